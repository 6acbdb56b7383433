//! Sealing the commit a writable opening recovered, as a clean close seals the last one
//! (docs/design.md#recovery).
//!
//! A commit opened after a crash may name an older durable commit (the one its pages are
//! newer than): recovery verified its new pages against it, and the opening's sync made
//! them durable. Until the slot says so, every later opening verifies them again, and
//! once a later commit reused the older commit's pages (free since the sync) and failed
//! before writing its slot, that verification can no longer lean on the older commit and
//! reads the header of every older page the new ones point at. An Eventual commit that
//! wrote no freelist also leaves every later opening to find its free set by walking its
//! trees. So the opening writes the commit again as its own durable commit, with a
//! freelist, into the other slot's place: a power cut that tears that write loses the
//! older durable commit, never the opened one. It does the same over a newer commit it
//! refused (pages a power cut lost), which readers in other processes would otherwise
//! take for the live writer's newest.

use crate::db::{Inner, WriterState};
use crate::error::Result;
use crate::pager::Snapshot;

impl Inner {
    /// Seals the newest commit when its slot names an older durable commit, or when the
    /// other slot holds a newer commit recovery refused; the database was just opened for
    /// writing (its log applied, if it had records).
    pub(crate) fn seal_opened(&self) -> Result<()> {
        let latest = self.state().latest.slot;
        // (A refused commit stayed in its slot until the writer's first commit: a reader
        // process beside the writer, which trusts a live writer's slots, moved to it and
        // read the damage that made recovery refuse it; until the forty-eighth session.)
        let refused_newer = self.rejected.iter().any(|s| s.txid > latest.txid);
        if latest.durable_txid >= latest.txid && !refused_newer {
            return Ok(());
        }
        let Some(ws) = self.try_take_writer() else {
            return Ok(());
        };
        self.with_writer(ws, |ws| self.seal_opened_with(ws))
    }

    /// [`Inner::seal_opened`] with the writer state `ws`.
    fn seal_opened_with(&self, ws: &mut WriterState) -> Result<()> {
        if !self.state().latest.slot.records_freelist() {
            // The free set goes to pages free now; those the older durable commit used
            // among them may be overwritten: the opened commit is durable already.
            let oldest_reader = self.oldest_reader_txid(&self.state());
            self.release_freed(ws, oldest_reader);
            self.record_free_set(ws)?;
            // (The freelist is on the disk before a slot that counts on it.)
            self.sync_counted()?;
        }
        let latest = self.state().latest.clone();
        let sealed = self.write_sealed(ws, latest.slot)?;
        ws.durable_slot = 1 - ws.durable_slot;
        ws.freelist.settle(true);
        // (So that closing finds nothing left to seal.)
        self.publish(Snapshot::new(
            sealed,
            self.page_size,
            self.storage.region(),
            latest.verified.clone(),
        ));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::format::Slot;
    use crate::killed_writer::KilledWriter;
    use crate::recovery::{read_header, read_slots};
    use crate::storage::{FaultyStorage, MemoryStorage, Storage};
    use crate::{Database, Durability, Result};

    /// A killed writer's file without a commit log: a durable load, then `eventual`
    /// commits that each change a few keys, Eventual (which write no freelist) or
    /// Immediate (which do).
    fn killed_writer(durability: Durability) -> Result<Vec<u8>> {
        let writer = KilledWriter::new(11, 0)?;
        let db = &writer.db;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        let mut t = w.open_table("t")?;
        for i in 0u32..3000 {
            t.insert(&i.to_be_bytes(), &[1; 50])?;
        }
        w.commit()?;
        for i in 0u32..40 {
            let mut w = db.begin_write()?;
            w.set_durability(durability);
            let mut t = w.open_table("t")?;
            t.insert(&(i * 7919 % 6000).to_be_bytes(), &[2; 50])?;
            t.remove(&(i * 4111 % 3000).to_be_bytes())?;
            w.commit()?;
        }
        Ok(writer.kill())
    }

    /// Both slots of the file in `storage`, newest first.
    fn slots(storage: &dyn Storage) -> Result<Vec<Slot>> {
        let p = read_header(storage)?.page_size as usize;
        let (mut slots, _) = read_slots(storage, p)?;
        slots.sort_by_key(|(s, _)| std::cmp::Reverse((s.txid, s.durable_txid)));
        Ok(slots.into_iter().map(|(s, _)| s).collect())
    }

    /// The table's entries.
    fn entries(db: &Database) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let r = db.begin_read()?;
        let t = r.open_table("t")?;
        t.iter()?
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect()
    }

    /// What an opening read: the table's entries and the free pages.
    type Read = (Vec<(Vec<u8>, Vec<u8>)>, u64);

    /// The file an opening of `image` leaves behind it, the database never closed (as if
    /// the process were killed right after opening), and what the opening read.
    fn opened_and_killed(image: &[u8]) -> Result<(Vec<u8>, Read)> {
        let storage = Arc::new(MemoryStorage::from_bytes(image)?);
        let db = Database::builder().with_storage(storage.clone(), false, None)?;
        let rows = entries(&db)?;
        let free = db.stats()?.free_pages;
        std::mem::forget(db);
        Ok((storage.to_vec(), (rows, free)))
    }

    /// After a crash, the opened commit names an older durable commit; the opening writes
    /// it again as durable (with a freelist, when it wrote none) into the older one's
    /// slot, so that a later opening has nothing to verify, and finds the same commit and
    /// free set in it.
    #[test]
    fn an_opening_seals_the_commit_it_recovered() -> Result<()> {
        for durability in [Durability::Eventual, Durability::Immediate] {
            let image = killed_writer(durability)?;
            let before = slots(&MemoryStorage::from_bytes(&image)?)?;
            let newest = before[0];
            assert!(
                newest.durable_txid < newest.txid && before[1].txid == newest.durable_txid,
                "{durability:?}: the crash left an unsealed commit: {before:?}"
            );
            assert_eq!(
                newest.free_set_implied(),
                durability == Durability::Eventual
            );
            let (after, (rows, free)) = opened_and_killed(&image)?;
            let sealed = slots(&MemoryStorage::from_bytes(&after)?)?;
            assert_eq!(
                (sealed[0].txid, sealed[0].durable_txid),
                (newest.txid, newest.txid),
                "{durability:?}: {sealed:?}"
            );
            assert!(sealed[0].records_freelist(), "{durability:?}: {sealed:?}");
            assert_eq!(sealed[1], newest, "{durability:?}: the opened slot is kept");
            // (The killed writer's last commit: key 39·7919 % 6000 holds its value.)
            assert!(
                rows.iter()
                    .any(|(k, _)| k == &(39u32 * 7919 % 6000).to_be_bytes())
            );
            let (again, (rows_again, free_again)) = opened_and_killed(&after)?;
            assert_eq!(rows_again, rows, "{durability:?}");
            assert_eq!(free_again, free, "{durability:?}: the recorded free set");
            assert_eq!(again, after, "{durability:?}: nothing left to seal");
            let db = Database::builder().with_storage(
                Arc::new(MemoryStorage::from_bytes(&after)?),
                false,
                None,
            )?;
            let report = db.check()?;
            assert!(report.is_ok(), "{durability:?}: {:?}", report.problems);
        }
        Ok(())
    }

    /// An I/O error in the seal (any of its last operations: the freelist's write, the
    /// syncs, the slot's write) does not fail the opening: the next `sync` reports it, the
    /// database works, and the file reopens at the same commit, whole.
    #[test]
    fn a_seal_that_fails_leaves_the_opening_standing() -> Result<()> {
        let image = killed_writer(Durability::Eventual)?;
        // The store with `image` synced on it, and the database opened there, its
        // operation `fail_at` (counted from the opening's first) failing; and how many
        // operations came before the opening.
        let on_faulty = |fail_at: Option<u64>| -> Result<(Arc<FaultyStorage>, Database, u64)> {
            let storage = FaultyStorage::new(3)?;
            storage.resize(image.len() as u64)?;
            storage.write(0, &image)?;
            storage.sync()?;
            let ops = storage.operations();
            if let Some(n) = fail_at {
                storage.fail_at(ops + n);
            }
            let db = Database::builder().with_storage(storage.clone(), false, None)?;
            Ok((storage, db, ops))
        };
        // (The operations of a clean opening, its seal's last: four with a free set to
        // record.)
        let (storage, db, before) = on_faulty(None)?;
        let expected = entries(&db)?;
        let all = storage.operations() - before;
        std::mem::forget(db);
        for n in all - 3..=all {
            let (storage, db, _) = on_faulty(Some(n))?;
            assert!(
                db.sync().is_err(),
                "operation {n}: the seal's error is reported"
            );
            db.sync()?;
            assert_eq!(entries(&db)?, expected, "operation {n}");
            let mut w = db.begin_write()?;
            w.open_table("t")?.insert(b"after", b"1")?;
            w.commit()?;
            let image = storage.power_cut();
            std::mem::forget(db);
            let db = Database::builder().with_storage(
                Arc::new(MemoryStorage::from_bytes(&image)?),
                false,
                None,
            )?;
            let r = db.begin_read()?;
            assert_eq!(
                r.open_table("t")?.get(b"after")?,
                Some(&b"1"[..]),
                "operation {n}"
            );
            drop(r);
            let report = db.check()?;
            assert!(report.is_ok(), "operation {n}: {:?}", report.problems);
        }
        Ok(())
    }
}
