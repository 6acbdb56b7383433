//! Overflow runs handed to the disk's write-back as they are written, when the commit
//! will sync them anyway: the disk then takes a large value while the writer is still
//! copying the rest of it (or the next values), instead of all of it at the commit's
//! sync. One durable transaction per 1 MiB value ran 15–19 % faster, 32 MiB of 10 KiB to
//! 1 MiB values in one durable transaction 1.35–1.9× faster (docs/benchmark-history.md,
//! thirtieth session). Only for a commit that will sync: an Eventual one leaves its pages
//! for a later sync (or the kernel's own write-back), and one that logs holds at most
//! 128 KiB of values, less than a piece. (Pieces of 64 KiB made durable puts of 128 KiB
//! values a tenth slower; 256 and 512 KiB gained less than 128 KiB on 1 MiB values.)
//!
//! A run longer than a piece (one large value) goes in pieces of [`LARGE_PIECE`] instead:
//! fewer, larger writes and hand-overs. On the AMD EPYC machine (fifty-seventh session,
//! medians of five to eight alternated runs) one durable transaction per 1 MiB value ran
//! 1.20–1.27× faster, per 4 MiB or 8 MiB value 1.21–1.23×, 256 KiB values in one durable
//! transaction 1.12×; smaller values, gathered into pieces of [`PIECE`] as before, ran
//! 6–10 % slower when gathered into 1 MiB, and whole values past 1 MiB in one piece gained
//! less (0.92–1.09× against 1 MiB pieces).

use std::io;
use std::ops::Range;

use crate::storage::Storage;

/// The bytes written before they are handed to write-back: a run is written in pieces of
/// this size, and adjacent small runs are gathered up to it.
pub(crate) const PIECE: u64 = 128 << 10;

/// The piece a run longer than [`PIECE`] is written and handed over in.
pub(crate) const LARGE_PIECE: u64 = 1 << 20;

/// Where a transaction's overflow runs go, and whether they are handed to write-back.
#[derive(Debug, Default)]
pub(crate) struct EarlyWriteBack {
    /// Whether runs written now are handed to write-back (the transaction sets it before
    /// each change: on when its commit will sync).
    pub on: bool,
    /// Bytes written and not yet handed, when fewer than [`PIECE`]: a range of the file.
    pending: Option<Range<u64>>,
}

impl EarlyWriteBack {
    /// Writes `parts` one after the other at `offset` of `storage`; when on, in pieces of
    /// [`PIECE`] bytes ([`LARGE_PIECE`] when they are longer than one), each handed to
    /// write-back once written.
    pub fn write(&mut self, storage: &dyn Storage, offset: u64, parts: &[&[u8]]) -> io::Result<()> {
        if !self.on {
            return storage.write_vectored(offset, parts);
        }
        let total: u64 = parts.iter().map(|b| b.len() as u64).sum();
        let piece_len = if total > PIECE { LARGE_PIECE } else { PIECE };
        let mut piece = Vec::with_capacity(parts.len());
        let mut at = 0;
        while at < total {
            let end = (at + piece_len).min(total);
            piece.clear();
            slices_in(parts, at..end, &mut piece);
            storage.write_vectored(offset + at, &piece)?;
            self.wrote(storage, offset + at..offset + end);
            at = end;
        }
        Ok(())
    }

    /// Adds `range`, just written, to the pending bytes, and hands them to write-back once
    /// they are [`PIECE`] bytes (or when `range` does not follow them).
    fn wrote(&mut self, storage: &dyn Storage, range: Range<u64>) {
        let range = match self.pending.take() {
            Some(p) if p.end == range.start => p.start..range.end,
            Some(p) => {
                storage.start_write_back(p.start, p.end - p.start);
                range
            }
            None => range,
        };
        if range.end - range.start >= PIECE {
            storage.start_write_back(range.start, range.end - range.start);
        } else {
            self.pending = Some(range);
        }
    }
}

/// The parts of `parts` (taken one after the other) that lie in bytes `range`, pushed to
/// `out`.
fn slices_in<'a>(parts: &[&'a [u8]], range: Range<u64>, out: &mut Vec<&'a [u8]>) {
    let mut start = 0u64;
    for part in parts {
        let end = start + part.len() as u64;
        let (lo, hi) = (range.start.max(start), range.end.min(end));
        if lo < hi {
            out.push(&part[(lo - start) as usize..(hi - start) as usize]);
        }
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::{EarlyWriteBack, LARGE_PIECE, PIECE};
    use crate::storage::{Recording, Storage};
    use crate::{Database, Durability};
    use std::sync::Arc;

    /// Only a durable transaction whose record is too large to log (its commit syncs)
    /// hands its runs to write-back: not an Eventual one, nor one that logs.
    #[test]
    fn only_a_commit_that_will_sync_writes_its_runs_back_early() -> crate::Result<()> {
        let mut recording = Recording::new()?;
        recording.durable_writes = true;
        let storage = Arc::new(recording);
        let db = Database::builder().with_storage(storage.clone(), true, None)?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        let large = vec![5u8; 1 << 20];
        let put = |durability, key: &[u8], values: &[&[u8]]| -> crate::Result<usize> {
            let before = storage.write_backs().len();
            let mut w = db.begin_write()?;
            w.set_durability(durability);
            for (i, v) in values.iter().enumerate() {
                let mut k = key.to_vec();
                k.push(i as u8);
                w.open_table("t")?.insert(&k, v)?;
            }
            w.commit()?;
            Ok(storage.write_backs().len() - before)
        };
        assert_eq!(put(Durability::Eventual, b"e", &[&large])?, 0);
        assert_eq!(
            put(Durability::Immediate, b"s", &[b"v", &large[..64 << 10]])?,
            0
        );
        let pieces = put(Durability::Immediate, b"d", &[&large])?;
        assert!(pieces >= 1, "{pieces}");
        // The bytes are there whichever way they went.
        let r = db.begin_read()?;
        assert_eq!(r.open_table("t")?.get(b"d\0")?, Some(&large[..]));
        assert_eq!(r.open_table("t")?.get(b"e\0")?, Some(&large[..]));
        Ok(())
    }

    /// Off: one write, no write-back. On: a long run goes in large pieces, each handed to
    /// write-back; short adjacent runs are gathered until they make a piece, and a run
    /// elsewhere hands the gathered ones over first; the bytes land either way.
    #[test]
    fn runs_go_to_write_back_in_pieces_when_on() -> std::io::Result<()> {
        let storage = Recording::new()?;
        storage.resize(16 << 20)?;
        let value: Vec<u8> = (0..(2500u32 << 10)).map(|i| (i % 251) as u8).collect();
        let header = [7u8; 16];
        let parts = [&header[..], &value[..], &[0u8; 100][..]];
        let total = 16 + value.len() as u64 + 100;
        let mut w = EarlyWriteBack::default();
        w.write(&storage, 4096, &parts)?;
        assert_eq!(storage.take_vectored(), [(4096, total)]);
        assert!(storage.write_backs().is_empty());

        w.on = true;
        let at = 4 << 20;
        w.write(&storage, at, &parts)?;
        let pieces = storage.take_vectored();
        let tail = total - 2 * LARGE_PIECE;
        assert_eq!(
            pieces,
            [
                (at, LARGE_PIECE),
                (at + LARGE_PIECE, LARGE_PIECE),
                (at + 2 * LARGE_PIECE, tail)
            ]
        );
        // The last piece, longer than a small one, is handed over too.
        assert!(tail >= PIECE);
        assert_eq!(
            storage.write_backs(),
            [
                (at, LARGE_PIECE),
                (at + LARGE_PIECE, LARGE_PIECE),
                (at + 2 * LARGE_PIECE, tail)
            ]
        );
        let mut back = vec![0u8; total as usize];
        storage.read(at, &mut back)?;
        assert_eq!(&back[..16], &header);
        assert_eq!(&back[16..16 + value.len()], &value[..]);

        // Short runs (a piece or less) are written whole and gathered: the first waits
        // for more, the next one after it makes up a piece with it, and one elsewhere
        // hands over what waits.
        let short = vec![1u8; (PIECE / 2) as usize];
        let next = at + total;
        w.write(&storage, next, &[&short[..]])?;
        assert_eq!(storage.take_vectored(), [(next, PIECE / 2)]);
        assert_eq!(storage.write_backs().len(), 3);
        w.write(&storage, next + PIECE / 2, &[&short[..]])?;
        assert_eq!(storage.write_backs()[3..], [(next, PIECE)]);
        w.write(&storage, 12 << 20, &[&[2u8; 4096][..]])?;
        w.write(&storage, 14 << 20, &[&[3u8; 4096][..]])?;
        assert_eq!(storage.write_backs()[4..], [(12 << 20, 4096)]);
        Ok(())
    }
}
