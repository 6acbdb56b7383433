//! The integrity check: every page of a snapshot, re-read and re-verified, whatever the
//! bytes. Problems are collected, never panicked on.

use std::fmt;

use crate::btree::MAX_DEPTH;
use crate::format::{
    BranchPage, ChildRef, HEADER_LEN, Header, LeafPage, PageKind, TableMeta, ValueRef,
    decode_freelist, page_kind,
};
use crate::page_set::PageSet;
use crate::pager::{FIRST_DATA_PAGE, Snapshot, verify};

/// One thing wrong with the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The page where it was found.
    pub page: u64,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "page {}: {}", self.page, self.what)
    }
}

/// The result of [`crate::Database::check`].
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    /// Every problem found; empty for a healthy file.
    pub problems: Vec<Problem>,
    /// How many pages were examined.
    pub pages_checked: u64,
    /// How many entries the tables hold in all.
    pub entries: u64,
}

impl CheckReport {
    /// Whether no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// How a page is used, to find pages used twice or not at all.
struct Checker<'a> {
    snap: &'a Snapshot,
    used: PageSet,
    report: CheckReport,
}

impl Checker<'_> {
    fn problem(&mut self, page: u64, what: impl Into<String>) {
        self.report.problems.push(Problem {
            page,
            what: what.into(),
        });
    }

    /// Reports what a page's heads check found: the first key (`what`) that does not
    /// match its head or the page's prefix, or the error that stopped the check.
    fn heads(&mut self, page: u64, what: &str, found: crate::error::Result<Option<usize>>) {
        match found {
            Ok(None) => {}
            Ok(Some(i)) => self.problem(
                page,
                format!("{what} {i} does not match its head or the page's prefix"),
            ),
            Err(e) => self.problem(page, e.to_string()),
        }
    }

    /// Claims `n` pages from `first`; false (with a problem) if any is outside the file or
    /// claimed already.
    fn claim(&mut self, first: u64, n: u64, what: &str) -> bool {
        let count = self.snap.slot.page_count;
        if first < FIRST_DATA_PAGE || first.checked_add(n).is_none_or(|end| end > count) {
            self.problem(first, format!("{what} outside the file ({count} pages)"));
            return false;
        }
        for page in first..first + n {
            if !self.used.insert(page) {
                self.problem(page, format!("{what} is referenced twice"));
                return false;
            }
        }
        self.report.pages_checked += n;
        true
    }

    /// The file header's two copies (page 0 and page 1): each must read as this file's.
    /// Either serves alone; a damaged one is a problem to report all the same.
    fn headers(&mut self) {
        let p = self.snap.page_size as u64;
        let limit = FIRST_DATA_PAGE * p;
        for page in 0..FIRST_DATA_PAGE {
            let intact = self
                .snap
                .region
                .bytes(page * p, HEADER_LEN, limit)
                .and_then(|b| Header::decode(b).ok())
                .is_some_and(|h| h.page_size as usize == self.snap.page_size);
            if !intact {
                self.problem(
                    page,
                    "the file header's copy here is damaged (the other serves)",
                );
            }
        }
    }

    fn freelist(&mut self) {
        let s = self.snap.slot;
        if s.freelist_page == 0 || !s.records_freelist() {
            return;
        }
        let p = self.snap.page_size as u64;
        if !self.claim(s.freelist_page, s.freelist_len.div_ceil(p), "freelist") {
            return;
        }
        let Ok(len) = usize::try_from(s.freelist_len) else {
            return self.problem(s.freelist_page, "freelist length out of range");
        };
        let bytes = match self.snap.raw(s.freelist_page, len) {
            Ok(b) => b,
            Err(e) => return self.problem(s.freelist_page, e.to_string()),
        };
        if let Err(e) = verify(s.freelist_page, bytes, s.freelist_crc) {
            return self.problem(s.freelist_page, e.to_string());
        }
        let Some(entries) = decode_freelist(bytes) else {
            return self.problem(s.freelist_page, "freelist length mismatch");
        };
        for (first, count, _) in entries {
            self.claim(first, u64::from(count), "free pages");
        }
    }

    /// Checks the tree under `r`, whose keys must lie in `[lo, hi)`; returns its entries.
    fn tree(
        &mut self,
        r: ChildRef,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        catalog: bool,
        depth: usize,
    ) -> u64 {
        if depth > MAX_DEPTH {
            self.problem(r.page, "tree too deep (a cycle?)");
            return 0;
        }
        if !self.claim(r.page, 1, "tree page") {
            return 0;
        }
        let bytes = match self.snap.raw(r.page, self.snap.page_size) {
            Ok(b) => b,
            Err(e) => {
                self.problem(r.page, e.to_string());
                return 0;
            }
        };
        if let Err(e) = verify(r.page, bytes, r.crc) {
            self.problem(r.page, e.to_string());
            return 0;
        }
        let in_bounds = |k: &[u8]| lo.is_none_or(|lo| k >= lo) && hi.is_none_or(|hi| k < hi);
        match page_kind(bytes) {
            Some(PageKind::Branch) => {
                let b = match BranchPage::new(bytes, r.page) {
                    Ok(b) => b,
                    Err(e) => {
                        self.problem(r.page, e.to_string());
                        return 0;
                    }
                };
                let mut keys = Vec::with_capacity(b.keys());
                for i in 0..b.keys() {
                    match b.key(i) {
                        Ok(k) => keys.push(k),
                        Err(e) => {
                            self.problem(r.page, e.to_string());
                            return 0;
                        }
                    }
                }
                self.heads(r.page, "separator", b.heads_mismatch());
                if keys.windows(2).any(|w| w[0] >= w[1]) || !keys.iter().all(|k| in_bounds(k)) {
                    self.problem(
                        r.page,
                        "branch keys out of order or outside their parent's range",
                    );
                }
                let mut total = 0;
                for i in 0..=keys.len() {
                    let child = match b.child(i) {
                        Ok(c) => c,
                        Err(e) => {
                            self.problem(r.page, e.to_string());
                            continue;
                        }
                    };
                    let clo = if i == 0 { lo } else { Some(keys[i - 1]) };
                    let chi = keys.get(i).copied().or(hi);
                    total += self.tree(child, clo, chi, catalog, depth + 1);
                }
                total
            }
            Some(PageKind::Leaf) => {
                let l = match LeafPage::new(bytes, r.page) {
                    Ok(l) => l,
                    Err(e) => {
                        self.problem(r.page, e.to_string());
                        return 0;
                    }
                };
                self.heads(r.page, "leaf key", l.heads_mismatch());
                let mut prev: Option<&[u8]> = None;
                for i in 0..l.len() {
                    let (k, v) = match l.entry(i) {
                        Ok(e) => e,
                        Err(e) => {
                            self.problem(r.page, e.to_string());
                            continue;
                        }
                    };
                    if prev.is_some_and(|p| p >= k) || !in_bounds(k) {
                        self.problem(
                            r.page,
                            format!("leaf key {i} out of order or outside its parent's range"),
                        );
                    }
                    prev = Some(k);
                    match (v, catalog) {
                        (ValueRef::Inline(v), true) => self.table(r.page, k, v),
                        (ValueRef::Overflow(o), false) => {
                            let pages = o.pages(self.snap.page_size);
                            if self.claim(o.page, pages, "overflow run") {
                                match self
                                    .snap
                                    .raw(o.page, crate::format::OVERFLOW_HEADER + o.len as usize)
                                {
                                    Ok(run) => {
                                        if let Err(e) = verify(o.page, run, o.crc) {
                                            self.problem(o.page, e.to_string());
                                        }
                                    }
                                    Err(e) => self.problem(o.page, e.to_string()),
                                }
                            }
                        }
                        (ValueRef::Overflow(_), true) => {
                            self.problem(r.page, "overflow value in the catalog")
                        }
                        (ValueRef::Inline(_), false) => {}
                    }
                }
                l.len() as u64
            }
            other => {
                self.problem(r.page, format!("expected a tree page, found {other:?}"));
                0
            }
        }
    }

    fn table(&mut self, catalog_page: u64, name: &[u8], value: &[u8]) {
        let name = String::from_utf8_lossy(name);
        let Some(meta) = TableMeta::decode(value) else {
            return self.problem(
                catalog_page,
                format!("bad catalog entry for table {name:?}"),
            );
        };
        let entries = meta.root.map_or(0, |r| self.tree(r, None, None, false, 0));
        self.report.entries += entries;
        if entries != meta.len {
            self.problem(
                meta.root.map_or(catalog_page, |r| r.page),
                format!(
                    "table {name:?} records {} entries but holds {entries}",
                    meta.len
                ),
            );
        }
    }
}

impl Checker<'_> {
    /// Claims the commit log and every page of the trees, checking each.
    fn log_and_trees(&mut self) {
        let s = self.snap.slot;
        if s.log_page != 0 {
            self.claim(s.log_page, s.log_pages, "commit log");
        }
        if s.catalog.page != 0 {
            self.tree(s.catalog, None, None, true, 0);
        }
    }
}

/// The pages `snap`'s trees and commit log use, each checked as [`check`] checks it;
/// `None` when a problem was found. (The header's copies and the freelist are not read:
/// recovery asks this of a commit whose free set is every other page.)
pub(crate) fn used_pages(snap: &Snapshot) -> Option<PageSet> {
    let mut c = Checker {
        snap,
        used: PageSet::new(snap.slot.page_count),
        report: CheckReport::default(),
    };
    c.log_and_trees();
    c.report.problems.is_empty().then_some(c.used)
}

/// Checks every page of `snap`.
pub(crate) fn check(snap: &Snapshot) -> CheckReport {
    let mut c = Checker {
        snap,
        used: PageSet::new(snap.slot.page_count),
        report: CheckReport::default(),
    };
    c.headers();
    c.freelist();
    c.log_and_trees();
    // (A free set in the writer's memory, of a logged commit or an unlogged Eventual one:
    // every page no tree uses counts as free.)
    let free_recorded = snap.slot.records_freelist();
    for page in FIRST_DATA_PAGE..snap.slot.page_count {
        if free_recorded && !c.used.contains(page) {
            c.problem(page, "leaked: neither referenced nor free");
        }
    }
    c.report
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::format::{ChildRef, LEAF_HEADER, LeafPage, Slot, TableMeta, ValueRef, checksum};
    use crate::pager::{Snapshot, VerifiedSet};
    use crate::{Database, Error};

    /// A leaf whose checksums are right but one of whose heads is wrong (as a bug in the
    /// leaf's encoder would write it) is reported, naming the key.
    #[test]
    fn a_head_that_does_not_match_its_key_is_reported() -> Result<(), Error> {
        let db = Database::in_memory()?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        for i in 0..50u64 {
            w.open_table("t")?
                .insert(&(1000 + i * 3).to_be_bytes(), b"value")?;
        }
        w.commit()?;
        assert!(db.check()?.is_ok());
        let latest = db.inner.state().latest.clone();
        let p = latest.page_size;
        let storage = &db.inner.storage;
        // The table's one leaf, its seventh head changed, at a new checksum.
        let meta = crate::read_txn::catalog_get(
            crate::btree::Pages {
                snapshot: &latest,
                dirty: None,
            },
            latest.slot.catalog,
            "t",
        )?
        .ok_or_else(|| Error::TableNotFound("t".into()))?;
        let root = meta.root.ok_or_else(|| Error::TableNotFound("t".into()))?;
        let mut leaf = latest.raw(root.page, p)?.to_vec();
        leaf[LEAF_HEADER + crate::format::LEAF_SLOT * 7 + 2] ^= 0x40;
        let root = ChildRef {
            page: root.page,
            crc: checksum(root.page, &leaf),
        };
        storage.write(root.page * p as u64, &leaf)?;
        // The catalog's entry for the table, pointing at it with that checksum.
        let cat = latest.slot.catalog;
        let mut catalog = latest.raw(cat.page, p)?.to_vec();
        let at = match LeafPage::new(&catalog, cat.page)?.entry(0)? {
            (_, ValueRef::Inline(v)) => v.as_ptr() as usize - catalog.as_ptr() as usize,
            (_, ValueRef::Overflow(_)) => return Err(Error::corrupt(cat.page, "overflow")),
        };
        let entry = TableMeta {
            root: Some(root),
            ..meta
        }
        .encode();
        catalog[at..at + entry.len()].copy_from_slice(&entry);
        storage.write(cat.page * p as u64, &catalog)?;
        let snap = Snapshot::new(
            Slot {
                catalog: ChildRef {
                    page: cat.page,
                    crc: checksum(cat.page, &catalog),
                },
                ..latest.slot
            },
            p,
            storage.region(),
            Arc::new(VerifiedSet::with_capacity(latest.slot.page_count)),
        );
        let report = super::check(&snap);
        let expected = "leaf key 7 does not match its head or the page's prefix";
        assert!(
            report
                .problems
                .iter()
                .any(|pr| pr.page == root.page && pr.what == expected),
            "{:?}",
            report.problems
        );
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        Ok(())
    }
}
