//! The freelist run: every free page with the transaction that freed it.
//! Layout: docs/design.md#freelist.
//!
//! A contiguous run of pages: the page header, then `entries: u64`, then `entries` pairs
//! `page: u64, freed_by: u64` (0 for pages free since before the oldest state kept).

use super::{PAGE_HEADER, PageKind, get_u64, put_u64, write_page_header};

const ENTRIES: usize = PAGE_HEADER;
const FIRST: usize = ENTRIES + 8;
const ENTRY_LEN: usize = 16;

/// Bytes a freelist of `n` entries takes.
pub(crate) fn freelist_len(n: usize) -> usize {
    FIRST + n * ENTRY_LEN
}

/// Encodes `entries` into a buffer of `len` bytes (at least [`freelist_len`]; the rest
/// is zero padding, so that the record spans its whole run of pages).
pub(crate) fn encode_freelist(txid: u64, entries: &[(u64, u64)], len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len.max(freelist_len(entries.len()))];
    write_page_header(&mut b, PageKind::Freelist, 0, txid);
    put_u64(&mut b, ENTRIES, entries.len() as u64);
    for (i, (page, freed_by)) in entries.iter().enumerate() {
        put_u64(&mut b, FIRST + i * ENTRY_LEN, *page);
        put_u64(&mut b, FIRST + i * ENTRY_LEN + 8, *freed_by);
    }
    b
}

/// The entries of an encoded freelist, or `None` when its length field claims more than
/// its size.
pub(crate) fn decode_freelist(b: &[u8]) -> Option<Vec<(u64, u64)>> {
    let n = usize::try_from(get_u64(b, ENTRIES)?).ok()?;
    if n.checked_mul(ENTRY_LEN)?.checked_add(FIRST)? > b.len() {
        return None;
    }
    (0..n)
        .map(|i| {
            Some((
                get_u64(b, FIRST + i * ENTRY_LEN)?,
                get_u64(b, FIRST + i * ENTRY_LEN + 8)?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_length_mismatch() {
        let e = vec![(3, 0), (9, 17), (u64::MAX, 1)];
        let b = encode_freelist(5, &e, 0);
        assert_eq!(b.len(), freelist_len(3));
        assert_eq!(decode_freelist(&b), Some(e.clone()));
        assert_eq!(decode_freelist(&b[..b.len() - 1]), None);
        let padded = encode_freelist(5, &e, 4096);
        assert_eq!((padded.len(), decode_freelist(&padded)), (4096, Some(e)));
        assert_eq!(decode_freelist(&encode_freelist(1, &[], 0)), Some(vec![]));
        let mut huge = b.clone();
        put_u64(&mut huge, ENTRIES, u64::MAX);
        assert_eq!(decode_freelist(&huge), None);
    }
}
