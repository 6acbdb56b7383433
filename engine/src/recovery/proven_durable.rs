//! A commit whose slot names an older durable commit, which the other slot proves durable
//! itself: recovery then has nothing of it to verify.
//!
//! A commit's slot names, as its durable commit, the one the last sync before it made
//! durable; and a sync leaves the slot of the commit it makes durable as it was, naming
//! the durable commit before it (writing it again would take a second sync). So after a
//! crash, the commit an opening falls back to (the newest slot being a logged commit,
//! which a writable opening rebuilds from the log, or a commit whose pages a power cut
//! lost) is often the last one a sync made durable, whose slot names the one before:
//! until the forty-seventh session the opening verified every page written since that
//! one (with the log, its whole cycle) and read the header of every older page those
//! point at (the other slot holding the newer commit, not the one they are newer than).
//! But the newer commit's slot proves it durable when it names it as its durable commit:
//! no sync came after that slot was written (a logged commit's slot is written again, with
//! a freelist, by the sync that makes it durable; an unlogged one that the opening did
//! not accept was never synced, and any later commit would have overwritten it before a
//! sync could follow), and until a sync after it, none of its durable commit's pages is
//! reused.

use crate::format::Slot;

/// Whether `other`, the other slot, proves the commit `slot` names durable: a newer commit
/// that names it as its durable one, and that the opening skips (logged) or refused. Only
/// for a file no live writer holds: beside one, the slots read may be gone already.
pub(super) fn proves_durable(other: &Slot, slot: &Slot) -> bool {
    other.durable_txid == slot.txid && other.txid > slot.txid
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::format::{PageKind, Slot, page_kind};
    use crate::killed_writer::KilledWriter;
    use crate::pager::{Snapshot, VerifiedSet};
    use crate::recovery::new_pages::{CheckOlder, NewPage, walk};
    use crate::recovery::{read_header, read_slots};
    use crate::storage::{MemoryStorage, Storage};
    use crate::{Database, Durability, Error, Result};

    fn key(i: u32) -> [u8; 4] {
        i.to_be_bytes()
    }

    /// A killed writer's file on 1 KiB pages with a commit log of `log_size` bytes, after
    /// a load of 2,000 keys and the puts `puts` gives: (key, value, durability) each.
    fn killed_after(
        log_size: u64,
        puts: impl Iterator<Item = (u32, Vec<u8>, Durability)>,
    ) -> Result<Vec<u8>> {
        let writer = KilledWriter::new(5, log_size)?;
        let db = &writer.db;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        let mut t = w.open_table("t")?;
        for i in 0..2000 {
            t.insert(&key(i), &[1; 50])?;
        }
        w.commit()?;
        for (k, value, durability) in puts {
            let mut w = db.begin_write()?;
            w.set_durability(durability);
            w.open_table("t")?.insert(&key(k), &value)?;
            w.commit()?;
        }
        Ok(writer.kill())
    }

    /// 200 durable puts over the loaded keys, one of a value larger than the commit log
    /// (which syncs: the commit the test damages), and five durable puts past the others,
    /// which the commit log holds: the newest slot is theirs, logged.
    fn logged_after_a_sync() -> Result<Vec<u8>> {
        let puts = (0..206).map(|i| match i {
            0..200 => (i * 37 % 2000, vec![2; 50], Durability::Immediate),
            // (A record larger than the log: the commit syncs instead.)
            200 => (9000, vec![3; 100 << 10], Durability::Immediate),
            _ => (5000 + i, vec![4; 50], Durability::Immediate),
        });
        killed_after(64 << 10, puts)
    }

    /// Without a commit log, a durable put (which syncs: the commit the test damages) and
    /// an Eventual one past the others, whose slot is the newest.
    fn eventual_after_a_sync() -> Result<Vec<u8>> {
        let puts = [
            (0, vec![2; 50], Durability::Immediate),
            (9000, vec![3; 50], Durability::Eventual),
        ];
        killed_after(0, puts.into_iter())
    }

    /// The first table leaf in key order that the commit `slot` names wrote since its
    /// durable commit.
    fn first_new_leaf(storage: &dyn Storage, slot: Slot) -> Result<u64> {
        let p = read_header(storage)?.page_size as usize;
        let snap = Snapshot::new(
            slot,
            p,
            storage.region(),
            Arc::new(VerifiedSet::with_capacity(slot.page_count)),
        );
        let mut leaves = Vec::new();
        walk(
            &snap,
            slot.durable_txid,
            CheckOlder::Now,
            &mut |page, kind, bytes| {
                if kind == NewPage::Tree && page_kind(bytes) == Some(PageKind::Leaf) {
                    leaves.push(page);
                }
                Ok(())
            },
        )?;
        // (The catalog's leaf comes first.)
        leaves
            .get(1)
            .copied()
            .ok_or_else(|| Error::corrupt(0, "no new table leaf"))
    }

    /// The synced commit's slot names an older durable commit, and the newer slot names it
    /// as durable; one of the synced commit's pages written since its durable commit (a
    /// leaf, off the path of the commits after it) is damaged. The opening, which does not
    /// take the newer commit (logged: it replays it; Eventual: a power cut lost one of its
    /// pages), does not verify the synced commit's pages, and opens: the
    /// damage is reported where it is read. Verifying them, as before, refused it too, and
    /// the file did not open at all.
    #[test]
    fn a_commit_the_newer_slot_names_as_durable_is_not_verified_again() -> Result<()> {
        for (logged, image) in [
            (true, logged_after_a_sync()?),
            (false, eventual_after_a_sync()?),
        ] {
            let mut image = image;
            let storage = MemoryStorage::from_bytes(&image)?;
            let p = read_header(&storage)?.page_size as usize;
            let (mut slots, _) = read_slots(&storage, p)?;
            slots.sort_by_key(|(s, _)| s.txid);
            let [(synced, _), (newer, _)] = slots[..] else {
                return Err(Error::corrupt(0, "expected two slots"));
            };
            assert!(
                newer.durable_txid == synced.txid
                    && synced.durable_txid < synced.txid
                    && newer.logged() == logged,
                "{slots:?}"
            );
            let damaged = first_new_leaf(&storage, synced)?;
            image[damaged as usize * p + p / 2] ^= 0xff;
            if !logged {
                // (A power cut lost the newer commit's leaf: it is refused.)
                let lost = first_new_leaf(&storage, newer)?;
                image[lost as usize * p..][..p].fill(0);
            }
            let db = Database::builder().with_storage(
                Arc::new(MemoryStorage::from_bytes(&image)?),
                false,
                None,
            )?;
            let r = db.begin_read()?;
            let t = r.open_table("t")?;
            assert_eq!(t.get(&key(5205))?.is_some(), logged, "the log replayed");
            assert_eq!(
                t.get(&key(9000))?.map(<[u8]>::len),
                Some(100 << 10).filter(|_| logged)
            );
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
        }
        Ok(())
    }
}
