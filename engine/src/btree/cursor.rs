//! Cursors: a position in a tree, moved forward and back, and the double-ended range
//! iterator built from two of them.

use std::ops::Bound;

use super::{BranchView, LeafView, MAX_DEPTH, NodeView, Pages};
use crate::error::{Error, Result};
use crate::format::{ChildRef, ValueRef};

/// Where a descent goes at each level.
#[derive(Clone, Copy)]
enum Target<'k> {
    First,
    Last,
    Key(&'k [u8]),
}

/// A position on an entry of a tree, or off its end.
#[derive(Debug, Clone)]
pub(crate) struct Cursor<'a> {
    pages: Pages<'a>,
    /// The branches above the current leaf, each with the index of the child taken.
    stack: Vec<(BranchView<'a>, usize)>,
    /// The current leaf and entry; `None` once the cursor has left the tree.
    leaf: Option<(LeafView<'a>, usize)>,
}

impl<'a> Cursor<'a> {
    /// A cursor on the first entry at or after `bound` (`forward`), or on the last entry at
    /// or before it.
    pub fn seek(
        pages: Pages<'a>,
        root: Option<ChildRef>,
        bound: Bound<&[u8]>,
        forward: bool,
    ) -> Result<Cursor<'a>> {
        let mut c = Cursor {
            pages,
            stack: Vec::new(),
            leaf: None,
        };
        let Some(root) = root else { return Ok(c) };
        let target = match (bound, forward) {
            (Bound::Unbounded, true) => Target::First,
            (Bound::Unbounded, false) => Target::Last,
            (Bound::Included(k) | Bound::Excluded(k), _) => Target::Key(k),
        };
        let leaf = c.descend(root, target)?;
        let pos = match (bound, forward) {
            (Bound::Unbounded, true) => Some(0),
            (Bound::Unbounded, false) => leaf.len().checked_sub(1),
            (Bound::Included(k), true) => Some(leaf.search(k)?.unwrap_or_else(|i| i)),
            (Bound::Excluded(k), true) => Some(leaf.search(k)?.map_or_else(|i| i, |i| i + 1)),
            (Bound::Included(k), false) => match leaf.search(k)? {
                Ok(i) => Some(i),
                Err(i) => i.checked_sub(1),
            },
            (Bound::Excluded(k), false) => leaf.search(k)?.unwrap_or_else(|i| i).checked_sub(1),
        };
        match pos {
            Some(i) if i < leaf.len() => c.leaf = Some((leaf, i)),
            _ if forward => {
                c.leaf = Some((leaf, leaf.len()));
                c.next_leaf(true)?;
            }
            _ => {
                c.leaf = Some((leaf, 0));
                c.next_leaf(false)?;
            }
        }
        Ok(c)
    }

    /// Descends from `r` to a leaf, pushing the branches passed.
    fn descend(&mut self, mut r: ChildRef, target: Target<'_>) -> Result<LeafView<'a>> {
        loop {
            if self.stack.len() > MAX_DEPTH {
                return Err(Error::corrupt(
                    r.page,
                    "tree deeper than any valid tree (a cycle?)",
                ));
            }
            match self.pages.node(r)? {
                NodeView::Leaf(leaf) => return Ok(leaf),
                NodeView::Branch(b) => {
                    let i = match target {
                        Target::First => 0,
                        Target::Last => b.children() - 1,
                        Target::Key(k) => b.find_child(k)?,
                    };
                    r = b.child(i)?;
                    self.stack.push((b, i));
                }
            }
        }
    }

    /// Moves to the first entry of the next leaf (`forward`) or the last of the previous
    /// one, skipping empty leaves; leaves the tree when there is none.
    fn next_leaf(&mut self, forward: bool) -> Result<()> {
        self.leaf = None;
        while let Some((b, i)) = self.stack.pop() {
            let next = if forward {
                (i + 1 < b.children()).then_some(i + 1)
            } else {
                i.checked_sub(1)
            };
            let Some(next) = next else { continue };
            self.stack.push((b, next));
            let target = if forward { Target::First } else { Target::Last };
            let leaf = self.descend(b.child(next)?, target)?;
            if leaf.len() > 0 {
                let i = if forward { 0 } else { leaf.len() - 1 };
                self.leaf = Some((leaf, i));
                return Ok(());
            }
        }
        Ok(())
    }

    /// The entry under the cursor.
    pub fn current(&self) -> Option<(LeafView<'a>, usize)> {
        self.leaf
    }

    /// Moves one entry forward or back.
    pub fn step(&mut self, forward: bool) -> Result<()> {
        let Some((leaf, i)) = self.leaf else {
            return Ok(());
        };
        if forward && i + 1 < leaf.len() {
            self.leaf = Some((leaf, i + 1));
            Ok(())
        } else if !forward && i > 0 {
            self.leaf = Some((leaf, i - 1));
            Ok(())
        } else {
            self.next_leaf(forward)
        }
    }
}

/// The entries between two cursors, from either end. Yields an error at most once, then ends.
///
/// The front cursor never passes the back one: their keys are compared once, when the
/// range is made; after that, each step ends the range when it yields the entry both
/// cursors are on (on different leaves, the front one is the earlier leaf).
#[derive(Debug, Clone)]
pub(crate) struct RangeIter<'a> {
    front: Cursor<'a>,
    back: Cursor<'a>,
    done: bool,
}

impl<'a> RangeIter<'a> {
    pub fn new(
        pages: Pages<'a>,
        root: Option<ChildRef>,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> Result<RangeIter<'a>> {
        let front = Cursor::seek(pages, root, start, true)?;
        let back = Cursor::seek(pages, root, end, false)?;
        let done = match (front.current(), back.current()) {
            (Some((fl, fi)), Some((bl, bi))) => fl.key(fi)? > bl.key(bi)?,
            _ => true,
        };
        Ok(RangeIter { front, back, done })
    }

    /// The next entry from the front or the back.
    pub fn advance(&mut self, forward: bool) -> Option<Result<(&'a [u8], &'a [u8])>> {
        if self.done {
            return None;
        }
        let r = self.try_advance(forward);
        if !matches!(r, Ok(Some(_))) {
            self.done = true;
        }
        r.transpose()
    }

    fn try_advance(&mut self, forward: bool) -> Result<Option<(&'a [u8], &'a [u8])>> {
        let (Some((fl, fi)), Some((bl, bi))) = (self.front.current(), self.back.current()) else {
            return Ok(None);
        };
        let same_leaf = fl.same(&bl);
        if same_leaf && fi > bi {
            return Ok(None);
        }
        let (leaf, i, cursor) = if forward {
            (fl, fi, &mut self.front)
        } else {
            (bl, bi, &mut self.back)
        };
        let (key, value) = leaf.entry(i)?;
        let value = match value {
            ValueRef::Inline(v) => v,
            ValueRef::Overflow(o) => cursor.pages.overflow(o)?,
        };
        if same_leaf && fi == bi {
            // The last entry between the cursors: the range ends after it.
            self.done = true;
        } else {
            cursor.step(forward)?;
        }
        Ok(Some((key, value)))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Database, Result};

    /// Ranges over a tree of many small leaves, walked from both ends in a mixed order,
    /// yield each entry between their bounds exactly once — including when the two ends
    /// meet on the last or first entry of a leaf.
    #[test]
    fn both_ends_meet_once_across_leaves() -> Result<()> {
        let db = Database::builder().page_size(1024).in_memory()?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        let mut t = w.open_table("t")?;
        for i in 0u16..600 {
            t.insert(&i.to_be_bytes(), &[0u8; 40])?;
        }
        drop(t);
        w.commit()?;
        let r = db.begin_read()?;
        let t = r.open_table("t")?;
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for _ in 0..300 {
            let (a, b) = ((next() % 620) as u16, (next() % 620) as u16);
            let (lo, hi) = (a.min(b), a.max(b));
            let mut it = t.range(&lo.to_be_bytes()[..]..&hi.to_be_bytes()[..])?;
            let (mut front, mut back) = (Vec::new(), Vec::new());
            loop {
                let item = if next() % 2 == 0 {
                    it.next().map(|e| e.map(|e| (e, &mut front)))
                } else {
                    it.next_back().map(|e| e.map(|e| (e, &mut back)))
                };
                let Some(item) = item else { break };
                let ((k, _), side) = item?;
                side.push(u16::from_be_bytes([k[0], k[1]]));
            }
            back.reverse();
            front.extend(back);
            let want: Vec<u16> = (lo..hi.min(600)).collect();
            assert_eq!(front, want, "range {lo}..{hi}");
        }
        Ok(())
    }
}
