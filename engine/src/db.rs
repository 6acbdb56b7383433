//! The database handle: opening and creating, the shared state of readers and the writer,
//! and syncing.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::format::{MAX_PAGE_SIZE, MIN_PAGE_SIZE, SLOT_OFFSET, Slot};
use crate::freelist::FreeList;
use crate::pager::Snapshot;
use crate::read_txn::ReadTxn;
use crate::recovery;
use crate::storage::{Counted, FileStorage, IoCounters, MemoryStorage, Storage};
use crate::write_txn::WriteTxn;
use crate::writer_slot::WriterSlot;
use crate::{CheckReport, Stats};

pub(crate) mod opening_pin;
mod private_copy;

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

/// Options for opening a database.
#[derive(Debug, Clone)]
pub struct Builder {
    page_size: usize,
    log_size: u64,
    durability: Durability,
    lock_timeout: Duration,
    read_only: bool,
    poll_waits: bool,
    /// How often Eventual commits are synced in the background; `None`: the default
    /// (every second for a file, never for other storage).
    eventual_sync: Option<Option<Duration>>,
    txn_memory: usize,
    /// Opening a private copy (`private_copy.rs`): the free pages of the file are not
    /// reused.
    withhold_free: bool,
    /// How many times a read-only opening found the file's slots changed under it while
    /// making a private copy (`private_copy.rs`), and began again.
    copy_retries: u8,
}

/// The memory a write transaction's changed tree pages may take, unless the builder says
/// otherwise.
const DEFAULT_TXN_MEMORY: usize = 512 << 20;

/// How often a file's Eventual commits are synced in the background, unless the builder
/// says otherwise.
const DEFAULT_EVENTUAL_SYNC: Duration = Duration::from_secs(1);

impl Default for Builder {
    fn default() -> Self {
        Builder {
            page_size: 4096,
            log_size: recovery::DEFAULT_LOG_BYTES,
            durability: Durability::Immediate,
            lock_timeout: Duration::from_secs(1),
            read_only: false,
            poll_waits: true,
            eventual_sync: None,
            txn_memory: DEFAULT_TXN_MEMORY,
            withhold_free: false,
            copy_retries: 0,
        }
    }
}

impl Builder {
    /// The page size of a new database: a power of two from 1 KiB to 64 KiB (default
    /// 4 KiB). An existing database keeps the page size it was created with.
    pub fn page_size(mut self, bytes: usize) -> Self {
        self.page_size = bytes;
        self
    }

    /// The size of a new database's commit log, in bytes: rounded up to whole pages, at
    /// least 16 of them, at most 64 MiB (default 2 MiB); 0 makes none. An existing database
    /// keeps the log it was created with. A durable commit whose record of its changes fits
    /// in the log's free space appends it there with one write instead of syncing the file,
    /// which is synced when the log is full: a larger log lets larger transactions commit
    /// that way and makes syncs rarer (each writes back more pages), for a larger file.
    /// Without a log, every durable commit syncs the file.
    pub fn log_size(mut self, bytes: u64) -> Self {
        self.log_size = bytes;
        self
    }

    /// The default durability of write transactions (default `Immediate`).
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }

    /// How long to wait for another process's lock on the file (default 1 s).
    pub fn lock_timeout(mut self, t: Duration) -> Self {
        self.lock_timeout = t;
        self
    }

    /// Opens without writing, locking or syncing; works on a read-only file. Readers follow
    /// the commits of a writer in another process. A file whose writer stopped with commits
    /// only its log holds opens as a private copy with them applied in memory (see
    /// [`Database::is_private_copy`]).
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }

    /// Whether a thread waiting for a durable commit — its own log record on its way to the
    /// disk, the group commit its batch joined, or (leading a group) the batches it expects
    /// — polls for the end of the wait, yielding its processor between tries, before it
    /// sleeps (default `true`). A sleeping thread
    /// can run again tens of microseconds after it is woken, the more on a virtual
    /// machine, which slows every durable commit and keeps threads out of the next group.
    /// A polling thread keeps a processor busy until the wait ends, for at most about
    /// twice as long as the last such wait took (and not at all when that was over half a
    /// millisecond); a leader gathering batches polls for at most 100 µs. `false` sleeps
    /// at once, for the least CPU time, and writes log records without the `io_uring`
    /// (see `FileStorage::poll_waits`).
    pub fn poll_waits(mut self, yes: bool) -> Self {
        self.poll_waits = yes;
        self
    }

    /// How often a background thread makes Eventual commits durable: every `interval`
    /// (100 µs at least) when commits since the last sync are not durable and no write
    /// transaction is open, put off for up to four intervals while the writer keeps
    /// committing (see `eventual_sync.rs`). `None` leaves them to the next Immediate
    /// commit, [`Database::sync`] or close. Default: every second for a database file;
    /// never for one in memory or on storage given to [`Builder::with_storage`].
    pub fn eventual_sync(mut self, interval: Option<Duration>) -> Self {
        self.eventual_sync = Some(interval);
        self
    }

    /// About how much memory a write transaction's changed tree pages may take (default
    /// 512 MiB, about LMDB's limit on a transaction's dirty pages; at least 16 pages).
    /// Past it, before its next change, the transaction writes changed leaves (in key
    /// order, never the last leaf of a table it appends to) to the free pages its commit
    /// would have written them to, until it holds three quarters of the budget; when
    /// leaves alone do not get it there, the branches whose children are all written go
    /// too. A transaction of any size then runs in bounded memory: its commit writes the
    /// rest and syncs them all, as before, and a rollback or a crash leaves the written
    /// pages free. A written page the transaction changes again is read back and written
    /// again later, so a transaction of random changes over more leaves than this holds
    /// writes many pages more than once. (Overflow pages of large values never stay in
    /// memory: they are written as they are put.)
    pub fn txn_memory(mut self, bytes: usize) -> Self {
        self.txn_memory = bytes;
        self
    }

    /// Checks the options that shape a new file: page size and log size.
    fn check_new_file(&self) -> Result<()> {
        let p = self.page_size;
        if !p.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&p) {
            return Err(Error::InvalidPageSize(p as u64));
        }
        // As `initialise` will round it, so that what it makes opens again.
        if recovery::log_pages(self.log_size, p).is_none() {
            return Err(Error::InvalidLogSize(self.log_size));
        }
        Ok(())
    }

    /// Opens the database at `path`, creating it if it does not exist. An existing empty
    /// file is refused ([`Error::EmptyFile`]): only a file this call creates is initialised.
    ///
    /// # Errors
    /// [`Error::Locked`] when another process has it open for writing, the errors of
    /// [`Builder::open`], and I/O errors.
    pub fn create(self, path: impl AsRef<Path>) -> Result<Database> {
        self.open_path(path.as_ref(), true)
    }

    /// Opens an existing database at `path`.
    ///
    /// # Errors
    /// [`Error::EmptyFile`], [`Error::NotADatabase`], [`Error::VersionTooNew`],
    /// [`Error::Truncated`], [`Error::NoValidCommit`] or [`Error::Corruption`] for a file
    /// that is not a healthy Cairn database (left untouched); [`Error::Locked`] when another
    /// process has it open for writing, [`Error::AlreadyOpen`] when this one has (each after
    /// the lock timeout: clones of one [`Database`] share the file); and I/O errors.
    pub fn open(self, path: impl AsRef<Path>) -> Result<Database> {
        self.open_path(path.as_ref(), false)
    }

    /// A database that lives in memory and disappears when dropped.
    ///
    /// # Errors
    /// When memory cannot be reserved.
    pub fn in_memory(self) -> Result<Database> {
        self.check_new_file()?;
        self.with_storage(Arc::new(MemoryStorage::new()?), true, None)
    }

    /// Opens a database on any storage backend (a fault-injecting one in tests, say),
    /// initialising it when it is empty and `create` is set.
    ///
    /// # Errors
    /// As [`Builder::open`].
    pub fn with_storage(
        self,
        storage: Arc<dyn Storage>,
        create: bool,
        path: Option<PathBuf>,
    ) -> Result<Database> {
        self.build(storage, create, path, None, None)
    }

    fn build(
        self,
        storage: Arc<dyn Storage>,
        create: bool,
        path: Option<PathBuf>,
        lock_file: Option<std::fs::File>,
        writer_claim: Option<crate::lock::WriterClaim>,
    ) -> Result<Database> {
        if create && storage.is_empty() && !self.read_only {
            self.check_new_file()?;
            recovery::initialise(storage.as_ref(), self.page_size, self.log_size)?;
        }
        let counters = Arc::new(IoCounters::default());
        let storage: Arc<dyn Storage> = Arc::new(Counted {
            inner: storage,
            counters: counters.clone(),
        });
        // Read-only beside a writer in another process, the commit recovery verifies is
        // pinned while it does.
        let pinned = match (&lock_file, self.read_only) {
            (Some(file), true) => opening_pin::pin_newest(storage.as_ref(), file),
            _ => None,
        };
        let opened = recovery::open(storage.as_ref(), !self.read_only);
        if let (Some(txid), Some(file)) = (pinned, &lock_file) {
            opening_pin::unpin(file, txid);
        }
        let mut opened = opened?;
        let log = std::mem::take(&mut opened.log);
        // The commit that applies the log's records takes the last one's id: the records
        // stay in the log until the next cycle overwrites them, and with the first one's
        // id, the records after it would follow its slot and be applied again after a crash
        // (a table they create "already exists").
        let next_txid = opened.snapshot.slot.txid + (log.len() as u64).max(1);
        if self.withhold_free {
            opened.freelist.withhold(next_txid);
        }
        // Read-only, the log is applied to a private copy; while a writer process holds the
        // file, its slots are current (it writes a commit's slot before its record) and the
        // log is its business.
        if self.read_only
            && !log.is_empty()
            && !lock_file.as_ref().is_some_and(crate::lock::writer_alive)
        {
            let page_size = opened.snapshot.page_size;
            return private_copy::open(self, storage, path, lock_file, page_size);
        }
        let slot = opened.snapshot.slot;
        let page_size = opened.snapshot.page_size;
        let file_backed = if self.read_only && lock_file.is_some() {
            u64::MAX
        } else {
            0
        };
        let inner = Inner {
            storage,
            path,
            page_size,
            read_only: self.read_only,
            lock_file,
            private_copy: false,
            pin: None,
            file_backed,
            durability: self.durability,
            state: Mutex::new(State {
                latest: Arc::new(opened.snapshot),
                readers: Default::default(),
            }),
            reader_slots: Default::default(),
            writer: Mutex::new(WriterSlot::new((!self.read_only).then(|| WriterState {
                freelist: opened.freelist,
                next_txid,
                durable_txid: slot.txid,
                durable_slot: opened.slot_index,
                // The first commit after opening syncs and starts a new cycle of the log,
                // whose records then cannot be mistaken for the ones already there.
                log: LogState {
                    page: slot.log_page,
                    pages: slot.log_pages,
                    ..LogState::default()
                },
            }))),
            writer_cv: Condvar::new(),
            counters,
            commits: AtomicU64::new(0),
            group: Mutex::default(),
            group_cv: Condvar::new(),
            group_arrival: Condvar::new(),
            group_waiting: std::sync::atomic::AtomicUsize::new(0),
            groups_done: AtomicU64::new(0),
            group_time: crate::poll::PollBound::default(),
            handles: AtomicUsize::new(1),
            syncer: Mutex::new(None),
            background_error: Mutex::new(None),
            sync_failures: crate::resync::SyncFailures::default(),
            txn_budget_pages: (self.txn_memory / page_size).max(crate::commit::MIN_BUDGET_PAGES),
            pages_spilled: AtomicU64::new(0),
            _writer_claim: writer_claim,
        };
        inner.group_time.set_enabled(self.poll_waits);
        let db = Database {
            inner: Arc::new(inner),
        };
        if !self.read_only && !log.is_empty() {
            // The commits only the log holds, applied again as one durable commit.
            let mut txn = db.begin_write()?;
            txn.set_durability(Durability::Immediate);
            for (page, payload) in &log {
                // A record that passed its checksum but does not apply to the commit it
                // follows (a missing table, say) is damage, named by its page.
                crate::oplog::replay(&mut txn, payload, *page).map_err(|e| match e {
                    Error::Io(_) | Error::Corruption { .. } => e,
                    other => Error::corrupt(*page, format!("commit log record: {other}")),
                })?;
            }
            txn.commit()?;
        }
        if let Some(every) = self.eventual_sync.flatten()
            && !self.read_only
        {
            let syncer = crate::eventual_sync::Syncer::start(&db.inner, every)?;
            *db.inner
                .syncer
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(syncer);
        }
        Ok(db)
    }

    fn open_path(self, path: &Path, create: bool) -> Result<Database> {
        // Refuse directories, devices, FIFOs and sockets before opening: opening a FIFO
        // for reading would block until a writer came. An existing empty file is refused
        // too: only a file this call creates is ever initialised, and it appears at the
        // path only once initialised.
        let existed = match std::fs::metadata(path) {
            Ok(meta) if !meta.is_file() => {
                return Err(Error::NotAFile {
                    path: path.to_path_buf(),
                });
            }
            Ok(meta) if meta.len() == 0 => return Err(Error::EmptyFile),
            Ok(_) => true,
            Err(_) => false,
        };
        if create && !existed && !self.read_only {
            // Written beside the path and linked into place whole (or another creator's
            // file kept), then opened like any existing database.
            self.check_new_file()?;
            crate::create::create_file(path, self.page_size, self.log_size)?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(!self.read_only)
            .open(path)?;
        let writer_claim = if self.read_only {
            None
        } else {
            let started = std::time::Instant::now();
            let claim = crate::lock::WriterClaim::new(&file, path, self.lock_timeout)?;
            let left = self.lock_timeout.saturating_sub(started.elapsed());
            crate::lock::lock_exclusive(&file, path, left)?;
            Some(claim)
        };
        let lock_file = file.try_clone()?;
        let mut storage = FileStorage::new(file)?;
        if !self.read_only {
            storage = storage
                .with_durable_writes(path)?
                .poll_waits(self.poll_waits);
        }
        let storage = Arc::new(storage);
        if storage.is_empty() {
            return Err(Error::EmptyFile);
        }
        let builder = Builder {
            eventual_sync: Some(self.eventual_sync.unwrap_or(Some(DEFAULT_EVENTUAL_SYNC))),
            ..self
        };
        builder.build(
            storage,
            false,
            Some(path.to_path_buf()),
            Some(lock_file),
            writer_claim,
        )
    }
}

/// What readers and the writer share: the newest snapshot and who reads which.
#[derive(Debug)]
pub(crate) struct State {
    pub latest: Arc<Snapshot>,
    /// Live read transactions by snapshot id: how many, and when the first began.
    pub readers: crate::readers::Readers,
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
            ws.freelist.settle(true);
        }
        Ok(synced)
    }
}

impl Inner {
    /// Gives the newest commit, when its free set is only in the writer's memory (a logged
    /// commit), a freelist: encoded into a run taken from the set, and named by a copy of
    /// its slot, which becomes the newest snapshot (the caller writes the slot and syncs).
    fn record_free_set(&self, ws: &mut WriterState) -> Result<()> {
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
    /// `fdatasync` calls (or their equivalent).
    pub syncs: u64,
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
}
