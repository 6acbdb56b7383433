//! Steps 1 to 5 of a commit once its catalog paths are owned: every owned node gets its
//! final page and is encoded, the commit decides whether it logs (`log_allows`), its free
//! set is encoded or kept in memory, the file grows, and the slot is made. Nothing is
//! written here but the file's growth: `commit.rs` writes the pages, the slot and the
//! record.

use rustc_hash::FxHashMap;
use std::sync::Arc;

use crate::btree::{Node, Run};
use crate::db::{Durability, WriterState};
use crate::error::{Error, Result};
use crate::format::{ChildRef, LOG_UNIT, SLOT_OFFSET, Slot, TableMeta, checksum};
use crate::pager::VerifiedSet;
use crate::storage::Storage;
use crate::txn_tables::TableState;
use crate::write_txn::WriteTxn;

use super::encode::{encode_free_set, finalize, place};
use super::file_size::{grow, pages_to_cut, tail_to_cut};
use super::page_writes::{Written, pages_per_write};
use super::{
    ALWAYS_LOGGED_RECORD, MAX_TAIL_SCAN, MAX_WAITING_PAGES, MIN_PAGES_PER_RECORD_BYTE,
    WAITING_PER_LOG_PAGE,
};

/// A commit laid out: its pages, encoded and sorted, and its slot, ready to be written.
pub(super) struct Layout {
    pub out: Vec<(u64, Box<[u8]>)>,
    /// At most this many pages in one write (see `pages_per_write`).
    pub per_write: usize,
    /// The verified set the commit publishes (its written pages left out).
    pub verified: Arc<VerifiedSet>,
    pub slot: Slot,
    /// The slot the commit goes to: the one not holding the last durable commit.
    pub slot_index: usize,
    /// Whether the commit's record makes it durable (or goes with the next durable one).
    pub logged: bool,
    /// Whether the commit syncs the file.
    pub durable: bool,
    /// The run the commit log moves to, when it moves.
    pub new_log: Option<(u64, u64)>,
    /// The catalog entries the commit wrote, by table name, as the commit's snapshot
    /// holds them: the snapshot starts out knowing them (`table_cache.rs`).
    pub metas: Vec<(Box<str>, TableMeta)>,
}

impl Layout {
    /// What the commit writes beside its record.
    pub fn written<'a>(&'a self, storage: &'a dyn Storage, page_size: usize) -> Written<'a> {
        let p = page_size as u64;
        Written {
            storage,
            out: &self.out,
            page_size,
            per_write: self.per_write,
            verified: &self.verified,
            write_back: self.durable,
            slot_at: self.slot_index as u64 * p + SLOT_OFFSET as u64,
            slot: self.slot.encode(),
        }
    }
}

/// What [`WriteTxn::lay_out`] needs from the commit's first step.
pub(super) struct Laying<'a> {
    pub ws: &'a WriterState,
    pub original: &'a WriterState,
    /// The tables whose catalog entries change, by name.
    pub changed: &'a [(String, TableState)],
    /// The pages the commit log moves to, if it moves.
    pub new_pages: Option<u64>,
    pub record_units: Option<u64>,
    /// Whether the commit's record was submitted before the commit was laid out (it then
    /// logs, whatever the file's state).
    pub record_first: bool,
}

impl WriteTxn {
    /// Lays the commit out (see the module's comment).
    pub(super) fn lay_out(&mut self, storage: &dyn Storage, laying: &Laying<'_>) -> Result<Layout> {
        let Laying {
            ws,
            original,
            changed,
            new_pages,
            record_units,
            record_first,
        } = *laying;
        let page_size = self.base.page_size;
        let p = page_size as u64;
        let txid = self.txid;
        let (placed, new_log) = if self.compacting {
            let new_log = new_pages.map(|pages| (self.freelist.alloc_run(pages), pages));
            (FxHashMap::default(), new_log)
        } else {
            // A log that fills a block of the page cache starts at one, so that the slot
            // and the commits' pages lie outside the blocks the log touches, and are
            // written while its records are under way (`page_writes::log_blocks`).
            let block = (storage.overlap_block() / p).max(1);
            let log = new_pages.map(|n| (n, if n >= block { block } else { 1 }));
            place(&self.dirty.nodes, &mut self.freelist, txid, log)
        };
        if new_log.is_some() {
            self.moving_log = !self.compacting;
            for page in ws.log.page..ws.log.page + ws.log.pages {
                self.freelist.free(page, txid);
            }
        }
        let mut out: Vec<(u64, Box<[u8]>)> = Vec::new();
        let mut finish = |nodes: &mut FxHashMap<u64, Node>, root| {
            finalize(nodes, &placed, root, txid, page_size, &mut out)
        };
        let mut metas = Vec::with_capacity(changed.len());
        for (name, state) in changed {
            let mut meta = state.current;
            if let Some(root) = meta.root {
                meta.root = Some(finish(&mut self.dirty.nodes, root)?);
            }
            self.with_catalog(|w, root| w.insert(root, name.as_bytes(), &meta.encode()))?;
            metas.push((name.as_str().into(), meta));
        }
        let catalog = match self.catalog {
            Some(root) => finish(&mut self.dirty.nodes, root)?,
            None => ChildRef::default(),
        };
        // Every owned node is in a tree, behind a pointer with checksum 0: one left over
        // would be a page its tree points at that this commit does not write. Fail the
        // commit (nothing is written yet) rather than write such a tree.
        if let Some(&id) = self.dirty.nodes.keys().next() {
            return Err(Error::corrupt(
                id,
                "internal: an owned node is not reached from its tree",
            ));
        }
        // Runs written when they were made, and spilled pages, only need their pages
        // re-verified when read.
        let mut written_runs: Vec<_> = self
            .dirty
            .spilled
            .drain()
            .map(|(page, _)| page..page + 1)
            .collect();
        for (page, run) in self.dirty.overflow.drain() {
            match run {
                Run::Held(bytes) => out.push((page, bytes)),
                Run::Written { len, .. } => {
                    written_runs.push(page..page + (len as u64).div_ceil(p));
                }
            }
        }

        // The commit log: a commit whose record fits appends it, when every commit since
        // the durable one did the same (decided again below, once the file's length and
        // the waiting pages are known). A durable commit makes its record, and the records
        // of the Eventual commits before it, durable with one `O_DSYNC` write instead of
        // syncing the file; an Eventual commit writes its record like its pages.
        let page_bytes = || {
            out.iter().map(|(_, b)| b.len() as u64).sum::<u64>()
                + written_runs
                    .iter()
                    .map(|r| (r.end - r.start) * p)
                    .sum::<u64>()
        };
        let mut logged = !self.compacting
            && new_log.is_none()
            && ws.log.next == Some(txid)
            && record_units.is_some_and(|n| {
                let bytes = n * LOG_UNIT as u64;
                ws.log.head + n <= ws.log.units(page_size)
                    && (bytes <= ALWAYS_LOGGED_RECORD
                        || bytes * MIN_PAGES_PER_RECORD_BYTE <= page_bytes())
            });

        // 2. Free pages at the end of the file that nobody can see any more leave the file
        //    (the file itself is cut only after a durable commit, below).
        while self.freelist.page_count > crate::pager::FIRST_DATA_PAGE
            && self.freelist.take(self.freelist.page_count - 1)
        {
            self.freelist.page_count -= 1;
        }

        // 3. The old freelist run is freed. A logged commit writes no freelist: its free
        //    set stays in memory, and recovery replays the log from the durable commit,
        //    whose freelist is intact (its pages wait for a sync like any of its pages).
        //    Nor does an unlogged Eventual one (below). Any other commit encodes its free
        //    set into a run it takes from it.
        for page in self.base.slot.freelist_run(page_size) {
            self.freelist.free(page, txid);
        }
        let waiting = self.freelist.waiting_after(original.durable_txid) as u64;
        // Whether the file's state lets the commit log (`log_allows`). A commit whose record
        // went first logs whatever that state is now: those rules only bound the file's
        // size, and the next commit sees what this one left.
        logged = record_first || (logged && self.log_allows(storage.len(), ws, original, 0));
        let durable =
            !logged && (self.durability == Durability::Immediate || waiting > MAX_WAITING_PAGES);
        debug_assert!(new_log.is_none() || durable, "the log moves only at a sync");
        let (log_page, log_pages) = new_log.unwrap_or((ws.log.page, ws.log.pages));
        let log = log_pages * p;
        // An Eventual commit that does not log (its cycle is full, say) leaves its free set
        // implied: every page its trees and the log do not use, which recovery finds by
        // walking them if it opens this commit. After the first such commit, every commit
        // until the next sync is one, and encoding the free set each time cost them in
        // proportion to it (docs/design.md#freelist).
        let (freelist_page, freelist_crc, freelist_bytes) = if logged {
            (Slot::FREELIST_IN_MEMORY, 0, 0)
        } else if !durable && !self.compacting {
            (Slot::FREELIST_IN_MEMORY, 0, Slot::NOT_LOGGED)
        } else {
            let (page, encoded) = encode_free_set(&mut self.freelist, txid, p);
            let crc = checksum(page, &encoded);
            let len = encoded.len() as u64;
            out.push((page, encoded.into_boxed_slice()));
            (page, crc, len)
        };

        // 4. Grow the file first. The growth becomes durable with the commit's sync (an
        //    Eventual commit's, with the next one): a power cut before that sync returns
        //    can leave the slot without the length it needs, and recovery rejects a slot
        //    past the end, taking the durable commit in the other slot.
        let page_count = self.freelist.page_count;
        let needed = page_count * p;
        grow(storage, needed, p, log)?;

        // 5. Every new page, adjacent pages coalesced into one write (unless the commit is
        //    scattered), then the slot, in the slot not holding the last durable commit.
        out.sort_unstable_by_key(|(id, _)| *id);
        let per_write = pages_per_write(&out, page_size);
        let verified = if page_count > self.base.verified.capacity() {
            Arc::new(self.base.verified.grown(page_count))
        } else {
            self.base.verified.clone()
        };
        let slot_index = 1 - original.durable_slot;
        let slot = Slot {
            txid,
            durable_txid: original.durable_txid,
            page_count,
            catalog,
            freelist_page,
            freelist_len: freelist_bytes,
            freelist_crc,
            log_page,
            log_pages,
            log_limit: ws.log.limit,
        };
        for page in written_runs.into_iter().flatten() {
            verified.remove(page);
        }
        Ok(Layout {
            out,
            per_write,
            verified,
            slot,
            slot_index,
            logged,
            durable,
            new_log,
            metas,
        })
    }

    /// Whether the file's state lets the commit log, `freeing` more of the durable commit's
    /// pages than it freed so far: a commit after which the file's free tail could be cut
    /// does not log (a durable one syncs instead), nor does one that needs pages past the
    /// file's end, but fewer than the cycle's earlier commits freed: the sync lets those be
    /// reused, and the file shrink, instead of growing. (A commit that needs more, a large
    /// one early in the cycle, would grow the file all the same after a sync, and its
    /// record spares it the sync of every page it wrote.) Pages of the durable commit freed
    /// since cannot be reused until a sync: past a bound, a logged commit syncs too, and so
    /// does an Eventual one past a lower bound, so that the file does not grow without end.
    pub(super) fn log_allows(
        &self,
        len: u64,
        ws: &WriterState,
        original: &WriterState,
        freeing: u64,
    ) -> bool {
        let p = self.base.page_size as u64;
        let freed_since = self.freelist.waiting_after(original.durable_txid) as u64;
        let waiting = freed_since + freeing;
        let log = ws.log.pages * p;
        let used = self.freelist.page_count * p;
        let growth = used.saturating_sub(len) / p;
        let freed_earlier = freed_since
            .saturating_sub(self.freelist.waiting_after(self.txid.saturating_sub(1)) as u64);
        let max_waiting = (WAITING_PER_LOG_PAGE * ws.log.pages).min(self.freelist.page_count / 2);
        if waiting > max_waiting
            || (growth != 0 && growth <= freed_earlier)
            || tail_to_cut(len, used, p, log)
        {
            return false;
        }
        // Nor one after which a sync would let the file shrink: the pages at its end wait
        // (a file that lost data at its end). The scan stops at the first page in use, at
        // the first count of pages that would make the tail worth cutting, and after
        // [`MAX_TAIL_SCAN`] pages: that many waiting at the end sync the file too, after
        // which they are free, leave `page_count`, and are not scanned again.
        let limit = pages_to_cut(len, used, p, log).min(MAX_TAIL_SCAN);
        self.freelist.unused_tail(limit) < limit
    }
}
