//! Which pages a reader has verified since they were last written, and the shapes of the
//! leaves among them: lock-free, shared by every snapshot of a database, so that
//! steady-state reads pay nothing for verification (docs/design.md#reads-and-verification).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::format::{Known, Shape};

/// The first shape word of a leaf examined and found without a shape (a packed shape's
/// first word has its top bit set).
const SHAPELESS: u64 = 1 << 62;

/// Pages per block of shapes, allocated when a get first records the shape of a leaf in
/// it: a set is made for every snapshot a reader in another process follows, and most
/// pages of a large file are never read by a get (1.5 KiB a block).
const BLOCK: usize = 64;

/// Three words per page ([`Shape::pack`]); a first word of zero: not examined since the
/// page was written; [`SHAPELESS`]: examined, no shape.
type Block = [[AtomicU64; 3]; BLOCK];

/// Which pages have been verified since they were last written, with the [`Shape`] a
/// reader found in each verified leaf that has one.
///
/// A shape is recorded by the first get that reaches a verified leaf, and cleared with the
/// page's bit when the page is rewritten. Readers never see a shape of a page's earlier
/// contents: a page is only rewritten while it is free, when no snapshot a reader holds can
/// reach it, and a reader gets the new contents' snapshot after the writer cleared the bit
/// and the shape.
#[derive(Debug)]
pub(crate) struct VerifiedSet {
    words: Box<[AtomicU64]>,
    shapes: Box<[OnceLock<Box<Block>>]>,
}

fn new_block() -> Box<Block> {
    Box::new(std::array::from_fn(|_| Default::default()))
}

impl VerifiedSet {
    pub fn with_capacity(pages: u64) -> VerifiedSet {
        let words = usize::try_from(pages.div_ceil(64)).unwrap_or(0).max(1);
        VerifiedSet {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
            shapes: (0..(words * 64).div_ceil(BLOCK))
                .map(|_| OnceLock::new())
                .collect(),
        }
    }

    pub fn capacity(&self) -> u64 {
        self.words.len() as u64 * 64
    }

    fn word(&self, page: u64) -> Option<(&AtomicU64, u64)> {
        let w = self.words.get(usize::try_from(page / 64).ok()?)?;
        Some((w, 1 << (page % 64)))
    }

    /// The block holding `page`'s shape (allocated or not), and the page's place in it;
    /// `None` past the set's capacity.
    fn block(&self, page: u64) -> Option<(&OnceLock<Box<Block>>, usize)> {
        let page = usize::try_from(page).ok()?;
        Some((self.shapes.get(page / BLOCK)?, page % BLOCK))
    }

    #[inline]
    pub fn contains(&self, page: u64) -> bool {
        self.word(page)
            .is_some_and(|(w, bit)| w.load(Ordering::Relaxed) & bit != 0)
    }

    pub fn insert(&self, page: u64) {
        if let Some((w, bit)) = self.word(page) {
            w.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// Records what a reader found of verified leaf `page`'s shape.
    pub fn set_shape(&self, page: u64, shape: Option<Shape>) {
        let Some((block, i)) = self.block(page) else {
            return;
        };
        let words = &block.get_or_init(new_block)[i];
        match shape {
            Some(shape) => {
                let [first, rest @ ..] = shape.pack();
                for (word, value) in words[1..].iter().zip(rest) {
                    word.store(value, Ordering::Relaxed);
                }
                words[0].store(first, Ordering::Release);
            }
            None => words[0].store(SHAPELESS, Ordering::Relaxed),
        }
    }

    /// What readers found of verified leaf `page`'s shape.
    #[inline]
    pub fn shape(&self, page: u64) -> Known {
        let Some((block, i)) = self.block(page) else {
            return Known::Shapeless;
        };
        let Some(block) = block.get() else {
            return Known::Unexamined;
        };
        let words = &block[i];
        match words[0].load(Ordering::Acquire) {
            0 => Known::Unexamined,
            SHAPELESS => Known::Shapeless,
            first => Shape::unpack([
                first,
                words[1].load(Ordering::Relaxed),
                words[2].load(Ordering::Relaxed),
            ])
            .map_or(Known::Shapeless, Known::Shaped),
        }
    }

    pub fn remove(&self, page: u64) {
        if let Some((w, bit)) = self.word(page) {
            w.fetch_and(!bit, Ordering::Relaxed);
        }
        // A block not yet allocated holds nothing to clear (and is all zeros when it is).
        if let Some((block, i)) = self.block(page)
            && let Some(block) = block.get()
        {
            block[i][0].store(0, Ordering::Relaxed);
        }
    }

    /// Forgets every page: each is verified again when next read.
    pub fn clear(&self) {
        for page in 0..self.capacity() {
            self.remove(page);
        }
    }

    /// A copy with room for at least `pages` pages (twice that, so copies stay rare).
    pub fn grown(&self, pages: u64) -> VerifiedSet {
        let bigger = VerifiedSet::with_capacity(pages.saturating_mul(2));
        for (dst, src) in bigger.words.iter().zip(self.words.iter()) {
            dst.store(src.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        for (dst, src) in bigger.shapes.iter().zip(self.shapes.iter()) {
            if let Some(src) = src.get() {
                let copy = dst.get_or_init(new_block);
                for (d, s) in copy.iter().flatten().zip(src.iter().flatten()) {
                    d.store(s.load(Ordering::Relaxed), Ordering::Relaxed);
                }
            }
        }
        bigger
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{LeafNode, ValueRef};

    #[test]
    fn verified_set_marks_and_grows() {
        let v = VerifiedSet::with_capacity(10);
        assert!(!v.contains(3));
        v.insert(3);
        v.insert(1_000_000); // out of range: ignored
        assert!(v.contains(3) && !v.contains(1_000_000));
        let g = v.grown(1000);
        assert!(g.capacity() >= 1000 && g.contains(3));
        g.remove(3);
        assert!(!g.contains(3) && v.contains(3));
    }

    #[test]
    fn shapes_are_kept_copied_and_cleared_with_their_pages() {
        let entries: Vec<(&[u8], ValueRef)> = vec![
            (b"k1", ValueRef::Inline(b"one")),
            (b"k2", ValueRef::Inline(b"two")),
        ];
        let shape = Shape::of(&LeafNode::with_entries(4096, &entries).page(5));
        let Some(shape) = shape else {
            panic!("a leaf of two alike entries has a shape");
        };
        let v = VerifiedSet::with_capacity(10);
        assert_eq!(v.shape(5), Known::Unexamined);
        v.set_shape(5, Some(shape));
        v.set_shape(6, None);
        v.set_shape(1_000_000, Some(shape)); // out of range: ignored
        assert_eq!(v.shape(5), Known::Shaped(shape));
        assert_eq!(v.shape(6), Known::Shapeless);
        assert_eq!(v.shape(1_000_000), Known::Shapeless);
        let g = v.grown(1000);
        assert_eq!(g.shape(5), Known::Shaped(shape));
        assert_eq!(g.shape(6), Known::Shapeless);
        g.remove(5);
        g.remove(6);
        assert_eq!(g.shape(5), Known::Unexamined);
        assert_eq!(g.shape(6), Known::Unexamined);
        assert_eq!(v.shape(5), Known::Shaped(shape));
    }
}
