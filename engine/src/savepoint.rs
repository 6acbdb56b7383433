//! Savepoints: points inside a write transaction that it can roll back to without
//! ending (SQL's `SAVEPOINT` / `ROLLBACK TO` / `RELEASE`, LMDB's nested transactions).
//!
//! A savepoint copies nothing when it is taken: it records the transaction's small state
//! (its tables' roots and counts, the catalog's root, where the free set and the commit
//! log's record stand) and opens a journal in which each changed node, overflow run and
//! spilled page is noted as it was before its first change (`btree/journal.rs`). Pages the
//! transaction allocated and frees are held out of the free set while a savepoint is open,
//! so that the bytes a rollback needs again (a spilled page, an overflow run written when
//! put) are not overwritten (`freelist.rs`). A rollback applies the journals from the
//! newest down and returns the free set to its mark; a release folds the journal into the
//! one before, and once no savepoint is left the held pages are free.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::error::{Error, Result};
use crate::format::ChildRef;
use crate::freelist::FreeMark;
use crate::txn_tables::TxnTables;
use crate::write_txn::WriteTxn;

/// A point in a write transaction to roll back to: made by [`WriteTxn::savepoint`],
/// used by [`WriteTxn::rollback_to`] and [`WriteTxn::release`].
#[derive(Debug)]
pub struct Savepoint {
    /// Unique in the process, so that no other transaction's savepoint is taken for one of
    /// this transaction's.
    serial: u64,
}

/// The next savepoint's serial number.
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(0);

/// What a savepoint puts back besides the journaled pages.
#[derive(Debug)]
pub(crate) struct Saved {
    serial: u64,
    free: FreeMark,
    catalog: Option<ChildRef>,
    tables: TxnTables,
    /// Where the commit log's record stood (none: the transaction had given up on it).
    ops: Option<(usize, Option<String>)>,
}

impl WriteTxn {
    /// Marks the transaction's state now, to come back to with [`WriteTxn::rollback_to`]
    /// while the transaction goes on. Savepoints nest: each is newer than the ones taken
    /// before it.
    ///
    /// A savepoint copies nothing when taken; from then on, the first change to each page
    /// the transaction holds keeps a copy of it as it was, until the savepoint is released
    /// or the transaction ends. Pages the transaction frees meanwhile are reused only
    /// after that.
    ///
    /// The copies count against the transaction's memory budget
    /// ([`crate::Builder::txn_memory`]), which the transaction's own pages keep to by
    /// spilling: the copies cannot spill, so once they take more than the budget, no
    /// savepoint is taken until one is released or rolled back to. They then take at most
    /// twice the budget (the newest savepoint's copies are at most the pages held when it
    /// was taken).
    ///
    /// # Errors
    /// [`Error::SavepointsTooLarge`] past the budget. The damage a removal in this
    /// transaction met (see [`WriteTxn::commit`]): the transaction can only roll back (to
    /// an earlier savepoint, or altogether).
    pub fn savepoint(&mut self) -> Result<Savepoint> {
        self.undamaged()?;
        let held = self.dirty.journals_held();
        let page = self.inner.page_size;
        let held = (held.nodes * page + held.bytes) as u64;
        let budget = (self.inner.txn_budget_pages * page) as u64;
        if held > budget {
            return Err(Error::SavepointsTooLarge { held, budget });
        }
        let serial = NEXT_SERIAL.fetch_add(1, Relaxed);
        self.savepoints.push(Saved {
            serial,
            free: self.freelist.mark(),
            catalog: self.catalog,
            tables: self.tables.clone(),
            ops: self.ops.as_ref().map(|ops| ops.mark()),
        });
        self.dirty.open_journal();
        Ok(Savepoint { serial })
    }

    /// Undoes every change made since `savepoint` was taken; the savepoint stays, to roll
    /// back to again, and the ones taken after it are gone. A transaction that met damage
    /// after the savepoint (see [`WriteTxn::commit`]) is whole again.
    ///
    /// # Errors
    /// [`Error::NoSuchSavepoint`] when the savepoint was released, rolled back past, or
    /// belongs to another transaction.
    pub fn rollback_to(&mut self, savepoint: &Savepoint) -> Result<()> {
        let at = self.savepoint_index(savepoint)?;
        self.savepoints.truncate(at + 1);
        let saved = &self.savepoints[at];
        self.dirty.roll_back_journals(at);
        self.freelist.rollback_to(&saved.free);
        self.catalog = saved.catalog;
        self.tables = saved.tables.clone();
        // A record given up on after the savepoint stays given up on: the commit then
        // syncs instead of logging, which is correct, only slower.
        match (&mut self.ops, &saved.ops) {
            (Some(ops), Some(mark)) => ops.truncate(mark.clone()),
            (ops, None) => *ops = None,
            (None, Some(_)) => {}
        }
        self.damaged = None;
        Ok(())
    }

    /// Keeps the changes made since `savepoint` and forgets it, with the savepoints taken
    /// after it: they become part of the savepoint before it, if there is one, else of
    /// the transaction.
    ///
    /// # Errors
    /// [`Error::NoSuchSavepoint`], as for [`WriteTxn::rollback_to`].
    pub fn release(&mut self, savepoint: Savepoint) -> Result<()> {
        let at = self.savepoint_index(&savepoint)?;
        self.savepoints.truncate(at);
        self.dirty.release_journals(at);
        if self.savepoints.is_empty() {
            self.freelist.release_held();
        }
        Ok(())
    }

    /// How many savepoints the transaction has open.
    pub fn savepoints(&self) -> usize {
        self.savepoints.len()
    }

    /// Forgets every savepoint, keeping the changes (before a commit).
    pub(crate) fn release_all_savepoints(&mut self) {
        if !self.savepoints.is_empty() {
            self.savepoints.clear();
            self.dirty.release_journals(0);
            self.freelist.release_held();
        }
    }

    fn savepoint_index(&self, savepoint: &Savepoint) -> Result<usize> {
        self.savepoints
            .iter()
            .position(|s| s.serial == savepoint.serial)
            .ok_or(Error::NoSuchSavepoint)
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    use crate::{Database, Error, WriteTxn};

    type Entries = BTreeMap<Vec<u8>, Vec<u8>>;

    fn contents(w: &mut WriteTxn, table: &str) -> Result<Entries, Error> {
        w.open_table(table)?
            .iter()?
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect()
    }

    fn healthy(db: &Database) -> Result<(), Error> {
        let report = db.check()?;
        assert!(report.is_ok(), "{:?}", report.problems);
        Ok(())
    }

    #[test]
    fn a_rollback_to_a_savepoint_undoes_what_came_after_it_and_keeps_it() -> Result<(), Error> {
        let db = Database::builder().in_memory()?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.open_table("t")?.insert(b"a", b"1")?;
        let sp = w.savepoint()?;
        w.open_table("t")?.insert(b"b", b"2")?;
        w.open_table("t")?.remove(b"a")?;
        w.create_table("u")?;
        w.rollback_to(&sp)?;
        let want: Entries = [(b"a".to_vec(), b"1".to_vec())].into();
        assert_eq!(contents(&mut w, "t")?, want);
        assert!(!w.table_exists("u")?);
        assert_eq!(w.open_table("t")?.len(), 1);
        // The savepoint stays: a second rollback to it undoes the changes since the first.
        w.open_table("t")?.insert(b"c", b"3")?;
        w.rollback_to(&sp)?;
        assert_eq!(contents(&mut w, "t")?, want);
        assert_eq!(w.savepoints(), 1);
        w.open_table("t")?.insert(b"d", b"4")?;
        w.commit()?;
        healthy(&db)?;
        let r = db.begin_read()?;
        let t = r.open_table("t")?;
        assert_eq!(t.get(b"a")?, Some(&b"1"[..]));
        assert_eq!(t.get(b"d")?, Some(&b"4"[..]));
        assert_eq!(t.len(), 2);
        Ok(())
    }

    #[test]
    fn releasing_keeps_the_changes_and_ends_the_later_savepoints() -> Result<(), Error> {
        let db = Database::builder().in_memory()?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        let outer = w.savepoint()?;
        w.open_table("t")?.insert(b"a", b"1")?;
        let middle = w.savepoint()?;
        w.open_table("t")?.insert(b"b", b"2")?;
        let inner = w.savepoint()?;
        w.open_table("t")?.insert(b"c", b"3")?;
        w.release(middle)?;
        assert_eq!(w.savepoints(), 1);
        assert!(matches!(w.rollback_to(&inner), Err(Error::NoSuchSavepoint)));
        assert_eq!(contents(&mut w, "t")?.len(), 3);
        // The released savepoints' changes belong to the outer one now.
        w.rollback_to(&outer)?;
        assert!(contents(&mut w, "t")?.is_empty());
        w.release(outer)?;
        assert_eq!(w.savepoints(), 0);
        w.open_table("t")?.insert(b"e", b"5")?;
        w.commit()?;
        healthy(&db)?;
        assert_eq!(db.begin_read()?.open_table("t")?.len(), 1);
        Ok(())
    }

    #[test]
    fn a_rollback_to_an_earlier_savepoint_ends_the_later_ones() -> Result<(), Error> {
        let db = Database::builder().in_memory()?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        let first = w.savepoint()?;
        let second = w.savepoint()?;
        w.rollback_to(&first)?;
        assert!(matches!(
            w.rollback_to(&second),
            Err(Error::NoSuchSavepoint)
        ));
        assert!(matches!(w.release(second), Err(Error::NoSuchSavepoint)));
        w.rollback_to(&first)?;
        Ok(())
    }

    #[test]
    fn another_transactions_savepoint_is_refused() -> Result<(), Error> {
        let (a, b) = (
            Database::builder().in_memory()?,
            Database::builder().in_memory()?,
        );
        let mut wa = a.begin_write()?;
        let mut wb = b.begin_write()?;
        let sp = wa.savepoint()?;
        assert!(matches!(wb.rollback_to(&sp), Err(Error::NoSuchSavepoint)));
        wa.commit()?;
        // One of the same database's next transaction, too.
        let mut wa = a.begin_write()?;
        assert!(matches!(wa.rollback_to(&sp), Err(Error::NoSuchSavepoint)));
        Ok(())
    }

    /// The copies savepoints keep count against the transaction's budget: past it, a
    /// savepoint is refused, so that they never take more than about twice the budget;
    /// releasing the savepoints lets one be taken again.
    #[test]
    fn savepoints_copies_are_bounded_by_the_budget() -> Result<(), Error> {
        let dir = tempfile::tempdir()?;
        let db = Database::builder()
            .page_size(1024)
            .txn_memory(16 << 10)
            .create(dir.path().join("bounded.cairn"))?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        for i in 0..3_000u32 {
            w.open_table("t")?.insert(&i.to_be_bytes(), &[1; 40])?;
        }
        w.commit()?;
        let mut w = db.begin_write()?;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(39);
        let (mut saves, mut refused) = (Vec::new(), 0);
        for round in 0..40u8 {
            match w.savepoint() {
                Ok(sp) => saves.push(sp),
                Err(Error::SavepointsTooLarge { held, budget }) => {
                    assert_eq!(budget, 16 << 10);
                    assert!(held > budget && held <= 2 * budget + 4 * 1024, "{held}");
                    refused += 1;
                }
                Err(e) => return Err(e),
            }
            let mut t = w.open_table("t")?;
            for _ in 0..200 {
                t.insert(&rng.random_range(0..3_000u32).to_be_bytes(), &[round; 40])?;
            }
        }
        assert!(refused > 10 && saves.len() > 1, "{refused} refused");
        let first = saves.remove(0);
        w.release(first)?;
        w.savepoint()?;
        w.commit()?;
        healthy(&db)
    }

    /// Random changes under a 16-page budget, so that spilled pages and overflow runs
    /// written at once are changed, freed and reused under savepoints, nested, released and
    /// rolled back to at random; the contents checked after every rollback, and the file
    /// after every commit.
    #[test]
    fn random_savepoints_under_spilling_match_a_model() -> Result<(), Error> {
        let db = Database::builder()
            .page_size(1024)
            .txn_memory(16 << 10)
            .in_memory()?;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(38);
        let mut committed = Entries::new();
        let (mut rolled_back, mut refused) = (0, 0);
        for round in 0..12 {
            let mut w = db.begin_write()?;
            if round == 0 {
                w.create_table("t")?;
            }
            let mut model = committed.clone();
            let mut saves: Vec<(super::Savepoint, Entries)> = Vec::new();
            for i in 0..3_000u32 {
                let key = rng.random_range(0..1_500u32).to_be_bytes().to_vec();
                match rng.random_range(0..100) {
                    0..=64 => {
                        let len = if rng.random_ratio(1, 20) {
                            rng.random_range(600..3_000)
                        } else {
                            rng.random_range(1..120)
                        };
                        let value = vec![(i % 251) as u8; len];
                        w.open_table("t")?.insert(&key, &value)?;
                        model.insert(key, value);
                    }
                    65..=89 => {
                        let existed = w.open_table("t")?.remove(&key)?;
                        assert_eq!(existed, model.remove(&key).is_some());
                    }
                    90..=94 => match w.savepoint() {
                        Ok(sp) => saves.push((sp, model.clone())),
                        // The copies past the budget: the bound the test below checks.
                        Err(Error::SavepointsTooLarge { .. }) => refused += 1,
                        Err(e) => return Err(e),
                    },
                    95..=97 if !saves.is_empty() => {
                        let at = rng.random_range(0..saves.len());
                        saves.truncate(at + 1);
                        w.rollback_to(&saves[at].0)?;
                        model = saves[at].1.clone();
                        assert_eq!(contents(&mut w, "t")?, model, "round {round}, op {i}");
                        rolled_back += 1;
                    }
                    _ if !saves.is_empty() => {
                        let at = rng.random_range(0..saves.len());
                        let mut later = saves.split_off(at).into_iter();
                        if let Some((sp, _)) = later.next() {
                            w.release(sp)?;
                        }
                    }
                    _ => {}
                }
            }
            assert_eq!(contents(&mut w, "t")?, model);
            if round % 4 == 3 {
                w.rollback();
            } else {
                w.commit()?;
                committed = model;
            }
            healthy(&db)?;
            let r = db.begin_read()?;
            assert_eq!(r.open_table("t")?.len(), committed.len() as u64);
        }
        assert!(rolled_back > 50, "{rolled_back} rollbacks");
        assert!(refused > 0, "the copies never reached the budget");
        assert!(db.io_stats().pages_spilled > 0, "nothing spilled");
        Ok(())
    }
}
