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
    /// Leaves the cursor moved into since its seek.
    crossed: u32,
    /// The page a scan will read after this leaf's successor, how much of it has been
    /// asked for, and how much each step asks for (see [`Cursor::prefetch_beyond`]).
    ahead: Option<Ahead<'a>>,
}

/// The page after the next one, asked for a few lines at each step through a leaf.
#[derive(Debug, Clone, Copy)]
struct Ahead<'a> {
    bytes: &'a [u8],
    at: usize,
    per_step: usize,
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
            crossed: 0,
            ahead: None,
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
                self.crossed = self.crossed.saturating_add(1);
                if self.crossed > 1 {
                    self.prefetch_beyond(forward);
                }
                return Ok(());
            }
        }
        Ok(())
    }

    /// A scan that read a whole leaf and crossed into the next likely goes on to the one
    /// after: asks for that leaf's page while this one is read (the processor's own
    /// prefetching stops at the end of a memory page, and the next leaf may lie anywhere
    /// in the file). Measured (100,000 keys): full scans 29 % faster, scans of 1,000 keys
    /// 37 %; asking from the first crossing on made scans of 10 keys slower. The page is
    /// asked for a few lines at each step through this leaf, so that it is all asked for
    /// by the leaf's end: asked for at once, its 64 lines stalled the scan until the
    /// first-level cache's few outstanding requests drained (a third of a cached scan's
    /// time went to that loop); spread, full scans ran 13–35 % faster (thirty-third
    /// session, docs/benchmark-history.md).
    fn prefetch_beyond(&mut self, forward: bool) {
        let Some((b, i)) = self.stack.last() else {
            return;
        };
        let beyond = if forward {
            (i + 1 < b.children()).then_some(i + 1)
        } else {
            i.checked_sub(1)
        };
        let Some(bytes) = beyond
            .and_then(|j| b.child(j).ok())
            .and_then(|child| self.pages.ahead(child.page))
        else {
            self.ahead = None;
            return;
        };
        // Spread over the steps through this leaf: the whole page asked for at once
        // stalled the scan until the first-level cache's few outstanding requests drained.
        let steps = self.leaf.map_or(1, |(leaf, _)| leaf.len()).max(1);
        let mut ahead = Ahead {
            bytes,
            at: 0,
            per_step: bytes.len().div_ceil(64).div_ceil(steps) * 64,
        };
        ahead.step();
        self.ahead = (ahead.at < bytes.len()).then_some(ahead);
    }

    /// Asks for the next lines of the page ahead, if any are left.
    #[inline]
    fn prefetch_step(&mut self) {
        if let Some(ahead) = &mut self.ahead {
            ahead.step();
            if ahead.at >= ahead.bytes.len() {
                self.ahead = None;
            }
        }
    }

    /// The entry under the cursor.
    #[inline]
    pub fn current(&self) -> Option<&(LeafView<'a>, usize)> {
        self.leaf.as_ref()
    }

    /// Moves one entry forward or back (in place: a scan takes this step per entry).
    #[inline]
    pub fn step(&mut self, forward: bool) -> Result<()> {
        let Some((leaf, i)) = &mut self.leaf else {
            return Ok(());
        };
        if forward && *i + 1 < leaf.len() {
            *i += 1;
            self.prefetch_step();
            Ok(())
        } else if !forward && *i > 0 {
            *i -= 1;
            self.prefetch_step();
            Ok(())
        } else {
            self.next_leaf(forward)
        }
    }
}

impl Ahead<'_> {
    /// Asks for the next `per_step` bytes' lines.
    #[inline]
    fn step(&mut self) {
        let end = (self.at + self.per_step).min(self.bytes.len());
        while self.at < end {
            crate::format::prefetch::prefetch(self.bytes, self.at);
            self.at += 64;
        }
    }
}

/// One end of a range: a cursor, or — for an unbounded end not walked from yet — nothing,
/// so that a range walked from one end descends the tree once, not twice.
#[derive(Debug, Clone)]
enum End<'a> {
    Unsought,
    At(Cursor<'a>),
}

impl<'a> End<'a> {
    /// `None` while not sought; else the cursor's entry (`Some(None)`: off the tree).
    #[inline]
    fn current(&self) -> Option<Option<&(LeafView<'a>, usize)>> {
        match self {
            End::Unsought => None,
            End::At(c) => Some(c.current()),
        }
    }
}

/// The entries between two cursors, from either end. Yields an error at most once, then ends.
///
/// The front cursor never passes the back one: their keys are compared once, when both
/// exist; after that, each step ends the range when it yields the entry both cursors are
/// on (on different leaves, the front one is the earlier leaf). An unbounded end is sought
/// only when the range is first walked from it; until then, that end of the tree is the
/// limit and a cursor running off the tree ends the range.
#[derive(Debug, Clone)]
pub(crate) struct RangeIter<'a> {
    pages: Pages<'a>,
    root: Option<ChildRef>,
    front: End<'a>,
    back: End<'a>,
    done: bool,
}

impl<'a> RangeIter<'a> {
    pub fn new(
        pages: Pages<'a>,
        root: Option<ChildRef>,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> Result<RangeIter<'a>> {
        let seek = |bound: Bound<&[u8]>, forward| -> Result<End<'a>> {
            Ok(match bound {
                Bound::Unbounded => End::Unsought,
                _ => End::At(Cursor::seek(pages, root, bound, forward)?),
            })
        };
        let mut it = RangeIter {
            pages,
            root,
            front: seek(start, true)?,
            back: seek(end, false)?,
            done: root.is_none(),
        };
        it.check_order()?;
        Ok(it)
    }

    /// Ends the range when a cursor is off the tree, or when both exist and are out of order.
    fn check_order(&mut self) -> Result<()> {
        match (self.front.current(), self.back.current()) {
            (Some(None), _) | (_, Some(None)) => self.done = true,
            (Some(Some((fl, fi))), Some(Some((bl, bi)))) if fl.key(*fi)? > bl.key(*bi)? => {
                self.done = true;
            }
            _ => {}
        }
        Ok(())
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
        let end = if forward {
            &mut self.front
        } else {
            &mut self.back
        };
        if let End::Unsought = end {
            *end = End::At(Cursor::seek(
                self.pages,
                self.root,
                Bound::Unbounded,
                forward,
            )?);
            self.check_order()?;
            if self.done {
                return Ok(None);
            }
        }
        let (mine, other) = if forward {
            (&mut self.front, &self.back)
        } else {
            (&mut self.back, &self.front)
        };
        let End::At(cursor) = mine else {
            return Ok(None);
        };
        let Some(&(ref leaf, i)) = cursor.current() else {
            return Ok(None);
        };
        // Whether this entry is the other cursor's too: then it is the range's last.
        let last = match other.current() {
            None => false,
            Some(None) => return Ok(None),
            Some(Some(&(ref ol, oi))) if leaf.same(ol) => {
                if (forward && i > oi) || (!forward && i < oi) {
                    return Ok(None);
                }
                i == oi
            }
            Some(Some(_)) => false,
        };
        let (key, value) = leaf.entry(i)?;
        let value = match value {
            ValueRef::Inline(v) => v,
            ValueRef::Overflow(o) => cursor.pages.overflow(o)?,
        };
        if last {
            self.done = true;
        } else {
            cursor.step(forward)?;
        }
        Ok(Some((key, value)))
    }
}

#[cfg(test)]
mod tests {
    use std::ops::{Bound, RangeBounds};

    use crate::{Database, Range, Result};

    type Bounds<'k> = (Bound<&'k [u8]>, Bound<&'k [u8]>);

    /// Walks 600 random ranges of a table holding keys `0..600` (bounds included, excluded
    /// or open; walked from one end or from both in a mixed order) and checks that each
    /// yields every key between its bounds exactly once.
    fn walk_random_ranges<'t>(range: impl Fn(Bounds<'_>) -> Result<Range<'t>>) -> Result<()> {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for _ in 0..600 {
            let (a, b) = ((next() % 620) as u16, (next() % 620) as u16);
            let (lo, hi) = (a.min(b), a.max(b));
            let (lo_key, hi_key) = (lo.to_be_bytes(), hi.to_be_bytes());
            let start = match next() % 3 {
                0 => Bound::Included(&lo_key[..]),
                1 => Bound::Excluded(&lo_key[..]),
                _ => Bound::Unbounded,
            };
            let end = match next() % 3 {
                0 => Bound::Included(&hi_key[..]),
                1 => Bound::Excluded(&hi_key[..]),
                _ => Bound::Unbounded,
            };
            let mut it = range((start, end))?;
            let (mut front, mut back) = (Vec::new(), Vec::new());
            // Some walks go one way only, some alternate.
            let bias = next() % 3;
            loop {
                let forward = match bias {
                    0 => true,
                    1 => false,
                    _ => next() % 2 == 0,
                };
                let item = if forward { it.next() } else { it.next_back() };
                let Some(item) = item else { break };
                let (k, _) = item?;
                let k = u16::from_be_bytes([k[0], k[1]]);
                if forward { front.push(k) } else { back.push(k) }
            }
            assert!(it.next().is_none() && it.next_back().is_none());
            back.reverse();
            front.extend(back);
            let want: Vec<u16> = (0..600u16)
                .filter(|k| (start, end).contains(&&k.to_be_bytes()[..]))
                .collect();
            assert_eq!(front, want, "range {start:?}..{end:?}");
        }
        Ok(())
    }

    /// Ranges over many small leaves yield each entry once, including when the two ends
    /// meet on the last or first entry of a leaf and when an open end is first walked from
    /// after the other has moved: over committed pages, and over the nodes a write
    /// transaction owns.
    #[test]
    fn both_ends_meet_once_across_leaves() -> Result<()> {
        let db = Database::builder().page_size(1024).in_memory()?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        let mut t = w.open_table("t")?;
        for i in 0u16..600 {
            t.insert(&i.to_be_bytes(), &[0u8; 40])?;
        }
        walk_random_ranges(|b| t.range::<[u8], _>(b))?;
        w.commit()?;
        let r = db.begin_read()?;
        let t = r.open_table("t")?;
        walk_random_ranges(|b| t.range::<[u8], _>(b))
    }
}
