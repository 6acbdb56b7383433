//! Hot backup: a consistent copy of one snapshot into a new file while writers go on.
//!
//! The copy is logical (table by table, entry by entry), so it is also dense: it doubles
//! as an offline compaction. It is written in transactions of bounded size, so memory
//! stays small whatever the database's size, and synced once at the end. It is written to
//! a new file beside `path` that takes `path` as its name only when the copy is whole and
//! synced: a failed or interrupted backup leaves no file there.

use std::path::Path;
use std::sync::Arc;

use crate::create::NewFile;
use crate::db::{Database, Durability};
use crate::error::{Error, Result};

/// Entries copied per transaction of the target.
const BATCH: usize = 10_000;

impl Database {
    /// Writes a consistent copy of the newest commit to a new database at `path` (which
    /// must not exist), with the same page size; returns the number of entries copied.
    /// Readers and the writer of this database go on meanwhile.
    ///
    /// # Errors
    /// An I/O error (`AlreadyExists` when `path` exists), or corruption found while
    /// reading. A failed backup leaves no file at `path`.
    pub fn backup(&self, path: impl AsRef<Path>) -> Result<u64> {
        let path = path.as_ref();
        let exists = || {
            Error::Io(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} already exists", path.display()),
            ))
        };
        if std::fs::symlink_metadata(path).is_ok() {
            return Err(exists());
        }
        let source = self.begin_read()?;
        let new = NewFile::beside(path)?;
        // The copy gets the source's page size, and a new file's commit log (64 KiB,
        // growing as its commits need: the copy is dense), unless a size was asked for the
        // source's, which the copy then gets too: the size its slot records, or, in a file
        // of a build that did not record it, a log larger than one grows to by default
        // (for large records too, since the fifty-eighth session: a size asked for in such
        // a file up to that, 16 MiB, is not kept). (Until the forty-third session it got
        // the source's log whatever its size, 2 MiB of zeros for most.)
        let mut builder = Database::builder().page_size(self.page_size());
        let page_size = self.page_size() as u64;
        let slot = source.snapshot.slot;
        let log_bytes = slot.log_pages.saturating_mul(page_size);
        if let Some(pages) = crate::recovery::recorded_log_limit(&slot, self.page_size()) {
            builder = builder.log_size(pages * page_size);
        } else if log_bytes > crate::recovery::LARGE_RECORDS_LOG_BYTES {
            builder = builder.log_size(log_bytes);
        }
        let target = builder.durability(Durability::Eventual).with_storage(
            Arc::new(new.storage()?),
            true,
            None,
        )?;
        let mut copied = 0u64;
        for info in source.list_tables()? {
            let table = source.open_table(&info.name)?;
            let mut txn = target.begin_write()?;
            txn.create_table(&info.name)?;
            let mut in_batch = 0;
            for entry in table.iter()? {
                let (k, v) = entry?;
                txn.open_table(&info.name)?.insert(k, v)?;
                copied += 1;
                in_batch += 1;
                if in_batch == BATCH {
                    txn.commit()?;
                    txn = target.begin_write()?;
                    in_batch = 0;
                }
            }
            txn.commit()?;
        }
        target.sync()?;
        drop(target);
        if !new.link(path)? {
            return Err(exists());
        }
        Ok(copied)
    }
}
