//! A commit whose slot names an older durable commit, which the other slot proves durable
//! itself: recovery then has nothing of it to verify.
//!
//! A commit's slot names, as its durable commit, the one the last sync before it made
//! durable; and a sync leaves the slot of the commit it makes durable as it was, naming
//! the durable commit before it (writing it again would take a second sync). So after a
//! crash of a writer whose durable commits go to the commit log, the writable opening
//! skips the newest slot (a logged commit, rebuilt from the log) and opens the other,
//! the last commit a sync made durable, whose slot names the one before: until the
//! forty-seventh session it verified every page the log's whole cycle before had written,
//! and read the header of every older page those point at (the other slot holds the
//! logged commit, not the one they are newer than). But a logged commit's slot that
//! names it as durable proves it: a logged commit's slot is written again, with a
//! freelist, by the sync that makes it durable, so while it reads as logged no sync came
//! after it, and none of its durable commit's pages was reused.

use crate::format::Slot;

/// Whether `other`, the other slot, proves the commit `slot` names durable: a newer logged
/// commit that names it as its durable one. Only for a file no live writer holds: beside
/// one, the slots read may be gone already.
pub(super) fn proves_durable(other: &Slot, slot: &Slot) -> bool {
    other.logged() && other.durable_txid == slot.txid && other.txid > slot.txid
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::format::{PageKind, page_kind};
    use crate::pager::{Snapshot, VerifiedSet};
    use crate::recovery::new_pages::{CheckOlder, NewPage, walk};
    use crate::recovery::{read_header, read_slots};
    use crate::storage::{FaultyStorage, MemoryStorage, Storage};
    use crate::{Database, Error, Result};

    fn key(i: u32) -> [u8; 4] {
        i.to_be_bytes()
    }

    /// A writer killed after a load, 200 durable puts over the loaded keys, one of a value
    /// larger than the commit log (which syncs), and five durable puts past the others,
    /// which the commit log holds.
    fn killed_after_logged_commits() -> Result<Vec<u8>> {
        let storage = FaultyStorage::new(5)?;
        let db = Database::builder()
            .page_size(1024)
            .log_size(64 << 10)
            .eventual_sync(None)
            .with_storage(storage.clone(), true, None)?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        let mut t = w.open_table("t")?;
        for i in 0..2000 {
            t.insert(&key(i), &[1; 50])?;
        }
        w.commit()?;
        for i in 0..206 {
            let mut w = db.begin_write()?;
            let mut t = w.open_table("t")?;
            match i {
                0..200 => t.insert(&key(i * 37 % 2000), &[2; 50]),
                // (A record larger than the log: the commit syncs instead.)
                200 => t.insert(&key(9000), &[3; 100 << 10]),
                _ => t.insert(&key(5000 + i), &[4; 50]),
            }?;
            w.commit()?;
        }
        let image = storage.live_image();
        std::mem::forget(db);
        Ok(image)
    }

    /// A page of the synced commit is damaged where no read of the opening goes (a leaf
    /// the puts before the sync wrote; the log's puts go to the last leaf). The slots say
    /// the commit is durable, so the opening does not verify its pages and opens: the
    /// damage is reported where it is read. Verifying them, as before, refused the commit,
    /// and with the other slot a logged one, the file did not open at all.
    #[test]
    fn a_commit_a_logged_slot_names_as_durable_is_not_verified_again() -> Result<()> {
        let mut image = killed_after_logged_commits()?;
        let storage = MemoryStorage::from_bytes(&image)?;
        let p = read_header(&storage)?.page_size as usize;
        let (mut slots, _) = read_slots(&storage, p)?;
        slots.sort_by_key(|(s, _)| s.txid);
        let [(synced, _), (logged, _)] = slots[..] else {
            return Err(Error::corrupt(0, "expected two slots"));
        };
        assert!(
            super::proves_durable(&logged, &synced) && synced.durable_txid < synced.txid,
            "{slots:?}"
        );
        // The leaves the synced commit's cycle wrote, in key order (the catalog's first).
        let snap = Snapshot::new(
            synced,
            p,
            storage.region(),
            Arc::new(VerifiedSet::with_capacity(synced.page_count)),
        );
        let mut leaves = Vec::new();
        walk(
            &snap,
            synced.durable_txid,
            CheckOlder::Now,
            &mut |page, kind, bytes| {
                if kind == NewPage::Tree && page_kind(bytes) == Some(PageKind::Leaf) {
                    leaves.push(page);
                }
                Ok(())
            },
        )?;
        assert!(leaves.len() > 10, "{leaves:?}");
        let damaged = leaves[1];
        image[damaged as usize * p + p / 2] ^= 0xff;
        let db = Database::builder().with_storage(
            Arc::new(MemoryStorage::from_bytes(&image)?),
            false,
            None,
        )?;
        let r = db.begin_read()?;
        let t = r.open_table("t")?;
        assert_eq!(t.get(&key(5205))?, Some(&[4; 50][..]), "the log replayed");
        let scan = t.iter()?.try_for_each(|e| e.map(drop));
        assert!(
            matches!(scan, Err(Error::Corruption { page, .. }) if page == damaged),
            "the damage is found where it is read: {scan:?}"
        );
        let report = db.check()?;
        assert!(
            report
                .problems
                .iter()
                .any(|problem| problem.page == damaged),
            "{:?}",
            report.problems
        );
        Ok(())
    }
}
