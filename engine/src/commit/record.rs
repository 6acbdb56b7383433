//! Step 6 of a logged commit: appending its record to the commit log. A durable record
//! goes to the disk while the commit's pages are written (they cost the commit no time
//! then), all but those in the storage's blocks that the log touches, which go first. A
//! reader process can find the record before the slot: while a writer holds the file,
//! readers take the log for the writer's business (`db.rs`).

use crate::db::LogState;
use crate::error::Result;
use crate::format::{LOG_UNIT, SLOT_BYTES, encode_record};

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
    fn encode(&self, written: &Written<'_>, log: &LogState) -> (u64, Vec<u8>) {
        let at = log.page * written.page_size as u64 + log.head * LOG_UNIT as u64;
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
        let (at, record) = self.encode(written, log);
        written.pages(written.out)?;
        written.slot()?;
        written.storage.write(at, &record)?;
        log.unsynced.get_or_insert(log.head);
        log.head += (record.len() / LOG_UNIT) as u64;
        log.next = Some(self.txid + 1);
        Ok(())
    }

    /// An Immediate commit: the record, with the Eventual commits' records since the last
    /// durable one, in one durable write, while the pages and the slot are written.
    pub fn append_durable(&self, written: &Written<'_>, log: &mut LogState) -> Result<()> {
        let storage = written.storage;
        let (p, unit) = (written.page_size as u64, LOG_UNIT as u64);
        let log_start = log.page * p;
        let (at, record) = self.encode(written, log);
        let units = (record.len() / LOG_UNIT) as u64;
        // The Eventual commits' records since the last durable one, read back, go with
        // this one: a durable record never follows one that is not.
        let (from, bytes) = match log.unsynced {
            Some(from) => {
                let mut stretch = vec![0u8; ((log.head - from) * unit) as usize];
                storage.read(log_start + from * unit, &mut stretch)?;
                stretch.extend_from_slice(&record);
                (log_start + from * unit, stretch)
            }
            None => (at, record),
        };
        // What shares a block with the log goes first; the rest during the record.
        let out = written.out;
        let near = log_blocks(storage, log_start, log.pages * p);
        let (i, j) = pages_in(out, p, &near);
        let slot_near =
            written.slot_at < near.end && written.slot_at + SLOT_BYTES as u64 > near.start;
        written.pages(&out[i..j])?;
        let mut write_far = || {
            written.pages(&out[..i])?;
            written.pages(&out[j..])?;
            if slot_near { Ok(()) } else { written.slot() }
        };
        // (The slot follows every page, so that a reader process that finds it finds
        // them: one in the log's blocks waits for the record.)
        let done = storage
            .write_durable_while(from, &bytes, &mut write_far)
            .and_then(|()| if slot_near { written.slot() } else { Ok(()) });
        if let Err(e) = done {
            // The record may have reached the disk although what was written during or
            // after it did not: its first unit is cleared, so that recovery does not
            // replay a commit reported as failed. (Should that write fail too, the next
            // commit writes its own record over it.)
            let _ = storage.write_durable(at, &[0u8; LOG_UNIT]);
            return Err(e.into());
        }
        log.unsynced = None;
        log.logged = self.txid;
        log.head += units;
        log.next = Some(self.txid + 1);
        Ok(())
    }
}
