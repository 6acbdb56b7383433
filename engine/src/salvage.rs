//! Salvage: what a damaged file still holds, read without opening the database. For a
//! file that `check` finds damaged, or that does not open at all: every entry whose pages
//! verify, and, in their key order, what could not be read.
//!
//! Each slot's tree is walked from its catalog, each page verified against its parent's
//! checksum; a page that fails is skipped with the keys its parent gives it, and the walk
//! goes on with the next (`salvage/walk.rs`). The slot read is one that loses nothing up
//! to the newest commit (with the commit log's records after it), else the one that
//! recovers the most. The trees under a page that failed, which no page that verifies
//! leads to any more, are found among the pages nothing accounts for and handed over as
//! tables of their own (`salvage/orphans.rs`). Then the commits the commit log holds after
//! it are handed over, change by change, as recovery would replay them. When neither slot
//! can be read, the newest tree is looked for among the pages (`salvage/slotless.rs`).
//! Nothing is written to the file.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{FORMAT_VERSION, Header, LOG_UNITS_VERSION, LogOp, Slot, decode_ops};
use crate::pager::{FIRST_DATA_PAGE, Snapshot, VerifiedSet};
use crate::storage::{FileStorage, Storage};

mod orphans;
mod slotless;
mod walk;
use walk::Walk;

/// Keys that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LostKeys {
    /// Every key from `from` (inclusive) up to `to` (exclusive); `None`: that end is open.
    Range {
        /// The first key that may be lost.
        from: Option<Vec<u8>>,
        /// The first key after the lost ones.
        to: Option<Vec<u8>>,
    },
    /// The value of this one key (its overflow run does not verify).
    Value(Vec<u8>),
    /// Commits after the ones handed over: a record of the commit log that does not
    /// verify where a later one says it was durable, or a newer commit whose slot names
    /// a tree that does not verify, beyond what the log holds.
    Log,
}

/// A part of the file that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    /// The table, or `None` for the catalog (the tables whose names fall in `keys` are
    /// lost whole) and for the log.
    pub table: Option<String>,
    /// The page that failed.
    pub page: u64,
    /// The keys lost with it.
    pub keys: LostKeys,
    /// Why it could not be read.
    pub reason: String,
}

/// What [`salvage`] hands over, in order: each table with its entries in key order (and
/// its losses where they stood), then each commit the log holds with its changes.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Salvaged<'a> {
    /// A table; its entries follow. A tree no page that verifies leads to any more comes
    /// under the name a part of the catalog found with it or an older catalog gives it,
    /// else `lost_and_found_<page>` (see [`SalvageReport::lost_and_found`]); a subtree under
    /// a damaged page of a table comes back under that table's name, which then comes a
    /// second time (see [`SalvageReport::rejoined`]).
    Table(&'a str),
    /// An entry of the last table named.
    Entry(&'a [u8], &'a [u8]),
    /// What could not be read, where it stood (also in [`SalvageReport::lost`]).
    Lost(&'a Lost),
    /// A commit from the commit log; its changes follow.
    LoggedCommit,
    /// A change of a logged commit (they come in the order it made them): `key` now
    /// holds `value` in `table`.
    Put {
        /// The table.
        table: &'a str,
        /// The key.
        key: &'a [u8],
        /// Its new value.
        value: &'a [u8],
    },
    /// A change of a logged commit: `key` was removed from `table`.
    Delete {
        /// The table.
        table: &'a str,
        /// The key.
        key: &'a [u8],
    },
    /// A change of a logged commit: this table was created.
    Created(&'a str),
    /// A change of a logged commit: this table was dropped, with its entries.
    Dropped(&'a str),
}

/// What [`salvage`] read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SalvageReport {
    /// The commit whose tree was read.
    pub txid: u64,
    /// The newest commit a commit slot names.
    pub newest_txid: u64,
    /// Commits the commit log held after `txid`, handed over as changes.
    pub logged_commits: u64,
    /// Tables handed over from the tree (not counting those the log creates), those of
    /// `lost_and_found` included.
    pub tables: u64,
    /// Tables of subtrees whose pages verify but which no page that verifies leads to
    /// (under a damaged catalog or branch), found among the pages neither the tree nor the
    /// free set accounts for: named as a part of the catalog found among them names their
    /// root (under a damaged catalog branch), or as an older version of the catalog in a
    /// free page does (that very page, with that checksum), else `lost_and_found_<page>`.
    /// Their entries count in `entries`.
    pub lost_and_found: u64,
    /// Subtrees no page that verifies leads to, whose keys all lie in a range one table
    /// lost (under a damaged branch of it): handed over again under that table's name
    /// (a [`Salvaged::Table`] of a name already given, then their entries), unless the
    /// catalog lost something too. Their entries count in `entries`; the range stays in
    /// `lost` (the damaged page itself is).
    pub rejoined: u64,
    /// Tables of [`lost_and_found`](Self::lost_and_found) whose root is a leaf nothing
    /// vouches for: the failed page that named it no longer parses, or the damage hit the
    /// very reference to it, and no older catalog names it. Its entries (for a leaf of
    /// the catalog, the names of the tables it gives) are the page's bytes as they read,
    /// checked by no checksum: damage that left the page parsing would show in them. And
    /// tables whose root is a branch that a reference names with another checksum (an
    /// older version of the page, or damaged): the pages under it match the checksums it
    /// gives, but may be an older commit's, with older values. (Every other page handed
    /// over matched a checksum the newest tree gives.)
    pub unverified: Vec<String>,
    /// Entries handed over from the tree (not counting the log's changes).
    pub entries: u64,
    /// Why the file's header could not be read, in both its copies, when salvage found the
    /// page size from the pages instead (the format version then taken as this build's).
    pub header_damage: Option<String>,
    /// Everything that could not be read.
    pub lost: Vec<Lost>,
}

/// Reads every entry the file at `path` still holds, handing each to `each` (see
/// [`Salvaged`]) and returning what was read and lost. For a file that `check` finds
/// damaged or that does not open; the file is only read. A writer could change the file
/// under the walk, so a file held for writing, by another process or by a [`crate::Database`]
/// of this one (under any of its paths), is refused.
///
/// # Errors
/// [`Error::Locked`] while another process has the file open for writing,
/// [`Error::AlreadyOpen`] while this one has; the errors of
/// opening for an unreadable header (not a database, a newer version, truncated);
/// [`Error::NoValidCommit`] when neither commit slot verifies; the first error `each`
/// returns (as [`Error::Io`]).
pub fn salvage(
    path: impl AsRef<Path>,
    each: &mut dyn FnMut(Salvaged<'_>) -> std::io::Result<()>,
) -> Result<SalvageReport> {
    let path = path.as_ref();
    let file = File::open(path)?;
    if !file.metadata()?.is_file() {
        return Err(Error::NotAFile {
            path: path.to_path_buf(),
        });
    }
    if crate::lock::claimed_here(&file)? {
        return Err(Error::AlreadyOpen {
            path: path.to_path_buf(),
        });
    }
    if let Some(pid) = crate::lock::writer_holding(&file) {
        return Err(Error::Locked {
            path: path.to_path_buf(),
            pid,
        });
    }
    salvage_storage(&FileStorage::new(file)?, each)
}

/// [`salvage`] of the database `storage` holds.
///
/// # Errors
/// As [`salvage`].
pub fn salvage_storage(
    storage: &dyn Storage,
    each: &mut dyn FnMut(Salvaged<'_>) -> std::io::Result<()>,
) -> Result<SalvageReport> {
    // A header unreadable in both copies: the page size is found from the pages (a file
    // that shows none is not a database, or holds nothing to read).
    let mut roots_found = None;
    let (header, header_damage) = match crate::recovery::read_header(storage) {
        Ok(header) => (header, None),
        Err(e @ (Error::Corruption { .. } | Error::NotADatabase)) => {
            let Some(found) = slotless::page_size_from_pages(storage) else {
                return Err(e);
            };
            let page_size = found.size;
            roots_found = found.roots;
            let header = Header {
                version: FORMAT_VERSION,
                page_size: page_size as u32,
            };
            let damage = format!(
                "the file header is unreadable in both copies ({}); its page size, \
                 {page_size} bytes, was found from the pages",
                why(&e)
            );
            (header, Some(damage))
        }
        Err(e) => return Err(e),
    };
    let page_size = header.page_size as usize;
    // (With the header unreadable the version is unknown: a record may be in either form,
    // and one that does not follow the slot's commit is not taken, whatever its form.)
    let legacy = header.version < LOG_UNITS_VERSION || header_damage.is_some();
    let (decoded, mut reasons) = crate::recovery::read_slots(storage, page_size)?;
    let mut slots = Vec::new();
    for (slot, i) in decoded {
        match crate::recovery::check_log_run(&slot, page_size) {
            Ok(()) => slots.push(slot),
            Err(e) => reasons[i] = why(&e),
        }
    }
    let newest_txid = slots.iter().map(|s| s.txid).max().unwrap_or(0);
    // Each slot's walk, counted only. A slot that loses nothing and reaches the newest
    // commit (with the log's records after it) is read; failing that, the one that
    // recovers the most entries (each logged change counted as one), of two that recover
    // as many the one that reaches the newer commit.
    let mut best: Option<Candidate> = None;
    for slot in slots {
        let candidate = Candidate::of(storage, slot, page_size, legacy, newest_txid)?;
        if best.as_ref().is_none_or(|b| candidate.score > b.score) {
            best = Some(candidate);
        }
    }
    // Neither slot serves: the newest trees are looked for among the pages
    // (`salvage/slotless.rs`), and what came after the one read is reported lost.
    let mut slotless = None;
    if best.is_none() {
        let found = roots_found.unwrap_or_else(|| slotless::catalog_roots(storage, page_size));
        let newest = found.first().map_or(0, |f| f.slot.txid);
        for f in found {
            let candidate = Candidate::of(storage, f.slot, page_size, legacy, newest)?;
            if best.as_ref().is_none_or(|b| candidate.score > b.score) {
                best = Some(candidate);
                slotless = Some(f.leaf_root);
            }
        }
    }
    let Some(Candidate { snapshot, log, .. }) = best else {
        let [slot0, slot1] = reasons;
        return Err(Error::NoValidCommit { slot0, slot1 });
    };
    let newest_txid = match slotless {
        Some(_) => snapshot.slot.txid,
        None => newest_txid,
    };
    let mut walk = Walk::new(&snapshot);
    walk.catalog(each)?;
    let mut unverified = Vec::new();
    if slotless == Some(true) {
        // (A catalog's root that is a leaf names every table: nothing checks those names.)
        unverified.extend_from_slice(walk.named());
    }
    // Pages under a failed tree page that still verify: tables of their own.
    if walk
        .lost
        .iter()
        .any(|l| matches!(l.keys, LostKeys::Range { .. }))
    {
        // Parts of the catalog first: the tables they name are orphans too, and come
        // back under their names when walked from there.
        // (Only where the free set is recorded and verifies: a free page may hold an older
        // version of a page.)
        let free = orphans::free_pages(&snapshot);
        let found = free
            .as_deref()
            .map(|free| orphans::orphans(&snapshot, &walk.seen, free))
            .unwrap_or_default();
        let (catalog, tables): (Vec<_>, Vec<_>) = found.into_iter().partition(|o| o.catalog);
        walk.refuse_older(free.unwrap_or_default());
        // A root has no checksum of its own. Where a failed page still names it, its bytes
        // must match what that names: else the root or the reference is damaged. A leaf
        // root of a table is then not read (its keys stay in the range reported lost); a
        // branch root is, as a table of its own (its children are checked against the
        // checksums it gives them, so what is read under it verifies). A leaf root nothing
        // vouches for is read as it is, and reported unverified; so is a leaf of the
        // catalog either way (only the names it gives could be wrong: each table's root is
        // checked against the checksum its record gives). An older catalog naming a root
        // vouches for it: it names that very checksum.
        let failed: Vec<u64> = walk.lost.iter().map(|l| l.page).collect();
        let parent = |orphan: &orphans::Orphan| orphans::vouched(&snapshot, &failed, orphan.root);
        for orphan in catalog {
            if walk.seen.contains(&orphan.root.page) {
                continue;
            }
            let named = walk.catalog_part(each, orphan.root)?;
            if orphan.leaf && parent(&orphan) != Some(true) {
                unverified.extend_from_slice(named);
            }
        }
        // A subtree whose keys lie in a range one table lost (under a damaged branch of
        // it) goes back to that table, when the failed branch vouches for its root; when
        // the catalog lost something too, a table's whole tree may be among them, and
        // nothing is put back. Any other stays a table of its own.
        let catalog_lost = walk.lost.iter().any(|l| l.table.is_none());
        for orphan in tables {
            let parent = parent(&orphan);
            // (A found branch naming it with a checksum it does not match says the same as
            // a failed one: it is that branch's damaged child.)
            let vouched = match (&orphan.name, parent) {
                (Some(_), _) => Some(true),
                (None, Some(v)) => Some(v),
                (None, None) => orphan.mismatched.then_some(false),
            };
            if walk.seen.contains(&orphan.root.page) || (orphan.leaf && vouched == Some(false)) {
                continue;
            }
            let home = orphan
                .span
                .as_ref()
                .filter(|_| !catalog_lost && parent == Some(true))
                .and_then(|(first, last)| home_table(&walk.lost, first, last));
            match home {
                Some(home) => {
                    let bounds = (home.from.as_deref(), home.to.as_deref());
                    walk.rejoin(each, orphan.root, &home.table, bounds)?;
                }
                None => {
                    let name = walk.lost_and_found(each, orphan.root, orphan.name)?;
                    // (A branch root a reference contradicts is damaged or an older
                    // version of its page: its children verify against it, but may be
                    // an older commit's pages, with older values. Until the forty-third
                    // session such a table was not reported unverified.)
                    let contradicted = !orphan.leaf && vouched == Some(false);
                    if (orphan.leaf && vouched.is_none()) || contradicted {
                        unverified.push(name);
                    }
                }
            }
        }
    }
    let mut report = SalvageReport {
        txid: snapshot.slot.txid,
        newest_txid,
        tables: walk.tables,
        entries: walk.entries,
        lost: walk.lost,
        lost_and_found: walk.found,
        rejoined: walk.rejoined,
        unverified,
        header_damage,
        logged_commits: 0,
    };
    for (page, payload) in &log {
        let Some(ops) = decode_ops(payload) else {
            let lost = Lost {
                table: None,
                page: *page,
                keys: LostKeys::Log,
                reason: "a record's changes do not decode".into(),
            };
            each(Salvaged::Lost(&lost))?;
            report.lost.push(lost);
            break;
        };
        each(Salvaged::LoggedCommit)?;
        report.logged_commits += 1;
        let mut table = String::new();
        for op in ops {
            let name = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            match op {
                LogOp::Table(t) => table = name(t),
                LogOp::Put(key, value) => each(Salvaged::Put {
                    table: &table,
                    key,
                    value,
                })?,
                LogOp::Delete(key) => each(Salvaged::Delete { table: &table, key })?,
                LogOp::Create(t) => each(Salvaged::Created(&name(t)))?,
                LogOp::Drop(t) => each(Salvaged::Dropped(&name(t)))?,
            }
        }
    }
    // A damaged record that a later one proves durable ends what could be replayed: the
    // records before it were handed over; the loss is reported after them. (Looked for
    // wherever the records stop, whatever the slots name: a damaged slot may have named
    // the newest commit.)
    let anywhere = Some(u64::MAX);
    if let Err(e) = crate::recovery::log_tail(storage, &snapshot.slot, page_size, legacy, anywhere)
    {
        let lost = Lost {
            table: None,
            page: match e {
                Error::Corruption { page, .. } => page,
                _ => 0,
            },
            keys: LostKeys::Log,
            reason: why(&e),
        };
        each(Salvaged::Lost(&lost))?;
        report.lost.push(lost);
    }
    if slotless.is_some() {
        let [slot0, slot1] = &reasons;
        let lost = Lost {
            table: None,
            page: 0,
            keys: LostKeys::Log,
            reason: format!(
                "neither commit slot could be read (slot 0: {slot0}; slot 1: {slot1}): the \
                 tree read is commit {}'s, found by its catalog's root among the pages; \
                 commits after it, and the commit log, could not be looked for",
                report.txid
            ),
        };
        each(Salvaged::Lost(&lost))?;
        report.lost.push(lost);
    }
    let reached = report.txid.saturating_add(report.logged_commits);
    let log_lost = report.lost.iter().any(|l| l.keys == LostKeys::Log);
    if reached < newest_txid && !log_lost {
        let lost = Lost {
            table: None,
            page: 0,
            keys: LostKeys::Log,
            reason: format!(
                "a commit slot names commit {newest_txid}, but its tree does not verify \
                 and the commit log holds only the commits up to {reached}"
            ),
        };
        each(Salvaged::Lost(&lost))?;
        report.lost.push(lost);
    }
    Ok(report)
}

/// Why a page could not be read: the damage found, without the page's number (a
/// [`Lost`] names it).
pub(crate) fn why(e: &Error) -> String {
    match e {
        Error::Corruption { reason, .. } => reason.clone(),
        e => e.to_string(),
    }
}

/// A slot to read: its snapshot, the log's records after it (`(page, payload)`), and how
/// well its walk went.
struct Candidate {
    snapshot: Snapshot,
    log: Vec<(u64, Vec<u8>)>,
    score: Score,
}

impl Candidate {
    /// `slot`'s tree walked (counted only) and its log read; `newest_txid` is the newest
    /// commit known, which a walk that loses nothing must reach to count as whole.
    fn of(
        storage: &dyn Storage,
        slot: Slot,
        page_size: usize,
        legacy: bool,
        newest_txid: u64,
    ) -> Result<Candidate> {
        // (A slot past the file's end would read past the map: its page count is cut to
        // the file, and what lies beyond is lost.)
        let in_file = storage.len() / page_size as u64;
        let snapshot = Snapshot::new(
            Slot {
                page_count: slot.page_count.min(in_file).max(FIRST_DATA_PAGE),
                ..slot
            },
            page_size,
            storage.region(),
            Arc::new(VerifiedSet::with_capacity(slot.page_count.min(in_file))),
        );
        let mut walk = Walk::new(&snapshot);
        walk.catalog(&mut |_| Ok(()))?;
        let log = crate::recovery::log_tail(storage, &slot, page_size, legacy, None)?;
        let changes: usize = log
            .iter()
            .map(|(_, payload)| decode_ops(payload).map_or(0, |ops| ops.len()))
            .sum();
        let reaches = slot.txid.saturating_add(log.len() as u64);
        let score = Score {
            whole: walk.lost.is_empty() && reaches >= newest_txid,
            read: walk.entries + changes as u64,
            reaches,
        };
        Ok(Candidate {
            snapshot,
            log,
            score,
        })
    }
}

/// How well a slot's walk went, better as greater: nothing lost up to the newest commit
/// first, then the entries and logged changes read, then the commit reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Score {
    whole: bool,
    read: u64,
    reaches: u64,
}

/// Where a subtree found under a damaged page goes back: its table, and the key range
/// that table lost there (the subtree's keys lie in it).
struct Home {
    table: String,
    from: Option<Vec<u8>>,
    to: Option<Vec<u8>>,
}

/// The one table that lost a key range holding every key from `first` to `last`, if
/// exactly one did, with the narrowest such range.
fn home_table(lost: &[Lost], first: &[u8], last: &[u8]) -> Option<Home> {
    let mut homes = lost.iter().filter_map(|l| match (&l.table, &l.keys) {
        (Some(table), LostKeys::Range { from, to })
            if from.as_deref().is_none_or(|f| first >= f)
                && to.as_deref().is_none_or(|t| last < t) =>
        {
            Some((table, from.as_deref(), to.as_deref()))
        }
        _ => None,
    });
    let (table, mut from, mut to) = homes.next()?;
    // (`None` is unbounded: the narrowest range has the greatest start, the least end.)
    for (other, f, t) in homes {
        if other != table {
            return None;
        }
        from = from.max(f);
        to = match (to, t) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, None) => a,
            (None, b) => b,
        };
    }
    Some(Home {
        table: table.clone(),
        from: from.map(<[u8]>::to_vec),
        to: to.map(<[u8]>::to_vec),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lost(table: &str, from: Option<&str>, to: Option<&str>) -> Lost {
        Lost {
            table: Some(table.to_owned()),
            page: 9,
            keys: LostKeys::Range {
                from: from.map(|f| f.as_bytes().to_vec()),
                to: to.map(|t| t.as_bytes().to_vec()),
            },
            reason: String::new(),
        }
    }

    /// Where `needle` is in `hay` (it must be there).
    fn find(hay: &[u8], needle: &[u8]) -> usize {
        hay.windows(needle.len())
            .position(|w| w == needle)
            .unwrap_or_else(|| panic!("{needle:?} not found"))
    }

    /// A crafted file whose references all agree with their checksums but name one
    /// overflow run twice: value `b`'s reference changed to value `a`'s run (with `b`'s
    /// checksum), and every checksum above it made to match. The walk verifies the run as
    /// `a`'s first; read against `b`'s checksum it fails, and `b` is reported lost instead
    /// of handed over with `a`'s bytes (which a read that trusted the run's verified bit
    /// did).
    #[test]
    fn an_overflow_run_two_references_name_is_read_against_each() -> Result<()> {
        use crate::format::{LeafPage, Slot, TableMeta, ValueRef, checksum, put_u32};
        use crate::storage::MemoryStorage;
        let storage = Arc::new(MemoryStorage::new()?);
        let db = crate::Database::builder().with_storage(storage.clone(), true, None)?;
        let mut w = db.begin_write()?;
        let mut t = w.open_or_create_table("alpha")?;
        t.insert(b"a", &[1; 9000])?;
        t.insert(b"b", &[2; 9000])?;
        w.commit()?;
        db.close()?;
        let mut bytes = storage.to_vec();
        let p = 4096;
        let page = |bytes: &[u8], n: u64| bytes[n as usize * p..(n as usize + 1) * p].to_vec();
        let slot = Slot::decode(&bytes[512..]).unwrap_or_else(|| panic!("no slot"));
        // The catalog's root is a leaf naming alpha, whose root is a leaf of two values.
        let catalog = page(&bytes, slot.catalog.page);
        let ValueRef::Inline(record) = LeafPage::new(&catalog, slot.catalog.page)?.entry(0)?.1
        else {
            panic!("alpha's record is not inline");
        };
        let root = TableMeta::decode(record)
            .and_then(|m| m.root)
            .unwrap_or_else(|| panic!("alpha has no root"));
        let leaf = page(&bytes, root.page);
        let overflow = |i| match LeafPage::new(&leaf, root.page).and_then(|l| l.entry(i)) {
            Ok((_, ValueRef::Overflow(o))) => o,
            other => panic!("{other:?}"),
        };
        let (a, b) = (overflow(0), overflow(1));
        // b's reference names a's run; then the leaf's, the catalog's and the slots'
        // checksums follow.
        let at = root.page as usize * p;
        let mut reference = b.page.to_le_bytes().to_vec();
        reference.extend_from_slice(&b.crc.to_le_bytes());
        let r = at + find(&leaf, &reference);
        bytes[r..r + 8].copy_from_slice(&a.page.to_le_bytes());
        let leaf_crc = checksum(root.page, &page(&bytes, root.page));
        let mut named = root.page.to_le_bytes().to_vec();
        named.extend_from_slice(&root.crc.to_le_bytes());
        let c = slot.catalog.page as usize * p + find(&catalog, &named) + 8;
        put_u32(&mut bytes, c, leaf_crc);
        let catalog_crc = checksum(slot.catalog.page, &page(&bytes, slot.catalog.page));
        let mut crafted = slot;
        crafted.catalog.crc = catalog_crc;
        for at in [512, p + 512] {
            let encoded = crafted.encode();
            bytes[at..at + encoded.len()].copy_from_slice(&encoded);
        }
        // `check()` reports the run as referenced twice (reads trust a run verified once:
        // docs/design.md#reads-and-verification).
        let opened = crate::Database::builder().with_storage(
            Arc::new(MemoryStorage::from_bytes(&bytes)?),
            false,
            None,
        )?;
        let report = opened.check()?;
        assert!(
            report
                .problems
                .iter()
                .any(|p| p.what.contains("referenced twice")),
            "{report:?}"
        );
        let crafted_file = MemoryStorage::from_bytes(&bytes)?;
        let mut values = Vec::new();
        let report = salvage_storage(&crafted_file, &mut |s| {
            if let Salvaged::Entry(k, v) = s {
                values.push((k.to_vec(), v.to_vec()));
            }
            Ok(())
        })?;
        // (Each value by its key, first byte and length.)
        let got: Vec<_> = values
            .iter()
            .map(|(k, v)| (&k[..], v.first(), v.len()))
            .collect();
        assert_eq!(got, [(&b"a"[..], Some(&1), 9000)]);
        assert!(
            report
                .lost
                .iter()
                .any(|l| l.keys == LostKeys::Value(b"b".to_vec())),
            "{:?}",
            report.lost
        );
        Ok(())
    }

    #[test]
    fn a_subtree_goes_home_to_the_one_table_whose_lost_range_holds_it() {
        // A branch of t lost whole, then a branch under it: the narrower range bounds the
        // walk of the subtree.
        let ranges = [lost("t", None, None), lost("t", Some("c"), Some("m"))];
        let home = home_table(&ranges, b"d", b"k");
        assert!(home.as_ref().is_some_and(|h| h.table == "t"
            && h.from.as_deref() == Some(&b"c"[..])
            && h.to.as_deref() == Some(&b"m"[..])));
        // Keys outside every range: no home; another table's range holding them too: none.
        assert!(home_table(&ranges[1..], b"a", b"d").is_none());
        let two = [lost("t", Some("c"), Some("m")), lost("u", None, Some("z"))];
        assert!(home_table(&two, b"d", b"k").is_none());
        assert!(home_table(&two, b"n", b"p").is_some_and(|h| h.table == "u"));
    }
}
