//! Leaf pages: sorted key/value entries behind a slot array.
//! Layout: docs/design.md#leaf-page.
//!
//! The page is header, then `count` little-endian `u16` offsets (the slot array, in key
//! order), then free space, then the entries, packed at the end of the page (in key order
//! when the page is written whole by [`encode_leaf`]; in any order once edited in place).
//! An entry is `key_len: u16, flags: u8, value_len: u32, key`, then the value itself or,
//! when flag bit 0 is set, an overflow reference `first_page: u64, crc: u32`.

use super::page::page_count;
use super::{
    LEAF_HEADER, OverflowRef, PageKind, get_u16, get_u32, get_u64, put_u16, put_u32, put_u64,
    write_page_header,
};
use crate::error::{Error, Result};

const ENTRY_HEADER: usize = 7;
const OVERFLOW_REF: usize = 12;
const FLAG_OVERFLOW: u8 = 1;

/// A stored value: its bytes in the leaf, or where its overflow run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueRef<'a> {
    Inline(&'a [u8]),
    Overflow(OverflowRef),
}

/// Bytes an entry takes in a leaf, its slot included.
pub(crate) fn leaf_entry_size(key_len: usize, value: &ValueRef<'_>) -> usize {
    2 + ENTRY_HEADER
        + key_len
        + match value {
            ValueRef::Inline(v) => v.len(),
            ValueRef::Overflow(_) => OVERFLOW_REF,
        }
}

/// A read-only view of a leaf page. Every accessor checks its bounds: a damaged page gives
/// a corruption error, never a panic.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeafPage<'a> {
    bytes: &'a [u8],
    id: u64,
    count: usize,
}

impl<'a> LeafPage<'a> {
    pub fn new(bytes: &'a [u8], id: u64) -> Result<LeafPage<'a>> {
        let count = page_count(bytes).map_or(0, usize::from);
        if LEAF_HEADER + 2 * count > bytes.len() {
            return Err(Error::corrupt(id, format!("leaf claims {count} entries")));
        }
        Ok(LeafPage { bytes, id, count })
    }

    /// A view of a page whose header says it holds `count` entries (a leaf being edited).
    pub(super) fn trusted(bytes: &'a [u8], id: u64, count: usize) -> LeafPage<'a> {
        LeafPage { bytes, id, count }
    }

    pub fn len(&self) -> usize {
        self.count
    }

    /// The page's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether `self` and `other` are views of the same page.
    pub fn same(&self, other: &LeafPage<'_>) -> bool {
        self.id == other.id
    }

    /// The page's bytes.
    pub(super) fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    fn bad(&self, i: usize) -> Error {
        Error::corrupt(self.id, format!("leaf entry {i} out of bounds"))
    }

    /// Where entry `i` starts, read from its slot.
    #[inline(always)]
    pub(super) fn slot(&self, i: usize) -> Option<usize> {
        get_u16(self.bytes, LEAF_HEADER + 2 * i).map(usize::from)
    }

    /// Where entry `i` starts and how many bytes it takes (its slot not included), when it
    /// lies inside the page.
    pub(super) fn extent(&self, i: usize) -> Option<(usize, usize)> {
        let b = self.bytes;
        let at = self.slot(i)?;
        let (klen, flags, vlen) = (get_u16(b, at)?, *b.get(at + 2)?, get_u32(b, at + 3)?);
        let value = if flags & FLAG_OVERFLOW != 0 {
            OVERFLOW_REF
        } else {
            vlen as usize
        };
        let len = ENTRY_HEADER + usize::from(klen) + value;
        (at.checked_add(len)? <= b.len()).then_some((at, len))
    }

    fn entry_start(&self, i: usize) -> Result<usize> {
        self.slot(i).ok_or_else(|| self.bad(i))
    }

    #[inline(always)]
    fn key_at(&self, i: usize) -> Option<&'a [u8]> {
        let at = self.slot(i)?;
        let klen = usize::from(get_u16(self.bytes, at)?);
        let start = at + ENTRY_HEADER;
        self.bytes.get(start..start + klen)
    }

    pub fn key(&self, i: usize) -> Result<&'a [u8]> {
        self.key_at(i).ok_or_else(|| self.bad(i))
    }

    pub fn entry(&self, i: usize) -> Result<(&'a [u8], ValueRef<'a>)> {
        let at = self.entry_start(i)?;
        let b = self.bytes;
        let (Some(klen), Some(&flags), Some(vlen)) =
            (get_u16(b, at), b.get(at + 2), get_u32(b, at + 3))
        else {
            return Err(self.bad(i));
        };
        let kstart = at + ENTRY_HEADER;
        let vstart = kstart + klen as usize;
        let key = b.get(kstart..vstart).ok_or_else(|| self.bad(i))?;
        let value = if flags & FLAG_OVERFLOW != 0 {
            let (Some(page), Some(crc)) = (get_u64(b, vstart), get_u32(b, vstart + 8)) else {
                return Err(self.bad(i));
            };
            ValueRef::Overflow(OverflowRef {
                page,
                len: vlen,
                crc,
            })
        } else {
            let vend = vstart
                .checked_add(vlen as usize)
                .ok_or_else(|| self.bad(i))?;
            ValueRef::Inline(b.get(vstart..vend).ok_or_else(|| self.bad(i))?)
        };
        Ok((key, value))
    }

    /// `Ok(i)` when entry `i` has `key`; `Err(i)` when `key` would be inserted at `i`.
    pub fn search(&self, key: &[u8]) -> Result<std::result::Result<usize, usize>> {
        let (mut lo, mut hi) = (0, self.count);
        if let Some(area) = self.slot(0) {
            // Where the first probes' entries are, taking the entries to be of one size and
            // packed in key order (as a page written whole has them): reading their slots
            // would cost a search in a cached page more than the hint saves.
            let size = self.bytes.len().saturating_sub(area) / hi.max(1);
            super::prefetch::first_probes(hi, |i| {
                super::prefetch::prefetch(self.bytes, area + size * i);
            });
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let Some(k) = self.key_at(mid) else {
                return Err(self.bad(mid));
            };
            match super::compare(k, key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(Ok(mid)),
            }
        }
        Ok(Err(lo))
    }
}

/// Writes a leaf holding `entries` (in key order) into `page`. The caller has checked that
/// they fit: the sum of [`leaf_entry_size`] plus the header is at most the page size.
///
/// The entries are laid out in key order too, from the start of the entry area to the end
/// of the page, so a scan reads the page's memory forwards.
pub(crate) fn encode_leaf<'e>(
    page: &mut [u8],
    txid: u64,
    entries: impl ExactSizeIterator<Item = (&'e [u8], ValueRef<'e>)> + Clone,
) {
    let count = entries.len();
    write_page_header(page, PageKind::Leaf, count as u16, txid);
    let used: usize = entries
        .clone()
        .map(|(k, v)| leaf_entry_size(k.len(), &v) - 2)
        .sum();
    let area = page.len() - used;
    page[LEAF_HEADER + 2 * count..area].fill(0);
    let mut start = area;
    for (i, (key, value)) in entries.enumerate() {
        put_u16(page, LEAF_HEADER + 2 * i, start as u16);
        start = write_entry(page, start, key, value);
    }
}

/// Writes one entry at `start` (the caller has checked that it fits); returns where it ends.
pub(super) fn write_entry(page: &mut [u8], start: usize, key: &[u8], value: ValueRef<'_>) -> usize {
    put_u16(page, start, key.len() as u16);
    let kstart = start + ENTRY_HEADER;
    page[kstart..kstart + key.len()].copy_from_slice(key);
    write_value(page, start, key.len(), value)
}

/// Writes the value part of the entry at `start` whose key is `key_len` bytes long; returns
/// where the entry ends.
fn write_value(page: &mut [u8], start: usize, key_len: usize, value: ValueRef<'_>) -> usize {
    let vstart = start + ENTRY_HEADER + key_len;
    match value {
        ValueRef::Inline(v) => {
            page[start + 2] = 0;
            put_u32(page, start + 3, v.len() as u32);
            page[vstart..vstart + v.len()].copy_from_slice(v);
            vstart + v.len()
        }
        ValueRef::Overflow(o) => {
            page[start + 2] = FLAG_OVERFLOW;
            put_u32(page, start + 3, o.len);
            put_u64(page, vstart, o.page);
            put_u32(page, vstart + 8, o.crc);
            vstart + OVERFLOW_REF
        }
    }
}

/// Overwrites the value of the entry at `start`, whose key is `key_len` bytes long and
/// which takes `old_size` bytes (its [`leaf_entry_size`]), when the entry with `value`
/// takes exactly as many; returns whether it did.
pub(super) fn overwrite_value(
    page: &mut [u8],
    start: usize,
    key_len: usize,
    old_size: usize,
    value: ValueRef<'_>,
) -> bool {
    if old_size != leaf_entry_size(key_len, &value) {
        return false;
    }
    write_value(page, start, key_len, value);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_search_and_sizes() -> Result<()> {
        let o = OverflowRef {
            page: 12,
            len: 100_000,
            crc: 5,
        };
        let entries: Vec<(&[u8], ValueRef)> = vec![
            (b"", ValueRef::Inline(b"empty key")),
            (b"a", ValueRef::Inline(b"")),
            (b"big", ValueRef::Overflow(o)),
            (b"c", ValueRef::Inline(b"see")),
        ];
        let used: usize = entries
            .iter()
            .map(|(k, v)| leaf_entry_size(k.len(), v))
            .sum();
        let mut page = vec![0xaa; LEAF_HEADER + used];
        encode_leaf(&mut page, 3, entries.iter().copied());
        let leaf = LeafPage::new(&page, 1)?;
        assert_eq!(leaf.len(), 4);
        let starts: Vec<usize> = (0..4).filter_map(|i| leaf.slot(i)).collect();
        assert!(
            starts.windows(2).all(|w| w[0] < w[1]),
            "entries laid out in key order: {starts:?}"
        );
        for (i, e) in entries.iter().enumerate() {
            assert_eq!(&leaf.entry(i)?, e);
            assert_eq!(leaf.key(i)?, e.0);
        }
        assert_eq!(leaf.search(b"big")?, Ok(2));
        assert_eq!(leaf.search(b"b")?, Err(2));
        assert_eq!(leaf.search(b"z")?, Err(4));
        Ok(())
    }

    #[test]
    fn damaged_offsets_are_errors() -> Result<()> {
        let mut page = vec![0u8; 64];
        encode_leaf(
            &mut page,
            1,
            [(&b"k"[..], ValueRef::Inline(b"v"))].into_iter(),
        );
        page[LEAF_HEADER] = 0xff;
        page[LEAF_HEADER + 1] = 0xff;
        let leaf = LeafPage::new(&page, 9)?;
        assert!(matches!(
            leaf.key(0),
            Err(Error::Corruption { page: 9, .. })
        ));
        assert!(leaf.entry(0).is_err());
        page[2] = 0xff; // count
        assert!(LeafPage::new(&page, 9).is_err());
        Ok(())
    }
}
