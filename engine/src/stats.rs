//! Statistics of a snapshot, like `bbolt stats`.

use crate::btree::MAX_DEPTH;
use crate::error::{Error, Result};
use crate::format::{ChildRef, TableMeta, ValueRef, decode_freelist};
use crate::pager::{Snapshot, TreePage};

/// What [`crate::Database::stats`] reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// The commit described.
    pub txid: u64,
    pub page_size: usize,
    /// The file's length in bytes (may exceed `page_count * page_size`: space reserved ahead).
    pub file_size: u64,
    /// Pages the commit spans.
    pub page_count: u64,
    pub tables: u64,
    pub entries: u64,
    /// The depth of the deepest table tree (1: a single leaf; 0: all tables empty).
    pub depth: usize,
    pub branch_pages: u64,
    pub leaf_pages: u64,
    pub overflow_pages: u64,
    pub freelist_pages: u64,
    /// Pages of the commit log (durable commits append to it instead of syncing the file).
    pub log_pages: u64,
    pub free_pages: u64,
    /// Bytes used in branch and leaf pages divided by their total size.
    pub fill_factor: f64,
    /// The commit the oldest live read transaction sees, and for how long it has (unknown
    /// for a reader in another process).
    pub oldest_reader_txid: Option<u64>,
    pub oldest_reader_age: Option<std::time::Duration>,
    /// Freed pages that cannot be reused until that reader ends.
    pub pages_pinned_by_readers: u64,
}

struct Walk<'a> {
    snap: &'a Snapshot,
    stats: Stats,
    used_bytes: u64,
}

impl Walk<'_> {
    fn tree(&mut self, r: ChildRef, catalog: bool, depth: usize) -> Result<usize> {
        if depth > MAX_DEPTH {
            return Err(Error::corrupt(r.page, "tree too deep (a cycle?)"));
        }
        match self.snap.tree_page(r)? {
            TreePage::Branch(b) => {
                self.stats.branch_pages += 1;
                let mut deepest = 0;
                self.used_bytes += b.used()? as u64;
                for i in 0..=b.keys() {
                    deepest = deepest.max(self.tree(b.child(i)?, catalog, depth + 1)?);
                }
                Ok(deepest + 1)
            }
            TreePage::Leaf(l) => {
                self.stats.leaf_pages += 1;
                let used = l.used()?;
                for i in 0..l.len() {
                    match l.entry(i)?.1 {
                        ValueRef::Inline(v) if catalog => {
                            let meta = TableMeta::decode(v)
                                .ok_or_else(|| Error::corrupt(r.page, "bad catalog entry"))?;
                            self.stats.tables += 1;
                            self.stats.entries += meta.len;
                            if let Some(root) = meta.root {
                                let d = self.tree(root, false, 0)?;
                                self.stats.depth = self.stats.depth.max(d);
                            }
                        }
                        ValueRef::Overflow(o) => {
                            self.stats.overflow_pages += o.pages(self.snap.page_size);
                        }
                        ValueRef::Inline(_) => {}
                    }
                }
                self.used_bytes += used as u64;
                Ok(1)
            }
        }
    }
}

/// Statistics of `snap`, in a file of `file_size` bytes.
pub(crate) fn stats(snap: &Snapshot, file_size: u64) -> Result<Stats> {
    let s = snap.slot;
    let p = snap.page_size as u64;
    let mut w = Walk {
        snap,
        stats: Stats {
            txid: s.txid,
            page_size: snap.page_size,
            file_size,
            page_count: s.page_count,
            freelist_pages: {
                let run = s.freelist_run(snap.page_size);
                run.end - run.start
            },
            log_pages: s.log_pages,
            ..Stats::default()
        },
        used_bytes: 0,
    };
    if s.freelist_page != 0 && s.records_freelist() {
        let len = usize::try_from(s.freelist_len)
            .map_err(|_| Error::corrupt(s.freelist_page, "freelist length out of range"))?;
        let bytes = snap.raw(s.freelist_page, len)?;
        crate::pager::verify(s.freelist_page, bytes, s.freelist_crc)?;
        let entries = decode_freelist(bytes)
            .ok_or_else(|| Error::corrupt(s.freelist_page, "freelist length mismatch"))?;
        w.stats.free_pages = entries.iter().map(|&(_, count, _)| u64::from(count)).sum();
    }
    if s.catalog.page != 0 {
        w.tree(s.catalog, true, 0)?;
    }
    let tree_pages = w.stats.branch_pages + w.stats.leaf_pages;
    if !s.records_freelist() {
        // A logged commit's free set is in the writer's memory: every page no tree, header
        // or log uses is free.
        w.stats.free_pages = s
            .page_count
            .saturating_sub(crate::pager::FIRST_DATA_PAGE + s.log_pages)
            .saturating_sub(tree_pages + w.stats.overflow_pages);
    }
    if tree_pages > 0 {
        w.stats.fill_factor = w.used_bytes as f64 / (tree_pages * p) as f64;
    }
    Ok(w.stats)
}
