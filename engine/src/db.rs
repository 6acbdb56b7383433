//! The database handle: the shared state of readers and the writer, and syncing. Opening
//! and creating are in `db/builder.rs`; the pieces of a read-only opening in
//! `db/opening_alone.rs`, `db/opening_pin.rs` and `db/private_copy.rs`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::format::{SLOT_OFFSET, Slot};
use crate::freelist::FreeList;
use crate::pager::Snapshot;
use crate::read_txn::ReadTxn;
use crate::storage::{IoCounters, Storage};
use crate::write_txn::WriteTxn;
use crate::writer_slot::WriterSlot;
use crate::{CheckReport, Stats};

mod after_crash;
mod builder;
pub(crate) mod opening_alone;
pub(crate) mod opening_pin;
mod opening_seal;
mod private_copy;

pub use builder::Builder;

/// When a commit is on stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `commit` returns after the commit is on stable storage (one `fdatasync`).
    #[default]
    Immediate,
    /// `commit` is atomic and visible at once, and becomes durable at the next
    /// [`Database::sync`], the next `Immediate` commit, or when the database is closed.
    /// A crash loses at most the commits since the last durable one, never corrupts.
    Eventual,
}

/// What readers and the writer share: the newest snapshot and who reads which.
#[derive(Debug)]
pub(crate) struct State {
    pub latest: Arc<Snapshot>,
    /// Live read transactions by snapshot id: how many, and when the first began.
    pub readers: crate::readers::Readers,
    /// A follower's pinned snapshot (`follow.rs`) that a reader of it looked at the
    /// writer's recovery mark for, with the pin held, and found none: a writer that starts
    /// recovering later sees the pin, so readers joining it need not look again. Cleared
    /// when its last reader ends (and the pin goes).
    pub looked_pin: Option<u64>,
}

/// What belongs to the one writer, handed to a write transaction for its life.
#[derive(Debug, Clone)]
pub(crate) struct WriterState {
    pub freelist: FreeList,
    pub next_txid: u64,
    /// The newest commit known to be on stable storage, and the slot (0 or 1) holding it,
    /// which no later commit may overwrite until a newer one is durable.
    pub durable_txid: u64,
    pub durable_slot: usize,
    pub log: LogState,
}

/// Where the commit log is and how far the current cycle (the records written since the
/// durable commit) has filled it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LogState {
    /// The log's run of pages (0: none).
    pub page: u64,
    pub pages: u64,
    /// The most pages the log may grow to (docs/design.md#commit-log): at a sync, a log
    /// that was too small for the cycle moves to a larger run.
    pub target: u64,
    /// The most pages asked for (`Builder::log_size`, at this opening or an earlier one:
    /// every commit's slot records it); `None`: the default.
    pub limit: Option<u64>,
    /// Whether the log may grow past `target` for large records (the default size, and no
    /// move has failed since opening: `commit/log_growth.rs`).
    pub for_large_records: bool,
    /// Units ([`crate::format::LOG_UNIT`] bytes) the cycle's records take.
    pub head: u64,
    /// The id the next record must have: the commit after the last one logged, or after
    /// the durable commit. `None` once a commit went unlogged since the durable commit
    /// (the records must follow each other without a gap), until the next sync.
    pub next: Option<u64>,
    /// The newest commit its record made durable.
    pub logged: u64,
    /// The first unit of the records Eventual commits wrote since the last durable write
    /// to the log (`None`: none).
    pub unsynced: Option<u64>,
}

impl LogState {
    /// The log's length in units.
    pub fn units(&self, page_size: usize) -> u64 {
        self.pages * (page_size / crate::format::LOG_UNIT) as u64
    }

    /// The most payload bytes one record may hold.
    pub fn capacity(&self, page_size: usize) -> usize {
        (self.pages as usize * page_size).saturating_sub(crate::format::LOG_RECORD_HEADER)
    }

    /// A sync made commit `txid` durable: a new cycle starts after it.
    pub fn restart(&mut self, txid: u64) {
        self.head = 0;
        self.next = Some(txid + 1);
        self.logged = 0;
        self.unsynced = None;
    }
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub storage: Arc<dyn Storage>,
    pub path: Option<PathBuf>,
    pub page_size: usize,
    pub read_only: bool,
    /// The database file again, for the byte-range locks between processes (`None` in
    /// memory): a read-only process pins its snapshots there, the writer looks for pins.
    pub lock_file: Option<std::fs::File>,
    /// Whether this is a private copy of the file with its log applied (`private_copy.rs`).
    pub private_copy: bool,
    /// Commit slots recovery refused at opening (their commit did not verify): a reader
    /// following a writer in another process does not move to one (`follow.rs`).
    pub rejected: Vec<Slot>,
    /// For a private copy of a file: the file, whose byte-range lock pins the commits the
    /// copy reads, for as long as the copy is open.
    pub pin: Option<std::fs::File>,
    /// How many bytes at the start of the storage show the file through a map that a
    /// writer in another process may cut short (a read-only handle's: all of it; a private
    /// copy's: the part it maps). A page there that no snapshot pins is read with `pread`
    /// (`Database::page`): touching a page cut off the file through the map would fault.
    pub file_backed: u64,
    pub durability: Durability,
    pub state: Mutex<State>,
    /// Where this process's read transactions register without the state lock.
    pub reader_slots: crate::reader_slots::ReaderSlots,
    /// The writer state, while no write transaction holds it (see `writer_slot.rs`).
    pub writer: Mutex<WriterSlot>,
    pub writer_cv: Condvar,
    pub counters: Arc<IoCounters>,
    /// Commits that wrote something, since opening.
    pub commits: AtomicU64,
    /// Batches waiting to be committed together (see `group.rs`).
    pub group: Mutex<crate::group::GroupQueue>,
    pub group_cv: Condvar,
    /// Signalled when a batch joins the queue, for a leader gathering asleep (polling off).
    pub group_arrival: Condvar,
    /// How many batches wait in the queue, for a gathering leader to poll without its
    /// lock.
    pub group_waiting: std::sync::atomic::AtomicUsize,
    /// Groups committed so far, for waiting threads to poll without the queue's lock.
    pub groups_done: AtomicU64,
    /// How long the last group took, so that its waiting threads poll about as long.
    pub group_time: crate::poll::PollBound,
    /// `Database` handles alive: the last one stops the background sync.
    pub handles: AtomicUsize,
    /// The background sync of Eventual commits, when it runs (`eventual_sync.rs`).
    pub syncer: Mutex<Option<crate::eventual_sync::Syncer>>,
    /// The error the background sync last met, for the next `Database::sync` to return.
    pub background_error: Mutex<Option<Error>>,
    /// Failed syncs, which the next sync makes up for (`resync.rs`).
    pub sync_failures: crate::resync::SyncFailures,
    /// How many changed tree nodes a write transaction holds before it spills some
    /// (`commit/spill.rs`).
    pub txn_budget_pages: usize,
    /// Pages spilled since opening (see [`IoStats::pages_spilled`]).
    pub pages_spilled: AtomicU64,
    /// This process's claim to write the file, given up once the file is closed (the
    /// fields above dropped first).
    pub _writer_claim: Option<crate::lock::WriterClaim>,
}

impl Inner {
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes `snapshot` the newest, for the read transactions that begin from now on.
    pub fn publish(&self, snapshot: Snapshot) {
        let mut state = self.state();
        state.latest = Arc::new(snapshot);
        self.reader_slots.published();
    }

    /// The commit the oldest read transaction of this process reads; `u64::MAX` for none.
    pub fn oldest_reader_txid(&self, state: &State) -> u64 {
        self.oldest_reader(state).map_or(u64::MAX, |(txid, _)| txid)
    }

    /// The oldest snapshot a read transaction of this process reads, and for how long.
    pub fn oldest_reader(&self, state: &State) -> Option<(u64, std::time::Duration)> {
        match (state.readers.oldest(), self.reader_slots.oldest()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Writes the newest commit's slot into the slot beside the durable one (where it
    /// belongs, unless a failed commit wrote its own slot there since).
    pub fn rewrite_latest_slot(&self, ws: &WriterState) -> Result<()> {
        let latest = self.state().latest.slot;
        let at = (1 - ws.durable_slot) as u64 * self.page_size as u64 + SLOT_OFFSET as u64;
        self.storage.write(at, &latest.encode())?;
        Ok(())
    }

    /// Makes every commit so far durable, and the file hold all of them without its log;
    /// the caller holds the writer state. Whether it synced.
    pub fn sync_with(&self, ws: &mut WriterState) -> Result<bool> {
        let latest = self.state().latest.slot;
        let synced = ws.durable_txid < latest.txid;
        if synced {
            self.record_free_set(ws)?;
            // Write the newest commit's slot again, so that the sync makes durable exactly
            // what is then protected, even if a failed commit wrote its slot there.
            let slot = 1 - ws.durable_slot;
            self.rewrite_latest_slot(ws)?;
            let newest = self.state().latest.clone();
            self.sync_commit(&newest.slot, ws.durable_txid, &newest.verified)?;
            ws.durable_slot = slot;
            ws.durable_txid = latest.txid;
            ws.log.restart(latest.txid);
            let p = self.page_size as u64;
            self.storage.drop_cached(ws.log.page * p, ws.log.pages * p);
            ws.freelist.settle(true);
        }
        Ok(synced)
    }
}

impl Inner {
    /// Gives the newest commit, when its free set is only in the writer's memory (a logged
    /// commit), a freelist: encoded into a run taken from the set, and named by a copy of
    /// its slot, which becomes the newest snapshot (the caller writes the slot and syncs).
    pub(crate) fn record_free_set(&self, ws: &mut WriterState) -> Result<()> {
        let latest = self.state().latest.clone();
        if latest.slot.records_freelist() {
            return Ok(());
        }
        let p = self.page_size as u64;
        ws.freelist.begin();
        let (page, bytes) = crate::commit::encode_free_set(&mut ws.freelist, latest.txid(), p);
        let slot = Slot {
            page_count: ws.freelist.page_count,
            freelist_page: page,
            freelist_len: bytes.len() as u64,
            freelist_crc: crate::format::checksum(page, &bytes),
            ..latest.slot
        };
        let written = (|| {
            let needed = slot.page_count * p;
            if self.storage.len() < needed {
                self.storage.resize(needed)?;
            }
            self.storage.write(page * p, &bytes)
        })();
        if let Err(e) = written {
            ws.freelist.rollback();
            return Err(e.into());
        }
        let verified = if slot.page_count > latest.verified.capacity() {
            Arc::new(latest.verified.grown(slot.page_count))
        } else {
            latest.verified.clone()
        };
        for q in slot.freelist_run(self.page_size) {
            verified.remove(q);
        }
        ws.freelist.settle(false);
        self.publish(Snapshot::new(
            slot,
            self.page_size,
            self.storage.region(),
            verified,
        ));
        Ok(())
    }
}

impl Inner {
    /// Makes the commits since the last sync durable, unless their log records did or a
    /// write transaction holds the writer: the background sync's step. An error is kept
    /// for the next `Database::sync` to return.
    pub fn sync_if_idle(&self) {
        let unsynced = |ws: &mut WriterState| {
            let latest = self.state().latest.slot.txid;
            ws.log.logged != latest && ws.durable_txid < latest
        };
        let Some(ws) = self.try_take_writer() else {
            return;
        };
        if !self.with_writer(ws, unsynced) {
            return;
        }
        // The pages go to the disk first without the writer, so that write transactions
        // wait only for the short sync that follows. (A sync at any moment is safe: any
        // of the writes since the last one may reach the disk before it anyway.)
        // (Not after a failed sync: the pages it lost must be written again first, which
        // takes the writer.)
        let first = if self.sync_failures.pending() {
            Ok(())
        } else {
            self.sync_counted()
        };
        let synced = first
            .map_err(Error::Io)
            .and_then(|()| match self.try_take_writer() {
                Some(ws) => self.with_writer(ws, |ws| {
                    if unsynced(ws) {
                        self.sync_with(ws).map(|_| ())
                    } else {
                        Ok(())
                    }
                }),
                None => Ok(()),
            });
        if let Err(e) = synced {
            *self
                .background_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(e);
        }
    }
}

/// I/O done since the database was opened (see [`Database::io_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoStats {
    /// Commits that changed something.
    pub commits: u64,
    /// Flushes of the disk's cache: `fdatasync` calls of the whole file, and the durable
    /// (`O_DSYNC`) writes of commit-log records, one per durable commit that logs.
    pub syncs: u64,
    /// Of those, the `fdatasync` calls of the whole file: at the end of the commit log's
    /// cycle, a durable commit that cannot log, [`Database::sync`], closing. Each writes
    /// back every page written since the last one, and makes a commit wait longer.
    pub file_syncs: u64,
    /// Positioned writes.
    pub writes: u64,
    /// Bytes those writes wrote.
    pub bytes_written: u64,
    /// The file's length now.
    pub file_size: u64,
    /// Tree pages write transactions wrote before their commit, to bound their memory
    /// ([`Builder::txn_memory`]).
    pub pages_spilled: u64,
}

/// An open database. Cheap to clone; clones share the same open file.
#[derive(Debug)]
pub struct Database {
    pub(crate) inner: Arc<Inner>,
}

impl Clone for Database {
    fn clone(&self) -> Database {
        self.inner.handles.fetch_add(1, Ordering::Relaxed);
        Database {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl Database {
    /// Options for opening a database.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Opens the database at `path`, creating it if it does not exist. See [`Builder::create`].
    ///
    /// # Errors
    /// As [`Builder::create`].
    pub fn create(path: impl AsRef<Path>) -> Result<Database> {
        Builder::default().create(path)
    }

    /// Opens the existing database at `path`. See [`Builder::open`].
    ///
    /// # Errors
    /// As [`Builder::open`].
    pub fn open(path: impl AsRef<Path>) -> Result<Database> {
        Builder::default().open(path)
    }

    /// A new database in memory.
    ///
    /// # Errors
    /// When memory cannot be reserved.
    pub fn in_memory() -> Result<Database> {
        Builder::default().in_memory()
    }

    /// A read transaction on the newest committed state, which it sees unchanged for its
    /// whole life. Never waits for the writer.
    ///
    /// # Errors
    /// None today; the `Result` leaves room for limits on readers.
    pub fn begin_read(&self) -> Result<ReadTxn> {
        ReadTxn::new(self.inner.clone())
    }

    /// The write transaction: waits while another one is open in this process (on another
    /// thread: the thread that holds one gets an error instead, as its wait would never end).
    ///
    /// # Errors
    /// [`Error::ReadOnly`] on a database opened read-only; [`Error::WriteTxnOnThisThread`]
    /// while this thread holds the open write transaction (one moved to another thread
    /// still counts as its first thread's); [`Error::WriterLost`] once a commit panicked
    /// part-way on this handle.
    pub fn begin_write(&self) -> Result<WriteTxn> {
        WriteTxn::new(self.inner.clone())
    }

    /// The write transaction if none is open (in this process), else `None` at once.
    ///
    /// # Errors
    /// As [`Database::begin_write`].
    pub fn try_begin_write(&self) -> Result<Option<WriteTxn>> {
        WriteTxn::new_until(self.inner.clone(), Some(Instant::now()))
    }

    /// The write transaction, waiting at most `timeout` for an open one (in this process)
    /// to end; `None` when it does not end in time.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cairn_engine::Database;
    ///
    /// # fn main() -> cairn_engine::Result<()> {
    /// let db = Database::in_memory()?;
    /// let first = db.begin_write()?;
    /// let db2 = db.clone();
    /// let waited = std::thread::spawn(move || {
    ///     db2.begin_write_timeout(Duration::from_millis(10)).map(|txn| txn.is_some())
    /// });
    /// assert!(matches!(waited.join(), Ok(Ok(false))), "the first is still open");
    /// first.commit()?;
    /// assert!(db.try_begin_write()?.is_some());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`Database::begin_write`].
    pub fn begin_write_timeout(&self, timeout: Duration) -> Result<Option<WriteTxn>> {
        // (A timeout too long to add to the clock waits for good.)
        WriteTxn::new_until(self.inner.clone(), Instant::now().checked_add(timeout))
    }

    /// Makes every commit so far durable (waits for an open write transaction to end).
    /// After a sync that failed, this one first writes again every page written since the
    /// last durable commit (the operating system may have dropped them unwritten).
    ///
    /// # Errors
    /// An I/O error from `fdatasync`, or the one the background sync of Eventual commits
    /// met since the last call (returned instead of syncing: call again to sync);
    /// [`Error::Corruption`] when a page written since the last durable commit was lost
    /// after a failed sync (reopening recovers the last durable commit);
    /// [`Error::WriteTxnOnThisThread`] and [`Error::WriterLost`] as for
    /// [`Database::begin_write`].
    pub fn sync(&self) -> Result<()> {
        if self.inner.read_only {
            return Ok(());
        }
        let failed = self
            .inner
            .background_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(e) = failed {
            return Err(e);
        }
        let ws = self.inner.take_writer()?;
        self.inner.with_writer(ws, |ws| {
            // A commit its log record made durable needs no sync.
            let logged = ws.log.logged == self.inner.state().latest.slot.txid;
            if logged {
                Ok(())
            } else {
                self.inner.sync_with(ws).map(|_| ())
            }
        })
    }

    /// Walks every page of the newest commit and reports every problem found.
    ///
    /// When the newest commit is one the commit log holds, whose free set is only in the
    /// writer's memory, the file is synced first (which writes that set), unless a write
    /// transaction is open: then every page is checked, but leaked pages cannot be told
    /// from free ones and are not reported.
    ///
    /// # Errors
    /// An I/O error from that sync, or a failure to read; damage is reported in the
    /// [`CheckReport`].
    pub fn check(&self) -> Result<CheckReport> {
        // A logged commit's free set is in the writer's memory: a sync writes it, so that
        // the check can account for every page (unless a write transaction is open).
        if !self.inner.state().latest.slot.records_freelist()
            && let Some(ws) = self.inner.try_take_writer()
        {
            self.inner.with_writer(ws, |ws| self.inner.sync_with(ws))?;
        }
        // (Read in a registered read transaction: a writer, in this process or another,
        // reuses the pages of a snapshot nothing pins.)
        let txn = self.begin_read()?;
        Ok(crate::check::check(&txn.snapshot))
    }

    /// Statistics of the newest commit: depth, pages by kind, fill factor, free pages.
    ///
    /// # Errors
    /// A corruption error when a page cannot be read.
    pub fn stats(&self) -> Result<Stats> {
        let oldest = {
            let state = self.inner.state();
            self.inner.oldest_reader(&state)
        };
        // (Read in a registered read transaction, as `check` is; taken after the oldest
        // reader was asked for, so as not to count itself.)
        let txn = self.begin_read()?;
        let snapshot = &txn.snapshot;
        let mut stats = crate::stats::stats(snapshot, self.inner.storage.len())?;
        // A reader in another process pins its snapshot without saying since when.
        let remote = match (self.inner.read_only, self.inner.lock_file.as_ref()) {
            (false, Some(file)) => crate::lock::oldest_pinned(file, snapshot.txid())
                .ok()
                .flatten(),
            _ => None,
        };
        let oldest = match (oldest, remote) {
            (Some((txid, age)), Some(r)) if txid <= r => Some((txid, Some(age))),
            (_, Some(r)) => Some((r, None)),
            (local, None) => local.map(|(txid, age)| (txid, Some(age))),
        };
        if let Some((txid, age)) = oldest {
            stats.oldest_reader_txid = Some(txid);
            stats.oldest_reader_age = age;
        }
        // (Unknown while a write transaction holds the writer state.)
        if let Ok(guard) = self.inner.writer.try_lock()
            && let Some(ws) = guard.state()
        {
            // Pages freed after the oldest snapshot: they wait for it to end.
            if let Some((txid, _)) = oldest {
                stats.pages_pinned_by_readers = ws.freelist.waiting_freed_after(txid) as u64;
            }
            // Pages freed since the last synced commit: they wait for the next sync.
            stats.pages_awaiting_sync = ws.freelist.waiting_after(ws.durable_txid) as u64;
        }
        Ok(stats)
    }

    /// What this handle has written since the database was opened.
    pub fn io_stats(&self) -> IoStats {
        let c = &self.inner.counters;
        IoStats {
            commits: self.inner.commits.load(Ordering::Relaxed),
            syncs: c.syncs.load(Ordering::Relaxed),
            file_syncs: c.file_syncs.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            bytes_written: c.bytes_written.load(Ordering::Relaxed),
            file_size: self.inner.storage.len(),
            pages_spilled: self.inner.pages_spilled.load(Ordering::Relaxed),
        }
    }

    /// Whether this read-only database is a private copy: its file's commit log held
    /// commits that the writer had not applied to the tree (it stopped without closing the
    /// file, in a power cut say), and opening applied them in memory, leaving the file as it
    /// was. A copy shows those commits, but not the commits of a writer that opens the file
    /// later; a new read-only opening does.
    pub fn is_private_copy(&self) -> bool {
        self.inner.private_copy
    }

    /// The page size in bytes.
    pub fn page_size(&self) -> usize {
        self.inner.page_size
    }

    /// The longest key accepted.
    pub fn max_key_len(&self) -> usize {
        crate::format::max_key_len(self.inner.page_size)
    }

    /// The file this database lives in, or `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// Whether the database was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// The durability write transactions and batches get unless they set their own
    /// ([`Builder::durability`]).
    pub fn durability(&self) -> Durability {
        self.inner.durability
    }
}
