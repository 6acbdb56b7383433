//! Branch pages: `count` separator keys and `count + 1` child references.
//! Layout: docs/design.md#branch-page.
//!
//! The page is header, the leftmost child reference, `count` `u16` offsets, free space,
//! then entries packed at the end: `key_len: u16, key, child: u64, child_crc: u32`.
//! Child `i + 1` holds the keys at or above separator `i`.

use super::page::{CHILD_REF_LEN, page_count};
use super::{BRANCH_HEADER, ChildRef, PAGE_HEADER, PageKind, get_u16, put_u16, write_page_header};
use crate::error::{Error, Result};

/// Bytes a separator and its right child take in a branch, slot included.
pub(crate) fn branch_entry_size(key_len: usize) -> usize {
    2 + 2 + key_len + CHILD_REF_LEN
}

/// A read-only, bounds-checked view of a branch page.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BranchPage<'a> {
    bytes: &'a [u8],
    id: u64,
    count: usize,
}

impl<'a> BranchPage<'a> {
    pub fn new(bytes: &'a [u8], id: u64) -> Result<BranchPage<'a>> {
        let count = page_count(bytes).map_or(0, usize::from);
        if BRANCH_HEADER + 2 * count > bytes.len() {
            return Err(Error::corrupt(id, format!("branch claims {count} keys")));
        }
        Ok(BranchPage { bytes, id, count })
    }

    /// The page's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
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
        let at = get_u16(self.bytes, BRANCH_HEADER + 2 * i)? as usize;
        let klen = get_u16(self.bytes, at)? as usize;
        Some((at + 2, klen))
    }

    #[inline(always)]
    fn key_at(&self, i: usize) -> Option<&'a [u8]> {
        let (start, len) = self.entry_at(i)?;
        self.bytes.get(start..start + len)
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

    /// The index of the child whose range holds `key`.
    pub fn find_child(&self, key: &[u8]) -> Result<usize> {
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
/// `entries` into `page`. The caller has checked that they fit.
pub(crate) fn encode_branch<'e>(
    page: &mut [u8],
    txid: u64,
    first: ChildRef,
    entries: impl ExactSizeIterator<Item = (&'e [u8], ChildRef)>,
) {
    let count = entries.len();
    write_page_header(page, PageKind::Branch, count as u16, txid);
    first.encode(page, PAGE_HEADER);
    let mut end = page.len();
    for (i, (key, child)) in entries.enumerate() {
        let start = end - 2 - key.len() - CHILD_REF_LEN;
        put_u16(page, BRANCH_HEADER + 2 * i, start as u16);
        put_u16(page, start, key.len() as u16);
        page[start + 2..start + 2 + key.len()].copy_from_slice(key);
        child.encode(page, start + 2 + key.len());
        end = start;
    }
    page[BRANCH_HEADER + 2 * count..end].fill(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_child_search() -> Result<()> {
        let c = |page| ChildRef {
            page,
            crc: page as u32 * 3,
        };
        let seps: Vec<(&[u8], ChildRef)> = vec![(b"g", c(11)), (b"p", c(12))];
        let mut page = vec![0u8; 256];
        encode_branch(&mut page, 4, c(10), seps.iter().copied());
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
