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
    /// commit the crashed writer made after the one it opens.
    pub(crate) fn follow(&self, file: &std::fs::File) -> Result<Arc<Snapshot>> {
        let mut recovery_ends = None;
        let mut tries = 0;
        while tries < MAX_TRIES {
            let mut pinned = false;
            let snapshot = {
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
                if state.readers.enter(snapshot.txid()) {
                    if let Err(e) = crate::lock::pin(file, snapshot.txid()) {
                        state.readers.leave(snapshot.txid());
                        return Err(e.into());
                    }
                    pinned = true;
                }
                snapshot
            };
            if pinned && crate::lock::writer_recovering(file) {
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
        if state.readers.leave(txid)
            && let (true, Some(file)) = (self.read_only, self.lock_file.as_ref())
        {
            // Failing to unpin only keeps pages from reuse until this file closes.
            let _ = crate::lock::unpin(file, txid);
        }
    }
}
