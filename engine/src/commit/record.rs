//! Step 6 of a logged commit: appending its record to the commit log. A durable record
//! goes to the disk while the commit's pages are written (they cost the commit no time
//! then), all but those in the storage's blocks that the log touches, which go first —
//! or, for a commit whose record goes before it is laid out (`record_first.rs`), after.
//! A reader process can find the record before the slot: while a writer holds the file,
//! readers take the log for the writer's business (`db.rs`).

use std::io;

use crate::db::LogState;
use crate::error::Result;
use crate::format::{LOG_UNIT, encode_record};
use crate::storage::Storage;

use super::page_writes::{Written, log_blocks, pages_in};

/// A commit's record, before it is encoded at the log's head.
pub(super) struct Record<'a> {
    pub txid: u64,
    /// The newest durable commit, which recovery replays the log after.
    pub durable_txid: u64,
    /// The commit's changes (`oplog.rs`).
    pub payload: &'a [u8],
}

impl Record<'_> {
    /// Encodes the record where the log's head is: its offset in the file and its bytes.
    fn encode(&self, page_size: usize, log: &LogState) -> (u64, Vec<u8>) {
        let at = log.page * page_size as u64 + log.head * LOG_UNIT as u64;
        // (What completed writes made durable: recovery takes a broken record that a
        // later one says was durable for damage, not for a write a power cut tore.)
        let bytes = encode_record(
            at / LOG_UNIT as u64,
            self.txid,
            self.durable_txid,
            log.logged,
            self.payload,
        );
        (at, bytes)
    }

    /// An Eventual commit: the pages, the slot, then the record, each a plain write. The
    /// next durable record takes this one with it.
    pub fn append(&self, written: &Written<'_>, log: &mut LogState) -> Result<()> {
        let (at, record) = self.encode(written.page_size, log);
        written.pages(written.out)?;
        written.slot()?;
        written.storage.write(at, &record)?;
        log.unsynced.get_or_insert(log.head);
        log.head += (record.len() / LOG_UNIT) as u64;
        log.next = Some(self.txid + 1);
        Ok(())
    }

    /// A durable commit's record, made ready for its one durable write: with the Eventual
    /// commits' records since the last durable one, read back (a durable record never
    /// follows one that is not).
    pub fn stage(&self, storage: &dyn Storage, page_size: usize, log: &LogState) -> Result<Staged> {
        let (p, unit) = (page_size as u64, LOG_UNIT as u64);
        let log_start = log.page * p;
        let (at, record) = self.encode(page_size, log);
        let units = (record.len() / LOG_UNIT) as u64;
        let (from, bytes) = match log.unsynced {
            Some(from) => {
                let mut stretch = vec![0u8; ((log.head - from) * unit) as usize];
                storage.read(log_start + from * unit, &mut stretch)?;
                stretch.extend_from_slice(&record);
                (log_start + from * unit, stretch)
            }
            None => (at, record),
        };
        Ok(Staged {
            txid: self.txid,
            at,
            from,
            bytes,
            units,
        })
    }

    /// An Immediate commit laid out before its record: the record in one durable write,
    /// while the pages and the slot are written.
    pub fn append_durable(&self, written: &Written<'_>, log: &mut LogState) -> Result<()> {
        let storage = written.storage;
        let p = written.page_size as u64;
        let staged = self.stage(storage, written.page_size, log)?;
        // What shares a block with the log goes first; the rest during the record.
        let out = written.out;
        let near = log_blocks(storage, log.page * p, log.pages * p);
        let (i, j) = pages_in(out, p, &near);
        let slot_near = written.slot_in(&near);
        written.pages(&out[i..j])?;
        let mut write_far = || {
            written.pages(&out[..i])?;
            written.pages(&out[j..])?;
            if slot_near { Ok(()) } else { written.slot() }
        };
        // (The slot follows every page, so that a reader process that finds it finds
        // them: one in the log's blocks waits for the record.)
        let done = staged
            .write_while(storage, &mut write_far)
            .and_then(|()| if slot_near { written.slot() } else { Ok(()) });
        if let Err(e) = done {
            let _ = staged.clear(storage);
            return Err(e.into());
        }
        staged.landed(log);
        Ok(())
    }
}

/// A durable record ready to be written ([`Record::stage`]).
pub(super) struct Staged {
    txid: u64,
    /// Where the record itself starts.
    at: u64,
    /// Where the write starts (at the Eventual records before it, if any), and its bytes.
    from: u64,
    bytes: Vec<u8>,
    /// The log units the record itself takes.
    units: u64,
}

impl Staged {
    /// Writes the record durably while `meanwhile` runs (see
    /// [`Storage::write_durable_while`]).
    pub fn write_while(
        &self,
        storage: &dyn Storage,
        meanwhile: &mut dyn FnMut() -> io::Result<()>,
    ) -> io::Result<()> {
        storage.write_durable_while(self.from, &self.bytes, meanwhile)
    }

    /// After a failure: the record may have reached the disk although what was written
    /// during or after it did not, so its first unit is cleared, so that recovery does not
    /// replay a commit reported as failed. (Should that write fail too, the next commit,
    /// whose id follows the failed one's, goes unlogged and syncs: recovery then starts
    /// after it.)
    pub fn clear(&self, storage: &dyn Storage) -> io::Result<()> {
        storage.write_durable(self.at, &[0u8; LOG_UNIT])
    }

    /// The record is durable: the log's head moves past it.
    pub fn landed(&self, log: &mut LogState) {
        log.unsynced = None;
        log.logged = self.txid;
        log.head += self.units;
        log.next = Some(self.txid + 1);
    }
}
