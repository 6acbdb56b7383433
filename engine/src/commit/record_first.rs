//! A durable commit that will log submits its record before it is laid out: the record
//! holds the transaction's changes, not its pages, so the disk can take it while the nodes
//! are placed and encoded and the pages written. (A single-put durable commit spent about
//! 10 µs of its 26 µs before the record there: docs/benchmark-history.md, fifty-fourth
//! session.)
//!
//! Whether a commit logs is decided before it is laid out, then, from the state the
//! transaction leaves: the rules that depend on the layout only bound the file's size
//! (`WriteTxn::log_allows`), and what this commit changes there, the next one sees.

use std::io;

use crate::db::{Durability, LogState, WriterState};
use crate::error::{Error, Result};
use crate::format::{LOG_RECORD_HEADER, LOG_UNIT};
use crate::oplog::OpLog;
use crate::storage::Storage;
use crate::write_txn::WriteTxn;

use super::ALWAYS_LOGGED_RECORD;
use super::layout::{Laying, Layout};
use super::page_writes::{log_blocks, pages_in};
use super::record::{Record, Staged};

impl WriteTxn {
    /// This commit's record of `payload`, staged, when it goes before the commit is laid
    /// out: an Immediate commit whose record is the log's next, fits the log and is small
    /// enough to log whatever pages the commit writes, when the log does not move and the
    /// file's state lets the commit log.
    pub(super) fn record_first(
        &self,
        storage: &dyn Storage,
        laying: &Laying<'_>,
        payload: Option<&[u8]>,
    ) -> Result<Option<Staged>> {
        let page_size = self.base.page_size;
        let log = &laying.ws.log;
        let (Some(payload), Some(units)) = (payload, laying.record_units) else {
            return Ok(None);
        };
        let freeing = self.base.slot.freelist_run(page_size).count() as u64;
        let first = self.durability == Durability::Immediate
            && !self.compacting
            && laying.new_pages.is_none()
            && log.next == Some(self.txid)
            && log.head + units <= log.units(page_size)
            && units * LOG_UNIT as u64 <= ALWAYS_LOGGED_RECORD
            && self.log_allows(storage.len(), laying.ws, laying.original, freeing);
        if !first {
            return Ok(None);
        }
        let record = Record {
            txid: self.txid,
            durable_txid: laying.original.durable_txid,
            payload,
        };
        record.stage(storage, page_size, log).map(Some)
    }

    /// Runs `lay`, which lays the commit out (`None`: it has nothing to write), while
    /// `staged`, its record, goes to the disk, writing the pages outside the storage's
    /// blocks that the `log` touches meanwhile; those inside, then the slot, once the
    /// record is written (a buffered write must not change a block that a direct write is
    /// writing, and the slot follows every page, so that a reader process that finds it
    /// finds them). On failure, and when there is nothing to write, the record is cleared
    /// (`Staged::clear`).
    pub(super) fn lay_out_beside(
        &mut self,
        storage: &dyn Storage,
        log: &LogState,
        staged: &Staged,
        lay: impl FnOnce(&mut WriteTxn) -> Result<Option<Layout>>,
    ) -> Result<Option<Layout>> {
        let page_size = self.base.page_size;
        let p = page_size as u64;
        let near = log_blocks(storage, log.page * p, log.pages * p);
        let mut lay = Some(lay);
        let mut laid = None;
        let mut failure = None;
        let mut far = || {
            let lay = lay.take();
            let done = lay.map_or(Ok(None), |lay| lay(self)).and_then(|layout| {
                let Some(layout) = layout else {
                    return Ok(None);
                };
                let written = layout.written(storage, page_size);
                let (i, j) = pages_in(&layout.out, p, &near);
                written.pages(&layout.out[..i])?;
                written.pages(&layout.out[j..])?;
                let slot_now = i == j && !written.slot_in(&near);
                if slot_now {
                    written.slot()?;
                }
                Ok(Some((layout, (i, j), slot_now)))
            });
            match done {
                Ok(done) => {
                    laid = done;
                    Ok(())
                }
                Err(e) => {
                    let placeholder = io::Error::other(e.to_string());
                    failure = Some(e);
                    Err(placeholder)
                }
            }
        };
        let done = match (staged.write_while(storage, &mut far), laid) {
            (Ok(()), Some((layout, (i, j), slot_now))) => {
                let written = layout.written(storage, page_size);
                let after = written
                    .pages(&layout.out[i..j])
                    .and_then(|()| if slot_now { Ok(()) } else { written.slot() });
                after.map(|()| Some(layout)).map_err(Error::from)
            }
            (Ok(()), None) => Ok(None),
            (Err(e), _) => Err(failure.unwrap_or_else(|| e.into())),
        };
        match done {
            Ok(Some(layout)) => Ok(Some(layout)),
            // (A record of changes that changed nothing: its clearing must not fail
            // unseen, since nothing else would.)
            Ok(None) => Ok(staged.clear(storage).map(|()| None)?),
            Err(e) => {
                let _ = staged.clear(storage);
                Err(e)
            }
        }
    }

    /// Runs `apply`, which makes the transaction's changes, and writes the commit; its
    /// record, `expected` (what `apply` will record), goes to the disk before `apply` runs
    /// when it can ([`WriteTxn::record_first`], from the state before the changes), so
    /// that the disk takes it while the changes are made and the commit laid out. A
    /// transaction whose changes then record anything else fails, its record cleared.
    pub(crate) fn write_applying<T>(
        &mut self,
        original: &WriterState,
        expected: &[u8],
        apply: impl FnOnce(&mut WriteTxn) -> Result<T>,
    ) -> Result<(WriterState, T)> {
        let inner = self.inner.clone();
        let storage = inner.storage.as_ref();
        self.txid_in_range()?;
        self.dirty.flush_gathered()?;
        let ws = original.clone();
        let units = (LOG_RECORD_HEADER + expected.len()).div_ceil(LOG_UNIT) as u64;
        // (Nothing to record is nothing to apply: such a commit goes as any other.)
        let fresh = self
            .ops
            .as_ref()
            .is_some_and(|ops| ops.payload().is_empty());
        let staged = if fresh && !expected.is_empty() {
            let before = Laying {
                ws: &ws,
                original,
                changed: &[],
                new_pages: self.log_growth(&ws, original, Some(units)),
                record_units: Some(units),
                record_first: false,
            };
            self.record_first(storage, &before, Some(expected))
                .inspect_err(|_| inner.note_failed_sync())?
        } else {
            None
        };
        let Some(staged) = staged else {
            self.release_deferred();
            let applied = apply(self)?;
            return Ok((self.write_commit(original)?, applied));
        };
        let mut applied = None;
        let laid = self.lay_out_beside(storage, &ws.log, &staged, |txn| {
            // Nothing is written while the changes are made: a page written then could
            // share a block with the record. Without the storage at hand, the transaction
            // keeps its new overflow runs for the commit to write (with its pages, outside
            // the log's blocks), and spills nothing (its owned pages may pass its budget
            // by what the group changes).
            let runs_to = txn.dirty.storage.take();
            // (Pages no one needs any more are made reusable while the disk takes the
            // record: `WriteTxn::deferring_release`.)
            txn.release_deferred();
            let made = apply(txn);
            txn.dirty.storage = runs_to;
            applied = Some(made?);
            if txn.ops.as_ref().map(OpLog::payload) != Some(expected) {
                return Err(Error::corrupt(
                    0,
                    "internal: the changes made are not those recorded",
                ));
            }
            let Some(prepared) = txn.prepare(&ws, original)? else {
                return Ok(None);
            };
            // (The log moves at a sync only: a commit whose record went first does not
            // move it, and the next one decides again.)
            let laying = Laying {
                new_pages: None,
                record_first: true,
                ..prepared.laying(&ws, original)
            };
            txn.lay_out(storage, &laying).map(Some)
        });
        let laid = laid.inspect_err(|_| inner.note_failed_sync())?;
        let applied = applied.ok_or_else(|| Error::corrupt(0, "internal: nothing applied"))?;
        let ws = match laid {
            Some(laid) => self.write_laid(ws, original, Some(&staged), laid)?,
            None => self.commit_nothing(ws)?,
        };
        Ok((ws, applied))
    }
}
