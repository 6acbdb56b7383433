//! What the header and the two commit slots of a file say, read without opening the
//! database (no lock, nothing written): for `cairn info` and for diagnosing damaged files.

use std::fs::File;
use std::path::Path;

use crate::error::{Error, Result};
use crate::format::{SLOT_BYTES, SLOT_OFFSET, Slot};
use crate::storage::Storage;

/// One commit slot as found in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotInfo {
    /// The slot's checksum holds.
    Valid {
        /// The commit this slot names.
        txid: u64,
        /// The newest commit that was durable when this one was written.
        durable_txid: u64,
        /// The file's length in pages at this commit.
        page_count: u64,
        /// The root page of the catalog (the tree of tables).
        catalog_page: u64,
        /// The freelist's first page (0: no free pages); `None` for a commit whose free
        /// set was only in the writer's memory (see `logged`).
        freelist_page: Option<u64>,
        /// How many bytes the freelist's run takes (0 when it is not written).
        freelist_len: u64,
        /// Whether the commit log holds the commit (its free set was in the writer's
        /// memory; opening goes back to the durable commit and replays the log). False
        /// for a commit that names its freelist, and for an Eventual commit that neither
        /// logged nor wrote it: its free set is every page its trees do not use.
        logged: bool,
        /// The commit log's first page (0: the file has none).
        log_page: u64,
        /// The commit log's length in pages.
        log_pages: u64,
        /// The most pages the log grows to, when a size was asked for
        /// ([`crate::Builder::log_size`]); `None`: the default.
        log_limit: Option<u64>,
    },
    /// Never written, torn or damaged.
    Invalid,
}

/// The header and slots of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    /// The file's length in bytes.
    pub len: u64,
    /// The format version in the header.
    pub format_version: u32,
    /// The page size in bytes.
    pub page_size: u32,
    /// The two commit slots, in file order.
    pub slots: [SlotInfo; 2],
    /// How many commits only the commit log holds after the commit a read-only opening
    /// picks: its writer stopped before applying them (in a power cut, say); a writable
    /// opening applies them to the file, a read-only one to a private copy. `None` when
    /// no commit opens.
    pub unapplied_commits: Option<u64>,
}

/// Reads the header and both slots of the file at `path`, and how many commits only its
/// commit log holds (as a read-only opening would: nothing is written).
///
/// # Errors
/// [`Error::NotADatabase`], [`Error::Corruption`] (both copies damaged) or
/// [`Error::Truncated`] for an unreadable header, and I/O errors.
pub fn inspect(path: impl AsRef<Path>) -> Result<FileInfo> {
    let file = File::open(path.as_ref())?;
    if !file.metadata()?.is_file() {
        return Err(Error::NotAFile {
            path: path.as_ref().to_path_buf(),
        });
    }
    let len = file.metadata()?.len();
    // The header as opening reads it: page 0's copy, else page 1's.
    let pin_file = file.try_clone()?;
    let storage = crate::storage::FileStorage::new(file)?;
    let header = crate::recovery::find_header(&storage)?;
    let mut slots = [SlotInfo::Invalid, SlotInfo::Invalid];
    for (i, slot) in slots.iter_mut().enumerate() {
        let mut raw = [0u8; SLOT_BYTES];
        let at = i as u64 * u64::from(header.page_size) + SLOT_OFFSET as u64;
        if at + SLOT_BYTES as u64 <= len
            && storage.read(at, &mut raw).is_ok()
            && let Some(s) = Slot::decode(&raw)
        {
            *slot = SlotInfo::Valid {
                txid: s.txid,
                durable_txid: s.durable_txid,
                page_count: s.page_count,
                catalog_page: s.catalog.page,
                freelist_page: s.records_freelist().then_some(s.freelist_page),
                freelist_len: if s.records_freelist() {
                    s.freelist_len
                } else {
                    0
                },
                logged: s.logged(),
                log_page: s.log_page,
                log_pages: s.log_pages,
                log_limit: crate::recovery::recorded_log_limit(&s, header.page_size as usize),
            };
        }
    }
    // What a read-only opening finds (it reads, and writes nothing), pinning the commit it
    // verifies against a writer beside it as the opening does.
    let (opened, held) = crate::db::opening_alone::recover(
        &storage,
        true,
        Some(&pin_file),
        Some(path.as_ref()),
        std::time::Duration::from_secs(1),
    );
    drop(held);
    let unapplied_commits = opened.ok().map(|opened| opened.log.len() as u64);
    Ok(FileInfo {
        len,
        format_version: header.version,
        page_size: header.page_size,
        slots,
        unapplied_commits,
    })
}
