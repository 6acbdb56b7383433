//! Leaf pages: sorted key/value entries behind a slot array.
//! Layout: docs/design.md#leaf-page.
//!
//! The page is header, then `count` slots (in key order), then free space, then the
//! entries, packed at the end of the page (in key order when the page is written whole by
//! [`encode_leaf`]; in any order once edited in place). A slot is the entry's offset
//! (`u16`) and the key's head: the four key bytes after the prefix all the page's keys
//! share (zero-padded), whose length the header holds. A search compares heads, which lie
//! together in the slot array, and reads a stored key only when the heads are equal.
//! An entry is `key_len: u16, flags: u8, value_len: u32, key`, then the value itself or,
//! when flag bit 0 is set, an overflow reference `first_page: u64, crc: u32`.
//!
//! Leaves written before format version 4 ([`super::page::LEGACY_LEAF`]) have slots of the offset
//! alone; they are read as they are.

use super::heads::{
    Layout, first_mismatch, head, partition, put_head, record_prefix, recorded_prefix, slot_head,
    write_header,
};
use super::page::page_count;
use super::shape::{Known, Shape};
use super::{
    LEAF_HEADER, OverflowRef, PageKind, get_u16, get_u32, get_u64, put_u16, put_u32, put_u64,
};
use crate::error::{Error, Result};

const ENTRY_HEADER: usize = 7;
const OVERFLOW_REF: usize = 12;
const FLAG_OVERFLOW: u8 = 1;
/// Bytes of a slot: the entry's offset and the key's head.
pub(crate) const SLOT: usize = Layout::Heads.slot();

/// A stored value: its bytes in the leaf, or where its overflow run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueRef<'a> {
    Inline(&'a [u8]),
    Overflow(OverflowRef),
}

/// Bytes an entry takes in a leaf, its slot included.
pub(crate) fn leaf_entry_size(key_len: usize, value: &ValueRef<'_>) -> usize {
    SLOT + entry_len(key_len, value)
}

/// Bytes an entry takes in the entry area (its slot not included).
pub(super) fn entry_len(key_len: usize, value: &ValueRef<'_>) -> usize {
    ENTRY_HEADER
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
    layout: Layout,
    /// The length of the prefix every key shares (0 in a legacy page).
    prefix: usize,
    /// What is known of the shape of its entries (see [`Shape`]).
    shape: Known,
}

impl<'a> LeafPage<'a> {
    pub fn new(bytes: &'a [u8], id: u64) -> Result<LeafPage<'a>> {
        let count = page_count(bytes).map_or(0, usize::from);
        let layout = Layout::of(bytes);
        if LEAF_HEADER + layout.slot() * count > bytes.len() {
            return Err(Error::corrupt(id, format!("leaf claims {count} entries")));
        }
        let mut leaf = LeafPage::trusted(bytes, id, count, layout, 0);
        leaf.prefix = leaf.prefix_len();
        Ok(leaf)
    }

    /// A view of a page being edited, whose header may be behind: it holds `count`
    /// entries in `layout`, sharing a prefix of `prefix` bytes.
    pub(super) fn trusted(
        bytes: &'a [u8],
        id: u64,
        count: usize,
        layout: Layout,
        prefix: usize,
    ) -> LeafPage<'a> {
        LeafPage {
            bytes,
            id,
            count,
            layout,
            prefix,
            shape: Known::Shapeless,
        }
    }

    /// The same page, a verified leaf of a snapshot, with what its readers know of its
    /// shape.
    pub(crate) fn with_shape(self, shape: Known) -> LeafPage<'a> {
        LeafPage { shape, ..self }
    }

    /// What is known of the page's shape.
    #[inline(always)]
    pub(crate) fn known_shape(&self) -> Known {
        self.shape
    }

    /// The page's shape, if a reader worked it out.
    #[inline(always)]
    pub(crate) fn shape(&self) -> Option<Shape> {
        match self.shape {
            Known::Shaped(shape) => Some(shape),
            Known::Unexamined | Known::Shapeless => None,
        }
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

    /// The page's slot layout.
    pub(crate) fn layout(&self) -> Layout {
        self.layout
    }

    /// The length of the prefix every key shares, as the header records it (0 in a legacy
    /// page).
    pub(super) fn prefix_len(&self) -> usize {
        recorded_prefix(self.bytes)
    }

    fn bad(&self, i: usize) -> Error {
        Error::corrupt(self.id, format!("leaf entry {i} out of bounds"))
    }

    /// Where entry `i` starts, read from its slot.
    #[inline(always)]
    pub(super) fn slot(&self, i: usize) -> Option<usize> {
        get_u16(self.bytes, LEAF_HEADER + self.layout.slot() * i).map(usize::from)
    }

    /// The head recorded in slot `i` (of a page with heads).
    #[inline(always)]
    pub(super) fn head_at(&self, i: usize) -> Option<u32> {
        slot_head(self.bytes, LEAF_HEADER, i)
    }

    /// The slot whose head is `h`, by a search over the heads alone ([`partition`]): for a page
    /// whose heads rise and tell its keys apart (one of a [`Shape`]).
    #[inline]
    pub(super) fn find_head(&self, h: u32) -> Result<Option<usize>> {
        let n = self.count;
        let head_of = |i: usize| self.head_at(i).ok_or_else(|| self.bad(i));
        if n == 0 {
            return Ok(None);
        }
        let i = partition(n, h, head_of(0)?, head_of(n - 1)?, |i| Ok(head_of(i)? < h))?;
        Ok((i < n && head_of(i)? == h).then_some(i))
    }

    /// The inline value of entry `i`, whose key is `key_len` bytes long and value
    /// `value_len`, found from its slot without reading the entry's header.
    #[inline(always)]
    pub(super) fn inline_value(
        &self,
        i: usize,
        key_len: usize,
        value_len: usize,
    ) -> Result<&'a [u8]> {
        let start = self.entry_start(i)? + ENTRY_HEADER + key_len;
        self.bytes
            .get(start..start + value_len)
            .ok_or_else(|| self.bad(i))
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

    /// Entry `i`'s key and the length of its value, if the value is inline and the entry
    /// lies inside the page (what [`Shape::of`] needs, without decoding the rest).
    #[inline(always)]
    pub(super) fn key_and_inline_len(&self, i: usize) -> Option<(&'a [u8], usize)> {
        let b = self.bytes;
        let at = self.slot(i)?;
        let (klen, flags, vlen) = (get_u16(b, at)?, *b.get(at + 2)?, get_u32(b, at + 3)?);
        let kstart = at + ENTRY_HEADER;
        let vstart = kstart + usize::from(klen);
        let vlen = vlen as usize;
        (flags & FLAG_OVERFLOW == 0 && vstart.checked_add(vlen)? <= b.len())
            .then(|| Some((b.get(kstart..vstart)?, vlen)))
            .flatten()
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

    /// Bytes the page's header, slots and entries take.
    pub fn used(&self) -> Result<usize> {
        let mut used = LEAF_HEADER + self.layout.slot() * self.count;
        for i in 0..self.count {
            used += self.extent(i).ok_or_else(|| self.bad(i))?.1;
        }
        Ok(used)
    }

    /// Whether every key holds the page's prefix and its slot the key's head (trivially so
    /// in a legacy page); the first entry that does not, if one does not.
    pub fn heads_mismatch(&self) -> Result<Option<usize>> {
        match self.layout {
            Layout::Legacy => Ok(None),
            Layout::Heads => {
                first_mismatch(self.bytes, LEAF_HEADER, self.prefix, self.count, |i| {
                    self.key(i)
                })
            }
        }
    }

    /// How stored key `i` compares with `key`.
    #[inline(always)]
    fn order_at(&self, i: usize, key: &[u8]) -> Result<std::cmp::Ordering> {
        let k = self.key_at(i).ok_or_else(|| self.bad(i))?;
        Ok(super::compare(k, key))
    }

    /// `Ok(i)` when entry `i` has `key`; `Err(i)` when `key` would be inserted at `i`.
    #[inline]
    pub fn search(&self, key: &[u8]) -> Result<std::result::Result<usize, usize>> {
        self.search_knowing(key, None)
    }

    /// [`LeafPage::search`], given the bytes of the prefix every key shares when the caller
    /// knows them (an owned leaf keeps them): a key that is not there is placed without
    /// reading a stored key for them.
    pub fn search_knowing(
        &self,
        key: &[u8],
        prefix: Option<&[u8]>,
    ) -> Result<std::result::Result<usize, usize>> {
        match self.layout {
            Layout::Heads => self.search_heads(key, prefix),
            Layout::Legacy => self.search_keys(key),
        }
    }

    /// A search over the heads in the slot array ([`partition`]); a stored key is read only where
    /// its head equals `key`'s.
    #[inline]
    fn search_heads(
        &self,
        key: &[u8],
        known_prefix: Option<&[u8]>,
    ) -> Result<std::result::Result<usize, usize>> {
        let n = self.count;
        // The header's cache line is read; ask for the rest of the slot array at once.
        let slots_end = LEAF_HEADER + SLOT * n;
        let mut line = 64;
        while line < slots_end {
            super::prefetch::prefetch(self.bytes, line);
            line += 64;
        }
        let h = head(key, self.prefix);
        let head_of = |i: usize| self.head_at(i).ok_or_else(|| self.bad(i));
        let order = |i: usize| -> Result<std::cmp::Ordering> {
            Ok(match head_of(i)?.cmp(&h) {
                std::cmp::Ordering::Equal => self.order_at(i, key)?,
                unequal => unequal,
            })
        };
        let lo = match n {
            0 => 0,
            _ => partition(
                n,
                h,
                head_of(0)?,
                head_of(n - 1)?,
                |i| Ok(order(i)?.is_lt()),
            )?,
        };
        if lo < n && head_of(lo)? == h && order(lo)?.is_eq() {
            return Ok(Ok(lo));
        }
        if n == 0 || self.prefix == 0 {
            return Ok(Err(lo));
        }
        // Heads order keys that hold the page's prefix; `key` may not, and then it goes
        // before or after every key, as it compares with the prefix.
        let i = lo.min(n - 1);
        let stored = || self.key_at(i).and_then(|k| k.get(..self.prefix));
        let known = known_prefix.filter(|p| p.len() == self.prefix);
        let Some(prefix) = known.or_else(stored) else {
            return Err(self.bad(i));
        };
        Ok(
            match super::compare(key.get(..self.prefix).unwrap_or(key), prefix) {
                std::cmp::Ordering::Equal => Err(lo),
                std::cmp::Ordering::Less => Err(0),
                std::cmp::Ordering::Greater => Err(n),
            },
        )
    }

    /// A binary search comparing stored keys (a legacy page has no heads).
    fn search_keys(&self, key: &[u8]) -> Result<std::result::Result<usize, usize>> {
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
            match self.order_at(mid, key)? {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(Ok(mid)),
            }
        }
        Ok(Err(lo))
    }
}

/// Writes a leaf holding `entries` (in key order) into `page` in `layout` (with heads,
/// except when a legacy leaf too full to take them is rewritten). The caller has checked
/// that they fit: the sum of [`leaf_entry_size`] plus the header is at most the page size.
///
/// The entries are laid out in key order too, from the start of the entry area to the end
/// of the page, so a scan reads the page's memory forwards. Returns the length of the
/// prefix the keys share, as recorded (0 for a legacy page).
pub(super) fn encode_leaf<'e>(
    page: &mut [u8],
    txid: u64,
    entries: impl ExactSizeIterator<Item = (&'e [u8], ValueRef<'e>)> + Clone,
    layout: Layout,
) -> usize {
    let count = entries.len();
    write_header(page, PageKind::Leaf, layout, count, txid);
    let prefix = record_prefix(page, layout, entries.clone().map(|(k, _)| k));
    let used: usize = entries.clone().map(|(k, v)| entry_len(k.len(), &v)).sum();
    let area = page.len() - used;
    let stride = layout.slot();
    page[LEAF_HEADER + stride * count..area].fill(0);
    let mut start = area;
    for (i, (key, value)) in entries.enumerate() {
        put_u16(page, LEAF_HEADER + stride * i, start as u16);
        if layout == Layout::Heads {
            put_head(page, LEAF_HEADER, i, head(key, prefix));
        }
        start = write_entry(page, start, key, value);
    }
    prefix
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
    use crate::format::heads::{PREFIX_LEN, common_prefix};

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
        encode_leaf(&mut page, 3, entries.iter().copied(), Layout::Heads);
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
            Layout::Heads,
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

    /// Sorted, distinct keys over a small alphabet: long shared prefixes, heads that tie,
    /// keys that are prefixes of others.
    fn key_sets(rng: &mut impl rand::Rng) -> Vec<Vec<u8>> {
        let stem_len = rng.random_range(0..9);
        let stem: Vec<u8> = (0..stem_len).map(|_| rng.random_range(0..3)).collect();
        let mut keys: Vec<Vec<u8>> = (0..rng.random_range(0..40))
            .map(|_| {
                let mut k = stem.clone();
                k.extend((0..rng.random_range(0..9)).map(|_| rng.random_range(0..3u8)));
                k
            })
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    #[test]
    fn searches_in_both_layouts_agree_with_a_sorted_list() -> Result<()> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(4);
        for _ in 0..2_000 {
            let keys = key_sets(&mut rng);
            let entries = keys
                .iter()
                .map(|k| (&k[..], ValueRef::Inline(b"v")))
                .collect::<Vec<_>>();
            for layout in [Layout::Heads, Layout::Legacy] {
                let mut page = vec![0u8; 4096];
                encode_leaf(&mut page, 1, entries.iter().copied(), layout);
                let leaf = LeafPage::new(&page, 1)?;
                assert_eq!(leaf.layout(), layout);
                assert_eq!(leaf.heads_mismatch()?, None);
                if layout == Layout::Heads && keys.len() > 1 {
                    let shared = common_prefix(&keys[0], &keys[keys.len() - 1]);
                    assert_eq!(leaf.prefix_len(), shared, "the longest shared prefix");
                }
                for _ in 0..30 {
                    let probe: Vec<u8> = (0..rng.random_range(0..12))
                        .map(|_| rng.random_range(0..4u8))
                        .collect();
                    assert_eq!(
                        leaf.search(&probe)?,
                        keys.binary_search(&probe),
                        "{probe:?} in {keys:?} ({layout:?})"
                    );
                }
                for (i, k) in keys.iter().enumerate() {
                    assert_eq!(leaf.search(k)?, Ok(i));
                }
            }
        }
        Ok(())
    }

    #[test]
    fn a_wrong_head_or_prefix_is_found_and_never_panics() -> Result<()> {
        let keys: Vec<[u8; 8]> = (0..50u64).map(|i| (1000 + i * 3).to_be_bytes()).collect();
        let mut page = vec![0u8; 4096];
        encode_leaf(
            &mut page,
            1,
            keys.iter().map(|k| (&k[..], ValueRef::Inline(b"value"))),
            Layout::Heads,
        );
        assert_eq!(LeafPage::new(&page, 1)?.prefix_len(), 6);
        let mut head7 = page.clone();
        head7[LEAF_HEADER + SLOT * 7 + 2] ^= 0x40;
        assert_eq!(LeafPage::new(&head7, 1)?.heads_mismatch()?, Some(7));
        let mut long = page.clone();
        put_u16(&mut long, PREFIX_LEN, 900);
        let leaf = LeafPage::new(&long, 1)?;
        assert_eq!(leaf.heads_mismatch()?, Some(0));
        assert!(leaf.search(&keys[3]).is_err(), "a prefix past the keys");
        Ok(())
    }
}
