//! The engine's one error type.
//!
//! Every failure the engine can report is a variant here. Corruption always names
//! the page it was found in and what was wrong with it; it is never a panic.

use std::path::PathBuf;

/// A `Result` whose error is the engine's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A page's bytes do not match the checksum its parent recorded, or its contents
    /// break an invariant of the format.
    #[error("corruption in page {page}: {reason}")]
    Corruption {
        /// The page in which the damage was found.
        page: u64,
        /// What was wrong with it.
        reason: String,
    },
    /// The file does not start with Cairn's magic bytes.
    #[error("not a Cairn database (no Cairn header found)")]
    NotADatabase,
    /// The file has zero length.
    #[error("the file is empty, not a Cairn database")]
    EmptyFile,
    /// The file ends before the data its commit slots describe.
    #[error("the file is truncated: {len} bytes, but at least {expected} are needed")]
    Truncated {
        /// The file's length.
        len: u64,
        /// The length its newest readable commit needs.
        expected: u64,
    },
    /// Neither commit slot holds a commit whose pages are intact.
    #[error("no intact commit found: slot 0: {slot0}; slot 1: {slot1}")]
    NoValidCommit {
        /// Why the first slot was rejected.
        slot0: String,
        /// Why the second slot was rejected.
        slot1: String,
    },
    /// The file was written by a newer version of Cairn.
    #[error("format version {found} is newer than the newest this build reads ({supported})")]
    VersionTooNew {
        /// The version in the file.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// The file was written by an older, no longer readable version of Cairn.
    #[error("format version {found} is older than the oldest this build reads ({oldest})")]
    VersionTooOld {
        /// The version in the file.
        found: u32,
        /// The oldest version this build reads.
        oldest: u32,
    },
    /// Another process holds the file open for writing.
    #[error("database {} is locked by {}", path.display(), holder(*pid))]
    Locked {
        /// The locked file.
        path: PathBuf,
        /// The process holding it, where the platform tells.
        pid: Option<u32>,
    },
    /// This process has the file open for writing through another [`crate::Database`],
    /// which stayed open for the lock timeout (clones of one handle share the file), or
    /// which [`crate::salvage`] found open.
    #[error(
        "database {} is open for writing elsewhere in this process (clones of its Database handle share it)",
        path.display()
    )]
    AlreadyOpen {
        /// The file.
        path: PathBuf,
    },
    /// The path names a directory, a device, a FIFO or a socket, not a file.
    #[error("{path} is not a regular file")]
    NotAFile {
        /// The path given.
        path: PathBuf,
    },
    /// The page size asked for is not a power of two from 1 KiB to 64 KiB.
    #[error("page size {0} is not a power of two from 1024 to 65536")]
    InvalidPageSize(u64),
    /// The commit log's size asked for is over 64 MiB.
    #[error("commit log of {0} bytes exceeds the limit of 67108864 bytes (64 MiB)")]
    InvalidLogSize(u64),
    /// A key longer than the database's key limit.
    #[error("key of {len} bytes exceeds the limit of {max} bytes")]
    KeyTooLarge {
        /// The key's length.
        len: usize,
        /// The limit (a quarter of the page size).
        max: usize,
    },
    /// A value longer than the value limit.
    #[error("value of {len} bytes exceeds the limit of {max} bytes")]
    ValueTooLarge {
        /// The value's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// No table has this name.
    #[error("no table named {0:?}")]
    TableNotFound(String),
    /// A table with this name exists already.
    #[error("table {0:?} already exists")]
    TableExists(String),
    /// A table name that is empty or longer than the key limit.
    #[error("invalid table name {0:?}: {1}")]
    InvalidTableName(String, &'static str),
    /// A page number past the end of the database (or in its header), asked for by a caller.
    #[error("no page {page}: the database has pages 2 to {}", .pages.saturating_sub(1))]
    NoSuchPage {
        /// The page asked for.
        page: u64,
        /// How many pages the database has.
        pages: u64,
    },
    /// A write was attempted on a database opened read-only.
    #[error("the database is open read-only")]
    ReadOnly,
    /// This thread holds the open write transaction and asked for the writer again
    /// (`begin_write`, `sync` or `commit_batch`): waiting for its own transaction to end
    /// would never end.
    #[error(
        "this thread holds the open write transaction: commit or drop it before beginning another write"
    )]
    WriteTxnOnThisThread,
    /// A savepoint that this write transaction does not have: released, rolled back past
    /// (a rollback to an earlier savepoint), or taken in another transaction.
    #[error(
        "no such savepoint in this transaction (released, rolled back past, or another transaction's)"
    )]
    NoSuchSavepoint,
    /// The open savepoints' copies of earlier pages take more memory than a transaction
    /// may hold ([`crate::Builder::txn_memory`]): no savepoint is taken until one is
    /// released or rolled back to.
    #[error(
        "the open savepoints hold {held} bytes of earlier pages, more than the transaction's memory budget of {budget} bytes: release or roll back to one first"
    )]
    SavepointsTooLarge {
        /// The bytes the savepoints' copies take.
        held: u64,
        /// The transaction's memory budget.
        budget: u64,
    },
    /// A commit panicked part-way on this handle, so the writer state is in an unknown
    /// condition and no write may follow; the file is as a failed commit leaves it.
    #[error(
        "a commit panicked part-way: this handle cannot write again; open the database again to go on writing"
    )]
    WriterLost,
    /// The file grew past the largest size this build can map.
    #[error("the database would exceed the maximum file size of {max} bytes")]
    FileTooLarge {
        /// The limit.
        max: u64,
    },
    /// An I/O error from the operating system; the database stays at its last commit.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl Error {
    pub(crate) fn corrupt(page: u64, reason: impl Into<String>) -> Self {
        Error::Corruption {
            page,
            reason: reason.into(),
        }
    }

    /// A copy of this error, for each caller of a group commit that failed together (an
    /// I/O error keeps its kind and message).
    pub(crate) fn duplicate(&self) -> Self {
        use Error::*;
        match self {
            Corruption { page, reason } => Error::corrupt(*page, reason.clone()),
            NotADatabase => NotADatabase,
            EmptyFile => EmptyFile,
            Truncated { len, expected } => Truncated {
                len: *len,
                expected: *expected,
            },
            NoValidCommit { slot0, slot1 } => NoValidCommit {
                slot0: slot0.clone(),
                slot1: slot1.clone(),
            },
            VersionTooNew { found, supported } => VersionTooNew {
                found: *found,
                supported: *supported,
            },
            VersionTooOld { found, oldest } => VersionTooOld {
                found: *found,
                oldest: *oldest,
            },
            Locked { path, pid } => Locked {
                path: path.clone(),
                pid: *pid,
            },
            NotAFile { path } => NotAFile { path: path.clone() },
            AlreadyOpen { path } => AlreadyOpen { path: path.clone() },
            InvalidPageSize(n) => InvalidPageSize(*n),
            InvalidLogSize(n) => InvalidLogSize(*n),
            KeyTooLarge { len, max } => KeyTooLarge {
                len: *len,
                max: *max,
            },
            ValueTooLarge { len, max } => ValueTooLarge {
                len: *len,
                max: *max,
            },
            TableNotFound(name) => TableNotFound(name.clone()),
            TableExists(name) => TableExists(name.clone()),
            InvalidTableName(name, why) => InvalidTableName(name.clone(), why),
            NoSuchPage { page, pages } => NoSuchPage {
                page: *page,
                pages: *pages,
            },
            ReadOnly => ReadOnly,
            WriteTxnOnThisThread => WriteTxnOnThisThread,
            NoSuchSavepoint => NoSuchSavepoint,
            SavepointsTooLarge { held, budget } => SavepointsTooLarge {
                held: *held,
                budget: *budget,
            },
            WriterLost => WriterLost,
            FileTooLarge { max } => FileTooLarge { max: *max },
            Io(e) => Io(std::io::Error::new(e.kind(), e.to_string())),
        }
    }
}

fn holder(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("another process (pid {pid})"),
        None => "another process".to_owned(),
    }
}
