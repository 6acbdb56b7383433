//! The freelist run: every free page, as runs of consecutive pages freed by the same
//! commit. Layout: docs/design.md#freelist.
//!
//! A contiguous run of pages: the page header, then `runs: u64`, then `runs` entries
//! `first: u64, count: u32, freed_by: u64` (`freed_by` 0: reusable now), then zeros.

use super::{PAGE_HEADER, PageKind, get_u32, get_u64, put_u32, put_u64, write_page_header};

const RUNS: usize = PAGE_HEADER;
const FIRST: usize = RUNS + 8;
const ENTRY_LEN: usize = 20;

/// A run of free pages: the first page, how many, and the commit that freed them.
pub(crate) type FreeRun = (u64, u32, u64);

/// Bytes a freelist of `runs` runs takes.
pub(crate) fn freelist_len(runs: usize) -> usize {
    FIRST + runs * ENTRY_LEN
}

/// Encodes `runs` into a buffer of `len` bytes (at least [`freelist_len`]; the rest is zero
/// padding, so that the record spans its whole run of pages).
pub(crate) fn encode_freelist(txid: u64, runs: &[FreeRun], len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len.max(freelist_len(runs.len()))];
    write_page_header(&mut b, PageKind::Freelist, 0, txid);
    put_u64(&mut b, RUNS, runs.len() as u64);
    for (i, &(first, count, freed_by)) in runs.iter().enumerate() {
        let at = FIRST + i * ENTRY_LEN;
        put_u64(&mut b, at, first);
        put_u32(&mut b, at + 8, count);
        put_u64(&mut b, at + 12, freed_by);
    }
    b
}

/// The runs of an encoded freelist, or `None` when its count claims more than its size.
/// The runs are not checked against the file: callers do that before using them.
pub(crate) fn decode_freelist(b: &[u8]) -> Option<Vec<FreeRun>> {
    let n = usize::try_from(get_u64(b, RUNS)?).ok()?;
    if n.checked_mul(ENTRY_LEN)?.checked_add(FIRST)? > b.len() {
        return None;
    }
    (0..n)
        .map(|i| {
            let at = FIRST + i * ENTRY_LEN;
            Some((get_u64(b, at)?, get_u32(b, at + 8)?, get_u64(b, at + 12)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_padding_and_length_mismatch() {
        let e = vec![(3, 1, 0), (9, 40_000, 17), (u64::MAX - 1, 1, 1)];
        let b = encode_freelist(5, &e, 0);
        assert_eq!(b.len(), freelist_len(3));
        assert_eq!(decode_freelist(&b), Some(e.clone()));
        assert_eq!(decode_freelist(&b[..b.len() - 1]), None);
        let padded = encode_freelist(5, &e, 4096);
        assert_eq!((padded.len(), decode_freelist(&padded)), (4096, Some(e)));
        assert_eq!(decode_freelist(&encode_freelist(1, &[], 0)), Some(vec![]));
        let mut huge = b.clone();
        put_u64(&mut huge, RUNS, u64::MAX);
        assert_eq!(decode_freelist(&huge), None);
    }
}
