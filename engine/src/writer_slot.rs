//! Where the one writer state waits between write transactions, which thread holds it
//! meanwhile, and what happens when a commit unwinds while holding it.
//!
//! Waiting for the writer state is how write transactions queue. Two waits could never
//! end, and both fail instead:
//! - the thread that holds the state asks for it again (a second `begin_write`, `sync`
//!   or `commit_batch` while its own write transaction is open):
//!   [`Error::WriteTxnOnThisThread`];
//! - a commit panicked while it held the state, which is then in an unknown condition and
//!   is not handed on: [`Error::WriterLost`] for every later write, until the database is
//!   opened again (recovery then finds the last commit, or the panicked one whole).

use std::sync::{MutexGuard, PoisonError};
use std::thread::ThreadId;
use std::time::Instant;

use crate::db::{Inner, WriterState};
use crate::error::{Error, Result};

/// The writer state while no one holds it, and who does while someone does.
#[derive(Debug)]
pub(crate) struct WriterSlot {
    state: Option<WriterState>,
    /// The thread that took the state, while one holds it. (A write transaction moved to
    /// another thread is still counted as its first thread's.)
    holder: Option<ThreadId>,
    /// Set for good when a commit unwound while holding the state.
    lost: bool,
    /// Threads asleep on the writer's condition variable, waiting for the state: handing
    /// it back wakes one only when there is one (a wake is a system call, which a commit
    /// with no one waiting would pay for nothing).
    sleepers: usize,
}

impl WriterSlot {
    /// A slot holding `state` (`None`: a read-only database, which has no writer).
    pub fn new(state: Option<WriterState>) -> WriterSlot {
        WriterSlot {
            state,
            holder: None,
            lost: false,
            sleepers: 0,
        }
    }

    /// The state, when no one holds it.
    pub fn state(&self) -> Option<&WriterState> {
        self.state.as_ref()
    }

    /// Takes the state if no one holds it; `Err` when waiting for it could never end.
    fn take(&mut self) -> Result<Option<WriterState>> {
        let me = std::thread::current().id();
        if let Some(ws) = self.state.take() {
            self.holder = Some(me);
            return Ok(Some(ws));
        }
        if self.lost {
            Err(Error::WriterLost)
        } else if self.holder == Some(me) {
            Err(Error::WriteTxnOnThisThread)
        } else {
            Ok(None)
        }
    }
}

/// Marks the writer state lost unless disarmed: held across a commit, so that a panic in
/// it fails later writes instead of leaving them waiting for ever.
pub(crate) struct LoseOnUnwind<'a> {
    inner: Option<&'a Inner>,
}

impl LoseOnUnwind<'_> {
    /// The commit returned (with its result): nothing is lost.
    pub fn disarm(mut self) {
        self.inner = None;
    }
}

impl Drop for LoseOnUnwind<'_> {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            inner.lose_writer();
        }
    }
}

impl Inner {
    fn writer_slot(&self) -> MutexGuard<'_, WriterSlot> {
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for the writer state and takes it.
    ///
    /// # Errors
    /// [`Error::ReadOnly`]; [`Error::WriteTxnOnThisThread`] when this thread holds it
    /// already; [`Error::WriterLost`] after a commit panicked.
    pub fn take_writer(&self) -> Result<WriterState> {
        loop {
            if let Some(ws) = self.take_writer_until(None)? {
                return Ok(ws);
            }
        }
    }

    /// Waits for the writer state until `deadline` (`None`: for good) and takes it;
    /// `None` when the deadline passes first.
    ///
    /// # Errors
    /// As [`Inner::take_writer`].
    pub fn take_writer_until(&self, deadline: Option<Instant>) -> Result<Option<WriterState>> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        let mut slot = self.writer_slot();
        loop {
            if let Some(ws) = slot.take()? {
                return Ok(Some(ws));
            }
            let left = match deadline {
                None => None,
                Some(at) => match at.saturating_duration_since(Instant::now()) {
                    left if left.is_zero() => return Ok(None),
                    left => Some(left),
                },
            };
            slot.sleepers += 1;
            slot = match left {
                None => self
                    .writer_cv
                    .wait(slot)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(left) => {
                    self.writer_cv
                        .wait_timeout(slot, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
            slot.sleepers -= 1;
        }
    }

    /// The writer state, unless someone holds it (or it was lost).
    pub fn try_take_writer(&self) -> Option<WriterState> {
        if self.read_only {
            return None;
        }
        self.writer_slot().take().ok().flatten()
    }

    /// Hands the writer state back for the next write transaction.
    pub fn put_writer(&self, ws: WriterState) {
        let mut slot = self.writer_slot();
        slot.state = Some(ws);
        slot.holder = None;
        let wake = slot.sleepers > 0;
        drop(slot);
        if wake {
            self.writer_cv.notify_one();
        }
    }

    /// Whether this thread holds the writer state (an open write transaction, say).
    pub fn writer_held_here(&self) -> bool {
        self.writer_slot().holder == Some(std::thread::current().id())
    }

    /// Runs `f` on `ws` (the writer state, which the caller took), then hands it back; if
    /// `f` unwinds, the state is lost instead.
    pub fn with_writer<T>(&self, mut ws: WriterState, f: impl FnOnce(&mut WriterState) -> T) -> T {
        let unwinding = self.lose_on_unwind();
        let out = f(&mut ws);
        unwinding.disarm();
        self.put_writer(ws);
        out
    }

    /// A guard that marks the writer state lost if dropped without
    /// [`LoseOnUnwind::disarm`].
    pub fn lose_on_unwind(&self) -> LoseOnUnwind<'_> {
        LoseOnUnwind { inner: Some(self) }
    }

    /// The holder of the writer state unwound: no later write may take it, and every
    /// thread waiting for it learns so.
    fn lose_writer(&self) {
        let mut slot = self.writer_slot();
        slot.lost = true;
        slot.holder = None;
        drop(slot);
        self.writer_cv.notify_all();
    }

    /// Takes the writer state for good, if no one holds it: for closing.
    pub fn take_writer_for_close(&self) -> Option<WriterState> {
        self.writer_slot().state.take()
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use crate::group::tests::with_table;
    use crate::storage::{MemoryStorage, Region, Storage};
    use crate::{Batch, Database, Error, Result};

    /// Runs `f` on a thread of its own and returns what it returned; fails if it takes
    /// more than 10 seconds (the thread is left behind), as a wait that never ends would.
    fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(10))
            .map_err(|_| Error::Io(io::Error::other("still waiting after 10 seconds")))
    }

    #[test]
    fn the_thread_holding_the_write_transaction_gets_an_error_instead_of_a_wait() -> Result<()> {
        let db = Database::in_memory()?;
        with_table(&db)?;
        let mut batch = Batch::new();
        batch.put("t", b"k", b"v");
        let (db2, batch2) = (db.clone(), batch.clone());
        let txn = within_10s(move || -> Result<_> {
            let txn = db2.begin_write()?;
            let again = db2.begin_write().map(drop);
            let sync = db2.sync();
            let batch = db2.commit_batch(batch2);
            Ok((txn, again, sync, batch))
        });
        let (txn, again, sync, batch_outcome) = txn??;
        assert!(
            matches!(again, Err(Error::WriteTxnOnThisThread)),
            "{again:?}"
        );
        assert!(matches!(sync, Err(Error::WriteTxnOnThisThread)), "{sync:?}");
        assert!(
            matches!(batch_outcome, Err(Error::WriteTxnOnThisThread)),
            "{batch_outcome:?}"
        );
        // Another thread (this one: the transaction moved here, but counts as its first
        // thread's) waits for the transaction, and goes on when it ends.
        std::thread::scope(|s| {
            let other = s.spawn(|| db.commit_batch(batch.clone()));
            std::thread::sleep(Duration::from_millis(20));
            assert!(!other.is_finished(), "the other thread waits");
            drop(txn);
            let outcome = other.join();
            assert!(
                matches!(&outcome, Ok(Ok(found)) if found == &[false]),
                "{outcome:?}"
            );
        });
        // With the transaction gone, the thread that held it writes again.
        let mut txn = db.begin_write()?;
        assert!(txn.open_table("t")?.insert(b"k", b"w")?);
        txn.commit()?;
        db.sync()?;
        Ok(())
    }

    /// Handing the writer state back, and a group's end, wake only threads asleep for
    /// them: threads that queue for the writer on both paths at once all get their turn
    /// (a wake that went missing would leave one asleep, and the run past 10 seconds).
    #[test]
    fn writers_queueing_on_both_paths_are_all_woken_in_turn() -> Result<()> {
        let db = Database::in_memory()?;
        with_table(&db)?;
        let (threads, each) = (6u64, 150u64);
        let db2 = db.clone();
        within_10s(move || {
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads)
                    .map(|th| {
                        let db = &db2;
                        s.spawn(move || -> Result<()> {
                            for i in 0..each {
                                let key = (th * each + i).to_be_bytes();
                                if th % 2 == 0 {
                                    let mut txn = db.begin_write()?;
                                    txn.open_table("t")?.insert(&key, b"w")?;
                                    txn.commit()?;
                                } else {
                                    let mut batch = Batch::new();
                                    batch.put("t", &key, b"b");
                                    db.commit_batch(batch)?;
                                }
                            }
                            Ok(())
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .try_for_each(|h| h.join().unwrap_or(Err(Error::WriterLost)))
            })
        })??;
        let r = db.begin_read()?;
        assert_eq!(r.open_table("t")?.len(), threads * each);
        Ok(())
    }

    #[test]
    fn try_begin_write_and_a_timeout_give_up_instead_of_waiting_for_ever() -> Result<()> {
        let db = Database::in_memory()?;
        with_table(&db)?;
        let txn = db.begin_write()?;
        assert!(
            matches!(db.try_begin_write(), Err(Error::WriteTxnOnThisThread)),
            "the holding thread gets the error, as from begin_write"
        );
        let db2 = db.clone();
        let (now, soon) = within_10s(move || -> Result<_> {
            let now = db2.try_begin_write()?.is_some();
            let soon = db2
                .begin_write_timeout(Duration::from_millis(30))?
                .is_some();
            Ok((now, soon))
        })??;
        assert!(!now && !soon, "a transaction is open: {now} {soon}");
        // A long timeout gets the transaction once the open one ends.
        let db3 = db.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || -> Result<bool> {
            tx.send(()).map_err(|e| Error::Io(io::Error::other(e)))?;
            let txn = db3.begin_write_timeout(Duration::from_secs(60))?;
            let Some(mut txn) = txn else { return Ok(false) };
            txn.open_table("t")?.insert(b"k", b"v")?;
            txn.commit()?;
            Ok(true)
        });
        rx.recv_timeout(Duration::from_secs(10))
            .map_err(|e| Error::Io(io::Error::other(e)))?;
        std::thread::sleep(Duration::from_millis(20));
        drop(txn);
        let got = waiter
            .join()
            .map_err(|_| Error::Io(io::Error::other("panicked")))?;
        assert!(got?, "the waiter got the transaction");
        assert_eq!(
            db.begin_read()?.open_table("t")?.get(b"k")?,
            Some(&b"v"[..])
        );
        // Free again: no wait at all.
        assert!(db.try_begin_write()?.is_some());
        Ok(())
    }

    /// Memory that panics on writes while armed: a bug in the middle of a commit.
    #[derive(Debug)]
    struct PanicOnWrite {
        memory: MemoryStorage,
        armed: AtomicBool,
    }

    impl Storage for PanicOnWrite {
        fn len(&self) -> u64 {
            self.memory.len()
        }
        fn region(&self) -> Arc<Region> {
            self.memory.region()
        }
        fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            assert!(
                !self.armed.load(Ordering::Relaxed),
                "injected: a bug mid-commit"
            );
            self.memory.write(offset, data)
        }
        fn sync(&self) -> io::Result<()> {
            self.memory.sync()
        }
        fn resize(&self, len: u64) -> io::Result<()> {
            self.memory.resize(len)
        }
    }

    /// A database with table `t` on memory that panics on writes while armed.
    fn panicking_db() -> Result<(Arc<PanicOnWrite>, Database)> {
        let storage = Arc::new(PanicOnWrite {
            memory: MemoryStorage::new()?,
            armed: AtomicBool::new(false),
        });
        let db = Database::builder().with_storage(storage.clone(), true, None)?;
        with_table(&db)?;
        Ok((storage, db))
    }

    #[test]
    fn a_commit_that_panics_fails_later_writes_instead_of_leaving_them_waiting() -> Result<()> {
        let (storage, db) = panicking_db()?;
        let mut txn = db.begin_write()?;
        txn.open_table("t")?.insert(b"k", b"v")?;
        // Waiting for the writer when the commit panics: told, not left waiting.
        let db2 = db.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(db2.begin_write().map(drop));
        });
        storage.armed.store(true, Ordering::Relaxed);
        let commit = catch_unwind(AssertUnwindSafe(|| txn.commit()));
        storage.armed.store(false, Ordering::Relaxed);
        assert!(commit.is_err(), "the commit panicked");
        let outcome = rx.recv_timeout(Duration::from_secs(10));
        assert!(matches!(outcome, Ok(Err(Error::WriterLost))), "{outcome:?}");
        let db2 = db.clone();
        let later = within_10s(move || {
            let mut batch = Batch::new();
            batch.put("t", b"k", b"v");
            (
                db2.begin_write().map(drop),
                db2.sync(),
                db2.commit_batch(batch),
            )
        })?;
        assert!(matches!(later.0, Err(Error::WriterLost)), "{:?}", later.0);
        assert!(matches!(later.1, Err(Error::WriterLost)), "{:?}", later.1);
        assert!(matches!(later.2, Err(Error::WriterLost)), "{:?}", later.2);
        // Readers go on with the last commit.
        assert_eq!(db.begin_read()?.open_table("t")?.get(b"k")?, None);
        Ok(())
    }

    #[test]
    fn a_sync_that_panics_loses_the_writer_state_too() -> Result<()> {
        let (storage, db) = panicking_db()?;
        let mut txn = db.begin_write()?;
        txn.set_durability(crate::Durability::Eventual);
        txn.open_table("t")?.insert(b"k", b"v")?;
        txn.commit()?;
        storage.armed.store(true, Ordering::Relaxed);
        let sync = catch_unwind(AssertUnwindSafe(|| db.sync()));
        storage.armed.store(false, Ordering::Relaxed);
        assert!(sync.is_err(), "the sync panicked");
        let db2 = db.clone();
        let later = within_10s(move || db2.begin_write().map(drop))?;
        assert!(matches!(later, Err(Error::WriterLost)), "{later:?}");
        Ok(())
    }
}
