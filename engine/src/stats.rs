//! Statistics of a snapshot, like `bbolt stats`.

use crate::btree::MAX_DEPTH;
use crate::error::{Error, Result};
use crate::format::{ChildRef, TableMeta, ValueRef, decode_freelist};
use crate::pager::{Snapshot, TreePage};

/// What [`crate::Database::stats`] reports. (Later versions may add figures.)
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// The commit described.
    pub txid: u64,
    /// The page size in bytes.
    pub page_size: usize,
    /// The file's length in bytes (may exceed `page_count * page_size`: space reserved ahead).
    pub file_size: u64,
    /// Pages the commit spans.
    pub page_count: u64,
    /// How many tables there are.
    pub tables: u64,
    /// Entries in all tables.
    pub entries: u64,
    /// The depth of the deepest table tree (1: a single leaf; 0: all tables empty).
    pub depth: usize,
    /// Branch pages of every tree, the catalog's included.
    pub branch_pages: u64,
    /// Leaf pages of every tree, the catalog's included.
    pub leaf_pages: u64,
    /// Pages of large values' overflow runs.
    pub overflow_pages: u64,
    /// Pages of the freelist's run.
    pub freelist_pages: u64,
    /// Pages of the commit log (durable commits append to it instead of syncing the file).
    pub log_pages: u64,
    /// The most pages the commit log grows to, as the commit records it when a size was
    /// asked for ([`crate::Builder::log_size`], at this opening or an earlier one: an
    /// opening's own is recorded by its first commit); `None`: the default, 2 MiB (up to
    /// 16 MiB for records larger than 1 MiB: `Builder::log_size`).
    pub log_limit_pages: Option<u64>,
    /// Pages free for reuse, or waiting for readers or a sync (listed in the freelist, or
    /// for a commit the log holds, every page nothing uses).
    pub free_pages: u64,
    /// Bytes used in branch and leaf pages divided by their total size.
    pub fill_factor: f64,
    /// The commit the oldest live read transaction sees, and for how long it has (unknown
    /// for a reader in another process).
    pub oldest_reader_txid: Option<u64>,
    /// How long that reader has been reading (`None` for one in another process).
    pub oldest_reader_age: Option<std::time::Duration>,
    /// Freed pages that cannot be reused until that reader ends.
    pub pages_pinned_by_readers: u64,
    /// Freed pages that wait for the file's next sync before reuse: commits the commit
    /// log holds freed them, and recovery from the last synced commit may still read
    /// them. They take space in the file; their bound follows the log's size (eight for
    /// each of its pages, or half the file). The file is synced when the log's cycle ends,
    /// at close, and by `check`; [`crate::Database::sync`] leaves a commit the log made
    /// durable to the log. Readers may pin some of them too. (This and
    /// `pages_pinned_by_readers` are 0 while a write transaction holds the writer's state.)
    pub pages_awaiting_sync: u64,
    /// The same figures for each table, by name.
    pub by_table: Vec<TableStats>,
}

/// One table's share of [`Stats`]: the pages of its tree and of its values' overflow runs.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct TableStats {
    /// The table's name.
    pub name: String,
    /// Its entries.
    pub entries: u64,
    /// The depth of its tree (1: a single leaf; 0: empty).
    pub depth: usize,
    /// Branch pages of its tree.
    pub branch_pages: u64,
    /// Leaf pages of its tree.
    pub leaf_pages: u64,
    /// Pages of its large values' overflow runs.
    pub overflow_pages: u64,
    /// Bytes used in its branch and leaf pages divided by their total size.
    pub fill_factor: f64,
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
                            let before = self.counts();
                            let depth = match meta.root {
                                Some(root) => self.tree(root, false, 0)?,
                                None => 0,
                            };
                            self.stats.depth = self.stats.depth.max(depth);
                            let name = String::from_utf8_lossy(l.key(i)?).into_owned();
                            let table = self.table_stats(name, meta.len, depth, before);
                            self.stats.by_table.push(table);
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

/// The totals a table's figures are taken from: branch, leaf and overflow pages, bytes
/// used.
type Counts = [u64; 4];

impl Walk<'_> {
    fn counts(&self) -> Counts {
        let s = &self.stats;
        [
            s.branch_pages,
            s.leaf_pages,
            s.overflow_pages,
            self.used_bytes,
        ]
    }

    /// A table's figures: what the walk of its tree (`depth` deep) added to the totals
    /// since they were `before`.
    fn table_stats(&self, name: String, entries: u64, depth: usize, before: Counts) -> TableStats {
        let now = self.counts();
        let [branch_pages, leaf_pages, overflow_pages, used] =
            std::array::from_fn(|i| now[i] - before[i]);
        TableStats {
            name,
            entries,
            depth,
            branch_pages,
            leaf_pages,
            overflow_pages,
            fill_factor: fill(used, branch_pages + leaf_pages, self.snap.page_size),
        }
    }
}

/// Bytes used over the size of `pages` pages (0 for none).
fn fill(used: u64, pages: u64, page_size: usize) -> f64 {
    if pages == 0 {
        return 0.0;
    }
    used as f64 / (pages * page_size as u64) as f64
}

/// Statistics of `snap`, in a file of `file_size` bytes.
pub(crate) fn stats(snap: &Snapshot, file_size: u64) -> Result<Stats> {
    let s = snap.slot;
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
            log_limit_pages: crate::recovery::recorded_log_limit(&s, snap.page_size),
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
    w.stats.fill_factor = fill(w.used_bytes, tree_pages, snap.page_size);
    Ok(w.stats)
}
