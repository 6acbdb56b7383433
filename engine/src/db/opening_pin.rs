//! The pin a read-only opening of a file holds while recovery verifies the newest
//! commit's pages.
//!
//! A writer in another process reuses a page once no pinned snapshot can see it; until a
//! read-only opening has a snapshot, nothing of it is pinned, and a writer that commits,
//! syncs and reuses the pages recovery is checking would make them fail their checksums:
//! the opening would fall back to an older commit or fail, with nothing damaged. So the
//! opening pins the newest commit first, and reads the slots again, as a following reader
//! does (`follow.rs`, docs/design.md#readers-in-other-processes): if no newer commit has
//! appeared, no writer can reuse a page of that commit or of any newer one while the pin
//! holds. Recovery then verifies under it, and the pin goes once it has picked a commit;
//! the first read transaction pins its own snapshot, and a newer commit gets a fresh
//! verification. `cairn info` ([`crate::inspect`]) pins the same way while it looks.

use std::fs::File;

use crate::recovery;
use crate::storage::Storage;

/// How often the opening pins again while commits race past it, before it opens unpinned
/// (as every opening did before: only a reuse of exactly the pages being verified, during
/// the verification, makes that fail).
const MAX_TRIES: usize = 100;

/// Pins the newest commit the slots of `storage` (the file `file`) name; returns its id,
/// for [`unpin`]. `None` when nothing was pinned: no slot verifies, the header does not
/// read (recovery says why), the lock is refused, or commits kept racing past.
pub(crate) fn pin_newest(storage: &dyn Storage, file: &File) -> Option<u64> {
    let page_size = recovery::read_header(storage).ok()?.page_size as usize;
    let newest = || -> Option<u64> {
        let (slots, _) = recovery::read_slots(storage, page_size).ok()?;
        slots
            .iter()
            .filter(|(s, _)| s.txid_in_range())
            .map(|(s, _)| s.txid)
            .max()
    };
    for _ in 0..MAX_TRIES {
        let txid = newest()?;
        // A refused lock (a slot's id past what a lock range can name, say) leaves the
        // opening as it was without one.
        crate::lock::pin(file, txid).ok()?;
        if newest().is_some_and(|now| now <= txid) {
            return Some(txid);
        }
        unpin(file, txid);
    }
    None
}

/// Lets go of the opening's pin of commit `txid`. Before any read transaction exists, so
/// no reader's pin of the same commit goes with it.
pub(crate) fn unpin(file: &File, txid: u64) {
    // Failing to unpin only keeps pages from reuse until this file closes.
    let _ = crate::lock::unpin(file, txid);
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use crate::storage::{Call, FileStorage, Hooked};
    use crate::{Database, Durability, Result};

    /// A commit rewriting every value of table `t`.
    fn rewrite(db: &Database, round: u8, durability: Durability) -> Result<()> {
        let mut w = db.begin_write()?;
        w.set_durability(durability);
        let mut t = w.open_table("t")?;
        for i in 0u32..400 {
            t.insert(&i.to_be_bytes(), &[round; 100])?;
        }
        w.commit()
    }

    #[test]
    fn a_writer_cannot_reuse_the_pages_a_read_only_opening_verifies() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("busy.cairn");
        // No commit log: each commit rewrites the pages in place of a record (until the
        // forty-eighth session a writer in this process was not seen as alive, and a
        // read-only opening beside it applied its log to a private copy).
        let writer = Database::builder().log_size(0).create(&path)?;
        let mut w = writer.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        for round in 0..4 {
            rewrite(&writer, round, Durability::Immediate)?;
        }
        // Not yet durable: recovery verifies every page the newest commit rewrote.
        rewrite(&writer, 4, Durability::Eventual)?;
        let newest = writer.begin_read()?.txid();
        // When recovery asks for the map to verify that commit, the writer frees its
        // pages, makes that durable and reuses what it may: unpinned, those pages.
        let busy = Mutex::new(Some(writer.clone()));
        let storage = Hooked::new(
            FileStorage::new(std::fs::File::open(&path)?)?,
            move |call| {
                if call != Call::Region {
                    return Ok(());
                }
                if let Some(writer) = busy.lock().map(|mut w| w.take()).ok().flatten() {
                    for round in 5..8 {
                        rewrite(&writer, round, Durability::Immediate)
                            .map_err(std::io::Error::other)?;
                    }
                }
                Ok(())
            },
        );
        let lock_file = std::fs::File::open(&path)?;
        let db = super::super::Builder::default().read_only(true).build(
            Arc::new(storage),
            false,
            Some(path.clone()),
            Some(lock_file),
            None,
        )?;
        assert_eq!(db.inner.state().latest.txid(), newest, "opened the newest");
        assert!(writer.begin_read()?.txid() > newest, "the writer went on");
        let report = db.check()?;
        assert!(report.is_ok(), "{:?}", report.problems);
        Ok(())
    }
}
