//! Group commit: batches that threads submit at the same time are applied in one write
//! transaction and made durable by one sync, and each caller is told when its batch is.
//!
//! The first thread to find no group in progress leads: it takes every waiting batch,
//! applies them in submission order, commits once and hands each caller its outcome.
//! Threads that submit meanwhile wait; when the group is done one of them leads the next
//! group, which holds every batch that arrived during the last commit. A sync that costs
//! the same for one commit as for ten is then shared by all of them.

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::{MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::batch::Batch;
use crate::db::{Database, Durability, Inner};
use crate::error::{Error, Result};
use crate::oplog::OpLog;
use crate::write_txn::WriteTxn;

/// What a batch's caller gets back: per change, whether the key held a value before.
type Outcome = Result<Vec<bool>>;

/// Batches waiting for a group, and the outcomes not yet collected.
#[derive(Debug, Default)]
pub(crate) struct GroupQueue {
    next_ticket: u64,
    waiting: Vec<(u64, Batch)>,
    done: HashMap<u64, Outcome>,
    leading: bool,
    /// How many batches the last few groups held, the newest at `groups % RECENT`.
    recent: [usize; RECENT],
    groups: usize,
    /// Threads asleep on `group_cv` for a group's end: a leader wakes them only when there
    /// are some (a wake is a system call, which a lone thread's commits would pay for
    /// nothing).
    sleepers: usize,
}

impl GroupQueue {
    /// How many batches a leader waits for: as many as the largest of the last few groups
    /// held. (The last group alone would do, but a thread late for one group would then
    /// make every later group a batch short: each waits for as many as the one before.)
    fn expected(&self) -> usize {
        self.recent.iter().copied().max().unwrap_or(0)
    }

    fn take_group(&mut self, waiting: &AtomicUsize) -> Vec<(u64, Batch)> {
        let group = std::mem::take(&mut self.waiting);
        waiting.store(0, Relaxed);
        self.recent[self.groups % RECENT] = group.len();
        self.groups = self.groups.wrapping_add(1);
        group
    }
}

/// How many groups' sizes the next leader looks back on.
const RECENT: usize = 4;

/// How long a leader waits at most for the batches it expects.
const GATHER: Duration = Duration::from_micros(100);

/// Clears the leader's mark when the group is done, so that a waiting thread leads next.
/// If applying the group unwinds, its callers are told so instead of waiting for ever.
struct Leading<'a> {
    inner: &'a Inner,
    tickets: Vec<u64>,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        let mut queue = self.inner.group();
        if std::thread::panicking() {
            for &t in &self.tickets {
                queue.done.entry(t).or_insert_with(|| {
                    Err(Error::corrupt(
                        0,
                        "internal: the group commit's leader panicked",
                    ))
                });
            }
        }
        queue.leading = false;
        self.inner.groups_done.fetch_add(1, Release);
        let wake = queue.sleepers > 0;
        drop(queue);
        if wake {
            self.inner.group_cv.notify_all();
        }
    }
}

impl Inner {
    fn group(&self) -> MutexGuard<'_, GroupQueue> {
        self.group.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Database {
    /// Commits `batch` as one transaction and returns, per change, whether the key held a
    /// value before it. Batches that other threads submit at the same time are committed
    /// with it, in one write transaction under one sync; the call returns when the group
    /// has committed (with `Immediate` durability: when it is on stable storage). A batch
    /// sees the batches submitted before it in the same group.
    ///
    /// # Errors
    /// [`Error::WriteTxnOnThisThread`] from a thread that holds the open [`WriteTxn`] (its
    /// group would wait for that transaction for ever).
    ///
    /// [`Error::KeyTooLarge`], [`Error::ValueTooLarge`] and [`Error::TableNotFound`] fail
    /// this batch alone and change nothing. An I/O error or corruption fails the whole
    /// group: none of its batches is committed.
    pub fn commit_batch(&self, batch: Batch) -> Result<Vec<bool>> {
        if self.inner.read_only {
            return Err(Error::ReadOnly);
        }
        batch.validate(self.inner.page_size)?;
        let inner = self.inner.as_ref();
        // Its group would wait for this thread's own write transaction, and so would every
        // batch in it.
        if inner.writer_held_here() {
            return Err(Error::WriteTxnOnThisThread);
        }
        let mut queue = inner.group();
        let ticket = queue.next_ticket;
        queue.next_ticket += 1;
        queue.waiting.push((ticket, batch));
        inner.group_waiting.store(queue.waiting.len(), Relaxed);
        if !inner.group_time.enabled() {
            // A leader may be asleep, gathering (with polling, it watches the count).
            inner.group_arrival.notify_one();
        }
        loop {
            if let Some(outcome) = queue.done.remove(&ticket) {
                return outcome;
            }
            if !queue.leading {
                queue.leading = true;
                let expected = queue.expected();
                if queue.waiting.len() < expected {
                    queue = gather(inner, queue, expected);
                }
                let group = queue.take_group(&inner.group_waiting);
                drop(queue);
                let leading = Leading {
                    inner,
                    tickets: group.iter().map(|(t, _)| *t).collect(),
                };
                let started = Instant::now();
                let outcomes = self.commit_group(group);
                inner.group_time.record(started.elapsed());
                inner.group().done.extend(outcomes);
                drop(leading);
            } else {
                // A group is under way: poll for its end about as long as the last group
                // took, then sleep (see `poll.rs`). Woken late, this thread would also be
                // late for the next group, whose leader would wait for it.
                let seen = inner.groups_done.load(Acquire);
                drop(queue);
                inner
                    .group_time
                    .poll(|| inner.groups_done.load(Acquire) != seen);
                queue = inner.group();
                // (The count changes under the queue's lock, before the leader notifies.)
                if inner.groups_done.load(Acquire) == seen {
                    queue.sleepers += 1;
                    queue = inner
                        .group_cv
                        .wait(queue)
                        .unwrap_or_else(PoisonError::into_inner);
                    queue.sleepers -= 1;
                }
                continue;
            }
            queue = inner.group();
        }
    }

    /// Applies and commits one group; returns each ticket's outcome.
    fn commit_group(&self, group: Vec<(u64, Batch)>) -> Vec<(u64, Outcome)> {
        if group.is_empty() {
            return Vec::new();
        }
        let mut txn = match WriteTxn::deferring_release(self.inner.clone()) {
            Ok(txn) => txn,
            Err(e) => return fail_all(group, &e),
        };
        let durability = if group
            .iter()
            .any(|(_, b)| b.durability().unwrap_or(self.inner.durability) == Durability::Immediate)
        {
            Durability::Immediate
        } else {
            Durability::Eventual
        };
        txn.set_durability(durability);
        // A batch that names a missing table fails alone, before any is applied; the
        // others' record is then known, and goes to the disk while they are applied
        // (`WriteTxn::commit_applying`).
        let mut outcomes = Vec::with_capacity(group.len());
        let mut applied = Vec::with_capacity(group.len());
        for (ticket, batch) in &group {
            match missing_table(&mut txn, batch) {
                Ok(Some(missing)) => outcomes.push((*ticket, Err(missing))),
                Ok(None) => applied.push((*ticket, batch)),
                Err(e) => return fail_all(group, &e),
            }
        }
        // (Nothing spills while a record goes first, so only a group whose changes own
        // far fewer pages than the budget, one leaf or more each, takes that way.)
        let changes: usize = applied.iter().map(|(_, batch)| batch.len()).sum();
        let fits_budget = changes <= self.inner.txn_budget_pages / 4;
        let record =
            |log: &mut OpLog| fits_budget && applied.iter().all(|(_, batch)| batch.record(log));
        let apply_all = |txn: &mut WriteTxn| {
            applied
                .iter()
                .map(|(ticket, batch)| apply(txn, batch).map(|outcome| (*ticket, outcome)))
                .collect::<Result<Vec<_>>>()
        };
        match txn.commit_applying(record, apply_all) {
            Ok(done) => {
                outcomes.extend(done);
                outcomes
            }
            Err(e) => fail_all(group, &e),
        }
    }
}

/// Waits at most [`GATHER`] for `expected` batches to be waiting: the threads the last
/// groups released are about to submit again, and they then share this group's sync. The
/// leader polls the count, yielding its processor to them (a sleeper woken by the last
/// arrival took 50–100 µs more to run again), or sleeps until each arrival when the
/// database does not poll its waits.
fn gather<'a>(
    inner: &'a Inner,
    mut queue: MutexGuard<'a, GroupQueue>,
    expected: usize,
) -> MutexGuard<'a, GroupQueue> {
    if inner.group_time.enabled() {
        drop(queue);
        crate::poll::poll_for(GATHER, || inner.group_waiting.load(Relaxed) >= expected);
        return inner.group();
    }
    let deadline = Instant::now() + GATHER;
    while queue.waiting.len() < expected {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        queue = inner
            .group_arrival
            .wait_timeout(queue, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
    queue
}

/// The error that fails `batch` alone, before anything is applied: a table it names is
/// missing. The outer error fails the group.
fn missing_table(txn: &mut WriteTxn, batch: &Batch) -> Result<Option<Error>> {
    for name in batch.tables() {
        if !txn.table_exists(name)? {
            return Ok(Some(Error::TableNotFound(name.to_owned())));
        }
    }
    Ok(None)
}

/// Applies one batch, whose tables exist ([`missing_table`]). An error fails the group
/// (the transaction is then in an unknown state).
fn apply(txn: &mut WriteTxn, batch: &Batch) -> Result<Outcome> {
    let mut results = Vec::with_capacity(batch.len());
    let mut changes = batch.changes().peekable();
    while let Some(first) = changes.peek() {
        let table = first.table;
        let mut t = txn.open_table(table)?;
        while let Some(change) = changes.next_if(|c| c.table == table) {
            results.push(match change.value {
                Some(value) => t.insert(change.key, value)?,
                None => t.remove(change.key)?,
            });
        }
    }
    Ok(Ok(results))
}

fn fail_all(group: Vec<(u64, Batch)>, e: &Error) -> Vec<(u64, Outcome)> {
    group
        .into_iter()
        .map(|(ticket, _)| (ticket, Err(e.duplicate())))
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use super::*;
    use crate::storage::FaultyStorage;

    /// Creates table `t` (for the writer-state tests too).
    pub(crate) fn with_table(db: &Database) -> Result<()> {
        let mut txn = db.begin_write()?;
        txn.create_table("t")?;
        txn.commit()
    }

    fn get(db: &Database, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let r = db.begin_read()?;
        Ok(r.open_table("t")?.get(key)?.map(<[u8]>::to_vec))
    }

    #[test]
    fn a_batch_reports_what_each_change_found_and_bad_batches_change_nothing() -> Result<()> {
        let db = Database::in_memory()?;
        with_table(&db)?;
        let mut b = Batch::new();
        b.put("t", b"a", b"1")
            .put("t", b"a", b"2")
            .delete("t", b"a");
        b.delete("t", b"none").put("t", b"b", b"3");
        assert_eq!(b.len(), 5);
        assert_eq!(db.commit_batch(b)?, vec![false, true, true, false, false]);
        assert_eq!(get(&db, b"a")?, None);
        assert_eq!(get(&db, b"b")?.as_deref(), Some(&b"3"[..]));

        let mut missing = Batch::new();
        missing.put("t", b"c", b"4").put("nowhere", b"c", b"4");
        assert!(matches!(
            db.commit_batch(missing),
            Err(Error::TableNotFound(name)) if name == "nowhere"
        ));
        let mut big = Batch::new();
        big.put("t", b"d", b"5")
            .put("t", &vec![0; db.max_key_len() + 1], b"");
        assert!(matches!(
            db.commit_batch(big),
            Err(Error::KeyTooLarge { .. })
        ));
        assert_eq!(get(&db, b"c")?, None);
        assert_eq!(get(&db, b"d")?, None);
        let mut long_delete = Batch::new();
        long_delete.delete("t", &vec![0; db.max_key_len() + 1]);
        assert_eq!(db.commit_batch(long_delete)?, vec![false]);
        assert_eq!(db.commit_batch(Batch::new())?, Vec::<bool>::new());
        Ok(())
    }

    /// While a write transaction holds the writer, the first batch's thread leads and
    /// waits for it; the batches submitted meanwhile wait in the queue and then commit
    /// together: two commits for four batches, one of which fails alone.
    #[test]
    fn batches_submitted_together_commit_together() -> Result<()> {
        let db = Database::in_memory()?;
        with_table(&db)?;
        let held = db.begin_write()?;
        let commits = db.io_stats().commits;
        let outcomes = std::thread::scope(|s| {
            let submit = |table: &'static str, key: &'static [u8]| {
                let db = db.clone();
                s.spawn(move || {
                    let mut b = Batch::new();
                    b.put(table, key, b"v");
                    db.commit_batch(b)
                })
            };
            let first = submit("t", b"k0");
            while !db.inner.group().leading {
                std::thread::sleep(Duration::from_millis(1));
            }
            let rest = [
                submit("t", b"k1"),
                submit("nowhere", b"k2"),
                submit("t", b"k3"),
            ];
            while db.inner.group().waiting.len() < 3 {
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(held);
            let mut all = vec![first.join()];
            all.extend(rest.map(|h| h.join()));
            all
        });
        let ok: Vec<bool> = outcomes
            .into_iter()
            .map(|o| matches!(o, Ok(Ok(ref v)) if v == &[false]))
            .collect();
        assert_eq!(ok, [true, true, false, true]);
        assert_eq!(db.io_stats().commits - commits, 2);
        for key in [&b"k0"[..], b"k1", b"k3"] {
            assert_eq!(get(&db, key)?.as_deref(), Some(&b"v"[..]));
        }
        assert_eq!(get(&db, b"k2")?, None);
        Ok(())
    }

    #[test]
    fn a_leader_expects_as_many_batches_as_the_largest_recent_group() {
        let mut queue = GroupQueue::default();
        let waiting = AtomicUsize::new(0);
        assert_eq!(queue.expected(), 0, "a first group waits for nobody");
        let group_of = |queue: &mut GroupQueue, n: u64| {
            queue.waiting = (0..n).map(|t| (t, Batch::new())).collect();
            waiting.store(queue.waiting.len(), Relaxed);
            assert_eq!(queue.take_group(&waiting).len() as u64, n);
            assert_eq!(waiting.load(Relaxed), 0);
            assert!(queue.waiting.is_empty());
        };
        group_of(&mut queue, 4);
        group_of(&mut queue, 3);
        // A thread late for one group does not make the next group smaller.
        assert_eq!(queue.expected(), 4);
        for (n, expected) in [(1, 4), (1, 4), (1, 3), (1, 1)] {
            group_of(&mut queue, n);
            assert_eq!(queue.expected(), expected);
        }
        group_of(&mut queue, 2);
        assert_eq!(queue.expected(), 2);
    }

    #[test]
    fn many_threads_lose_nothing() -> Result<()> {
        many_threads_on(&Database::in_memory()?)
    }

    /// On a file, with durable commits through the log: the waiting threads poll for their
    /// group's end or sleep until told, and none is left waiting or loses its batch.
    #[test]
    fn many_threads_lose_nothing_on_a_file_polling_or_not() -> Result<()> {
        for poll in [true, false] {
            let dir = tempfile::tempdir()?;
            let path = dir.path().join("g.cairn");
            let db = Database::builder().poll_waits(poll).create(&path)?;
            many_threads_on(&db)?;
            drop(db);
            let db = Database::open(&path)?;
            assert_eq!(db.begin_read()?.open_table("t")?.len(), 800);
        }
        Ok(())
    }

    /// `poll_waits(false)` reaches the group queue: threads waiting for a group sleep at once.
    #[test]
    fn waiting_for_a_group_polls_unless_turned_off() -> Result<()> {
        let on = Database::builder().in_memory()?;
        assert!(on.inner.group_time.limit() > Duration::ZERO);
        let off = Database::builder().poll_waits(false).in_memory()?;
        assert_eq!(off.inner.group_time.limit(), Duration::ZERO);
        Ok(())
    }

    fn many_threads_on(db: &Database) -> Result<()> {
        with_table(db)?;
        std::thread::scope(|s| -> Result<()> {
            let threads: Vec<_> = (0..4u8)
                .map(|t| {
                    let db = db.clone();
                    s.spawn(move || -> Result<()> {
                        for i in 0..200u8 {
                            let mut b = Batch::new();
                            b.put("t", &[t, i], &[i]);
                            db.commit_batch(b)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            for t in threads {
                t.join()
                    .unwrap_or_else(|_| Err(Error::corrupt(0, "thread panicked")))?;
            }
            Ok(())
        })?;
        let r = db.begin_read()?;
        let t = r.open_table("t")?;
        assert_eq!(t.len(), 800);
        for (k, v) in t
            .iter()?
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<Vec<_>>>()?
        {
            assert_eq!(v, [k[1]]);
        }
        Ok(())
    }

    /// A group's transaction makes the freed pages no one needs reusable (after its record
    /// goes to the disk, `WriteTxn::deferring_release`): durable single puts over the same
    /// keys, each rewriting a leaf and its branches, leave the file its size, in a file
    /// whose commits log (the young pages they free wait for readers only) and in one
    /// whose commits sync.
    #[test]
    fn a_groups_commits_reuse_the_pages_earlier_ones_freed() -> Result<()> {
        for log in [None, Some(0)] {
            let dir = tempfile::tempdir()?;
            let path = dir.path().join("reuse.cairn");
            let mut builder = Database::builder();
            if let Some(bytes) = log {
                builder = builder.log_size(bytes);
            }
            let db = builder.create(&path)?;
            with_table(&db)?;
            let mut b = Batch::new();
            for i in 0..2_000u32 {
                b.put("t", &i.to_be_bytes(), &[1; 100]);
            }
            db.commit_batch(b)?;
            let before = db.stats()?.page_count;
            for i in 0..600u32 {
                let mut b = Batch::new();
                b.put("t", &(i * 7 % 2_000).to_be_bytes(), &[2; 100])
                    .set_durability(Durability::Immediate);
                db.commit_batch(b)?;
            }
            let after = db.stats()?.page_count;
            assert!(
                after <= before + 100,
                "log {log:?}: {before} pages before the puts, {after} after"
            );
            assert!(db.check()?.is_ok());
        }
        Ok(())
    }

    /// A failed sync fails every batch of the group, and none of them is visible.
    #[test]
    fn a_failed_commit_fails_the_whole_group() -> Result<()> {
        let storage = FaultyStorage::new(7)?;
        let db = Database::builder().with_storage(storage.clone(), true, None)?;
        with_table(&db)?;
        let mut b = Batch::new();
        b.put("t", b"k", b"v").set_durability(Durability::Immediate);
        // Fail the last operation of the commit: its log record (the first commit after
        // opening syncs instead, and is not measured).
        db.commit_batch(b.clone())?;
        let before = storage.operations();
        db.commit_batch(b.clone())?;
        let per_commit = storage.operations() - before;
        storage.fail_at(storage.operations() + per_commit);
        b.put("t", b"k2", b"v");
        let err = db.commit_batch(b.clone());
        assert!(matches!(err, Err(Error::Io(_))), "{err:?}");
        assert_eq!(get(&db, b"k2")?, None);
        assert_eq!(db.commit_batch(b)?, vec![true, false]);
        assert_eq!(get(&db, b"k2")?.as_deref(), Some(&b"v"[..]));
        Ok(())
    }

    #[test]
    fn a_duplicated_io_error_keeps_its_kind_and_message() {
        let e = Error::Io(std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            "disk full",
        ));
        let copy = e.duplicate();
        assert!(matches!(&copy, Error::Io(io) if io.kind() == std::io::ErrorKind::StorageFull));
        assert_eq!(copy.to_string(), e.to_string());
    }
}
