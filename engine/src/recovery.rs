//! Opening a file: reading the header, choosing the commit slot to trust, and verifying
//! the pages that commit wrote since the last one known durable.
//!
//! Protocol and failure analysis: docs/design.md#recovery.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::header::HeaderError;
use crate::format::{
    FORMAT_VERSION, FreeRun, HEADER_LEN, Header, LOG_UNITS_VERSION, MAGIC, MAX_PAGE_SIZE,
    MIN_PAGE_SIZE, OLDEST_VERSION, SLOT_BYTES, SLOT_OFFSET, Slot, decode_freelist,
};
use crate::freelist::FreeList;
use crate::pager::{FIRST_DATA_PAGE, Snapshot, VerifiedSet};
use crate::resync::write_again;
use crate::storage::Storage;

mod log_tail;
pub(crate) mod new_pages;
mod proven_durable;
mod references;
mod since_durable;
pub(crate) use log_tail::{log_cycle, log_tail};
use new_pages::{CheckOlder, NewPage};
use proven_durable::proves_durable;
use since_durable::{Durable, Since, implied_freelist};

/// The state a file opened at.
#[derive(Debug)]
pub(crate) struct Opened {
    pub snapshot: Snapshot,
    pub freelist: FreeList,
    /// The slot (0 or 1) the commit was read from.
    pub slot_index: usize,
    /// The committed transactions after it that only the commit log holds, to replay:
    /// `(record's page, payload)`, in commit order.
    pub log: Vec<(u64, Vec<u8>)>,
    /// The newer slots refused because their commit did not verify (pages damaged or
    /// torn, a log that does not read): a read-only process's readers do not move to them.
    pub rejected: Vec<Slot>,
    /// The newest commit either slot names with an id in range (a logged one whose record
    /// the log lost, or one refused, may be newer than the opened one and the log's).
    pub newest_named: u64,
}

/// The size a commit log grows to unless the builder names another: 2 MiB, or 16 pages
/// if more. A record of a single-put commit
/// takes a 512-byte unit, so the log holds about 4,000 of them before a commit must sync
/// the file; the longer the cycle, the fewer syncs, each writing back the pages the cycle
/// dirtied (a quarter of 1 MiB made 100-put transactions ~25 % slower). A transaction
/// whose record does not fit syncs every page it wrote instead: at 2 MiB, 10,000 puts of
/// 100-byte values (a 1.15 MB record) still log, and commit about 1.4× faster than at
/// 1 MiB (docs/benchmark-history.md, twenty-ninth session).
pub(crate) const DEFAULT_LOG_BYTES: u64 = 2 << 20;
/// The commit log a new file starts with unless the builder names a size: a database that
/// sees few durable commits stays small (its file about 140 KB with a table, against
/// 2.2 MB with the whole log), and a busy one's log grows to [`DEFAULT_LOG_BYTES`] as its
/// cycles fill it (docs/design.md#commit-log).
pub(crate) const INITIAL_LOG_BYTES: u64 = 64 << 10;
const MIN_LOG_PAGES: u64 = 16;
/// The most a log of the default size grows to for large records (records of more than
/// half of [`DEFAULT_LOG_BYTES`], whose commits write four times their bytes in pages: the
/// log grows to hold four of them; `commit/log_growth.rs`).
pub(crate) const LARGE_RECORDS_LOG_BYTES: u64 = 16 << 20;
/// The largest commit log a slot may name (opening may read a whole cycle into memory).
pub(crate) const MAX_LOG_BYTES: u64 = 64 << 20;

/// The pages of a commit log of `log_bytes`: whole pages, at least 16, none for 0; `None`
/// when that is over [`MAX_LOG_BYTES`].
pub(crate) fn log_pages(log_bytes: u64, page_size: usize) -> Option<u64> {
    let p = page_size as u64;
    let pages = match log_bytes {
        0 => 0,
        n => n.div_ceil(p).max(MIN_LOG_PAGES),
    };
    (pages.checked_mul(p)? <= MAX_LOG_BYTES).then_some(pages)
}

/// The most pages the log may grow to that `slot` records, when it is a size a builder
/// could have asked for (a slot whose limit verifies but is not one is damage, ignored).
pub(crate) fn recorded_log_limit(slot: &Slot, page_size: usize) -> Option<u64> {
    slot.log_limit.filter(|&pages| {
        pages
            .checked_mul(page_size as u64)
            .and_then(|bytes| log_pages(bytes, page_size))
            == Some(pages)
    })
}

/// Writes zeros over `pages`, a run for the commit log: zeros written, not a hole left (a
/// durable write into a hole allocates blocks, which costs a journal commit each time),
/// and no older bytes there to read as a record. A page per write, so that the kernel
/// caches the log in page-sized pieces, each flushed alone.
pub(crate) fn write_log_zeros(
    storage: &dyn Storage,
    pages: std::ops::Range<u64>,
    page_size: usize,
) -> Result<()> {
    let zeros = vec![0u8; page_size];
    for page in pages {
        storage.write(page * page_size as u64, &zeros)?;
    }
    Ok(())
}

/// Writes the header and a first, empty commit into an empty store, with a commit log of
/// `log_size` bytes (see [`log_pages`]; the caller has checked it), which its slots record
/// as the most the log grows to; `None`: a new file's default, [`INITIAL_LOG_BYTES`],
/// growing to [`DEFAULT_LOG_BYTES`].
pub(crate) fn initialise(
    storage: &dyn Storage,
    page_size: usize,
    log_size: Option<u64>,
) -> Result<()> {
    let p = page_size as u64;
    let log_bytes = log_size.unwrap_or(INITIAL_LOG_BYTES);
    // The commit log takes the pages after the two header pages, for good (zeros: no
    // record). Without cheap durable writes (in memory) there is none.
    let log_pages = if storage.durable_writes() {
        log_pages(log_bytes, page_size).ok_or(Error::InvalidLogSize(log_bytes))?
    } else {
        0
    };
    let page_count = FIRST_DATA_PAGE + log_pages;
    storage.resize(page_count * p)?;
    write_log_zeros(storage, FIRST_DATA_PAGE..page_count, page_size)?;
    let header = Header {
        version: FORMAT_VERSION,
        page_size: page_size as u32,
    }
    .encode();
    storage.write(0, &header)?;
    storage.write(p, &header)?;
    let slot = Slot {
        txid: 1,
        durable_txid: 1,
        page_count,
        log_page: if log_pages > 0 { FIRST_DATA_PAGE } else { 0 },
        log_pages,
        log_limit: log_size.map(|_| log_pages),
        ..Slot::default()
    };
    storage.write(SLOT_OFFSET as u64, &slot.encode())?;
    storage.sync()?;
    Ok(())
}

/// The file's header, checked: a version this build reads, a valid page size, a file at
/// least two pages long.
pub(crate) fn read_header(storage: &dyn Storage) -> Result<Header> {
    let len = storage.len();
    let header = find_header(storage)?;
    if header.version > FORMAT_VERSION {
        return Err(Error::VersionTooNew {
            found: header.version,
            supported: FORMAT_VERSION,
        });
    }
    if header.version < OLDEST_VERSION {
        return Err(Error::VersionTooOld {
            found: header.version,
            oldest: OLDEST_VERSION,
        });
    }
    let p = header.page_size as usize;
    if header.version == 0 || !p.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&p)
    {
        return Err(Error::corrupt(
            0,
            "file header holds an invalid version or page size",
        ));
    }
    if len < 2 * p as u64 {
        return Err(Error::Truncated {
            len,
            expected: 2 * p as u64,
        });
    }
    Ok(header)
}

/// The file's header as it reads, whatever its version: page 0's copy, else page 1's.
pub(crate) fn find_header(storage: &dyn Storage) -> Result<Header> {
    let len = storage.len();
    if len == 0 {
        return Err(Error::EmptyFile);
    }
    let n = len.min(HEADER_LEN as u64) as usize;
    let mut b = [0u8; HEADER_LEN];
    storage.read(0, &mut b[..n])?;
    // The copy in page 1 sits one page in; the page size says where that is.
    let copy = || {
        let mut b = [0u8; HEADER_LEN];
        (MIN_PAGE_SIZE.trailing_zeros()..=MAX_PAGE_SIZE.trailing_zeros())
            .map(|shift| 1u64 << shift)
            .filter(|&at| at + HEADER_LEN as u64 <= len)
            .find_map(|at| {
                storage.read(at, &mut b).ok()?;
                Header::decode(&b)
                    .ok()
                    .filter(|h| u64::from(h.page_size) == at)
            })
    };
    match Header::decode(&b[..n]) {
        Ok(h) => Ok(h),
        Err(HeaderError::NotCairn) if n < MAGIC.len() && MAGIC.starts_with(&b[..n]) => {
            Err(Error::Truncated {
                len,
                expected: HEADER_LEN as u64,
            })
        }
        // A damaged magic number in page 0, where page 1 holds an intact copy (with its
        // page size, one page in): the file is a database all the same. Without one, it
        // is not.
        Err(HeaderError::NotCairn) => copy().ok_or(Error::NotADatabase),
        Err(HeaderError::Damaged) if n < HEADER_LEN => Err(Error::Truncated {
            len,
            expected: HEADER_LEN as u64,
        }),
        Err(HeaderError::Damaged) => {
            copy().ok_or_else(|| Error::corrupt(0, "file header damaged in both copies"))
        }
    }
}

/// The commit slots that verify, each with its index (0 or 1); and for each slot that
/// does not, why (empty for one that does).
type Slots = (Vec<(Slot, usize)>, [String; 2]);

/// Reads both commit slots: see [`Slots`].
pub(crate) fn read_slots(storage: &dyn Storage, page_size: usize) -> Result<Slots> {
    let mut slots = Vec::new();
    let mut reasons = [String::new(), String::new()];
    for (i, reason) in reasons.iter_mut().enumerate() {
        let mut b = [0u8; SLOT_BYTES];
        storage.read((i * page_size + SLOT_OFFSET) as u64, &mut b)?;
        match Slot::decode(&b) {
            Some(s) => slots.push((s, i)),
            None => *reason = "never written, torn or damaged (checksum mismatch)".into(),
        }
    }
    Ok((slots, reasons))
}

/// Opens the newest commit whose pages are intact. With `writable`, the chosen state is
/// synced, so that it counts as durable from here on. `alone`: no writer holds the file
/// besides this opening (a writable one holds it), so that the commit log is what the last
/// writer left, and a break in its records that later ones prove durable is damage.
pub(crate) fn open(storage: &dyn Storage, writable: bool, alone: bool) -> Result<Opened> {
    let header = read_header(storage)?;
    let page_size = header.page_size as usize;
    let len = storage.len();
    let (mut slots, mut reasons) = read_slots(storage, page_size)?;
    // Newest first; of two copies of one commit, the one that knows it is durable.
    slots.sort_by_key(|(s, _)| std::cmp::Reverse((s.txid, s.durable_txid)));
    // The newest commit a slot names: an open that opens an older one (and replays the log
    // after it) looks for damage in the log when its records stop short of it — a writable
    // one, or a read-only one with no writer beside it (beside a live writer the log is the
    // writer's business, and a slot refused may have been a race; until the forty-third
    // session no read-only open looked: with the newest commit's pages damaged and the
    // log's first records too, it opened the durable commit before them without a word).
    // With a slot unreadable (torn, or damaged: it may have named the newest commit) the
    // slots cannot say how far the log should reach, and it looks wherever the records
    // stop (until the forty-second session a damaged slot and a damaged record together
    // opened an older commit without a word).
    let slot_unreadable = reasons.iter().any(|r| !r.is_empty());
    let newest = match slots.first() {
        _ if slot_unreadable => Some(u64::MAX),
        first => first.map(|(s, _)| s.txid),
    }
    .filter(|_| writable || alone);
    let mut shortest_needed = None;
    let mut rejected = Vec::new();
    let both: Vec<Slot> = slots.iter().map(|(s, _)| *s).collect();
    let other = |slot: &Slot| both.iter().find(|s| s.txid != slot.txid).copied();
    for (slot, i) in slots {
        if writable && slot.logged() {
            // A logged commit: its free set was only in the writer's memory. The durable
            // commit in the other slot and the log's records after it rebuild it.
            reasons[i] = format!(
                "commit {} is in the commit log, after commit {}",
                slot.txid, slot.durable_txid
            );
            continue;
        }
        let needed = slot.page_count.saturating_mul(page_size as u64);
        if needed > len || slot.page_count < FIRST_DATA_PAGE {
            reasons[i] = format!("commit {} needs {needed} bytes", slot.txid);
            shortest_needed = shortest_needed.min(Some(needed)).or(Some(needed));
            continue;
        }
        let snapshot = Snapshot::new(
            slot,
            page_size,
            storage.region(),
            Arc::new(VerifiedSet::with_capacity(slot.page_count)),
        );
        let accepted = check_log_run(&slot, page_size)
            // (The other slot holds the durable commit, which no later commit overwrites.)
            .and_then(|()| {
                // Beside a live writer (read-only, not alone) the newest commit is the
                // writer's, whole in the page cache whether a sync followed or not, and it
                // is taken as a following reader's `begin_read` takes it: nothing since
                // its durable commit is verified, and no page of the older commit is read
                // (only the newest is pinned: the writer may have given the older one's
                // pages back to the file system, and a read of one through the map was a
                // SIGBUS until the forty-eighth session).
                let durable_by = match other(&slot) {
                    _ if !writable && !alone => slot.txid,
                    Some(o) if proves_durable(&o, &slot) => slot.txid,
                    _ => slot.durable_txid,
                };
                verify_commit(&snapshot, other(&slot), durable_by, len)
            })
            .and_then(|(free, since, durable)| {
                let freelist = match writable && slot.free_set_implied() {
                    true => implied_freelist(&snapshot, durable.as_ref(), &since),
                    false => freelist(&snapshot, free)?,
                };
                Ok((freelist, since))
            })
            .and_then(|(freelist, since)| {
                let legacy = header.version < LOG_UNITS_VERSION;
                let (tail, last) = log_cycle(storage, &slot, page_size, legacy, newest)?;
                Ok((freelist, tail, last, since))
            });
        match accepted {
            // A logged commit whose record is not in the log (a power cut tore it, or a
            // failed commit cleared it): a writable opening goes back to the durable commit
            // and the records there are, and so does a read-only one where no writer holds
            // the file, so that the two show the same commit (until the forty-fifth session
            // the read-only one showed this one). Beside a live writer the slot is current.
            Ok((_, _, last, _))
                if !writable && alone && slot.logged() && last.is_none_or(|t| t < slot.txid) =>
            {
                reasons[i] = format!(
                    "commit {} is a logged commit whose record the commit log does not hold",
                    slot.txid
                );
                rejected.push(slot);
            }
            Ok((freelist, log, _, since)) => {
                if writable && header.version < FORMAT_VERSION {
                    let upgraded = Header {
                        version: FORMAT_VERSION,
                        ..header
                    }
                    .encode();
                    storage.write(0, &upgraded)?;
                    storage.write(page_size as u64, &upgraded)?;
                }
                if writable {
                    // A process that met a failed sync and then died may have left pages
                    // the kernel marked clean without writing them: the cache serves them
                    // (they verified), the disk does not hold them, and the sync below
                    // would not write them. They are written again first (`resync.rs`):
                    // those the walk above verified.
                    if slot.durable_txid < slot.txid {
                        write_again(storage, &snapshot, &since.written)?;
                    }
                    storage.sync()?;
                }
                return Ok(Opened {
                    snapshot,
                    freelist,
                    slot_index: i,
                    log,
                    rejected,
                    newest_named: both
                        .iter()
                        .filter(|s| s.txid_in_range())
                        .map(|s| s.txid)
                        .max()
                        .unwrap_or(0),
                });
            }
            Err(e) => {
                reasons[i] = format!("commit {}: {e}", slot.txid);
                rejected.push(slot);
            }
        }
    }
    if let Some(expected) = shortest_needed
        && reasons
            .iter()
            .all(|r| r.contains("needs") || r.contains("never written"))
    {
        return Err(Error::Truncated { len, expected });
    }
    let [slot0, slot1] = reasons;
    Err(Error::NoValidCommit { slot0, slot1 })
}

/// Checks where `slot` says the commit log is: none (0 pages), or a run of at most 64 MiB
/// inside the file, past the header pages and apart from the freelist run. Also refuses
/// a txid at or past [`Slot::TXID_LIMIT`], so that every later one can be pinned.
pub(crate) fn check_log_run(slot: &Slot, page_size: usize) -> Result<()> {
    if !slot.txid_in_range() {
        return Err(Error::corrupt(
            0,
            format!("commit id {} out of range (ids stay below 2^60)", slot.txid),
        ));
    }
    let bad = |what: &str| {
        Err(Error::corrupt(
            slot.log_page,
            format!("commit log of {} pages {what}", slot.log_pages),
        ))
    };
    if slot.log_page == 0 {
        return match (slot.log_pages, slot.logged()) {
            (0, false) => Ok(()),
            (0, true) => Err(Error::corrupt(0, "a logged commit in a file without a log")),
            _ => bad("at page 0"),
        };
    }
    let end = slot.log_page.checked_add(slot.log_pages);
    if slot.log_page < FIRST_DATA_PAGE || end.is_none_or(|end| end > slot.page_count) {
        return bad("outside the file");
    }
    // (This build makes logs of at most MAX_LOG_BYTES, `Builder::log_size`'s limit; a
    // damaged slot must not make opening read a whole large file into memory.)
    if slot.log_pages.saturating_mul(page_size as u64) > MAX_LOG_BYTES {
        return bad("too large");
    }
    let freelist = slot.freelist_run(page_size);
    let log = slot.log_page..end.unwrap_or(u64::MAX);
    if freelist.start < log.end && log.start < freelist.end {
        return bad("overlapping the freelist");
    }
    Ok(())
}

/// What [`verify_commit`] found: the freelist runs, the pages written since the durable
/// commit and the older ones they point at, and the durable commit's side of the two
/// commits' trees when the other slot holds it.
type Verified = (Vec<FreeRun>, Since, Option<Durable>);

/// Checks every page written since commit `durable_by` (the slot's last durable commit,
/// or itself when the other slot proves it durable), following the checksums down from
/// the slot, and every older page those point at, unless the durable commit (`other`,
/// the other slot's, when it is that one) points at it under the same checksum
/// (`since_durable.rs`).
fn verify_commit(
    snap: &Snapshot,
    other: Option<Slot>,
    durable_by: u64,
    len: u64,
) -> Result<Verified> {
    let durable = other
        .filter(|d| durable_by < snap.slot.txid && d.txid == durable_by)
        .and_then(|d| Durable::read(snap, d, len).ok());
    if let Some(mut durable) = durable {
        let uses = |page| durable.uses(page);
        let (entries, since) = walk_since(snap, durable_by, CheckOlder::ByCaller(Some(&uses)))?;
        if durable.walk(snap, &since).is_ok() {
            // (The older pages it does not prove, under pages of it that no longer verify
            // or that it does not point at, are read and checked. Until the forty-seventh
            // session one such page sent the opening to read every older page.)
            since.check_unproved(snap, &durable)?;
            let complete = durable.complete && since.proved_by(&durable);
            return Ok((entries, since, complete.then_some(durable)));
        }
        // (A durable commit whose trees reach a page twice proves nothing: every older
        // page's header is read instead.)
    }
    let (entries, since) = walk_since(snap, durable_by, CheckOlder::ByCaller(None))?;
    since.check_older(snap)?;
    Ok((entries, since, None))
}

/// The pages written since commit `durable_by`, checked, and the older ones they point
/// at, as `older` says; and the freelist's runs, if it names one.
fn walk_since(
    snap: &Snapshot,
    durable_by: u64,
    older: CheckOlder<'_>,
) -> Result<(Vec<FreeRun>, Since)> {
    let mut entries = Vec::new();
    let mut since = Since::default();
    new_pages::walk(snap, durable_by, older, &mut |page, kind, bytes| {
        if kind == NewPage::Freelist {
            entries = decode_freelist(bytes)
                .ok_or_else(|| Error::corrupt(page, "freelist length mismatch"))?;
        }
        since.note(page, kind, bytes, snap.page_size);
        Ok(())
    })?;
    Ok((entries, since))
}

/// The allocator state of a freshly opened file: the listed pages, those that waited for
/// readers still waiting, freed by the commit the freelist names (at most the opened one).
/// The opened commit is durable, and this process has no reader; but a reader process may
/// hold a snapshot older than the commits that freed them, and the first write
/// transaction releases only what no pinned snapshot sees. (Until the forty-fifth session
/// every listed page was free at once, and a writer process that opened the file after
/// another had closed it overwrote pages of a reader process's older snapshot, which then
/// read the new writer's data: `two_processes.rs`.) Runs are checked against the file
/// before any page is taken from them.
fn freelist(snap: &Snapshot, runs: Vec<FreeRun>) -> Result<FreeList> {
    let mut f = FreeList::with_pages(snap.slot.page_count);
    let mut waiting = Vec::new();
    let twice = |page| {
        Error::corrupt(
            snap.slot.freelist_page,
            format!("freelist lists page {page} twice"),
        )
    };
    let log = snap.slot.log_page..snap.slot.log_page.saturating_add(snap.slot.log_pages);
    for (first, count, freed_by) in runs {
        let end = first.checked_add(u64::from(count));
        if first < FIRST_DATA_PAGE || end.is_none_or(|end| end > f.page_count) {
            return Err(Error::corrupt(
                snap.slot.freelist_page,
                format!("freelist lists pages {first}+{count} outside the file"),
            ));
        }
        if end.is_some_and(|end| first < log.end && log.start < end) {
            return Err(Error::corrupt(
                snap.slot.freelist_page,
                format!("freelist lists pages {first}+{count} of the commit log"),
            ));
        }
        for page in first..first + u64::from(count) {
            // (Every page goes through the set first, so that one listed twice stops the
            // reading at once, and the waiting ones take no more memory than the file.)
            if !f.free.insert(page) {
                return Err(twice(page));
            }
            if freed_by != 0 {
                waiting.push((freed_by.min(snap.slot.txid), page));
            }
        }
    }
    waiting.sort_unstable();
    for (freed_by, page) in waiting {
        f.free.remove(&page);
        f.wait(page, freed_by);
    }
    Ok(f)
}
