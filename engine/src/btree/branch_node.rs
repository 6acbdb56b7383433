//! A branch being changed by a write transaction.
//!
//! While its edits only replace child references, it is the committed page's copy,
//! edited in place ([`BranchImage`]). The first edit that adds or removes a separator
//! unpacks it: its separators then live together in one byte buffer, and a vector of
//! fixed-size entries says where each is, with the separator's first eight bytes as a
//! big-endian integer and the child to its right: a search compares those integers and
//! reads a separator's bytes only when they tie, so a probe touches one entry instead of
//! chasing a pointer to a key.

use std::cmp::Ordering;

use crate::error::{Error, Result};
use crate::format::{
    BRANCH_HEADER, BranchImage, BranchPage, ChildRef, Layout, branch_entry_size, compare,
    encode_branch, legacy_saving,
};

#[derive(Debug, Clone, Copy)]
struct Sep {
    prefix: u64,
    at: u32,
    len: u32,
    /// The child holding keys at or above this separator.
    child: ChildRef,
}

/// A branch being changed: the leftmost child, then separators each with its right child.
#[derive(Debug, Clone)]
pub(crate) struct BranchNode {
    /// The committed page's copy, while no separator was added or removed; the fields
    /// below are then unused.
    image: Option<BranchImage>,
    first: ChildRef,
    seps: Vec<Sep>,
    bytes: Vec<u8>,
    /// Bytes the branch takes in a page, header included.
    pub size: usize,
}

/// The first eight bytes of `key`, zero-padded, as a big-endian integer: unequal prefixes
/// order as the keys do.
fn prefix(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

impl BranchNode {
    pub fn new(first: ChildRef) -> BranchNode {
        BranchNode {
            image: None,
            first,
            seps: Vec::new(),
            bytes: Vec::new(),
            size: BRANCH_HEADER,
        }
    }

    pub fn from_page(page: &BranchPage<'_>) -> Result<BranchNode> {
        if let Some(image) = BranchImage::of(page) {
            let mut node = BranchNode::new(ChildRef::default());
            node.size = image.size();
            node.image = Some(image);
            return Ok(node);
        }
        let mut node = BranchNode::new(page.child(0)?);
        node.seps.reserve(page.keys());
        node.bytes.reserve(page.bytes().len());
        for i in 0..page.keys() {
            node.push(page.key(i)?, page.child(i + 1)?);
        }
        Ok(node)
    }

    /// Turns a page's copy into separate separators, before an edit that adds or removes
    /// one.
    fn unpack(&mut self) {
        let Some(image) = self.image.take() else {
            return;
        };
        let mut node = BranchNode::new(image.child(0));
        node.seps.reserve(image.keys() + 1);
        node.bytes.reserve(image.size());
        for j in 0..image.keys() {
            node.push(image.key(j), image.child(j + 1));
        }
        *self = node;
    }

    fn make(&mut self, key: &[u8], child: ChildRef) -> Sep {
        self.size += branch_entry_size(key.len());
        let at = self.bytes.len() as u32;
        self.bytes.extend_from_slice(key);
        Sep {
            prefix: prefix(key),
            at,
            len: key.len() as u32,
            child,
        }
    }

    /// Appends separator `key` with the child to its right, after all others.
    pub fn push(&mut self, key: &[u8], child: ChildRef) {
        self.unpack();
        let s = self.make(key, child);
        self.seps.push(s);
    }

    /// Inserts separator `key` at index `j`, with the child to its right (child `j + 1`).
    pub fn insert(&mut self, j: usize, key: &[u8], child: ChildRef) {
        self.unpack();
        let s = self.make(key, child);
        self.seps.insert(j, s);
        self.tidy();
    }

    /// Removes separator `j` and the child to its right; returns the separator.
    pub fn remove(&mut self, j: usize) -> Box<[u8]> {
        self.unpack();
        let key: Box<[u8]> = self.sep(j).into();
        self.seps.remove(j);
        self.size -= branch_entry_size(key.len());
        self.tidy();
        key
    }

    /// The number of separators.
    pub fn len(&self) -> usize {
        match &self.image {
            Some(image) => image.keys(),
            None => self.seps.len(),
        }
    }

    /// The number of children.
    pub fn children(&self) -> usize {
        self.len() + 1
    }

    /// Separator `j`: the least key of child `j + 1`'s range.
    pub fn sep(&self, j: usize) -> &[u8] {
        if let Some(image) = &self.image {
            return image.key(j);
        }
        let s = &self.seps[j];
        &self.bytes[s.at as usize..(s.at + s.len) as usize]
    }

    pub fn child(&self, i: usize) -> ChildRef {
        match (&self.image, i) {
            (Some(image), _) => image.child(i),
            (None, 0) => self.first,
            (None, _) => self.seps[i - 1].child,
        }
    }

    pub fn set_child(&mut self, i: usize, c: ChildRef) {
        match (&mut self.image, i) {
            (Some(image), _) => image.set_child(i, c),
            (None, 0) => self.first = c,
            (None, _) => self.seps[i - 1].child = c,
        }
    }

    /// The (separator, right child) pairs, in order.
    pub fn entries(&self) -> impl ExactSizeIterator<Item = (&[u8], ChildRef)> + Clone {
        (0..self.len()).map(|j| (self.sep(j), self.child(j + 1)))
    }

    /// The index of the child whose range holds `key`.
    pub fn find_child(&self, key: &[u8]) -> usize {
        if let Some(image) = &self.image {
            return image.find_child(key);
        }
        let p = prefix(key);
        self.seps.partition_point(|s| {
            match s.prefix.cmp(&p) {
                Ordering::Equal => {
                    compare(&self.bytes[s.at as usize..(s.at + s.len) as usize], key)
                }
                unequal => unequal,
            }
            .is_le()
        })
    }

    /// Moves separators `m + 1..` and their children into a new right branch whose
    /// leftmost child is separator `m`'s; returns separator `m` (which moves up) and it.
    pub fn split_off(&mut self, m: usize) -> (Box<[u8]>, BranchNode) {
        self.unpack();
        let mut right = BranchNode::new(self.seps[m].child);
        right.seps.reserve(self.seps.len() - m);
        for j in m + 1..self.seps.len() {
            right.push(self.sep(j), self.seps[j].child);
        }
        let sep: Box<[u8]> = self.sep(m).into();
        self.seps.truncate(m);
        self.size -= right.size - BRANCH_HEADER + branch_entry_size(sep.len());
        self.tidy();
        (sep, right)
    }

    /// Removes separators `first..last` with their right children; returns them.
    pub fn drain(&mut self, first: usize, last: usize) -> Vec<(Box<[u8]>, ChildRef)> {
        self.unpack();
        let out: Vec<(Box<[u8]>, ChildRef)> = (first..last)
            .map(|j| (self.sep(j).into(), self.seps[j].child))
            .collect();
        self.seps.drain(first..last);
        self.size -= out
            .iter()
            .map(|(k, _)| branch_entry_size(k.len()))
            .sum::<usize>();
        self.tidy();
        out
    }

    /// The page to write for transaction `txid`.
    ///
    /// # Errors
    /// When the branch does not fit a page of `page_size` bytes (`id` names it).
    pub fn finish(self, id: u64, txid: u64, page_size: usize) -> Result<Box<[u8]>> {
        if let Some(image) = self.image {
            if self.size > page_size {
                return Err(Error::corrupt(id, "internal: branch larger than a page"));
            }
            return Ok(image.finish(txid));
        }
        // Without heads when they do not fit: only a branch read from a page written
        // without them (before format version 5) can be that full, and an edit that does
        // not split it (a removal) must still write it.
        let layout = if self.size <= page_size {
            Layout::Heads
        } else if self.size - legacy_saving(self.len()) <= page_size {
            Layout::Legacy
        } else {
            return Err(Error::corrupt(id, "internal: branch larger than a page"));
        };
        let mut page = vec![0u8; page_size].into_boxed_slice();
        encode_branch(&mut page, txid, self.first, self.entries(), layout);
        Ok(page)
    }

    /// Rewrites the byte buffer with only the live separators once it holds more than
    /// twice their bytes.
    fn tidy(&mut self) {
        let live = self.size - BRANCH_HEADER;
        if self.bytes.len() <= 2 * live + 256 {
            return;
        }
        let mut fresh = BranchNode::new(self.first);
        fresh.seps.reserve(self.seps.len());
        fresh.bytes.reserve(live);
        for (k, c) in self.entries() {
            fresh.push(k, c);
        }
        *self = fresh;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(page: u64) -> ChildRef {
        ChildRef { page, crc: 0 }
    }

    fn size(b: &BranchNode) -> usize {
        BRANCH_HEADER
            + b.entries()
                .map(|(k, _)| branch_entry_size(k.len()))
                .sum::<usize>()
    }

    #[test]
    fn find_child_agrees_with_slice_order_on_ties_of_the_first_eight_bytes() {
        // Separators that share eight-byte prefixes, differ only in length or past byte 8.
        let keys: Vec<&[u8]> = vec![
            b"",
            b"\0",
            b"ab",
            b"ab\0",
            b"ab\0\0\0\0\0\0",
            b"ab\0\0\0\0\0\0\0",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefgha",
            b"abcdefgi",
            b"b",
        ];
        let mut b = BranchNode::new(c(1));
        for (j, k) in keys.iter().enumerate() {
            b.push(k, c(j as u64 + 2));
        }
        let probes: Vec<&[u8]> = vec![
            b"",
            b"\0",
            b"\0\0",
            b"a",
            b"ab",
            b"ab\0",
            b"ab\0\0",
            b"ab\0\0\0\0\0\0\0\0",
            b"abcdefg",
            b"abcdefgh",
            b"abcdefgh\0\0",
            b"abcdefgha",
            b"abcdefgz",
            b"c",
        ];
        for p in probes {
            let expect = keys.partition_point(|k| *k <= p);
            assert_eq!(b.find_child(p), expect, "probe {p:?}");
        }
    }

    #[test]
    fn edits_keep_separators_children_and_size() {
        let mut b = BranchNode::new(c(0));
        for j in 0..10u8 {
            b.push(&[j * 2], c(u64::from(j) + 1));
        }
        b.insert(3, &[5], c(100));
        assert_eq!(b.find_child(&[5]), 4);
        assert_eq!(b.child(4), c(100));
        assert_eq!(b.remove(3), Box::from(&[5u8][..]));
        assert_eq!(b.size, size(&b));
        for round in 0..2_000u32 {
            b.insert(1, &round.to_le_bytes(), c(7));
            b.remove(1);
        }
        // 8,000 bytes of separators went through; the buffer is tidied past twice the
        // live size (210 bytes) and 256.
        assert!(
            b.bytes.len() <= 2 * 210 + 256,
            "{} bytes kept",
            b.bytes.len()
        );
        let drained = b.drain(2, 4);
        assert_eq!(
            drained,
            vec![(Box::from(&[4u8][..]), c(3)), (Box::from(&[6u8][..]), c(4))]
        );
        assert_eq!(b.size, size(&b));
        let (sep, right) = b.split_off(3);
        assert_eq!(&*sep, &[10u8]);
        assert_eq!(right.child(0), c(6));
        assert_eq!(
            right.entries().map(|(k, _)| k[0]).collect::<Vec<_>>(),
            [12, 14, 16, 18]
        );
        assert_eq!(
            b.entries().map(|(k, _)| k[0]).collect::<Vec<_>>(),
            [0, 2, 8]
        );
        assert_eq!((b.size, right.size), (size(&b), size(&right)));
        b.set_child(0, c(50));
        assert_eq!(b.child(0), c(50));
    }
    #[test]
    fn a_branch_too_full_for_heads_is_written_without_them() -> Result<()> {
        // 20 eight-byte separators fill 508 bytes of a 512-byte page without heads, 588
        // with them (a branch a build before format version 5 wrote).
        let keys: Vec<[u8; 8]> = (0..20u64).map(|i| (i * 3).to_be_bytes()).collect();
        let seps: Vec<(&[u8], ChildRef)> =
            (0..20).map(|i| (&keys[i][..], c(i as u64 + 2))).collect();
        let mut page = vec![0u8; 512];
        encode_branch(&mut page, 1, c(1), seps.iter().copied(), Layout::Legacy);
        let mut b = BranchNode::from_page(&BranchPage::new(&page, 9)?)?;
        assert!(
            b.image.is_none(),
            "a page without heads is decoded, to get them"
        );
        assert_eq!(b.size, 588);
        assert_eq!(b.remove(4), Box::from(&keys[4][..]));
        let written = b.clone().finish(9, 2, 512)?;
        let p = BranchPage::new(&written, 9)?;
        assert_eq!((p.layout(), p.keys()), (Layout::Legacy, 19));
        let expect: Vec<(Vec<u8>, ChildRef)> = b.entries().map(|(k, c)| (k.to_vec(), c)).collect();
        for (i, (k, child)) in expect.iter().enumerate() {
            assert_eq!((p.key(i)?, p.child(i + 1)?), (&k[..], *child));
            assert_eq!(p.find_child(k)?, i + 1);
        }
        // Three removals later it fits with heads again.
        for _ in 0..3 {
            b.remove(0);
        }
        let written = b.finish(9, 3, 512)?;
        assert_eq!(BranchPage::new(&written, 9)?.layout(), Layout::Heads);
        Ok(())
    }

    #[test]
    fn a_committed_page_is_edited_in_place_until_a_separator_changes() -> Result<()> {
        let mut page = vec![0u8; 512];
        let seps: Vec<(&[u8], ChildRef)> = vec![(b"d", c(2)), (b"m", c(3)), (b"t", c(4))];
        encode_branch(&mut page, 1, c(1), seps.iter().copied(), Layout::Heads);
        let mut b = BranchNode::from_page(&BranchPage::new(&page, 9)?)?;
        assert!(b.image.is_some(), "a packed page is kept as it is");
        assert_eq!(b.size, size(&b));
        b.set_child(2, c(30));
        assert_eq!((b.find_child(b"m"), b.child(2)), (2, c(30)));
        let mut expect = vec![0u8; 512];
        let edited: Vec<(&[u8], ChildRef)> = vec![(b"d", c(2)), (b"m", c(30)), (b"t", c(4))];
        encode_branch(&mut expect, 5, c(1), edited.iter().copied(), Layout::Heads);
        assert_eq!(&b.clone().finish(9, 5, 512)?[..], &expect[..]);
        // Adding a separator unpacks the copy; the children replaced so far stay.
        b.insert(1, b"g", c(5));
        assert!(b.image.is_none());
        assert_eq!(b.size, size(&b));
        assert_eq!(
            b.entries()
                .map(|(k, c)| (k.to_vec(), c.page))
                .collect::<Vec<_>>(),
            vec![
                (b"d".to_vec(), 2),
                (b"g".to_vec(), 5),
                (b"m".to_vec(), 30),
                (b"t".to_vec(), 4)
            ]
        );
        assert_eq!(b.child(0), c(1));
        Ok(())
    }
}
