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

use crate::db::Durability;
use crate::error::{Error, Result};
use crate::format::LOG_UNIT;
use crate::storage::Storage;
use crate::write_txn::WriteTxn;

use super::ALWAYS_LOGGED_RECORD;
use super::layout::{Laying, Layout};
use super::page_writes::{log_blocks, pages_in};
use super::record::{Record, Staged};

impl WriteTxn {
    /// This commit's record, staged, when it goes before the commit is laid out: an
    /// Immediate commit whose record is the log's next, fits the log and is small enough to
    /// log whatever pages the commit writes, when the log does not move and the file's
    /// state lets the commit log.
    pub(super) fn record_first(
        &self,
        storage: &dyn Storage,
        laying: &Laying<'_>,
    ) -> Result<Option<Staged>> {
        let page_size = self.base.page_size;
        let log = &laying.ws.log;
        let (Some(ops), Some(units)) = (&self.ops, laying.record_units) else {
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
            payload: ops.payload(),
        };
        record.stage(storage, page_size, log).map(Some)
    }

    /// Lays the commit out while `staged`, its record, goes to the disk, writing the pages
    /// outside the storage's blocks that the log touches meanwhile; those inside, then the
    /// slot, once the record is written (a buffered write must not change a block that a
    /// direct write is writing, and the slot follows every page, so that a reader process
    /// that finds it finds them). On failure the record is cleared (`Staged::clear`).
    pub(super) fn lay_out_beside(
        &mut self,
        storage: &dyn Storage,
        laying: &Laying<'_>,
        staged: &Staged,
    ) -> Result<Layout> {
        let page_size = self.base.page_size;
        let p = page_size as u64;
        let near = log_blocks(storage, laying.ws.log.page * p, laying.ws.log.pages * p);
        let mut laid = None;
        let mut failure = None;
        let mut far = || {
            let done = self.lay_out(storage, laying).and_then(|layout| {
                let written = layout.written(storage, page_size);
                let (i, j) = pages_in(&layout.out, p, &near);
                written.pages(&layout.out[..i])?;
                written.pages(&layout.out[j..])?;
                let slot_now = i == j && !written.slot_in(&near);
                if slot_now {
                    written.slot()?;
                }
                Ok((layout, (i, j), slot_now))
            });
            match done {
                Ok(done) => {
                    laid = Some(done);
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
                after.map(|()| layout).map_err(Error::from)
            }
            (Err(e), _) => Err(failure.unwrap_or_else(|| e.into())),
            (Ok(()), None) => Err(Error::corrupt(0, "internal: a commit was not laid out")),
        };
        if done.is_err() {
            staged.clear(storage);
        }
        done
    }
}
