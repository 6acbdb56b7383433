//! How a commit's pages reach the file: adjacent pages joined into vectored writes unless
//! the commit is scattered, and which of them share the storage's blocks with the commit
//! log (those are written before the log's record is submitted).

use crate::btree::PIECE;
use crate::format::{SLOT_BYTES, ZERO_PAGE};
use crate::pager::VerifiedSet;
use crate::storage::Storage;

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
pub(super) fn pages_per_write(out: &[(u64, Box<[u8]>)], page_size: usize) -> usize {
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
/// to the next page written. With `write_back` (the commit syncs next), every
/// [`PIECE`] bytes written are handed to the disk's write-back, so that the disk works
/// while the rest is copied (see `btree/early_write_back.rs`).
pub(super) fn write_pages(
    storage: &dyn Storage,
    out: &[(u64, Box<[u8]>)],
    page_size: usize,
    max_pages: usize,
    verified: &VerifiedSet,
    write_back: bool,
) -> std::io::Result<()> {
    let p = page_size as u64;
    let mut i = 0;
    let mut bufs: Vec<&[u8]> = Vec::new();
    // The bytes written since the last hand-over, and where the first and last of them lie.
    let (mut since, mut lo, mut hi) = (0u64, u64::MAX, 0u64);
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
        if write_back {
            since += (next - first) * p;
            (lo, hi) = (lo.min(first * p), hi.max(next * p));
            if since >= PIECE {
                storage.start_write_back(lo, hi - lo);
                (since, lo, hi) = (0, u64::MAX, 0);
            }
        }
        i = j;
    }
    Ok(())
}

/// What a commit writes beside its record: its pages, sorted, and its slot.
pub(super) struct Written<'a> {
    pub storage: &'a dyn Storage,
    pub out: &'a [(u64, Box<[u8]>)],
    pub page_size: usize,
    /// At most this many pages in one write (see [`pages_per_write`]).
    pub per_write: usize,
    /// The set the written pages leave (they are verified again when read).
    pub verified: &'a VerifiedSet,
    /// Whether the pages go to the disk's write-back as they are written (the commit syncs).
    pub write_back: bool,
    /// Where the slot goes, and its bytes.
    pub slot_at: u64,
    pub slot: [u8; SLOT_BYTES],
}

impl Written<'_> {
    /// Writes `out`, some of this commit's pages (see [`write_pages`]).
    pub fn pages(&self, out: &[(u64, Box<[u8]>)]) -> std::io::Result<()> {
        write_pages(
            self.storage,
            out,
            self.page_size,
            self.per_write,
            self.verified,
            self.write_back,
        )
    }

    /// Writes the commit's slot.
    pub fn slot(&self) -> std::io::Result<()> {
        self.storage.write(self.slot_at, &self.slot)
    }

    /// Whether the slot overlaps `bytes`.
    pub fn slot_in(&self, bytes: &std::ops::Range<u64>) -> bool {
        self.slot_at < bytes.end && self.slot_at + SLOT_BYTES as u64 > bytes.start
    }
}

/// The bytes of the storage's overlap blocks (see [`Storage::overlap_block`]) that the log
/// of `log_len` bytes at `log_start` touches.
pub(super) fn log_blocks(
    storage: &dyn Storage,
    log_start: u64,
    log_len: u64,
) -> std::ops::Range<u64> {
    let block = storage.overlap_block().max(1);
    let end = (log_start + log_len)
        .checked_next_multiple_of(block)
        .unwrap_or(u64::MAX);
    log_start / block * block..end
}

/// The indexes `i..j` of `out`'s pages (sorted, of `p` bytes) that overlap `bytes`.
pub(super) fn pages_in(
    out: &[(u64, Box<[u8]>)],
    p: u64,
    bytes: &std::ops::Range<u64>,
) -> (usize, usize) {
    let i = out.partition_point(|(page, b)| page * p + b.len() as u64 <= bytes.start);
    let j = i + out[i..].partition_point(|(page, _)| page * p < bytes.end);
    (i, j)
}

#[cfg(test)]
mod tests {
    use crate::Result as CairnResult;
    use crate::pager::VerifiedSet;
    use crate::storage::{Recording, Storage};

    /// A commit that syncs next hands every `PIECE` bytes of pages it writes to the disk's
    /// write-back, with the range of the file they lie in; one that does not, none.
    #[test]
    fn a_commit_that_syncs_hands_its_pages_to_write_back_as_it_writes_them() -> CairnResult<()> {
        const P: usize = 4096;
        let pieces = (crate::btree::PIECE / P as u64) as usize;
        // Scattered pages (one write each): every other page from 10 on, 2.5 pieces' worth.
        let out: Vec<(u64, Box<[u8]>)> = (0..pieces * 5 / 2)
            .map(|i| (10 + 2 * i as u64, vec![1u8; P].into_boxed_slice()))
            .collect();
        for write_back in [false, true] {
            let storage = Recording::new()?;
            storage.resize(4 << 20)?;
            let verified = VerifiedSet::with_capacity(1024);
            super::write_pages(&storage, &out, P, 1, &verified, write_back)?;
            let hints = storage.write_backs();
            if !write_back {
                assert!(hints.is_empty());
                continue;
            }
            let page = |i: usize| out[i].0 * P as u64;
            assert_eq!(
                hints,
                [
                    (page(0), page(pieces - 1) + P as u64 - page(0)),
                    (page(pieces), page(2 * pieces - 1) + P as u64 - page(pieces)),
                ]
            );
        }
        Ok(())
    }

    /// A scattered commit writes each page alone, its long run too; a commit of long runs
    /// joins adjacent pages; a buffer of several pages counts as its pages and goes whole.
    #[test]
    fn a_scattered_commits_pages_go_one_per_write_and_long_runs_together() -> CairnResult<()> {
        const P: usize = 512;
        let page = |id: u64, pages: usize| (id, vec![id as u8; pages * P].into_boxed_slice());
        let write = |out: &[(u64, Box<[u8]>)]| -> CairnResult<Vec<(u64, u64)>> {
            let storage = Recording::new()?;
            storage.resize(200 * P as u64)?;
            let verified = VerifiedSet::with_capacity(200);
            for (id, _) in out {
                verified.insert(*id);
            }
            let per_write = super::pages_per_write(out, P);
            super::write_pages(&storage, out, P, per_write, &verified, false)?;
            for (id, bytes) in out {
                let mut back = vec![0u8; bytes.len()];
                storage.read(id * P as u64, &mut back)?;
                assert_eq!(&back[..], &bytes[..], "page {id}");
                assert!(!verified.contains(*id), "page {id} is to be verified again");
            }
            Ok(storage.take_vectored())
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
}
