//! Read transactions that begin and end without touching memory another reader touches.
//!
//! Each read transaction of this process takes one of a fixed set of slots (each on its
//! own cache lines), trying first the one its thread took last, and writes there the
//! snapshot it reads. A slot also keeps its own copy of the newest snapshot it was given,
//! so that taking that snapshot again changes only the copy's reference count, a line no
//! other thread writes. Beginning under the state lock (the registry in `readers.rs`),
//! two reader threads passed the lock's line, the registry and the shared snapshot's count
//! back and forth: with transactions of 100 gets, two readers read 0.81–0.86× more than
//! one, and 0.92–1.02× with transactions of 1,000 (twenty-seventh session).
//!
//! The writer reads the slots when a write transaction begins, for the oldest snapshot
//! still read. A reader that takes a copy without the state lock writes the snapshot's id
//! into its slot and then checks that no newer snapshot was published meanwhile (trying
//! again if one was): either the writer's look at the slots comes after that write and
//! sees it, or the publication came before the check and the reader moves to the newer
//! snapshot. (Every access of the publication count and of the slots' ids is `SeqCst`.)
//!
//! When every slot is taken, a transaction registers under the state lock as before.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::pager::Snapshot;
use crate::readers::coarse_now;

/// How many transactions can be registered in slots at once; later ones register under
/// the state lock.
pub(crate) const SLOTS: usize = 64;

/// In a slot's id: free.
const FREE: u64 = 0;
/// In a slot's id: taken by a transaction that has not chosen its snapshot yet.
const TAKEN: u64 = u64::MAX;

/// One slot, alone on its cache lines (two, for the adjacent-line prefetcher).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Slot {
    /// The id of the snapshot read, or [`FREE`], or [`TAKEN`].
    txid: AtomicU64,
    /// When the transaction began (the coarse clock, in nanoseconds).
    since: AtomicU64,
    /// The slot's copy of a snapshot, with the publication it came from. Only the
    /// transaction holding the slot locks it, so the lock is never waited for.
    copy: Mutex<Option<(u64, Arc<Snapshot>)>>,
}

/// The slots of one database, and the count of snapshots published.
#[derive(Debug)]
pub(crate) struct ReaderSlots {
    slots: Box<[Slot]>,
    /// Incremented (under the state lock) each time a new snapshot becomes the newest.
    published: AtomicU64,
}

impl Default for ReaderSlots {
    fn default() -> ReaderSlots {
        ReaderSlots {
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
            published: AtomicU64::new(0),
        }
    }
}

thread_local! {
    /// The slot this thread's last transaction took (any database's: it is a first guess).
    static LAST_SLOT: Cell<usize> = Cell::new(first_guess());
}

/// Spreads threads over the slots: the n-th thread to read starts at slot n.
fn first_guess() -> usize {
    static THREADS: AtomicUsize = AtomicUsize::new(0);
    THREADS.fetch_add(1, SeqCst) % SLOTS
}

impl ReaderSlots {
    /// Records that the newest snapshot changed. The caller holds the state lock and has
    /// just replaced the snapshot.
    pub fn published(&self) {
        self.published.fetch_add(1, SeqCst);
    }

    /// How many snapshots were published (read under the state lock, it belongs to the
    /// newest snapshot).
    pub fn count(&self) -> u64 {
        self.published.load(SeqCst)
    }

    /// Takes a slot and registers a reader of the newest snapshot there: the slot's index
    /// and the slot's copy of the snapshot, or `None` when every slot is taken. `newest`
    /// gives the newest snapshot with the publication count, both read under the state
    /// lock; it is called only when the slot's copy is not of the newest snapshot.
    pub fn enter(
        &self,
        newest: impl Fn() -> (u64, Arc<Snapshot>),
    ) -> Option<(usize, Arc<Snapshot>)> {
        let index = self.take()?;
        let slot = &self.slots[index];
        slot.since.store(nanos(coarse_now()), SeqCst);
        let mut copy = slot.copy.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let published = self.published.load(SeqCst);
            if let Some((of, snapshot)) = copy.as_ref()
                && *of == published
            {
                slot.txid.store(snapshot.txid(), SeqCst);
                if self.published.load(SeqCst) == published {
                    return Some((index, snapshot.clone()));
                }
                continue;
            }
            let (of, latest) = newest();
            *copy = Some((of, Arc::new(Snapshot::clone(&latest))));
        }
    }

    /// Ends the transaction registered in slot `index`.
    pub fn leave(&self, index: usize) {
        if let Some(slot) = self.slots.get(index) {
            slot.txid.store(FREE, SeqCst);
        }
    }

    /// The oldest snapshot read by a transaction in a slot, and how long that transaction
    /// has been reading it.
    pub fn oldest(&self) -> Option<(u64, Duration)> {
        let (txid, since) = self
            .slots
            .iter()
            .filter_map(|s| {
                let txid = s.txid.load(SeqCst);
                (txid != FREE && txid != TAKEN).then(|| (txid, s.since.load(SeqCst)))
            })
            .min()?;
        Some((
            txid,
            coarse_now().saturating_sub(Duration::from_nanos(since)),
        ))
    }

    /// A free slot, taken: the thread's last one if free, else the next free one after it.
    fn take(&self) -> Option<usize> {
        let first = LAST_SLOT.with(Cell::get) % SLOTS;
        let index = (first..SLOTS).chain(0..first).find(|&i| {
            self.slots[i]
                .txid
                .compare_exchange(FREE, TAKEN, SeqCst, SeqCst)
                .is_ok()
        })?;
        LAST_SLOT.with(|c| c.set(index));
        Some(index)
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::SLOTS;
    use crate::{Database, Error};

    /// A database in memory with an empty table `t`.
    fn with_table() -> Result<Database, Error> {
        let db = Database::in_memory()?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        Ok(db)
    }

    fn put(db: &Database, key: &[u8]) -> Result<(), Error> {
        let mut w = db.begin_write()?;
        w.open_table("t")?.insert(key, b"v")?;
        w.commit()
    }

    fn oldest(db: &Database) -> Option<u64> {
        let state = db.inner.state();
        db.inner.oldest_reader(&state).map(|(txid, _)| txid)
    }

    #[test]
    fn a_reader_registers_in_a_slot_and_keeps_a_copy_until_a_commit() -> Result<(), Error> {
        let db = with_table()?;
        let first = db.begin_read()?;
        let txid = first.txid();
        assert_eq!(db.inner.reader_slots.oldest().map(|(t, _)| t), Some(txid));
        assert!(
            db.inner.state().readers.oldest().is_none(),
            "not under the lock"
        );
        let copy = first.snapshot.clone();
        assert!(
            !Arc::ptr_eq(&copy, &db.inner.state().latest),
            "a copy of its own"
        );
        drop(first);
        assert_eq!(oldest(&db), None);
        // Nothing published since: the same copy again.
        let again = db.begin_read()?;
        assert!(Arc::ptr_eq(&copy, &again.snapshot));
        // A second reader on the same thread takes another slot, with its own copy.
        let other = db.begin_read()?;
        assert!(!Arc::ptr_eq(&copy, &other.snapshot));
        drop((again, other));
        put(&db, b"k")?;
        let after = db.begin_read()?;
        assert!(after.txid() > txid);
        assert!(!Arc::ptr_eq(&copy, &after.snapshot));
        assert_eq!(after.open_table("t")?.get(b"k")?, Some(&b"v"[..]));
        assert_eq!(oldest(&db), Some(after.txid()));
        Ok(())
    }

    #[test]
    fn readers_past_the_slots_register_under_the_lock_and_count_too() -> Result<(), Error> {
        let db = with_table()?;
        let in_slots = (0..SLOTS)
            .map(|_| db.begin_read())
            .collect::<Result<Vec<_>, _>>()?;
        assert!(in_slots.iter().all(|r| r.slot.is_some()));
        let early = in_slots[0].txid();
        put(&db, b"k")?;
        let listed = db.begin_read()?;
        assert!(listed.slot.is_none(), "every slot is taken");
        assert!(listed.txid() > early);
        assert_eq!(oldest(&db), Some(early), "the slots' oldest reader");
        drop(in_slots);
        assert_eq!(oldest(&db), Some(listed.txid()), "the locked registry's");
        // A slot is free again, and a new reader takes it.
        let slotted = db.begin_read()?;
        assert!(slotted.slot.is_some());
        drop(listed);
        assert_eq!(oldest(&db), Some(slotted.txid()));
        drop(slotted);
        assert_eq!(oldest(&db), None);
        Ok(())
    }

    #[test]
    fn readers_on_many_threads_see_each_commit_whole() -> Result<(), Error> {
        // Each commit sets every key to the commit's round; a reader that registered
        // too late to protect its pages, or took a stale copy, would see mixed rounds.
        let db = with_table()?;
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| -> Result<(), Error> {
            let readers: Vec<_> = (0..3)
                .map(|_| {
                    s.spawn(|| -> Result<u64, Error> {
                        let mut checked = 0;
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            let r = db.begin_read()?;
                            let t = r.open_table("t")?;
                            let values = t
                                .iter()?
                                .map(|e| e.map(|(_, v)| v.to_vec()))
                                .collect::<Result<Vec<_>, _>>()?;
                            if values.windows(2).any(|w| w[0] != w[1]) {
                                return Err(Error::corrupt(0, "a snapshot mixed two commits"));
                            }
                            checked += 1;
                        }
                        Ok(checked)
                    })
                })
                .collect();
            let written = (|| {
                for round in 0u32..300 {
                    let mut w = db.begin_write()?;
                    let mut t = w.open_table("t")?;
                    for k in 0u32..300 {
                        t.insert(&k.to_be_bytes(), &round.to_be_bytes().repeat(8))?;
                    }
                    w.commit()?;
                }
                Ok(())
            })();
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            for r in readers {
                let checked = r
                    .join()
                    .map_err(|_| Error::corrupt(0, "a reader panicked"))??;
                assert!(checked > 0);
            }
            written
        })
    }
}
