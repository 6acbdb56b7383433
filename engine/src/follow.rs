//! Readers in a read-only process that follow a writer in another process.
//!
//! A read transaction of such a database starts at the newest commit in the file, not
//! the one seen at opening. It pins that commit with a lock the writer can see
//! ([`crate::lock::pin`]) and then reads the slots again: only if the newest commit is
//! still the pinned one is the snapshot safe, because any writer that could have reused
//! its pages without seeing the pin began before that commit was the newest, and the
//! writer reuses only pages freed by commits up to its durable one, never past the
//! newest (docs/design.md#readers-in-other-processes).
//!
//! A slot counts only with an id in range, a file long enough for it, and not one that
//! recovery refused when this process opened the file: a writer refuses it too, and
//! commits under lower ids over it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::db::Inner;
use crate::error::{Error, Result};
use crate::format::{SLOT_BYTES, SLOT_OFFSET, Slot};
use crate::pager::{FIRST_DATA_PAGE, Snapshot, VerifiedSet};

/// How often a reader retries while commits race past it.
const MAX_TRIES: usize = 1_000;

/// How long a reader waits for a writer's opening to recover the file.
const RECOVERY_WAIT: Duration = Duration::from_secs(10);

impl Inner {
    /// The two commit slots as the file holds them now (`None`: being written, or never).
    fn read_slots(&self) -> Result<[Option<Slot>; 2]> {
        let mut slots = [None, None];
        for (i, slot) in slots.iter_mut().enumerate() {
            let mut b = [0u8; SLOT_BYTES];
            self.storage
                .read((i * self.page_size + SLOT_OFFSET) as u64, &mut b)?;
            // A slot being written right now fails its checksum: the other one serves.
            *slot = Slot::decode(&b);
        }
        Ok(slots)
    }

    /// Whether `slot` names a commit a file of `len` bytes can hold (with an id in range),
    /// other than one recovery refused at opening.
    fn fits(&self, slot: &Slot, len: u64) -> bool {
        slot.txid_in_range()
            && !self.rejected.contains(slot)
            && slot.page_count >= FIRST_DATA_PAGE
            && slot.page_count.saturating_mul(self.page_size as u64) <= len
    }

    /// The newest intact commit slot in the file that the file is long enough for.
    fn newest_slot(&self) -> Result<Option<Slot>> {
        self.storage.refresh()?;
        let len = self.storage.len();
        Ok(self
            .read_slots()?
            .into_iter()
            .flatten()
            .filter(|s| self.fits(s, len))
            .max_by_key(|s| s.txid))
    }

    /// Whether the slots name a commit newer than `txid` that the file holds. A writer
    /// grows the file (and syncs the growth) before a slot names the new pages, so a newer
    /// slot the file seemed too short for is looked at again against its length read now:
    /// then it fits, or it is damage (a file cut short), which recovery skips too.
    fn newer_commit(&self, txid: u64) -> Result<bool> {
        let slots = self.read_slots()?;
        if !slots.iter().flatten().any(|s| s.txid > txid) {
            return Ok(false);
        }
        let held = |len: u64| {
            slots
                .iter()
                .flatten()
                .any(|s| s.txid > txid && self.fits(s, len))
        };
        if held(self.storage.len()) {
            return Ok(true);
        }
        self.storage.refresh()?;
        Ok(held(self.storage.len()))
    }

    /// Registers a reader of the newest commit in the file and returns its snapshot.
    ///
    /// A reader that pins a snapshot while a writer's opening recovers the file
    /// ([`crate::lock::recovering`]) lets go of it and waits for the opening to end: that
    /// writer may have looked for pins before this one was taken, and reuse the pages of a
    /// commit the crashed writer made after the one it opens. A reader that shares the
    /// pin of another in this process looks too, unless a reader looked while the pin was
    /// held ([`crate::db::State::looked_pin`]): the other may have taken it a moment ago
    /// and not looked yet (until the fifty-second session, only the first looked).
    pub(crate) fn follow(&self, file: &std::fs::File) -> Result<Arc<Snapshot>> {
        let mut recovery_ends = None;
        let mut tries = 0;
        while tries < MAX_TRIES {
            let (snapshot, look) = {
                let mut state = self.state();
                match self.newest_slot()? {
                    Some(slot) if slot.txid > state.latest.slot.txid => {
                        // A new commit: pages may have been rewritten since they were
                        // verified, so verification starts afresh for this snapshot.
                        state.latest = Arc::new(Snapshot::new(
                            slot,
                            self.page_size,
                            self.storage.region(),
                            Arc::new(VerifiedSet::with_capacity(slot.page_count)),
                        ));
                        self.reader_slots.published();
                    }
                    _ => {}
                }
                let snapshot = state.latest.clone();
                let txid = snapshot.txid();
                let look = if state.readers.enter(txid) {
                    if let Err(e) = crate::lock::pin(file, txid) {
                        state.readers.leave(txid);
                        return Err(e.into());
                    }
                    true
                } else {
                    state.looked_pin != Some(txid)
                };
                (snapshot, look)
            };
            if look {
                if crate::lock::writer_recovering(file) {
                    self.end_read(snapshot.txid());
                    let ends = *recovery_ends.get_or_insert_with(|| Instant::now() + RECOVERY_WAIT);
                    if Instant::now() >= ends {
                        return Err(Error::Io(std::io::Error::other(
                            "a writer kept recovering the file",
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                // This reader holds the pin, so it has been held since before the look.
                self.state().looked_pin = Some(snapshot.txid());
            }
            // A newer commit the file holds means a writer may have gone past the pin's
            // reach: begin again with it.
            if !self.newer_commit(snapshot.txid())? {
                return Ok(snapshot);
            }
            self.end_read(snapshot.txid());
            tries += 1;
        }
        Err(Error::Io(std::io::Error::other(
            "commits in another process kept racing past this reader",
        )))
    }

    /// Unregisters one reader of snapshot `txid`.
    pub(crate) fn end_read(&self, txid: u64) {
        let mut state = self.state();
        let last = state.readers.leave(txid);
        if last && state.looked_pin == Some(txid) {
            state.looked_pin = None;
        }
        if last && let (true, Some(file)) = (self.read_only, self.lock_file.as_ref()) {
            // Failing to unpin only keeps pages from reuse until this file closes.
            let _ = crate::lock::unpin(file, txid);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::{Receiver, channel};
    use std::time::Duration;

    use crate::{Database, Error, Result};

    /// A file with one commit past the table's creation, and a read-only handle of it.
    fn follower(dir: &tempfile::TempDir) -> Result<(std::fs::File, Database)> {
        let path = dir.path().join("followed.cairn");
        let db = Database::create(&path)?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.open_table("t")?.insert(b"k", b"v")?;
        w.commit()?;
        drop(db);
        let ro = Database::builder().read_only(true).open(&path)?;
        // (The recovery mark is a write lock: the file is opened for writing.)
        let other = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)?;
        Ok((other, ro))
    }

    /// Begins a read transaction of `ro` on a thread of its own; its snapshot's id comes
    /// back once it has begun.
    fn begin_elsewhere(ro: &Database) -> Receiver<Result<u64>> {
        let (ro, (done, begun)) = (ro.clone(), channel());
        std::thread::spawn(move || {
            let _ = done.send(ro.begin_read().map(|r| r.txid()));
        });
        begun
    }

    /// Begins a read transaction of `ro` on a thread of its own while the recovery mark
    /// `other` holds goes on, checks that it has not begun 300 ms later, ends the
    /// recovery and returns the transaction's snapshot once it has begun.
    fn begins_once_recovered(ro: &Database, other: &std::fs::File) -> Result<u64> {
        let begun = begin_elsewhere(ro);
        assert!(
            begun.recv_timeout(Duration::from_millis(300)).is_err(),
            "a read transaction began during the recovery"
        );
        crate::lock::recovered(other)?;
        begun
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| Error::corrupt(0, "the reader never began"))?
    }

    fn lock_file(ro: &Database) -> Result<&std::fs::File> {
        ro.inner.lock_file.as_ref().ok_or(Error::corrupt(
            0,
            "a read-only handle without its lock file",
        ))
    }

    #[test]
    fn a_reader_sharing_a_pin_not_yet_looked_at_waits_for_a_recovery() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let (other, ro) = follower(&dir)?;
        // A reader of this process has pinned the newest commit and not yet looked at the
        // recovery mark (it is between the two steps of `follow`) when a writer's opening
        // sets it.
        let txid = ro.inner.state().latest.txid();
        ro.inner.state().readers.enter(txid);
        crate::lock::pin(lock_file(&ro)?, txid)?;
        crate::lock::recovering(&other)?;
        assert_eq!(begins_once_recovered(&ro, &other)?, txid);
        ro.inner.end_read(txid);
        Ok(())
    }

    #[test]
    fn a_reader_sharing_a_pin_looked_at_begins_during_a_recovery() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let (other, ro) = follower(&dir)?;
        // The first reader looked, and no writer was recovering: one that starts now sees
        // the pin and leaves that commit's pages alone.
        let held = ro.begin_read()?;
        crate::lock::recovering(&other)?;
        let began = begin_elsewhere(&ro)
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| Error::corrupt(0, "the reader waited for the recovery"))?;
        assert_eq!(began?, held.txid());
        // Once that reader and the first have ended, the pin goes, and the next reader
        // pins afresh and looks.
        drop(held);
        begins_once_recovered(&ro, &other)?;
        Ok(())
    }
}
