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
//! less (0.75–0.90× the speed with 1 MiB pieces).

use std::io;
use std::ops::Range;

use crate::storage::Storage;

/// The bytes written before they are handed to write-back: a run is written in pieces of
/// this size, and adjacent small runs are gathered up to it.
pub(crate) const PIECE: u64 = 128 << 10;

/// The piece a run longer than [`PIECE`] is written and handed over in.
pub(crate) const LARGE_PIECE: u64 = 1 << 20;

/// The longest run gathered with the runs written after it into one write (see
/// [`EarlyWriteBack::write`]).
pub(crate) const GATHERED_RUN: u64 = PIECE / 4;

/// Where a transaction's overflow runs go, and whether they are handed to write-back.
#[derive(Debug, Default)]
pub(crate) struct EarlyWriteBack {
    /// Whether runs written now are handed to write-back (the transaction sets it before
    /// each change: on when its commit will sync).
    pub on: bool,
    /// Bytes written and not yet handed, when fewer than [`PIECE`]: a range of the file.
    pending: Option<Range<u64>>,
    /// Short runs not written yet, one after the other, the first at `gathered_at`.
    gathered: Vec<u8>,
    gathered_at: u64,
    /// Why writing gathered runs failed: they are lost, so every later write and flush
    /// fails too (the transaction cannot commit).
    failed: Option<(io::ErrorKind, String)>,
}

impl EarlyWriteBack {
    /// Writes `parts` one after the other at `offset` of `storage`; when on, in pieces of
    /// [`PIECE`] bytes ([`LARGE_PIECE`] when they are longer than one), each handed to
    /// write-back once written.
    ///
    /// A run of [`GATHERED_RUN`] bytes or fewer is gathered instead, with the runs after it
    /// that follow it in the file, and written with them once they make a piece, or when a
    /// run elsewhere comes, or at [`EarlyWriteBack::flush`]: one write for many short runs
    /// rather than one each. Until then [`EarlyWriteBack::gathered`] has its bytes.
    ///
    /// # Errors
    /// An I/O error writing this run or gathered ones; after one that lost gathered runs,
    /// every later call fails with it.
    pub fn write(&mut self, storage: &dyn Storage, offset: u64, parts: &[&[u8]]) -> io::Result<()> {
        self.failure()?;
        let total: u64 = parts.iter().map(|b| b.len() as u64).sum();
        let follows = self.gathered_at + self.gathered.len() as u64 == offset;
        if !self.gathered.is_empty() && (!follows || total > GATHERED_RUN) {
            self.flush(storage)?;
        }
        if total <= GATHERED_RUN {
            if self.gathered.is_empty() {
                self.gathered_at = offset;
            }
            for part in parts {
                self.gathered.extend_from_slice(part);
            }
            if self.gathered.len() as u64 >= PIECE {
                self.flush(storage)?;
            }
            return Ok(());
        }
        if !self.on {
            return storage.write_vectored(offset, parts);
        }
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

    /// Writes the gathered runs (handing them to write-back when on).
    ///
    /// # Errors
    /// An I/O error writing them: they are dropped (some of their pages may be freed and
    /// taken again after it), and this and every later write and flush fail.
    pub fn flush(&mut self, storage: &dyn Storage) -> io::Result<()> {
        self.failure()?;
        if self.gathered.is_empty() {
            return Ok(());
        }
        let at = self.gathered_at;
        let written = storage.write_vectored(at, &[&self.gathered]);
        let len = self.gathered.len() as u64;
        self.gathered.clear();
        if let Err(e) = written {
            self.failed = Some((e.kind(), e.to_string()));
            return Err(e);
        }
        if self.on {
            self.wrote(storage, at..at + len);
        }
        Ok(())
    }

    /// The error that lost gathered runs, if one did.
    fn failure(&self) -> io::Result<()> {
        match &self.failed {
            Some((kind, why)) => Err(io::Error::new(
                *kind,
                format!("an earlier write of the transaction's values failed: {why}"),
            )),
            None => Ok(()),
        }
    }

    /// The bytes of the run of `len` bytes at `offset` while it is gathered (not yet in the
    /// file); `None` once written.
    pub fn gathered(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let start = usize::try_from(offset.checked_sub(self.gathered_at)?).ok()?;
        self.gathered.get(start..start.checked_add(len)?)
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
    use super::{EarlyWriteBack, GATHERED_RUN, LARGE_PIECE, PIECE};
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

        // Runs of a piece or less, too long to be gathered in memory, are written whole
        // at once and handed to write-back together: the first waits for more, the next
        // one after it makes up a piece with it, and one elsewhere hands over what waits.
        let short = vec![1u8; (PIECE / 2) as usize];
        let next = at + total;
        w.write(&storage, next, &[&short[..]])?;
        assert_eq!(storage.take_vectored(), [(next, PIECE / 2)]);
        assert_eq!(storage.write_backs().len(), 3);
        w.write(&storage, next + PIECE / 2, &[&short[..]])?;
        assert_eq!(storage.write_backs()[3..], [(next, PIECE)]);
        w.write(&storage, 12 << 20, &[&[2u8; 4096][..]])?;
        w.write(&storage, 14 << 20, &[&[3u8; 4096][..]])?;
        w.flush(&storage)?;
        assert_eq!(storage.write_backs()[4..], [(12 << 20, 4096)]);
        Ok(())
    }

    /// Runs of [`GATHERED_RUN`] bytes or fewer that follow each other go in one write once
    /// they make a piece (their bytes readable from memory until then); a run elsewhere, a
    /// longer run and a flush write what is gathered first; off, nothing is handed over.
    #[test]
    fn short_runs_are_gathered_into_one_write() -> std::io::Result<()> {
        for on in [false, true] {
            let storage = Recording::new()?;
            storage.resize(8 << 20)?;
            let mut w = EarlyWriteBack {
                on,
                ..EarlyWriteBack::default()
            };
            let run = GATHERED_RUN / 4;
            let runs = PIECE / run;
            let at = 1 << 20;
            for i in 0..runs - 1 {
                let header = [i as u8; 16];
                let body = vec![i as u8 ^ 0x55; run as usize - 16];
                w.write(&storage, at + i * run, &[&header[..], &body[..]])?;
            }
            assert!(storage.take_vectored().is_empty(), "nothing written yet");
            let third = w.gathered(at + 2 * run, run as usize).map(<[u8]>::to_vec);
            assert_eq!(third.as_deref().map(|b| (b[0], b[16])), Some((2, 2 ^ 0x55)));
            assert_eq!(
                w.gathered(at + (runs - 1) * run, 1),
                None,
                "past what is gathered"
            );
            // The run that completes the piece writes it all at once.
            let last = vec![9u8; run as usize];
            w.write(&storage, at + (runs - 1) * run, &[&last[..]])?;
            assert_eq!(storage.take_vectored(), [(at, PIECE)]);
            assert_eq!(w.gathered(at, 1), None);
            let mut back = vec![0u8; run as usize];
            storage.read(at + 2 * run, &mut back)?;
            assert_eq!(Some(back), third);
            let handed = if on { vec![(at, PIECE)] } else { vec![] };
            assert_eq!(storage.write_backs(), handed);

            // A run elsewhere, then a longer one, each write what waits first.
            let short = [4u8; 4096];
            w.write(&storage, 4 << 20, &[&short[..]])?;
            w.write(&storage, 4 << 20, &[&short[..]])?;
            assert_eq!(storage.take_vectored(), [(4 << 20, 4096)]);
            let long = vec![5u8; (GATHERED_RUN + 1) as usize];
            w.write(&storage, 6 << 20, &[&long[..]])?;
            assert_eq!(
                storage.take_vectored(),
                [(4 << 20, 4096), (6 << 20, GATHERED_RUN + 1)]
            );
            w.write(&storage, 7 << 20, &[&short[..]])?;
            w.flush(&storage)?;
            w.flush(&storage)?;
            assert_eq!(storage.take_vectored(), [(7 << 20, 4096)]);
        }
        Ok(())
    }

    /// A failed write of gathered runs loses them: it fails, and so does every later write
    /// and flush (the transaction's commit then fails), rather than let a later flush write
    /// them over pages taken again since.
    #[test]
    fn a_failed_write_of_gathered_runs_fails_every_later_one() -> std::io::Result<()> {
        let storage = crate::storage::FaultyStorage::new(7)?;
        storage.resize(1 << 20)?;
        let mut w = EarlyWriteBack::default();
        w.write(storage.as_ref(), 4096, &[&[1u8; 4096][..]])?;
        storage.fail_at(storage.operations() + 1);
        assert!(w.flush(storage.as_ref()).is_err());
        assert!(w.flush(storage.as_ref()).is_err(), "the loss is kept");
        assert!(
            w.write(storage.as_ref(), 8192, &[&[2u8; 4096][..]])
                .is_err()
        );
        let mut back = [0u8; 4096];
        storage.read(4096, &mut back)?;
        assert_eq!(back, [0u8; 4096], "nothing written");
        Ok(())
    }

    /// Through the engine: 10 KiB values, gathered, read back in the transaction that put
    /// them (from memory, then from the file), committed, and read after reopening.
    #[test]
    fn gathered_values_read_back_before_and_after_their_write() -> crate::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("g.cairn");
        let value = |i: u32| -> Vec<u8> { (0..10_240u32).map(|j| (i * 7 + j) as u8).collect() };
        {
            let db = Database::create(&path)?;
            let mut w = db.begin_write()?;
            {
                let mut t = w.open_or_create_table("t")?;
                for i in 0..40u32 {
                    t.insert(&i.to_be_bytes(), &value(i))?;
                    // The value just put is gathered, an early one written by now.
                    assert_eq!(t.get(&i.to_be_bytes())?, Some(&value(i)[..]));
                }
                assert_eq!(t.get(&0u32.to_be_bytes())?, Some(&value(0)[..]));
                // Replaced and removed while gathered: the pages freed are taken again.
                t.insert(&39u32.to_be_bytes(), &value(100))?;
                t.remove(&38u32.to_be_bytes())?;
                t.insert(&40u32.to_be_bytes(), &value(40))?;
            }
            w.commit()?;
            let r = db.begin_read()?;
            let t = r.open_table("t")?;
            assert_eq!(t.get(&39u32.to_be_bytes())?, Some(&value(100)[..]));
            assert_eq!(t.get(&38u32.to_be_bytes())?, None);
        }
        let db = Database::open(&path)?;
        let r = db.begin_read()?;
        let t = r.open_table("t")?;
        for i in (0..38u32).chain([40]) {
            assert_eq!(t.get(&i.to_be_bytes())?, Some(&value(i)[..]), "{i}");
        }
        assert_eq!(t.get(&39u32.to_be_bytes())?, Some(&value(100)[..]));
        assert!(db.check()?.is_ok());
        Ok(())
    }
}
