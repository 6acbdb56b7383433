//! A leaf's shape: what its entries look like when they all look alike. A leaf has a
//! shape when every key has one length, at most four bytes past the prefix they share, and
//! every value is inline with one length. In such a leaf a key's head is the whole of what
//! follows the prefix, so heads alone say whether a key is there, and a slot's offset says
//! where its value starts: a get reads the header and the slot array, which the descent
//! asked for together (`prefetch::page_start`), and never the entry itself, whose cache
//! line is another wait for memory (random gets over 100,000 keys of 8 bytes: a fifth of
//! their time; docs/benchmark-history.md, twenty-sixth session).
//!
//! Shapes are not stored in the file: the first get that reaches a verified leaf works its
//! shape out (or finds it has none) and keeps that beside the page's verified bit
//! (`verified.rs`), which a rewrite of the page clears. Descents that write do not: working
//! out the shapes of the leaves a transaction is about to rewrite cost random updates and
//! deletes 8–10 %.

use super::compare;
use super::heads::{HEAD, Layout, head};
use super::leaf::LeafPage;
use crate::error::Result;

/// The longest prefix a shape holds.
const MAX_PREFIX: usize = 16;

/// What a reader knows of a leaf's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    /// Nobody has worked it out since the leaf was last written.
    Unexamined,
    /// The leaf has none (or is not a committed leaf a reader can examine).
    Shapeless,
    /// The leaf has this one.
    Shaped(Shape),
}

/// A leaf's shape (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    key_len: u8,
    prefix_len: u8,
    value_len: u16,
    prefix: [u8; MAX_PREFIX],
}

/// The words a shape packs into; the first is never zero.
type Packed = [u64; 3];

const PRESENT: u64 = 1 << 63;

impl Shape {
    /// The shape of leaf `leaf`, if it has one: every key of one length, at most four bytes
    /// past the recorded prefix (of at most 16 bytes), which each holds; the slots' heads
    /// those of the keys, rising; every value inline, of one length.
    pub fn of(leaf: &LeafPage<'_>) -> Option<Shape> {
        if leaf.layout() != Layout::Heads {
            return None;
        }
        let p = leaf.prefix_len();
        let first = leaf.key(0).ok()?;
        let key_len = first.len();
        if p > MAX_PREFIX || key_len < p || key_len - p > HEAD {
            return None;
        }
        let shared = first.get(..p)?;
        let (mut value_len, mut previous) = (None, None);
        for i in 0..leaf.len() {
            let (key, len) = leaf.key_and_inline_len(i)?;
            let h = head(key, p);
            if key.len() != key_len
                || !key.get(..p).is_some_and(|k| compare(k, shared).is_eq())
                || *value_len.get_or_insert(len) != len
                || leaf.head_at(i) != Some(h)
                || previous.is_some_and(|before| before >= h)
            {
                return None;
            }
            previous = Some(h);
        }
        let mut prefix = [0; MAX_PREFIX];
        prefix[..p].copy_from_slice(shared);
        Some(Shape {
            key_len: u8::try_from(key_len).ok()?,
            prefix_len: u8::try_from(p).ok()?,
            value_len: u16::try_from(value_len?).ok()?,
            prefix,
        })
    }

    /// The shape as three words, the first never zero.
    pub fn pack(&self) -> Packed {
        let [a, b] = [&self.prefix[..8], &self.prefix[8..]].map(|half| {
            let mut word = [0; 8];
            word.copy_from_slice(half);
            u64::from_le_bytes(word)
        });
        let lengths = u64::from(self.key_len)
            | u64::from(self.prefix_len) << 8
            | u64::from(self.value_len) << 16;
        [PRESENT | lengths, a, b]
    }

    /// The shape [`Shape::pack`] made `words`; `None` for a first word of zero (no shape).
    pub fn unpack(words: Packed) -> Option<Shape> {
        if words[0] & PRESENT == 0 {
            return None;
        }
        let mut prefix = [0; MAX_PREFIX];
        prefix[..8].copy_from_slice(&words[1].to_le_bytes());
        prefix[8..].copy_from_slice(&words[2].to_le_bytes());
        let prefix_len = (words[0] >> 8) as u8;
        (usize::from(prefix_len) <= MAX_PREFIX).then_some(Shape {
            key_len: words[0] as u8,
            prefix_len,
            value_len: (words[0] >> 16) as u16,
            prefix,
        })
    }

    /// Whether `key` has this shape's length and prefix: no other key can be in the leaf.
    #[inline(always)]
    fn fits(&self, key: &[u8]) -> bool {
        let p = usize::from(self.prefix_len);
        // `compare` rather than `==`, which calls `memcmp`.
        key.len() == usize::from(self.key_len)
            && matches!((key.get(..p), self.prefix.get(..p)), (Some(k), Some(s)) if compare(k, s).is_eq())
    }

    /// The value stored under `key` in `leaf`, a leaf of this shape.
    #[inline]
    pub fn value<'a>(&self, leaf: &LeafPage<'a>, key: &[u8]) -> Result<Option<&'a [u8]>> {
        if !self.fits(key) {
            return Ok(None);
        }
        let Some(i) = leaf.find_head(head(key, usize::from(self.prefix_len)))? else {
            return Ok(None);
        };
        leaf.inline_value(i, key.len(), usize::from(self.value_len))
            .map(Some)
    }

    /// Whether `key` lies between the first and the last key of `leaf`, a leaf of this
    /// shape (both included): no other leaf of the tree can hold it. Never for a key of
    /// another length or prefix, which would take reading a key to place (a get then
    /// descends from the root).
    #[inline]
    pub fn covers(&self, leaf: &LeafPage<'_>, key: &[u8]) -> bool {
        if !self.fits(key) {
            return false;
        }
        let h = head(key, usize::from(self.prefix_len));
        let last = leaf.len().saturating_sub(1);
        leaf.head_at(0).is_some_and(|first| first <= h)
            && leaf.head_at(last).is_some_and(|last| h <= last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::heads::put_head;
    use crate::format::leaf::encode_leaf;
    use crate::format::{LEAF_HEADER, OverflowRef, ValueRef};

    const PAGE: usize = 4096;

    fn page_of(entries: &[(Vec<u8>, Vec<u8>)], layout: Layout) -> Vec<u8> {
        let mut page = vec![0; PAGE];
        let refs = entries
            .iter()
            .map(|(k, v)| (&k[..], ValueRef::Inline(&v[..])));
        encode_leaf(&mut page, 1, refs.collect::<Vec<_>>().into_iter(), layout);
        page
    }

    fn shape_of(page: &[u8]) -> Result<Option<Shape>> {
        Ok(Shape::of(&LeafPage::new(page, 9)?))
    }

    /// `count` keys of `len` bytes, `first` then every `step`th number after it, big-endian
    /// in the key's last bytes, each with a value of `value_len` bytes.
    fn entries(
        count: u64,
        first: u64,
        step: u64,
        len: usize,
        value_len: usize,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..count)
            .map(|i| {
                let n = (first + i * step).to_be_bytes();
                let mut key = vec![b'k'; len.saturating_sub(8)];
                key.extend_from_slice(&n[8usize.saturating_sub(len)..]);
                (key, vec![i as u8; value_len])
            })
            .collect()
    }

    /// Every key of `keys` gets from the shape what a search and the entry give.
    fn agrees(page: &[u8], shape: &Shape, keys: &[Vec<u8>]) -> Result<()> {
        let leaf = LeafPage::new(page, 9)?;
        let (first, last) = (leaf.key(0)?, leaf.key(leaf.len() - 1)?);
        for key in keys {
            let expected = match leaf.search(key)? {
                Ok(i) => match leaf.entry(i)?.1 {
                    ValueRef::Inline(v) => Some(v),
                    ValueRef::Overflow(_) => None,
                },
                Err(_) => None,
            };
            assert_eq!(shape.value(&leaf, key)?, expected, "key {key:?}");
            // A key of another length or prefix is never covered, whether it lies between
            // or not: the get then descends from the root.
            let between = compare(key, first).is_ge() && compare(key, last).is_le();
            assert_eq!(
                shape.covers(&leaf, key),
                between && shape.fits(key),
                "key {key:?}"
            );
        }
        Ok(())
    }

    /// The keys a get might ask for around `entries`: each, its neighbours by one in every
    /// byte, shorter and longer ones, and keys of other prefixes.
    fn probes(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<Vec<u8>> {
        let mut out = vec![vec![], vec![0], vec![0xff; 20]];
        for (key, _) in entries {
            out.push(key.clone());
            out.push(key[..key.len() - 1].to_vec());
            out.push([&key[..], &[0]].concat());
            for at in 0..key.len() {
                for delta in [1u8, 255] {
                    let mut k = key.clone();
                    k[at] = k[at].wrapping_add(delta);
                    out.push(k);
                }
            }
        }
        out
    }

    #[test]
    fn gets_by_shape_agree_with_searches() -> Result<()> {
        // (count, first, step, key length, value length): prefixes of 0 to 16 bytes, tails
        // of 1 to 4 bytes, sparse and dense keys, empty values.
        let cases = [
            (30, 1_000, 1, 8, 100),
            (30, 1_000, 977, 8, 100),
            (150, 0, 3, 8, 0),
            (50, 0x0102_0304, 0x0101_0101, 4, 8),
            (12, 7, 1, 1, 5),
            (40, 5_000, 7, 16, 16),
            (1, 42, 1, 8, 10),
        ];
        for (count, first, step, len, value_len) in cases {
            let entries = entries(count, first, step, len, value_len);
            let page = page_of(&entries, Layout::Heads);
            let shape = shape_of(&page)?;
            let Some(shape) = shape else {
                panic!("no shape for {count} keys of {len} bytes from {first} by {step}");
            };
            assert_eq!(Shape::unpack(shape.pack()), Some(shape));
            agrees(&page, &shape, &probes(&entries))?;
        }
        Ok(())
    }

    #[test]
    fn leaves_whose_entries_differ_have_no_shape() -> Result<()> {
        let uniform = entries(30, 1_000, 1, 8, 100);
        assert!(shape_of(&page_of(&uniform, Layout::Heads))?.is_some());
        // A legacy leaf (no heads).
        assert_eq!(shape_of(&page_of(&uniform, Layout::Legacy))?, None);
        // One value longer, one key longer.
        let mut other = uniform.clone();
        other[7].1.push(0);
        assert_eq!(shape_of(&page_of(&other, Layout::Heads))?, None);
        let mut other = uniform.clone();
        other[29].0.push(0);
        assert_eq!(shape_of(&page_of(&other, Layout::Heads))?, None);
        // Tails of more than four bytes (keys far apart), a prefix of more than 16.
        let spread = entries(30, 0, 1 << 40, 8, 10);
        assert_eq!(shape_of(&page_of(&spread, Layout::Heads))?, None);
        let long = entries(30, 0, 1, 24, 10);
        assert_eq!(shape_of(&page_of(&long, Layout::Heads))?, None);
        // An overflow value.
        let mut page = vec![0; PAGE];
        let o = ValueRef::Overflow(OverflowRef {
            page: 5,
            len: 10,
            crc: 1,
        });
        let refs: Vec<(&[u8], ValueRef)> = vec![(b"a", ValueRef::Inline(b"0123456789")), (b"b", o)];
        encode_leaf(&mut page, 1, refs.into_iter(), Layout::Heads);
        assert_eq!(shape_of(&page)?, None);
        // An empty leaf.
        assert_eq!(shape_of(&page_of(&[], Layout::Heads))?, None);
        Ok(())
    }

    #[test]
    fn a_wrong_head_leaves_a_leaf_without_shape() -> Result<()> {
        let uniform = entries(30, 1_000, 1, 8, 100);
        for (i, head) in [(3, 0), (3, u32::MAX), (0, 1_000)] {
            let mut page = page_of(&uniform, Layout::Heads);
            put_head(&mut page, LEAF_HEADER, i, head);
            assert_eq!(shape_of(&page)?, None, "slot {i} with head {head}");
        }
        Ok(())
    }

    #[test]
    fn a_first_word_of_zero_is_no_shape() {
        assert_eq!(Shape::unpack([0, 1, 2]), None);
        assert_eq!(Shape::unpack([PRESENT | 17 << 8, 0, 0]), None);
    }
}
