//! The commit protocol: encode the changed nodes, persist the freelist (unless the commit
//! log takes the commit: then its free set stays in memory), write every new page, then
//! the commit slot, then (for `Immediate`) the log record with one `O_DSYNC` write, or one
//! `fdatasync`.
//!
//! Step-by-step with what a crash leaves: docs/design.md#commit-protocol.

use rustc_hash::FxHashMap;
use std::sync::Arc;

use crate::btree::{Node, Run};
use crate::db::{Durability, WriterState};
use crate::error::{Error, Result};
use crate::format::{
    ChildRef, LOG_RECORD_HEADER, LOG_UNIT, SLOT_LEN, SLOT_OFFSET, Slot, ZERO_PAGE, checksum,
    encode_freelist, encode_record, freelist_len,
};
use crate::freelist::FreeList;
use crate::pager::{Snapshot, VerifiedSet};
use crate::storage::Storage;
use crate::write_txn::{TableState, WriteTxn};

/// The least the file grows by when it must grow (it also grows by a quarter of its size).
const MIN_GROWTH_PAGES: u64 = 16;

/// How many freed pages may wait for a sync before an Eventual commit syncs anyway. A fixed
/// number, not a share of the file: every waiting page is listed in the freelist that each
/// commit rewrites, and waiting pages cannot be reused, so a bound growing with the file
/// let a large file's Eventual single-put commits write a freelist of many pages each, and
/// grow the file, until they cost more than durable ones.
const MAX_WAITING_PAGES: u64 = 1024;

/// The same bound for a logged commit, which writes no freelist: waiting pages cost it
/// nothing until the sync, and the longer the log's cycle, the fewer syncs (each writes
/// back every page the cycle dirtied). Half the file at most: past that, the sync lets a
/// file that lost most of its data shrink.
const MAX_WAITING_LOGGED: u64 = 4096;

/// The most pages at the end of the file a logged commit looks at to see whether a sync
/// would let the file shrink (each a lookup in the free and waiting sets).
const MAX_TAIL_SCAN: u64 = 4096;

/// Whether a file of `len` bytes, of which a commit uses `used`, has a free tail to cut
/// (down to `used` plus [`MIN_GROWTH_PAGES`]): one longer than a quarter of the file, so
/// that a growth step (a quarter of the old size, a fifth of the new) stays until the file
/// shrinks, instead of being cut by the commit that grew the file and grown again a few
/// commits later.
fn tail_to_cut(len: u64, used: u64, page_size: u64) -> bool {
    len > used + MIN_GROWTH_PAGES * page_size + len / 4
}

/// The fewest unused pages at the end of `used` bytes that give a file of `len` bytes a
/// tail to cut, when it has none without them: [`tail_to_cut`] solved for the tail.
fn pages_to_cut(len: u64, used: u64, page_size: u64) -> u64 {
    (used + MIN_GROWTH_PAGES * page_size + len / 4).saturating_sub(len) / page_size + 1
}

/// Makes `storage` at least `needed` bytes long: when it must grow, by at least a quarter
/// of its length and [`MIN_GROWTH_PAGES`] pages of `p` bytes, so that a growing file is
/// resized rarely.
pub(crate) fn grow(storage: &dyn Storage, needed: u64, p: u64) -> Result<()> {
    if storage.len() < needed {
        let step = (storage.len() / 4).max(MIN_GROWTH_PAGES * p);
        let grown = needed.max(storage.len() + step).next_multiple_of(p);
        storage.resize(grown)?;
    }
    Ok(())
}

/// Pages written together in one vectored write, at most.
const MAX_COALESCED_PAGES: usize = 2048;

/// A commit whose runs of adjacent pages are this many pages long or shorter on average is
/// *scattered*: each of its pages goes in a write of its own (see [`pages_per_write`]).
const SCATTERED_RUN: u64 = 8;

/// The most pages [`write_pages`] joins in one write for a commit writing `out` (sorted by
/// page): one when the commit is scattered (random changes over a large tree), else
/// [`MAX_COALESCED_PAGES`]. The page cache keeps a file in blocks as large as the write
/// that first filled them, and on ext4 each later one-page write into a block walks all of
/// the block's 4 KiB parts, at the write and again at write-back; the pages of a scattered
/// commit (its long runs too, at the file's end) are likely rewritten one at a time by the
/// next such commits, so they are given page-sized blocks. A commit of long runs
/// (sequential loads) keeps its few large writes. (1,000,000 random 1 KiB values in
/// batches of 2,000: docs/benchmark-history.md, twentieth session.)
fn pages_per_write(out: &[(u64, Box<[u8]>)], page_size: usize) -> usize {
    let (mut runs, mut pages, mut next) = (0, 0, None);
    for (page, bytes) in out {
        if next != Some(*page) {
            runs += 1;
        }
        let n = bytes.len().div_ceil(page_size) as u64;
        pages += n;
        next = Some(page + n);
    }
    if pages <= SCATTERED_RUN * runs {
        1
    } else {
        MAX_COALESCED_PAGES
    }
}

/// Writes `out`'s pages (sorted by page), up to `max_pages` adjacent ones coalesced into
/// one write (a buffer longer than a page counts as its pages, and is never split), and
/// marks each as not yet verified. Runs shorter than their pages are padded with zeros up
/// to the next page written.
fn write_pages(
    storage: &dyn Storage,
    out: &[(u64, Box<[u8]>)],
    page_size: usize,
    max_pages: usize,
    verified: &VerifiedSet,
) -> std::io::Result<()> {
    let p = page_size as u64;
    let mut i = 0;
    let mut bufs: Vec<&[u8]> = Vec::new();
    while i < out.len() {
        let first = out[i].0;
        let (mut next, mut pages, mut written) = (first, 0, 0);
        bufs.clear();
        let mut j = i;
        while j < out.len() && out[j].0 == next && pages < max_pages {
            let start = pages * page_size;
            if start > written {
                bufs.push(&ZERO_PAGE[..start - written]);
            }
            let bytes = &out[j].1;
            bufs.push(bytes);
            written = start + bytes.len();
            let n = bytes.len().div_ceil(page_size);
            next += n as u64;
            pages += n;
            j += 1;
        }
        storage.write_vectored(first * p, &bufs)?;
        for page in first..next {
            verified.remove(page);
        }
        i = j;
    }
    Ok(())
}

/// The bytes of the storage's overlap blocks (see [`Storage::overlap_block`]) that the log
/// of `log_len` bytes at `log_start` touches.
fn log_blocks(storage: &dyn Storage, log_start: u64, log_len: u64) -> std::ops::Range<u64> {
    let block = storage.overlap_block().max(1);
    let end = (log_start + log_len)
        .checked_next_multiple_of(block)
        .unwrap_or(u64::MAX);
    log_start / block * block..end
}

/// The indexes `i..j` of `out`'s pages (sorted, of `p` bytes) that overlap `bytes`.
fn pages_in(out: &[(u64, Box<[u8]>)], p: u64, bytes: &std::ops::Range<u64>) -> (usize, usize) {
    let i = out.partition_point(|(page, b)| page * p + b.len() as u64 <= bytes.start);
    let j = i + out[i..].partition_point(|(page, _)| page * p < bytes.end);
    (i, j)
}

/// Gives every owned node its final page: the transaction allocated pages as it went, one
/// at a time, wherever one was free; now that it knows how many it needs, it takes them
/// in as few runs as the free pages allow, so that the commit writes them with few
/// positioned writes (a scattered write costs a sync much more than a contiguous one).
/// Leaves take the lower pages, branches the upper, so that the branches, which the next
/// commit likely rewrites, free a run together. Returns the pages that changed.
fn place(nodes: &FxHashMap<u64, Node>, freelist: &mut FreeList, txid: u64) -> FxHashMap<u64, u64> {
    let mut ids: Vec<(bool, u64)> = nodes
        .iter()
        .map(|(&id, node)| (matches!(node, Node::Branch(_)), id))
        .collect();
    ids.sort_unstable();
    for &(_, id) in &ids {
        // Pages the transaction allocated: free again at once.
        freelist.free(id, txid);
    }
    let pages = freelist.alloc_many(ids.len());
    ids.iter()
        .map(|&(_, id)| id)
        .zip(pages)
        .filter(|(old, new)| old != new)
        .collect()
}

/// Encodes the owned node at `r` and every owned node under it, leaves first, so that
/// each parent records its children's checksums; returns where `r` now is (its page from
/// `placed`, if it moved) with its checksum. Owned children are those whose pointer has
/// checksum 0 (see [`ChildRef`]): the others are not looked up (a branch may have
/// hundreds of children, and a single-put commit owns one of them).
fn finalize(
    nodes: &mut FxHashMap<u64, Node>,
    placed: &FxHashMap<u64, u64>,
    r: ChildRef,
    txid: u64,
    page_size: usize,
    out: &mut Vec<(u64, Box<[u8]>)>,
) -> Result<ChildRef> {
    let Some(node) = nodes.remove(&r.page) else {
        return Ok(r);
    };
    let page = match node {
        Node::Branch(mut b) => {
            for i in 0..b.children() {
                if nodes.is_empty() {
                    // Every owned node is encoded: the other children are as committed.
                    break;
                }
                let child = b.child(i);
                if child.crc != 0 {
                    // A committed child: an owned one's checksum is 0 until it is encoded.
                    continue;
                }
                let done = finalize(nodes, placed, child, txid, page_size, out)?;
                if done != child {
                    b.set_child(i, done);
                }
            }
            b.finish(r.page, txid, page_size)?
        }
        Node::Leaf(l) => l.finish(txid)?,
    };
    let id = placed.get(&r.page).copied().unwrap_or(r.page);
    let crc = checksum(id, &page);
    out.push((id, page));
    Ok(ChildRef { page: id, crc })
}

/// Encodes `freelist`'s free set, as of commit `txid`, into a run of pages it takes from
/// the set (or the file's end): returns the run's first page and its bytes.
pub(crate) fn encode_free_set(freelist: &mut FreeList, txid: u64, p: u64) -> (u64, Vec<u8>) {
    // Allocating the run takes pages from the front of free runs, so it never adds a run:
    // the count before allocating (plus one, to spare) bounds the count after.
    let mut runs = freelist.runs();
    let run_pages = (freelist_len(runs.len() + 1) as u64).div_ceil(p);
    let page = freelist.alloc_run(run_pages);
    crate::freelist::carve(&mut runs, page, run_pages);
    debug_assert_eq!(runs, freelist.runs(), "carved runs");
    (page, encode_freelist(txid, &runs, (run_pages * p) as usize))
}

impl WriteTxn {
    fn has_changes(&self) -> bool {
        self.compacting
            || !self.dirty.nodes.is_empty()
            || !self.dirty.overflow.is_empty()
            || self.freelist.freed_committed_pages()
            || self.catalog != (self.base.slot.catalog.page != 0).then_some(self.base.slot.catalog)
    }

    /// Writes the commit; returns the writer state that follows it.
    pub(crate) fn write_commit(&mut self, original: &WriterState) -> Result<WriterState> {
        let inner = self.inner.clone();
        let storage = inner.storage.as_ref();
        let page_size = self.base.page_size;
        let p = page_size as u64;
        let txid = self.txid;
        let mut ws = original.clone();

        if !self.has_changes() {
            // Nothing to write: the free set is as the transaction found it, and the sync
            // may write it (a logged commit's free set is only in memory).
            self.freelist.rollback();
            ws.freelist = std::mem::take(&mut self.freelist);
            // (A commit its log record made durable needs no sync.)
            let synced = if self.durability == Durability::Immediate
                && ws.log.logged != self.base.slot.txid
            {
                inner.sync_with(&mut ws)
            } else {
                Ok(false)
            };
            return match synced {
                Ok(synced) => {
                    ws.freelist.settle(synced);
                    Ok(ws)
                }
                Err(e) => {
                    self.freelist = std::mem::take(&mut ws.freelist);
                    Err(e)
                }
            };
        }

        // 1. Every table whose catalog entry changes has its catalog path owned first (the
        //    entry has a fixed size, so rewriting it later allocates nothing), then every
        //    owned node gets its final page, then the trees are encoded: tables, their
        //    catalog entries, the catalog.
        let mut changed: Vec<(String, TableState)> = self
            .tables
            .iter()
            .filter(|(_, t)| {
                t.loaded != Some(t.current)
                    || t.current
                        .root
                        .is_some_and(|r| self.dirty.nodes.contains_key(&r.page))
            })
            .map(|(name, t)| (name.clone(), *t))
            .collect();
        changed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (name, state) in &changed {
            let meta = state.current.encode();
            self.with_catalog(|w, root| w.insert(root, name.as_bytes(), &meta))?;
        }
        let placed = if self.compacting {
            FxHashMap::default()
        } else {
            place(&self.dirty.nodes, &mut self.freelist, txid)
        };
        let mut out: Vec<(u64, Box<[u8]>)> = Vec::new();
        let mut finish = |nodes: &mut FxHashMap<u64, Node>, root| {
            finalize(nodes, &placed, root, txid, page_size, &mut out)
        };
        for (name, state) in &changed {
            let mut meta = state.current;
            if let Some(root) = meta.root {
                meta.root = Some(finish(&mut self.dirty.nodes, root)?);
            }
            self.with_catalog(|w, root| w.insert(root, name.as_bytes(), &meta.encode()))?;
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
        // Runs written when they were made only need their pages re-verified when read.
        let mut written_runs = Vec::new();
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
        let record_units = self
            .ops
            .as_ref()
            .map(|ops| (LOG_RECORD_HEADER + ops.payload().len()).div_ceil(LOG_UNIT) as u64);
        let mut logged = !self.compacting
            && ws.log.next == Some(txid)
            && record_units.is_some_and(|n| ws.log.head + n <= ws.log.units(page_size));

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
        //    Any other commit encodes its free set into a run it takes from it.
        for page in self.base.slot.freelist_run(page_size) {
            self.freelist.free(page, txid);
        }
        let waiting = self.freelist.waiting_after(original.durable_txid) as u64;
        // A commit that grows the file, or after which the file's free tail could be cut,
        // does not log (a durable one syncs instead): the sync lets freed pages be reused
        // and the file shrink. Pages of the durable commit freed since cannot be reused
        // until a sync: past a bound, a logged commit syncs too, and so does an Eventual
        // one past a lower bound, so that the file does not grow without end.
        let len = storage.len();
        let used = self.freelist.page_count * p;
        let max_waiting = MAX_WAITING_LOGGED.min(self.freelist.page_count / 2);
        logged &= waiting <= max_waiting && used <= len && !tail_to_cut(len, used, p);
        // Nor one after which a sync would let the file shrink: the pages at its end wait
        // (a file that lost data at its end). The scan stops at the first page in use, at
        // the first count of pages that would make the tail worth cutting, and after
        // [`MAX_TAIL_SCAN`] pages: that many waiting at the end sync the file too, after
        // which they are free, leave `page_count`, and are not scanned again.
        if logged {
            let limit = pages_to_cut(len, used, p).min(MAX_TAIL_SCAN);
            logged = self.freelist.unused_tail(limit) < limit;
        }
        let (freelist_page, freelist_crc, freelist_bytes) = if logged {
            (Slot::FREELIST_IN_MEMORY, 0, 0)
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
        grow(storage, needed, p)?;
        let durable =
            !logged && (self.durability == Durability::Immediate || waiting > MAX_WAITING_PAGES);

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
            log_page: ws.log.page,
            log_pages: ws.log.pages,
        };
        for page in written_runs.into_iter().flatten() {
            verified.remove(page);
        }
        let write_slot =
            || storage.write(slot_index as u64 * p + SLOT_OFFSET as u64, &slot.encode());

        // 6. The record, if logged; the sync, if durable. A durable record goes to the disk
        //    while the pages are written (they cost the commit no time then), all but those
        //    in the storage's blocks that the log touches, which go first. A reader process
        //    can find the record before the slot: while a writer holds the file, readers
        //    take the log for the writer's business (`db.rs`).
        if let (true, Some(ops)) = (logged, &self.ops) {
            let unit = LOG_UNIT as u64;
            let log_start = ws.log.page * p;
            let at = log_start + ws.log.head * unit;
            let record = encode_record(at / unit, txid, original.durable_txid, ops.payload());
            let units = (record.len() / LOG_UNIT) as u64;
            if self.durability == Durability::Eventual {
                write_pages(storage, &out, page_size, per_write, &verified)?;
                write_slot()?;
                storage.write(at, &record)?;
                ws.log.unsynced.get_or_insert(ws.log.head);
            } else {
                // The Eventual commits' records since the last durable one, read back, go
                // with this one: a durable record never follows one that is not.
                let (from, bytes) = match ws.log.unsynced {
                    Some(from) => {
                        let mut stretch = vec![0u8; ((ws.log.head - from) * unit) as usize];
                        storage.read(log_start + from * unit, &mut stretch)?;
                        stretch.extend_from_slice(&record);
                        (log_start + from * unit, stretch)
                    }
                    None => (at, record),
                };
                // What shares a block with the log goes first; the rest during the record.
                let near = log_blocks(storage, log_start, ws.log.pages * p);
                let (i, j) = pages_in(&out, p, &near);
                let slot_at = slot_index as u64 * p + SLOT_OFFSET as u64;
                let slot_near = slot_at < near.end && slot_at + SLOT_LEN as u64 > near.start;
                write_pages(storage, &out[i..j], page_size, per_write, &verified)?;
                let mut write_far = || {
                    write_pages(storage, &out[..i], page_size, per_write, &verified)?;
                    write_pages(storage, &out[j..], page_size, per_write, &verified)?;
                    if slot_near { Ok(()) } else { write_slot() }
                };
                // (The slot follows every page, so that a reader process that finds it
                // finds them: one in the log's blocks waits for the record.)
                let written = storage
                    .write_durable_while(from, &bytes, &mut write_far)
                    .and_then(|()| if slot_near { write_slot() } else { Ok(()) });
                if let Err(e) = written {
                    // The record may have reached the disk although what was written
                    // during or after it did not: its first unit is cleared, so that
                    // recovery does not replay a commit reported as failed. (Should that
                    // write fail too, the next commit writes its own record over it.)
                    let _ = storage.write_durable(at, &[0u8; LOG_UNIT]);
                    return Err(e.into());
                }
                ws.log.unsynced = None;
                ws.log.logged = txid;
            }
            ws.log.head += units;
            ws.log.next = Some(txid + 1);
        } else {
            write_pages(storage, &out, page_size, per_write, &verified)?;
            write_slot()?;
            if !durable {
                // An unlogged commit leaves a gap in the log: it serves again after a sync.
                ws.log.next = None;
            }
        }
        if durable {
            storage.sync()?;
            ws.durable_txid = txid;
            ws.durable_slot = slot_index;
            ws.log.restart(txid);
            // Now that no recovery path needs pages past `page_count` (the other slot's
            // commit is older than this durable one and is never chosen over it), give a
            // long tail of unused space back, keeping 16 pages (compaction keeps nothing).
            if self.compacting && storage.len() > page_count * p {
                storage.resize(page_count * p)?;
            } else if tail_to_cut(storage.len(), page_count * p, p) {
                let keep = (page_count + MIN_GROWTH_PAGES) * p;
                storage.resize(keep)?;
            }
        }

        // 7. Publish to new readers.
        let snapshot = Snapshot::new(slot, page_size, storage.region(), verified.clone());
        inner.publish(snapshot);
        inner
            .commits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.freelist.settle(durable);
        ws.freelist = std::mem::take(&mut self.freelist);
        ws.next_txid = txid + 1;
        Ok(ws)
    }
}

#[cfg(test)]
mod tests {
    use crate::Database;
    use crate::btree::Node;
    use crate::error::{Error, Result};
    use crate::format::LeafNode;
    use crate::pager::VerifiedSet;
    use crate::storage::{MemoryStorage, Region, Storage};
    use crate::{Durability, Result as CairnResult};
    use std::io;
    use std::sync::{Arc, Mutex, PoisonError};

    /// What reached the storage, in order.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Event {
        Write { offset: u64, len: u64, during: bool },
        Durable { offset: u64, len: u64 },
    }

    /// Memory that keeps a commit log and records each write, and whether it was made
    /// while a durable write was under way (in blocks of [`BLOCK`] bytes).
    #[derive(Debug)]
    struct Recorder {
        memory: MemoryStorage,
        events: Mutex<(Vec<Event>, bool)>,
    }

    const BLOCK: u64 = 64 * 1024;

    impl Recorder {
        fn push(&self, event: Event) {
            self.events
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .0
                .push(event);
        }
        fn set_during(&self, during: bool) {
            self.events.lock().unwrap_or_else(PoisonError::into_inner).1 = during;
        }
        fn take(&self) -> Vec<Event> {
            std::mem::take(&mut self.events.lock().unwrap_or_else(PoisonError::into_inner).0)
        }
    }

    impl Storage for Recorder {
        fn len(&self) -> u64 {
            self.memory.len()
        }
        fn region(&self) -> Arc<Region> {
            self.memory.region()
        }
        fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            let during = self.events.lock().unwrap_or_else(PoisonError::into_inner).1;
            let len = data.len() as u64;
            self.push(Event::Write {
                offset,
                len,
                during,
            });
            self.memory.write(offset, data)
        }
        fn sync(&self) -> io::Result<()> {
            self.memory.sync()
        }
        fn resize(&self, len: u64) -> io::Result<()> {
            self.memory.resize(len)
        }
        fn durable_writes(&self) -> bool {
            true
        }
        fn write_durable(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            let len = data.len() as u64;
            self.push(Event::Durable { offset, len });
            self.memory.write(offset, data)
        }
        fn write_durable_while(
            &self,
            offset: u64,
            data: &[u8],
            meanwhile: &mut dyn FnMut() -> io::Result<()>,
        ) -> io::Result<()> {
            self.set_during(true);
            let during = meanwhile();
            self.set_during(false);
            during?;
            self.write_durable(offset, data)
        }
        fn overlap_block(&self) -> u64 {
            BLOCK
        }
    }

    /// The blocks of [`BLOCK`] bytes a range touches.
    fn blocks(offset: u64, len: u64) -> std::ops::RangeInclusive<u64> {
        offset / BLOCK..=(offset + len.max(1) - 1) / BLOCK
    }

    #[test]
    fn a_logged_commit_writes_beside_its_record_only_outside_the_logs_blocks_and_its_slot_last()
    -> CairnResult<()> {
        let storage = Arc::new(Recorder {
            memory: MemoryStorage::new()?,
            events: Mutex::default(),
        });
        let db = Database::builder().with_storage(storage.clone(), true, None)?;
        let page = db.page_size() as u64;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        for i in 0..20_000u32 {
            w.open_table("t")?.insert(&i.to_be_bytes(), &[7u8; 40])?;
        }
        w.commit()?;
        let (mut during_writes, mut logged) = (0, 0);
        for i in 0..40u32 {
            storage.take();
            let mut w = db.begin_write()?;
            w.set_durability(Durability::Immediate);
            let key = (i * 4099 % 20_000).to_be_bytes();
            w.open_table("t")?.insert(&key, b"new")?;
            w.commit()?;
            let events = storage.take();
            // (The first commit after the load syncs instead: it starts the log's cycle.)
            let Some(&Event::Durable { offset, len }) =
                events.iter().find(|e| matches!(e, Event::Durable { .. }))
            else {
                continue;
            };
            logged += 1;
            let record = blocks(offset, len);
            let is_slot = |o: u64| o < 2 * page;
            let mut slot_seen = false;
            for e in &events {
                let Event::Write {
                    offset: o,
                    len: l,
                    during,
                } = *e
                else {
                    continue;
                };
                if during {
                    during_writes += 1;
                    let b = blocks(o, l);
                    assert!(
                        b.end() < record.start() || b.start() > record.end(),
                        "commit {i}: a write at {o} shares a block with the record at {offset}"
                    );
                }
                if is_slot(o) {
                    slot_seen = true;
                } else {
                    assert!(!slot_seen, "commit {i}: a page at {o} after the slot");
                }
            }
            assert!(slot_seen, "commit {i} wrote its slot");
        }
        assert!(logged >= 35, "{logged} of 40 commits logged");
        assert!(
            during_writes > 40,
            "pages went during the records: {during_writes}"
        );
        assert_eq!(db.begin_read()?.open_table("t")?.len(), 20_000);
        assert!(db.check()?.is_ok());
        Ok(())
    }

    /// Memory that records each vectored write: its offset and length.
    #[derive(Debug)]
    struct Vectored {
        memory: MemoryStorage,
        calls: Mutex<Vec<(u64, u64)>>,
    }

    impl Storage for Vectored {
        fn len(&self) -> u64 {
            self.memory.len()
        }
        fn region(&self) -> Arc<Region> {
            self.memory.region()
        }
        fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            self.memory.write(offset, data)
        }
        fn write_vectored(&self, offset: u64, bufs: &[&[u8]]) -> io::Result<()> {
            let len = bufs.iter().map(|b| b.len() as u64).sum();
            let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
            calls.push((offset, len));
            self.memory.write_vectored(offset, bufs)
        }
        fn sync(&self) -> io::Result<()> {
            self.memory.sync()
        }
        fn resize(&self, len: u64) -> io::Result<()> {
            self.memory.resize(len)
        }
    }

    /// A scattered commit writes each page alone, its long run too; a commit of long runs
    /// joins adjacent pages; a buffer of several pages counts as its pages and goes whole.
    #[test]
    fn a_scattered_commits_pages_go_one_per_write_and_long_runs_together() -> CairnResult<()> {
        const P: usize = 512;
        let page = |id: u64, pages: usize| (id, vec![id as u8; pages * P].into_boxed_slice());
        let write = |out: &[(u64, Box<[u8]>)]| -> CairnResult<Vec<(u64, u64)>> {
            let storage = Vectored {
                memory: MemoryStorage::new()?,
                calls: Mutex::default(),
            };
            storage.resize(200 * P as u64)?;
            let verified = VerifiedSet::with_capacity(200);
            for (id, _) in out {
                verified.insert(*id);
            }
            let per_write = super::pages_per_write(out, P);
            super::write_pages(&storage, out, P, per_write, &verified)?;
            for (id, bytes) in out {
                let mut back = vec![0u8; bytes.len()];
                storage.read(id * P as u64, &mut back)?;
                assert_eq!(&back[..], &bytes[..], "page {id}");
                assert!(!verified.contains(*id), "page {id} is to be verified again");
            }
            Ok(std::mem::take(
                &mut storage.calls.lock().unwrap_or_else(PoisonError::into_inner),
            ))
        };
        // 14 pages in 5 runs (2.8 a run on average): scattered.
        let mut scattered: Vec<_> = (10..20).map(|id| page(id, 1)).collect();
        scattered.extend([40, 50, 60, 70].map(|id| page(id, 1)));
        let calls = write(&scattered)?;
        let each: Vec<_> = scattered
            .iter()
            .map(|(id, _)| (id * P as u64, P as u64))
            .collect();
        assert_eq!(calls, each);
        // 24 pages in 2 runs, the first starting with a buffer of 3 pages: joined.
        let mut long = vec![page(10, 3)];
        long.extend((13..30).map(|id| page(id, 1)));
        long.extend((40..44).map(|id| page(id, 1)));
        let calls = write(&long)?;
        assert_eq!(
            calls,
            [
                (10 * P as u64, 20 * P as u64),
                (40 * P as u64, 4 * P as u64)
            ]
        );
        // 24 pages in 3 runs is 8 a run: scattered, the 3-page buffer whole.
        long.push(page(60, 1));
        long.retain(|(id, _)| *id != 43);
        let calls = write(&long)?;
        assert_eq!(calls.len(), 22);
        assert_eq!(calls[0], (10 * P as u64, 3 * P as u64));
        Ok(())
    }

    /// The scan of the file's unused tail stops at the first count that makes the tail worth
    /// cutting: exactly the count at which [`super::tail_to_cut`] turns true.
    #[test]
    fn the_tail_scan_stops_where_the_tail_becomes_worth_cutting() {
        let mut checked = 0;
        for p in [512u64, 4096, 65536] {
            for len_pages in [16u64, 17, 40, 100, 257, 1000, 4099] {
                let len = len_pages * p;
                for used_pages in (0..=len_pages).step_by(3) {
                    let used = used_pages * p;
                    if super::tail_to_cut(len, used, p) {
                        continue;
                    }
                    let need = super::pages_to_cut(len, used, p);
                    for tail in 0..=used_pages {
                        let cut = super::tail_to_cut(len, used - tail * p, p);
                        assert_eq!(cut, tail >= need, "p {p} len {len} used {used} tail {tail}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }

    /// A node the transaction owns that no tree reaches (an internal error: its parent's
    /// pointer would not be 0-checksummed) fails the commit before anything is written.
    #[test]
    fn an_owned_node_outside_every_tree_fails_the_commit_and_changes_nothing() -> Result<()> {
        let db = Database::in_memory()?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.open_table("t")?.insert(b"k", b"v")?;
        w.commit()?;
        let mut w = db.begin_write()?;
        w.open_table("t")?.insert(b"k2", b"v2")?;
        let stray = Node::Leaf(LeafNode::new(db.page_size()));
        w.dirty.nodes.insert(1 << 40, stray);
        let err = w.commit();
        assert!(matches!(err, Err(Error::Corruption { .. })), "{err:?}");
        {
            let r = db.begin_read()?;
            let t = r.open_table("t")?;
            assert_eq!(t.get(b"k")?, Some(&b"v"[..]));
            assert_eq!(t.get(b"k2")?, None);
        }
        let mut w = db.begin_write()?;
        w.open_table("t")?.insert(b"k3", b"v3")?;
        w.commit()?;
        assert_eq!(db.begin_read()?.open_table("t")?.len(), 2);
        assert!(db.check()?.is_ok());
        Ok(())
    }
}
