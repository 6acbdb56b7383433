//! The commit protocol: encode the changed nodes, persist the freelist (unless the commit
//! log takes the commit: then its free set stays in memory), write every new page, then
//! the commit slot, then (for `Immediate`) the log record with one `O_DSYNC` write, or one
//! `fdatasync`.
//!
//! Step-by-step with what a crash leaves: docs/design.md#commit-protocol. The steps are
//! [`WriteTxn::write_commit`]'s; laying the commit out (steps 1 to 5 but the writes) is
//! in `commit/layout.rs`, placing and encoding the nodes in `commit/encode.rs`, growing
//! and cutting the file in `commit/file_size.rs`, writing pages in
//! `commit/page_writes.rs`, the log's record in `commit/record.rs`, and a durable record
//! submitted before the layout in `commit/record_first.rs`.

mod encode;
mod file_size;
mod layout;
mod log_growth;
mod page_writes;
mod record;
mod record_first;
mod spill;

use crate::db::{Durability, WriterState};
use crate::error::{Error, Result};
use crate::format::{LOG_RECORD_HEADER, LOG_UNIT, Slot};
use crate::oplog::OpLog;
use crate::pager::Snapshot;
use crate::txn_tables::TableState;
use crate::write_txn::WriteTxn;

pub(crate) use encode::encode_free_set;
pub(crate) use file_size::grow;
use file_size::{MIN_GROWTH_PAGES, tail_to_cut};
use layout::{Laying, Layout};
pub(crate) use log_growth::compacted_pages;
use log_growth::{LogPressure, grown_pages, zero_run};
use record::{Record, Staged};
pub(crate) use spill::MIN_BUDGET_PAGES;

/// How many freed pages may wait for a sync before an Eventual commit that does not log
/// syncs anyway: the logged commits' bound with the default log. Waiting pages cannot be
/// reused, so the file grows by them: by at most this many pages, or by the pages of the
/// durable commit (only its pages wait: a page written since is reused at once), whichever
/// is fewer. A bound growing with the file let a large file's Eventual single-put commits
/// grow it (and, until the forty-fifth session, when each such commit rewrote the
/// freelist, write a freelist of many pages each) until they cost more than durable ones;
/// with 1,024 (until then), Eventual puts over 400,000 keys synced every 300 or so
/// commits: 24,562–26,122 a second, p99.9 10.8–11.4 ms, against 28,972–32,343 and
/// 0.14–0.38 ms with 4,096 (docs/benchmark-history.md, forty-fifth session).
const MAX_WAITING_PAGES: u64 = 4096;

/// The same bound for a logged commit, in pages per page of the commit log (2 MiB of log:
/// 4,096 pages), which writes no freelist: waiting pages cost it nothing until the sync,
/// and the longer the log's cycle, the fewer syncs (each writes back every page the cycle
/// dirtied). The log's size is thus the one choice of how much a cycle may hold, in its
/// records and in the pages it keeps for recovery: a smaller log makes a smaller file
/// (the waiting pages take disk space) and more syncs. Half the file at most: past that,
/// the sync lets a file that lost most of its data shrink.
const WAITING_PER_LOG_PAGE: u64 = 8;

/// A commit whose record is larger than this logs only when the pages it writes take at
/// least [`MIN_PAGES_PER_RECORD_BYTE`] times its record's bytes. A record is the commit's
/// keys and values; the pages hold them too, and are written back at the cycle's sync all
/// the same: a large record about as large as its pages (a batch of sequential 1 KiB
/// values, one large value) has the data written twice, the disk's bandwidth spent for a
/// sync of pages it would take in few long runs. (With a 2 MiB log and no such rule,
/// batches of 2,000 sequential 1 KiB values logged every other batch and loaded at 0.85×
/// the rate of syncing each; durable transactions of one 1 MiB value each ran at 0.69×, of
/// 256 KiB at 0.84–0.97×.) A small record costs little bandwidth and its write is one wait
/// for the disk where a sync is more: durable puts of one 32 KiB value took 175–184 µs
/// logged against 251–272 µs synced, 64 KiB 205–212 against 273–319, 128 KiB 258–296
/// against 292–361 (docs/benchmark-history.md, twenty-ninth session).
pub(crate) const ALWAYS_LOGGED_RECORD: u64 = 128 << 10;
const MIN_PAGES_PER_RECORD_BYTE: u64 = 2;

/// The most pages at the end of the file a logged commit looks at to see whether a sync
/// would let the file shrink (each a lookup in the free and waiting sets).
const MAX_TAIL_SCAN: u64 = 4096;

/// What the first part of step 1 leaves for the layout ([`WriteTxn::prepare`]).
struct Prepared {
    /// The tables whose catalog entries change, by name.
    changed: Vec<(String, TableState)>,
    new_pages: Option<u64>,
    record_units: Option<u64>,
}

impl Prepared {
    /// What [`WriteTxn::lay_out`] takes, the record not gone first.
    fn laying<'a>(&'a self, ws: &'a WriterState, original: &'a WriterState) -> Laying<'a> {
        Laying {
            ws,
            original,
            changed: &self.changed,
            new_pages: self.new_pages,
            record_units: self.record_units,
            record_first: false,
        }
    }
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
        self.txid_in_range()?;
        self.dirty.flush_gathered()?;
        let ws = original.clone();
        let Some(prepared) = self.prepare(&ws, original)? else {
            return self.commit_nothing(ws);
        };
        let laying = prepared.laying(&ws, original);
        // The record of a durable commit that logs goes to the disk first, if it can
        // (`record_first.rs`), while the commit is laid out (steps 1 to 5, `layout.rs`).
        let payload = self.ops.as_ref().map(OpLog::payload);
        let staged = self
            .record_first(storage, &laying, payload)
            .inspect_err(|_| inner.note_failed_sync())?;
        let laid = match &staged {
            Some(staged) => {
                let laying = Laying {
                    record_first: true,
                    ..laying
                };
                let laid = self.lay_out_beside(storage, &ws.log, staged, |txn| {
                    txn.lay_out(storage, &laying).map(Some)
                });
                match laid.inspect_err(|_| inner.note_failed_sync())? {
                    Some(laid) => laid,
                    None => return Err(Error::corrupt(0, "internal: a commit was not laid out")),
                }
            }
            None => self.lay_out(storage, &laying)?,
        };
        self.write_laid(ws, original, staged.as_ref(), laid)
    }

    /// Fails a commit whose id would be past the range a file may hold.
    fn txid_in_range(&self) -> Result<()> {
        if self.txid >= Slot::TXID_LIMIT {
            // Only a file whose slot a crafter set just below the limit gets here: a commit
            // past it would be refused as damage at the next opening, and lost.
            return Err(Error::corrupt(
                0,
                format!("commit id {} out of range (ids stay below 2^60)", self.txid),
            ));
        }
        Ok(())
    }

    /// A commit that changed nothing: the free set is as the transaction found it, and
    /// the sync may write it (a logged commit's free set is only in memory).
    fn commit_nothing(&mut self, mut ws: WriterState) -> Result<WriterState> {
        self.freelist.rollback();
        ws.freelist = std::mem::take(&mut self.freelist);
        // (A commit its log record made durable needs no sync.)
        let synced =
            if self.durability == Durability::Immediate && ws.log.logged != self.base.slot.txid {
                self.inner.clone().sync_with(&mut ws)
            } else {
                Ok(false)
            };
        match synced {
            Ok(synced) => {
                ws.freelist.settle(synced);
                Ok(ws)
            }
            Err(e) => {
                self.freelist = std::mem::take(&mut ws.freelist);
                Err(e)
            }
        }
    }

    /// The first part of step 1: every table whose catalog entry changes has its catalog
    /// path owned first (the entry has a fixed size, so rewriting it later allocates
    /// nothing); and whether the log moves. `None` when the transaction changed nothing.
    fn prepare(&mut self, ws: &WriterState, original: &WriterState) -> Result<Option<Prepared>> {
        if !self.has_changes() {
            return Ok(None);
        }
        let mut changed: Vec<(String, TableState)> = self
            .tables
            .iter()
            .filter(|(_, t)| {
                t.loaded != Some(t.current)
                    || t.current
                        .root
                        .is_some_and(|r| self.dirty.nodes.contains_key(&r.page))
            })
            .map(|(name, t)| (name.to_owned(), *t))
            .collect();
        changed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (name, state) in &changed {
            let meta = state.current.encode();
            self.with_catalog(|w, root| w.insert(root, name.as_bytes(), &meta))?;
        }
        let record_units = self
            .ops
            .as_ref()
            .map(|ops| (LOG_RECORD_HEADER + ops.payload().len()).div_ceil(LOG_UNIT) as u64);
        let new_pages = self.log_growth(ws, original, record_units);
        Ok(Some(Prepared {
            changed,
            new_pages,
            record_units,
        }))
    }

    /// The pages the commit log moves to, if it moves. It does (`log_growth.rs`) only in a
    /// commit that syncs: one that grows it because it was too small for what this commit
    /// asked (so that the commit cannot log: it syncs, being Immediate), or a compaction's.
    /// The run is the lowest that holds it once the pages of the nodes are free again,
    /// before the nodes take theirs: a log grown by a bulk load goes below the loaded
    /// pages, not after them, where it would keep the file from shrinking when they go.
    fn log_growth(
        &self,
        ws: &WriterState,
        original: &WriterState,
        record_units: Option<u64>,
    ) -> Option<u64> {
        let page_size = self.base.page_size;
        if self.durability != Durability::Immediate {
            None
        } else if self.compacting {
            compacted_pages(&ws.log, &self.freelist, page_size)
        } else {
            let old_freelist = self.base.slot.freelist_run(page_size).count();
            let waiting = self.freelist.waiting_after(original.durable_txid) + old_freelist;
            let pressure = LogPressure {
                outgrew: self.outgrew_log,
                record_units,
                in_cycle: ws.log.next == Some(self.txid),
                too_many_waiting: waiting as u64 > WAITING_PER_LOG_PAGE * ws.log.pages,
                pages: self.dirty.nodes.len() as u64,
            };
            grown_pages(&ws.log, page_size, pressure)
        }
    }

    /// Steps 6 and 7 of a commit laid out: the record, unless `staged` went first, or the
    /// pages and the slot; the sync; publishing.
    fn write_laid(
        &mut self,
        mut ws: WriterState,
        original: &WriterState,
        staged: Option<&Staged>,
        mut laid: Layout,
    ) -> Result<WriterState> {
        let inner = self.inner.clone();
        let storage = inner.storage.as_ref();
        let page_size = self.base.page_size;
        let p = page_size as u64;
        let txid = self.txid;
        let written = laid.written(storage, page_size);
        let Layout {
            ref out,
            ref verified,
            slot,
            slot_index,
            logged,
            durable,
            new_log,
            ..
        } = laid;
        let (log_page, log_pages, page_count) = (slot.log_page, slot.log_pages, slot.page_count);
        let log = log_pages * p;

        // 6. The record, if logged (`record.rs`) and not written already; the sync, if
        //    durable.
        if let Some(staged) = staged {
            staged.landed(&mut ws.log);
        } else if let (true, Some(ops)) = (logged, &self.ops) {
            let record = Record {
                txid,
                durable_txid: original.durable_txid,
                payload: ops.payload(),
            };
            match self.durability {
                Durability::Eventual => record.append(&written, &mut ws.log)?,
                Durability::Immediate => record
                    .append_durable(&written, &mut ws.log)
                    .inspect_err(|_| inner.note_failed_sync())?,
            }
        } else {
            written.pages(out)?;
            if let Some((first, pages)) = new_log {
                zero_run(storage, first, pages, page_size, verified)?;
            }
            written.slot()?;
            if !durable {
                // An unlogged commit leaves a gap in the log: it serves again after a sync.
                ws.log.next = None;
            }
        }
        if durable {
            inner.sync_commit(&slot, original.durable_txid, verified)?;
            ws.durable_txid = txid;
            ws.durable_slot = slot_index;
            ws.log.restart(txid);
            (ws.log.page, ws.log.pages) = (log_page, log_pages);
            // The new cycle's records go straight to the disk, and one over a page the page
            // cache holds (the log's zeros, written through it; what an opening or an
            // Eventual commit read or wrote there) waits for a kernel worker thread: the
            // first durable record in each page of the log did, one commit in eight.
            storage.drop_cached(log_page * p, log);
            // Now that no recovery path needs pages past `page_count` (the other slot's
            // commit is older than this durable one and is never chosen over it), give a
            // long tail of unused space back, keeping 16 pages (compaction keeps nothing).
            if self.compacting && storage.len() > page_count * p {
                storage.resize(page_count * p)?;
            } else if tail_to_cut(storage.len(), page_count * p, p, log) {
                let keep = (page_count + MIN_GROWTH_PAGES) * p;
                storage.resize(keep)?;
            }
        }

        // 7. Publish to new readers, with the catalog entries the commit wrote known to
        //    the snapshot: the next transactions that open those tables (the next write
        //    transaction's too, before its record) need not read the catalog's page.
        let snapshot = Snapshot::new(slot, page_size, storage.region(), verified.clone());
        for (name, meta) in std::mem::take(&mut laid.metas) {
            snapshot.tables.remember(name, meta);
        }
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
    use crate::storage::{MemoryStorage, Recording, Region, Storage};
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
            // Submitted first, as to an `io_uring`; the bytes land after `meanwhile`.
            let len = data.len() as u64;
            self.push(Event::Durable { offset, len });
            self.set_during(true);
            let during = meanwhile();
            self.set_during(false);
            during?;
            self.memory.write(offset, data)
        }
        fn overlap_block(&self) -> u64 {
            BLOCK
        }
    }

    /// A new database over a [`Recorder`], and the recorder.
    fn recorded() -> CairnResult<(Arc<Recorder>, Database)> {
        let storage = Arc::new(Recorder {
            memory: MemoryStorage::new()?,
            events: Mutex::default(),
        });
        let db = Database::builder().with_storage(storage.clone(), true, None)?;
        Ok((storage, db))
    }

    /// The blocks of [`BLOCK`] bytes a range touches.
    fn blocks(offset: u64, len: u64) -> std::ops::RangeInclusive<u64> {
        offset / BLOCK..=(offset + len.max(1) - 1) / BLOCK
    }

    #[test]
    fn a_logged_commit_writes_beside_its_record_only_outside_the_logs_blocks_and_its_slot_last()
    -> CairnResult<()> {
        let (storage, db) = recorded()?;
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

    /// A log moved to a run that fills a block of the page cache starts at a block,
    /// skipping a block's pages at most; the slot, outside the log's blocks, is written
    /// while each record is under way.
    #[test]
    fn a_moved_log_that_fills_a_block_starts_at_one_and_the_slot_goes_during_the_record()
    -> CairnResult<()> {
        for keys in [20_000u32, 20_200, 20_400, 20_600] {
            let (storage, db) = recorded()?;
            let page = db.page_size() as u64;
            let first_log = db.stats()?.log_pages;
            let mut w = db.begin_write()?;
            w.create_table("t")?;
            for i in 0..keys {
                w.open_table("t")?.insert(&i.to_be_bytes(), &[7u8; 40])?;
            }
            w.commit()?;
            let slot = db.begin_read()?.snapshot.slot;
            assert!(
                slot.log_pages * page >= BLOCK,
                "{keys}: the log moved: {slot:?}"
            );
            assert_eq!(slot.log_page * page % BLOCK, 0, "{keys}: {slot:?}");
            // Free: the old log's pages, and those skipped to reach the block.
            let free = db.stats()?.free_pages;
            assert!(
                free < first_log + BLOCK / page,
                "{keys}: {free} free pages after the load"
            );
            let mut logged = 0;
            for i in 0..20u32 {
                storage.take();
                let mut w = db.begin_write()?;
                w.set_durability(Durability::Immediate);
                w.open_table("t")?
                    .insert(&(i * 4099 % keys).to_be_bytes(), b"new")?;
                w.commit()?;
                let events = storage.take();
                if !events.iter().any(|e| matches!(e, Event::Durable { .. })) {
                    continue;
                }
                logged += 1;
                let slot_during = events.iter().any(|e| {
                    matches!(*e, Event::Write { offset, during: true, .. } if offset < 2 * page)
                });
                assert!(slot_during, "{keys}, commit {i}: the slot: {events:?}");
            }
            assert!(logged >= 15, "{keys}: {logged} of 20 commits logged");
            assert!(db.check()?.is_ok());
        }
        Ok(())
    }

    /// A durable commit that logs submits its record before it is laid out: none of its
    /// pages is written before the record, and those in the blocks the log touches (a new
    /// file's first pages lie beside its log), then the slot, after it.
    #[test]
    fn a_logged_commits_record_goes_first_and_its_pages_beside_the_log_after_it() -> CairnResult<()>
    {
        let (storage, db) = recorded()?;
        let page = db.page_size() as u64;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        let log = db.stats()?.log_pages * page;
        let mut logged = 0;
        for i in 0..40u32 {
            storage.take();
            let mut w = db.begin_write()?;
            w.set_durability(Durability::Immediate);
            w.open_table("t")?.insert(&i.to_be_bytes(), b"value")?;
            w.commit()?;
            let events = storage.take();
            let Some(at) = events
                .iter()
                .position(|e| matches!(e, Event::Durable { .. }))
            else {
                continue;
            };
            logged += 1;
            assert!(
                events[..at].is_empty(),
                "commit {i}: written before its record: {:?}",
                &events[..at]
            );
            let near = |o: u64| o < 2 * page + log + BLOCK;
            let after: Vec<u64> = events[at..]
                .iter()
                .filter_map(|e| match *e {
                    Event::Write {
                        offset,
                        during: false,
                        ..
                    } => Some(offset),
                    _ => None,
                })
                .collect();
            assert!(
                after.iter().any(|&o| o >= 2 * page && near(o)),
                "commit {i}: no page beside the log after the record: {events:?}"
            );
            assert!(
                after.last().is_some_and(|&o| o < 2 * page),
                "commit {i}: the slot last: {events:?}"
            );
        }
        assert!(logged >= 35, "{logged} of 40 commits logged");
        assert_eq!(db.begin_read()?.open_table("t")?.len(), 40);
        Ok(())
    }

    /// A durable group of batches, whose record is known before they are applied, submits
    /// it first, and writes nothing while they are applied: the overflow run of a large
    /// value, written at once in any other transaction, goes with the commit's pages
    /// (during the record if outside its blocks, else after it).
    #[test]
    fn a_groups_record_goes_to_the_disk_before_its_batches_are_applied() -> CairnResult<()> {
        let storage = Arc::new(Recorder {
            memory: MemoryStorage::new()?,
            events: Mutex::default(),
        });
        let db = Database::builder()
            .log_size(1 << 20)
            .with_storage(storage.clone(), true, None)?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        // (The first commit after the table's syncs: it starts the log's cycle.)
        let mut w = db.begin_write()?;
        w.open_table("t")?.insert(b"first", b"")?;
        w.commit()?;
        let mut batch = crate::Batch::new();
        batch.set_durability(Durability::Immediate);
        for i in 0..200u32 {
            batch.put("t", &(i * 7919 % 2_000).to_be_bytes(), &[5u8; 40]);
        }
        let large = vec![6u8; 20_000];
        batch.put("t", b"large", &large);
        storage.take();
        db.commit_batch(batch)?;
        let events = storage.take();
        let at = events
            .iter()
            .position(|e| matches!(e, Event::Durable { .. }))
            .ok_or_else(|| Error::corrupt(0, format!("no record: {events:?}")))?;
        assert!(
            events[..at].is_empty(),
            "written before the record: {:?}",
            &events[..at]
        );
        let Event::Durable { offset, len } = events[at] else {
            unreachable!("found above");
        };
        let record = blocks(offset, len);
        let mut run_written = false;
        for e in &events[at..] {
            if let Event::Write {
                offset: o,
                len: l,
                during,
            } = *e
            {
                run_written |= l >= large.len() as u64;
                let b = blocks(o, l);
                assert!(!during || b.end() < record.start() || b.start() > record.end());
            }
        }
        assert!(
            run_written,
            "the overflow run went with the pages: {events:?}"
        );
        let r = db.begin_read()?;
        let t = r.open_table("t")?;
        assert_eq!(t.len(), 202);
        assert_eq!(t.get(b"large")?, Some(&large[..]));
        Ok(())
    }

    /// A commit whose large record takes about the bytes of the pages it writes (new keys
    /// in key order with values of a kilobyte fill fresh leaves with nothing else) syncs
    /// rather than write its data twice; one that rewrites many leaves for small changes
    /// logs, and so does one whose record is small, whatever its pages.
    #[test]
    fn a_commit_logs_only_when_its_record_is_small_or_its_pages_outweigh_it() -> CairnResult<()> {
        let (storage, db) = recorded()?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        for i in 0..20_000u32 {
            w.open_table("t")?.insert(&i.to_be_bytes(), &[7u8; 40])?;
        }
        w.commit()?;
        let logs = |keys: &mut dyn Iterator<Item = u32>, value: &[u8]| -> CairnResult<bool> {
            storage.take();
            let mut w = db.begin_write()?;
            w.set_durability(Durability::Immediate);
            for k in keys {
                w.open_table("t")?.insert(&k.to_be_bytes(), value)?;
            }
            w.commit()?;
            let events = storage.take();
            Ok(events.iter().any(|e| matches!(e, Event::Durable { .. })))
        };
        // 200 new keys of 1,000 bytes past the last: about 50 fresh leaves for a 200 KB
        // record (the first commit of the log's cycle, which logs whatever pages past the
        // file's end it needs).
        assert!(!logs(&mut (20_000..20_200), &[9u8; 1000])?);
        // 200 scattered keys: 200 leaves (800 KiB) for a 10 KB record.
        assert!(logs(&mut (0..200).map(|i| i * 97), b"scattered")?);
        // One value of 64 KiB: its overflow run and a few pages, for as large a record.
        assert!(logs(&mut std::iter::once(30_000), &[5u8; 64 << 10])?);
        assert_eq!(db.begin_read()?.open_table("t")?.len(), 20_201);
        assert!(db.check()?.is_ok());
        Ok(())
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

    /// Each sync that starts a cycle of the commit log asks the storage to drop the log's
    /// cached pages (a direct write over one waits for a kernel worker thread): a commit
    /// that syncs and `Database::sync`; a commit that logs asks nothing.
    #[test]
    fn a_sync_that_starts_a_cycle_of_the_log_drops_its_cached_pages() -> CairnResult<()> {
        let mut recording = Recording::new()?;
        recording.durable_writes = true;
        let storage = Arc::new(recording);
        let db = Database::builder().with_storage(storage.clone(), true, None)?;
        let put = |durability, key: &[u8]| -> CairnResult<()> {
            let mut w = db.begin_write()?;
            w.set_durability(durability);
            w.open_or_create_table("t")?.insert(key, b"v")?;
            w.commit()
        };
        // The first commit after opening syncs.
        put(Durability::Immediate, b"a")?;
        let p = 4096;
        let log = db.stats()?.log_pages * p;
        assert!(log > 0);
        let dropped = storage.dropped();
        assert_eq!(dropped.len(), 1, "{dropped:?}");
        assert_eq!(dropped[0].1, log);
        let file_syncs = db.io_stats().file_syncs;
        put(Durability::Immediate, b"b")?;
        put(Durability::Eventual, b"c")?;
        assert_eq!(storage.dropped().len(), 1);
        assert_eq!(db.io_stats().file_syncs, file_syncs, "the puts logged");
        db.sync()?;
        assert_eq!(storage.dropped(), [dropped[0], dropped[0]]);
        Ok(())
    }
}
