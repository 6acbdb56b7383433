//! Branch pages: `count` separator keys and `count + 1` child references.
//! Layout: docs/design.md#branch-page.
//!
//! The page is header, the leftmost child reference, `count` slots, free space, then
//! entries packed at the end: `key_len: u16, key, child: u64, child_crc: u32`. A slot is
//! the entry's offset (`u16`) and the separator's head: the four bytes after the prefix
//! all the page's separators share, as in a leaf (see [`super::leaf`]), so that a search
//! compares heads lying together in the slot array and reads a separator only where the
//! heads are equal. Child `i + 1` holds the keys at or above separator `i`.
//!
//! Branches written before format version 5 ([`super::page::LEGACY_BRANCH`]) have slots of the offset
//! alone; they are read as they are, and get heads when a transaction changes them,
//! unless they are too full to take them.

use super::heads::{
    Layout, first_mismatch, head, partition, put_head, record_prefix, recorded_prefix, slot_head,
    write_header,
};
use super::page::{CHILD_REF_LEN, page_count};
use super::{BRANCH_HEADER, ChildRef, PAGE_HEADER, PageKind, get_u16, put_u16};
use crate::error::{Error, Result};

/// Bytes a separator and its right child take in a branch with heads, slot included.
pub(crate) fn branch_entry_size(key_len: usize) -> usize {
    Layout::Heads.slot() + 2 + key_len + CHILD_REF_LEN
}

/// How many bytes fewer a branch of `keys` separators takes without heads.
pub(crate) fn legacy_saving(keys: usize) -> usize {
    (Layout::Heads.slot() - Layout::Legacy.slot()) * keys
}

/// A read-only, bounds-checked view of a branch page.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BranchPage<'a> {
    bytes: &'a [u8],
    id: u64,
    count: usize,
    layout: Layout,
    /// The length of the prefix every separator shares (0 in a legacy page).
    prefix: usize,
}

impl<'a> BranchPage<'a> {
    pub fn new(bytes: &'a [u8], id: u64) -> Result<BranchPage<'a>> {
        let count = page_count(bytes).map_or(0, usize::from);
        let layout = Layout::of(bytes);
        if BRANCH_HEADER + layout.slot() * count > bytes.len() {
            return Err(Error::corrupt(id, format!("branch claims {count} keys")));
        }
        let prefix = recorded_prefix(bytes);
        Ok(BranchPage {
            bytes,
            id,
            count,
            layout,
            prefix,
        })
    }

    /// The page's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The page's slot layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The number of separator keys (one less than the children).
    pub fn keys(&self) -> usize {
        self.count
    }

    fn bad(&self, i: usize) -> Error {
        Error::corrupt(self.id, format!("branch entry {i} out of bounds"))
    }

    /// Where separator `i` starts and its length, if its slot and length are in the page.
    #[inline(always)]
    fn entry_at(&self, i: usize) -> Option<(usize, usize)> {
        let at = get_u16(self.bytes, BRANCH_HEADER + self.layout.slot() * i)? as usize;
        let klen = get_u16(self.bytes, at)? as usize;
        Some((at + 2, klen))
    }

    #[inline(always)]
    fn key_at(&self, i: usize) -> Option<&'a [u8]> {
        let (start, len) = self.entry_at(i)?;
        self.bytes.get(start..start + len)
    }

    /// The head recorded in slot `i` (of a page with heads).
    #[inline(always)]
    fn slot_head(&self, i: usize) -> Option<u32> {
        slot_head(self.bytes, BRANCH_HEADER, i)
    }

    fn entry(&self, i: usize) -> Result<(usize, usize)> {
        self.entry_at(i).ok_or_else(|| self.bad(i))
    }

    pub fn key(&self, i: usize) -> Result<&'a [u8]> {
        self.key_at(i).ok_or_else(|| self.bad(i))
    }

    pub fn child(&self, i: usize) -> Result<ChildRef> {
        let at = if i == 0 {
            PAGE_HEADER
        } else {
            let (start, len) = self.entry(i - 1)?;
            start + len
        };
        ChildRef::decode(self.bytes, at).ok_or_else(|| self.bad(i))
    }

    /// Bytes the page's header, slots and entries take.
    pub fn used(&self) -> Result<usize> {
        let mut used = BRANCH_HEADER;
        for i in 0..self.count {
            used += branch_entry_size(self.key(i)?.len());
        }
        Ok(match self.layout {
            Layout::Heads => used,
            Layout::Legacy => used - legacy_saving(self.count),
        })
    }

    /// Whether every separator holds the page's prefix and its slot the separator's head
    /// (trivially so in a legacy page); the first that does not, if one does not.
    pub fn heads_mismatch(&self) -> Result<Option<usize>> {
        match self.layout {
            Layout::Legacy => Ok(None),
            Layout::Heads => {
                first_mismatch(self.bytes, BRANCH_HEADER, self.prefix, self.count, |i| {
                    self.key(i)
                })
            }
        }
    }

    /// The index of the child whose range holds `key`: how many separators are at or
    /// below it.
    pub fn find_child(&self, key: &[u8]) -> Result<usize> {
        match self.layout {
            Layout::Heads => self.find_by_heads(key),
            Layout::Legacy => self.find_by_keys(key),
        }
    }

    /// [`BranchPage::find_child`] over the heads in the slot array ([`partition`]); a separator is read
    /// only where its head equals `key`'s, and the first one at the end when the
    /// separators share a prefix, to compare it with `key`'s (always the same separator,
    /// so its line stays cached while the page is; reading it before the search measured
    /// slower).
    #[inline]
    fn find_by_heads(&self, key: &[u8]) -> Result<usize> {
        let n = self.count;
        let h = head(key, self.prefix);
        let head_of = |i: usize| self.slot_head(i).ok_or_else(|| self.bad(i));
        let lo = match n {
            0 => 0,
            _ => partition(n, h, head_of(0)?, head_of(n - 1)?, |i| {
                Ok(match head_of(i)?.cmp(&h) {
                    std::cmp::Ordering::Equal => super::compare(self.key(i)?, key).is_le(),
                    unequal => unequal.is_lt(),
                })
            })?,
        };
        if n == 0 || self.prefix == 0 {
            return Ok(lo);
        }
        // Heads order keys that hold the page's prefix; `key` may not, and then it goes
        // before or after every separator, as it compares with the prefix.
        let Some(prefix) = self.key(0)?.get(..self.prefix) else {
            return Err(self.bad(0));
        };
        Ok(
            match super::compare(key.get(..self.prefix).unwrap_or(key), prefix) {
                std::cmp::Ordering::Equal => lo,
                std::cmp::Ordering::Less => 0,
                std::cmp::Ordering::Greater => n,
            },
        )
    }

    /// [`BranchPage::find_child`] comparing stored separators (a legacy page has no heads).
    fn find_by_keys(&self, key: &[u8]) -> Result<usize> {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let Some(k) = self.key_at(mid) else {
                return Err(self.bad(mid));
            };
            if super::compare(k, key).is_le() {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }
}

/// Writes a branch with leftmost child `first` and the (separator, right child) pairs
/// `entries` into `page`, in `layout`. The caller has checked that they fit.
pub(crate) fn encode_branch<'e>(
    page: &mut [u8],
    txid: u64,
    first: ChildRef,
    entries: impl ExactSizeIterator<Item = (&'e [u8], ChildRef)> + Clone,
    layout: Layout,
) {
    let count = entries.len();
    write_header(page, PageKind::Branch, layout, count, txid);
    let prefix = record_prefix(page, layout, entries.clone().map(|(k, _)| k));
    first.encode(page, PAGE_HEADER);
    let stride = layout.slot();
    let mut end = page.len();
    for (i, (key, child)) in entries.enumerate() {
        let start = end - 2 - key.len() - CHILD_REF_LEN;
        put_u16(page, BRANCH_HEADER + stride * i, start as u16);
        if layout == Layout::Heads {
            put_head(page, BRANCH_HEADER, i, head(key, prefix));
        }
        put_u16(page, start, key.len() as u16);
        page[start + 2..start + 2 + key.len()].copy_from_slice(key);
        child.encode(page, start + 2 + key.len());
        end = start;
    }
    page[BRANCH_HEADER + stride * count..end].fill(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Separators sharing a five-byte prefix, some differing only past their head or in
    /// their length (zero bytes pad a head).
    const SHARED: [&[u8]; 8] = [
        b"user:",
        b"user:\0",
        b"user:a",
        b"user:abcd",
        b"user:abcd\0",
        b"user:abcde",
        b"user:b",
        b"user:zzzzzz",
    ];

    #[test]
    fn both_layouts_find_the_child_a_sorted_list_does() -> Result<()> {
        let probes: [&[u8]; 14] = [
            b"",
            b"a",
            b"user",
            b"user:",
            b"user:\0",
            b"user:\0\0",
            b"user:a",
            b"user:abc",
            b"user:abcd",
            b"user:abcd\0\0",
            b"user:abcdf",
            b"user:zzzzzzz",
            b"user;",
            b"zzz",
        ];
        let seps: Vec<(&[u8], ChildRef)> = SHARED
            .iter()
            .enumerate()
            .map(|(i, k)| {
                (
                    *k,
                    ChildRef {
                        page: i as u64 + 3,
                        crc: 1,
                    },
                )
            })
            .collect();
        for layout in [Layout::Heads, Layout::Legacy] {
            let mut page = vec![0u8; 512];
            encode_branch(
                &mut page,
                1,
                ChildRef::default(),
                seps.iter().copied(),
                layout,
            );
            let b = BranchPage::new(&page, 2)?;
            assert_eq!((b.layout(), b.keys()), (layout, SHARED.len()));
            assert_eq!(b.heads_mismatch()?, None);
            for p in probes {
                let expect = SHARED.partition_point(|k| *k <= p);
                assert_eq!(b.find_child(p)?, expect, "{layout:?} {p:?}");
            }
        }
        Ok(())
    }

    #[test]
    fn a_head_that_does_not_match_its_separator_is_found() -> Result<()> {
        let seps: Vec<(&[u8], ChildRef)> =
            SHARED.iter().map(|k| (*k, ChildRef::default())).collect();
        let mut page = vec![0u8; 512];
        encode_branch(
            &mut page,
            1,
            ChildRef::default(),
            seps.iter().copied(),
            Layout::Heads,
        );
        // Separator 3's head ("abcd"): its last byte changed.
        page[BRANCH_HEADER + 6 * 3 + 5] ^= 1;
        assert_eq!(BranchPage::new(&page, 2)?.heads_mismatch()?, Some(3));
        Ok(())
    }

    #[test]
    fn round_trip_and_child_search() -> Result<()> {
        let c = |page| ChildRef {
            page,
            crc: page as u32 * 3,
        };
        let seps: Vec<(&[u8], ChildRef)> = vec![(b"g", c(11)), (b"p", c(12))];
        let mut page = vec![0u8; 256];
        encode_branch(&mut page, 4, c(10), seps.iter().copied(), Layout::Heads);
        let b = BranchPage::new(&page, 2)?;
        assert_eq!(b.keys(), 2);
        assert_eq!(b.key(1)?, b"p");
        assert_eq!(
            (b.child(0)?, b.child(1)?, b.child(2)?),
            (c(10), c(11), c(12))
        );
        assert_eq!(b.find_child(b"a")?, 0);
        assert_eq!(b.find_child(b"g")?, 1);
        assert_eq!(b.find_child(b"o")?, 1);
        assert_eq!(b.find_child(b"zz")?, 2);
        assert!(b.child(3).is_err() || b.keys() < 3);
        page[BRANCH_HEADER] = 0xff;
        page[BRANCH_HEADER + 1] = 0xff;
        let b = BranchPage::new(&page, 2)?;
        assert!(matches!(b.key(0), Err(Error::Corruption { page: 2, .. })));
        Ok(())
    }
}
