//! Opening and creating: the options ([`Builder`]), the file's opening (refusing what is
//! not a database file, the writer's lock), recovery, and the handle's shared state
//! built from what recovery found, with the commits only the log holds applied.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use super::{
    Database, Durability, Inner, LogState, State, WriterState, after_crash, opening_alone,
    private_copy,
};
use crate::error::{Error, Result};
use crate::format::{MAX_PAGE_SIZE, MIN_PAGE_SIZE};
use crate::recovery;
use crate::storage::{Counted, FileStorage, IoCounters, MemoryStorage, Storage};
use crate::writer_slot::WriterSlot;

/// Options for opening a database.
#[derive(Debug, Clone)]
pub struct Builder {
    pub(super) page_size: usize,
    /// The commit log asked for (`None`: start small and grow to the default).
    pub(super) log_size: Option<u64>,
    pub(super) durability: Durability,
    pub(super) lock_timeout: Duration,
    pub(super) read_only: bool,
    pub(super) poll_waits: bool,
    /// How often Eventual commits are synced in the background; `None`: the default
    /// (every second for a file, never for other storage).
    pub(super) eventual_sync: Option<Option<Duration>>,
    pub(super) txn_memory: usize,
    /// Opening a private copy (`private_copy.rs`): the free pages of the file are not
    /// reused.
    pub(super) withhold_free: bool,
    /// How many times a read-only opening found the file's slots changed under it while
    /// making a private copy (`private_copy.rs`), and began again.
    pub(super) copy_retries: u8,
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
            log_size: None,
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

    /// The size of the commit log, in bytes: rounded up to whole pages, at least 16 of
    /// them, at most 64 MiB; 0 makes none. A durable commit whose record of its changes
    /// fits in the log's free space appends it there with one write instead of syncing the
    /// file, which is synced when the log is full: a larger log lets larger transactions
    /// commit that way and makes syncs rarer (each writes back more pages), for a larger
    /// file. Without a log, every durable commit syncs the file.
    ///
    /// A new database gets a log of this size. Unless it is given, a new database's log
    /// starts at 64 KiB and grows, at a sync, each time a cycle of commits fills it (or a
    /// transaction's record does not fit it), doubling up to 2 MiB: a database that sees
    /// few durable commits keeps a small file. (Records larger than 1 MiB, durable
    /// batches of many changes spread over a large tree, grow it further, to hold four
    /// of them, up to 16 MiB.) An existing database's log grows likewise
    /// up to this size, and shrinks only when [`Database::compact`] makes it a new file's
    /// again; a database made without a log never gets one.
    ///
    /// The file keeps the size given (its commits record it): an opening that gives none
    /// takes the one given last, at creation or at a later opening (the default above
    /// when none ever was), and a backup gets it too.
    pub fn log_size(mut self, bytes: u64) -> Self {
        self.log_size = Some(bytes);
        self
    }

    /// The bytes of a new file's commit log.
    pub(crate) fn new_log_bytes(&self) -> u64 {
        self.log_size.unwrap_or(recovery::INITIAL_LOG_BYTES)
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
        let bytes = self.new_log_bytes();
        if recovery::log_pages(bytes, p).is_none() {
            return Err(Error::InvalidLogSize(bytes));
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

    pub(super) fn build(
        self,
        storage: Arc<dyn Storage>,
        create: bool,
        path: Option<PathBuf>,
        lock_file: Option<std::fs::File>,
        writer_claim: Option<crate::lock::WriterClaim>,
    ) -> Result<Database> {
        // What the log may grow to: within the limit a new file's log has (any size up to
        // it is whole pages of any page size).
        if let Some(bytes) = self.log_size.filter(|&b| b > recovery::MAX_LOG_BYTES)
            && !self.read_only
        {
            return Err(Error::InvalidLogSize(bytes));
        }
        if create && storage.is_empty() && !self.read_only {
            self.check_new_file()?;
            recovery::initialise(storage.as_ref(), self.page_size, self.log_size)?;
        }
        let counters = Arc::new(IoCounters::default());
        let storage: Arc<dyn Storage> = Arc::new(Counted {
            inner: storage,
            counters: counters.clone(),
        });
        // A writer's file is marked as being recovered until the opening is done, so
        // that readers elsewhere wait (`lock::recovering`). (Failing to mark it leaves
        // them free to take a commit this opening is about to refuse, and read damage;
        // on failure the mark goes with the file.)
        if let (Some(file), false) = (&lock_file, self.read_only) {
            let _ = crate::lock::recovering(file);
        }
        // A read-only handle of a file says so for as long as it is open, before it reads a
        // slot: a writer after a crash then keeps the pages of the commits it discards
        // (`db/after_crash.rs`).
        if let (Some(file), true) = (&lock_file, self.read_only) {
            crate::lock::reading(file)?;
        }
        // Read-only, the commit recovery verifies is pinned while it does, and no writer
        // can start while `held` is (`db/opening_alone.rs`).
        let (opened, held) = opening_alone::recover(
            storage.as_ref(),
            self.read_only,
            lock_file.as_ref(),
            path.as_deref(),
            self.lock_timeout,
        );
        let alone = !self.read_only || lock_file.is_none() || held.is_some();
        let mut opened = opened?;
        let log = std::mem::take(&mut opened.log);
        // The commit that applies the log's records takes the last one's id at least (past
        // the newest a slot names, below): the records stay in the log until the next cycle
        // overwrites them, and with the first one's id, the records after it would follow
        // its slot and be applied again after a crash (a table they create "already
        // exists").
        let mut next_txid = opened.snapshot.slot.txid + (log.len() as u64).max(1);
        if self.withhold_free {
            opened.freelist.withhold(next_txid);
        }
        // A writer that opens an older commit than the newest a slot names commits past it,
        // and keeps the pages readers elsewhere may hold of the newer ones
        // (`db/after_crash.rs`).
        if !self.read_only {
            let file_pages = lock_file
                .as_ref()
                .filter(|f| crate::lock::any_reading(f))
                .map(|_| storage.len() / opened.snapshot.page_size as u64);
            next_txid = after_crash::first_txid(&mut opened, next_txid, file_pages);
        }
        // Read-only, the log is applied to a private copy; while a writer process holds the
        // file, its slots are current (it writes a commit's slot before its record) and the
        // log is its business.
        if self.read_only && !log.is_empty() && alone {
            let page_size = opened.snapshot.page_size;
            // No writer starts until the copy is built: it reads the file's slots and log
            // through its map, which a writer's opening rewrites (until the forty-eighth
            // session one could start meanwhile, and the copy's recovery read a log half
            // its new cycle's: "damaged").
            let copy = private_copy::open(self, storage, path, lock_file, page_size);
            drop(held);
            return copy;
        }
        drop(held);
        // Beside a writer the slots are live: a refusal then was a race, not damage, and
        // the readers need not skip the slot.
        let rejected = if alone {
            std::mem::take(&mut opened.rejected)
        } else {
            Vec::new()
        };
        let slot = opened.snapshot.slot;
        let page_size = opened.snapshot.page_size;
        // The size asked for now, else the one asked for before, which the slot records.
        let log_limit = match self.log_size {
            Some(bytes) => recovery::log_pages(bytes, page_size),
            None => recovery::recorded_log_limit(&slot, page_size),
        };
        let log_target = log_limit
            .or_else(|| recovery::log_pages(recovery::DEFAULT_LOG_BYTES, page_size))
            .unwrap_or(slot.log_pages);
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
            rejected,
            pin: None,
            file_backed,
            durability: self.durability,
            state: Mutex::new(State {
                latest: Arc::new(opened.snapshot),
                readers: Default::default(),
                looked_pin: None,
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
                    target: log_target,
                    limit: log_limit,
                    for_large_records: log_limit.is_none(),
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
        } else if !self.read_only && !self.withhold_free {
            // (A private copy, read-only once opened, has nothing to gain from it.) The seal
            // only spares later openings work: when it fails (a full disk, say), the file is
            // as the crash left it, which every opening handles, and the error waits for
            // the next `Database::sync`, as the background sync's do.
            if let Err(e) = db.inner.seal_opened() {
                *db.inner
                    .background_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(e);
            }
        }
        // Recovered: no slot names a commit the opening refused (the seal wrote over it,
        // or the log's replay did).
        if let (Some(file), false) = (&db.inner.lock_file, self.read_only) {
            let _ = crate::lock::recovered(file);
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
