//! Inspection, page by page: what every page of the newest commit is used for (like
//! bbolt's `pages`), and one page decoded (like `bbolt page`).

use crate::btree::MAX_DEPTH;
use crate::db::Database;
use crate::error::{Error, Result};
use crate::format::{ChildRef, Layout, TableMeta, ValueRef, decode_freelist, page_kind, page_txid};
use crate::pager::{FIRST_DATA_PAGE, Snapshot, TreePage};

/// What one page holds.
#[derive(Debug, Clone, PartialEq)]
pub struct PageInfo {
    /// The page number (a run's first page for a run).
    pub page: u64,
    /// `header`, `log`, `branch`, `leaf`, `legacy branch` and `legacy leaf` (written
    /// before format version 5 and 4, without heads in their slots), `overflow`, `freelist`, `free` (listed in the
    /// freelist; for a logged commit, whose free set is in the writer's memory, every page
    /// nothing uses) or `unused` (neither used nor listed: leaked).
    pub kind: &'static str,
    /// The tree it belongs to: a table's name, or `(catalog)`.
    pub owner: String,
    /// Entries (leaf), separators (branch), pages in the run (overflow, freelist).
    pub items: u64,
    /// Bytes used over the page size (tree pages).
    pub fill: f64,
}

/// One entry of a decoded page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageEntry {
    /// A leaf entry: key, and value (or where its overflow run is).
    Leaf {
        /// The key.
        key: Vec<u8>,
        /// The value, when it is stored in the leaf.
        value: Option<Vec<u8>>,
        /// The first page of the value's overflow run, when it has one.
        overflow: Option<u64>,
    },
    /// A branch entry: the separator (none for the leftmost child) and the child page.
    Branch {
        /// The separator: the child's keys are at or after it.
        key: Option<Vec<u8>>,
        /// The child's page.
        child: u64,
    },
}

/// A page decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageDump {
    /// The page number.
    pub page: u64,
    /// What its header says it is (`leaf`, `branch`, `overflow`, ...).
    pub kind: String,
    /// The commit that wrote it, from its header.
    pub txid: u64,
    /// Its entries, in order (none for a page that holds no tree entries).
    pub entries: Vec<PageEntry>,
}

struct Walk<'a> {
    snap: &'a Snapshot,
    out: Vec<Option<PageInfo>>,
}

impl Walk<'_> {
    fn mark(&mut self, page: u64, kind: &'static str, owner: &str, items: u64, fill: f64) {
        if let Some(slot) = usize::try_from(page).ok().and_then(|i| self.out.get_mut(i)) {
            *slot = Some(PageInfo {
                page,
                kind,
                owner: owner.to_owned(),
                items,
                fill,
            });
        }
    }

    fn tree(&mut self, r: ChildRef, owner: &str, catalog: bool, depth: usize) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(Error::corrupt(r.page, "tree too deep (a cycle?)"));
        }
        let p = self.snap.page_size as f64;
        match self.snap.tree_page(r)? {
            TreePage::Branch(b) => {
                let used = b.used()?;
                let kind = match b.layout() {
                    Layout::Heads => "branch",
                    Layout::Legacy => "legacy branch",
                };
                self.mark(r.page, kind, owner, b.keys() as u64, used as f64 / p);
                for i in 0..=b.keys() {
                    self.tree(b.child(i)?, owner, catalog, depth + 1)?;
                }
            }
            TreePage::Leaf(l) => {
                let used = l.used()?;
                for i in 0..l.len() {
                    let (k, v) = l.entry(i)?;
                    match v {
                        ValueRef::Inline(v) if catalog => {
                            let name = String::from_utf8_lossy(k).into_owned();
                            let meta = TableMeta::decode(v)
                                .ok_or_else(|| Error::corrupt(r.page, "bad catalog entry"))?;
                            if let Some(root) = meta.root {
                                self.tree(root, &name, false, 0)?;
                            }
                        }
                        ValueRef::Overflow(o) => {
                            let n = o.pages(self.snap.page_size);
                            for q in o.page..o.page.saturating_add(n) {
                                self.mark(q, "overflow", owner, n, 1.0);
                            }
                        }
                        ValueRef::Inline(_) => {}
                    }
                }
                let kind = match l.layout() {
                    Layout::Heads => "leaf",
                    Layout::Legacy => "legacy leaf",
                };
                self.mark(r.page, kind, owner, l.len() as u64, used as f64 / p);
            }
        }
        Ok(())
    }
}

impl Database {
    /// Every page of the newest commit: what it holds and for which tree.
    ///
    /// # Errors
    /// Corruption found on the way.
    pub fn pages(&self) -> Result<Vec<PageInfo>> {
        // (A registered read transaction's snapshot: a writer reuses the pages of one that
        // nothing pins.)
        let txn = self.begin_read()?;
        let snap = txn.snapshot.clone();
        let count = usize::try_from(snap.slot.page_count)
            .map_err(|_| Error::corrupt(0, "page count out of range"))?;
        let mut w = Walk {
            snap: &snap,
            out: vec![None; count],
        };
        for page in 0..FIRST_DATA_PAGE.min(count as u64) {
            w.mark(page, "header", "", 0, 0.0);
        }
        let s = snap.slot;
        if s.freelist_page != 0 && s.records_freelist() {
            let len = usize::try_from(s.freelist_len)
                .map_err(|_| Error::corrupt(s.freelist_page, "freelist length"))?;
            let bytes = snap.raw(s.freelist_page, len)?;
            crate::pager::verify(s.freelist_page, bytes, s.freelist_crc)?;
            let n = s.freelist_len.div_ceil(snap.page_size as u64);
            for q in s.freelist_page..s.freelist_page + n {
                w.mark(q, "freelist", "", n, 1.0);
            }
            for (first, run, _) in
                decode_freelist(bytes).ok_or_else(|| Error::corrupt(s.freelist_page, "freelist"))?
            {
                for q in first..first.saturating_add(u64::from(run)) {
                    w.mark(q, "free", "", 0, 0.0);
                }
            }
        }
        if s.log_page != 0 {
            for q in s.log_page..s.log_page.saturating_add(s.log_pages) {
                w.mark(q, "log", "", s.log_pages, 0.0);
            }
        }
        if s.catalog.page != 0 {
            w.tree(s.catalog, "(catalog)", true, 0)?;
        }
        let free_recorded = s.records_freelist();
        Ok(w.out
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                p.unwrap_or(PageInfo {
                    page: i as u64,
                    // (A logged commit's free set is in the writer's memory.)
                    kind: if free_recorded { "unused" } else { "free" },
                    owner: String::new(),
                    items: 0,
                    fill: 0.0,
                })
            })
            .collect())
    }

    /// Page `n` of the newest commit, decoded. The page is read as it is, without the
    /// checksum its parent records (it may be free, or damaged).
    ///
    /// # Errors
    /// A page past the end of the file or in the header; a tree page whose entries are out
    /// of bounds.
    pub fn page(&self, n: u64) -> Result<PageDump> {
        let txn = self.begin_read()?;
        let snap = txn.snapshot.clone();
        if n < FIRST_DATA_PAGE || n >= snap.slot.page_count {
            return Err(Error::NoSuchPage {
                page: n,
                pages: snap.slot.page_count,
            });
        }
        let read;
        let bytes = match self.inner.lock_file.as_ref().or(self.inner.pin.as_ref()) {
            // Read, not mapped: a page no snapshot pins (a free one) may have been cut off
            // the file by a writer in another process, and touching it through the map
            // would fault.
            Some(file) if n.saturating_mul(snap.page_size as u64) < self.inner.file_backed => {
                use std::os::unix::fs::FileExt;
                let mut buf = vec![0u8; snap.page_size];
                if file
                    .read_exact_at(&mut buf, n * snap.page_size as u64)
                    .is_err()
                {
                    let len = file.metadata()?.len();
                    return Err(Error::NoSuchPage {
                        page: n,
                        pages: len / snap.page_size as u64,
                    });
                }
                read = buf;
                &read[..]
            }
            _ => snap.raw(n, snap.page_size)?,
        };
        let kind = page_kind(bytes);
        let mut entries = Vec::new();
        match kind {
            Some(crate::format::PageKind::Leaf) => {
                let l = crate::format::LeafPage::new(bytes, n)?;
                for i in 0..l.len() {
                    let (k, v) = l.entry(i)?;
                    entries.push(match v {
                        ValueRef::Inline(v) => PageEntry::Leaf {
                            key: k.to_vec(),
                            value: Some(v.to_vec()),
                            overflow: None,
                        },
                        ValueRef::Overflow(o) => PageEntry::Leaf {
                            key: k.to_vec(),
                            value: None,
                            overflow: Some(o.page),
                        },
                    });
                }
            }
            Some(crate::format::PageKind::Branch) => {
                let b = crate::format::BranchPage::new(bytes, n)?;
                entries.push(PageEntry::Branch {
                    key: None,
                    child: b.child(0)?.page,
                });
                for i in 0..b.keys() {
                    entries.push(PageEntry::Branch {
                        key: Some(b.key(i)?.to_vec()),
                        child: b.child(i + 1)?.page,
                    });
                }
            }
            _ => {}
        }
        Ok(PageDump {
            page: n,
            kind: kind.map_or_else(
                || "unknown (free or damaged)".to_owned(),
                |k| format!("{k:?}").to_lowercase(),
            ),
            txid: page_txid(bytes).unwrap_or(0),
            entries,
        })
    }
}
