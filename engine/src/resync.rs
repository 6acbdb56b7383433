//! Syncing after a failed sync.
//!
//! When `fdatasync` fails, Linux reports the write-back error once and marks the pages it
//! could not write clean: the process still reads them from the page cache, but no later
//! sync writes them, and a page the cache drops is read back from the disk as it was
//! before (PostgreSQL's "fsyncgate"). A sync that then succeeds would declare durable
//! commits whose pages never reached the disk.
//!
//! So every failed sync of the file is counted, and the next sync meant to make commits
//! durable first writes again every page that recovery would verify for the commit it
//! makes durable (docs/design.md#recovery: the pages newer than the last durable commit,
//! their overflow runs, the freelist run), each checked against its parent's checksum as
//! it is read back: a page that the cache lost is reported as corruption naming it, and
//! nothing is declared durable. A sync that another thread's failed sync overlapped (the
//! background sync's, which runs without the writer) may have had its writes forgotten by
//! it, and fails too. A writable open does the same before its sync, for a process that
//! met a failed sync and died (`recovery.rs`).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use crate::db::Inner;
use crate::error::{Error, Result};
use crate::format::Slot;
use crate::pager::{Snapshot, VerifiedSet};
use crate::recovery::new_pages::{CheckOlder, NewPage, walk};
use crate::storage::Storage;

/// The most bytes of an overflow run copied at once when it is written again.
const CHUNK: usize = 1 << 20;

/// Failed syncs of the file, and how many of them a later sync has made up for.
#[derive(Debug, Default)]
pub(crate) struct SyncFailures {
    failed: AtomicU64,
    made_up: AtomicU64,
}

impl SyncFailures {
    /// Whether a sync failed that no later sync made up for.
    pub fn pending(&self) -> bool {
        self.failed.load(SeqCst) != self.made_up.load(SeqCst)
    }
}

impl Inner {
    /// Syncs the file so that the commit `slot` names (whose pages and slot are written)
    /// becomes durable, writing its pages newer than `durable_txid` again first when a
    /// sync failed since the last one that succeeded; `live` is the commit's set of
    /// verified pages. The caller holds the writer state.
    pub(crate) fn sync_commit(
        &self,
        slot: &Slot,
        durable_txid: u64,
        live: &VerifiedSet,
    ) -> Result<()> {
        let failures = &self.sync_failures;
        let failed = failures.failed.load(SeqCst);
        if failed != failures.made_up.load(SeqCst) {
            rewrite(
                self.storage.as_ref(),
                slot,
                self.page_size,
                durable_txid,
                live,
            )?;
        }
        self.sync_counted()?;
        if failures.failed.load(SeqCst) != failed {
            return Err(Error::Io(io::Error::other(
                "another sync of the file failed meanwhile; its writes may not be on the disk",
            )));
        }
        failures.made_up.store(failed, SeqCst);
        Ok(())
    }

    /// Syncs the file, counting a failure: for syncs that make nothing durable by
    /// themselves (the background sync's first one, a clean close's last).
    pub(crate) fn sync_counted(&self) -> io::Result<()> {
        self.storage.sync().inspect_err(|_| self.note_failed_sync())
    }

    /// Counts a failed sync, or a failed durable write (which syncs a range, or the whole
    /// file where the backend cannot sync less).
    pub(crate) fn note_failed_sync(&self) {
        self.sync_failures.failed.fetch_add(1, SeqCst);
    }
}

/// Writes again, from what the process reads, every page of the commit `slot` names that
/// was written after commit `durable_txid`, checking each on the way. When a page fails
/// its check, the cache lost it, and which others it lost is unknown: `live`, the pages
/// readers trust as verified, is emptied, so that readers check every page again and
/// report a lost one instead of reading what the disk had before.
pub(crate) fn rewrite(
    storage: &dyn Storage,
    slot: &Slot,
    page_size: usize,
    durable_txid: u64,
    live: &VerifiedSet,
) -> Result<()> {
    let snap = Snapshot::new(
        *slot,
        page_size,
        storage.region(),
        Arc::new(VerifiedSet::with_capacity(slot.page_count)),
    );
    let p = page_size as u64;
    let written = walk(
        &snap,
        durable_txid,
        CheckOlder::Now,
        &mut |page, kind, bytes| {
            if let NewPage::Older(_) = kind {
                return Ok(());
            }
            write_copy(storage, page * p, bytes)
        },
    );
    written.map_err(|e| match e {
        Error::Corruption { page, reason } => {
            live.clear();
            Error::Corruption {
                page,
                reason: format!(
                    "{reason}: written since the last sync, and lost with the cache after a \
                     sync failed; reopening the database recovers its last durable commit"
                ),
            }
        }
        e => e,
    })
}

/// Writes `bytes`, the file's own seen through its map, at `offset`: a copy at a time, of
/// at most [`CHUNK`] bytes.
fn write_copy(storage: &dyn Storage, offset: u64, bytes: &[u8]) -> Result<()> {
    for (i, chunk) in bytes.chunks(CHUNK).enumerate() {
        // (The copy is the point: the map's bytes are the file's, which the write changes.)
        let copy = chunk.to_vec();
        storage.write(offset + (i * CHUNK) as u64, &copy)?;
    }
    Ok(())
}

/// Writes again, from what the process reads, the `runs` of pages of `snap` (those an
/// opening verified as written since the durable commit: see [`rewrite`]).
pub(crate) fn write_again(
    storage: &dyn Storage,
    snap: &Snapshot,
    runs: &[std::ops::Range<u64>],
) -> Result<()> {
    let p = snap.page_size as u64;
    for run in runs {
        let len = usize::try_from(run.end.saturating_sub(run.start).saturating_mul(p))
            .map_err(|_| Error::corrupt(run.start, "run out of range"))?;
        write_copy(storage, run.start * p, snap.raw(run.start, len)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex, PoisonError};

    use crate::storage::{MemoryStorage, Region, Storage};
    use crate::{Database, Durability, Error, Result};

    /// A hook run before a sync.
    type Hook = Box<dyn FnOnce() + Send>;

    /// Memory whose next sync first runs a hook: another thread's sync failing meanwhile.
    struct Overlapped {
        memory: MemoryStorage,
        hook: Mutex<Option<Hook>>,
    }

    impl std::fmt::Debug for Overlapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Overlapped").finish_non_exhaustive()
        }
    }

    impl Storage for Overlapped {
        fn len(&self) -> u64 {
            self.memory.len()
        }
        fn region(&self) -> Arc<Region> {
            self.memory.region()
        }
        fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            self.memory.write(offset, data)
        }
        fn sync(&self) -> io::Result<()> {
            let hook = self
                .hook
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if let Some(hook) = hook {
                hook();
            }
            self.memory.sync()
        }
        fn resize(&self, len: u64) -> io::Result<()> {
            self.memory.resize(len)
        }
    }

    fn put(db: &Database, value: &[u8]) -> Result<()> {
        let mut w = db.begin_write()?;
        w.set_durability(Durability::Immediate);
        w.open_table("t")?.insert(b"k", value)?;
        w.commit()
    }

    /// A sync that succeeds while another thread's sync fails (the background sync's,
    /// which runs without the writer) may have had its writes forgotten by that failure:
    /// its commit fails instead of being declared durable, and the next one, which writes
    /// the unsynced pages again, succeeds.
    #[test]
    fn a_sync_overlapped_by_a_failed_one_fails_too() -> Result<()> {
        let storage = Arc::new(Overlapped {
            memory: MemoryStorage::new()?,
            hook: Mutex::default(),
        });
        let db = Database::builder().with_storage(storage.clone(), true, None)?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        put(&db, b"1")?;
        let inner = Arc::clone(&db.inner);
        *storage.hook.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(Box::new(move || inner.note_failed_sync()));
        // (A storage without durable writes keeps no commit log: every durable commit syncs.)
        let overlapped = put(&db, b"2");
        assert!(
            matches!(&overlapped, Err(Error::Io(e)) if e.to_string().contains("failed meanwhile")),
            "{overlapped:?}"
        );
        assert!(
            db.inner.sync_failures.pending(),
            "the failure is still to make up for"
        );
        put(&db, b"3")?;
        assert!(
            !db.inner.sync_failures.pending(),
            "made up for by the next sync"
        );
        let r = db.begin_read()?;
        assert_eq!(r.open_table("t")?.get(b"k")?, Some(&b"3"[..]));
        Ok(())
    }
}
