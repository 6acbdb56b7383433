//! Removing from a tree: copy the path down, remove in the leaf (one entry, or a run of
//! them for a range), then merge a node that fell under a quarter of a page into a
//! sibling when the two fit in one page, and shorten the tree when its root is left with
//! one child.

use super::{LeafNode, MAX_DEPTH, Node, TreeWriter};
use crate::error::{Error, Result};
use crate::format::{BRANCH_HEADER, ChildRef, LEAF_HEADER, branch_entry_size};

impl TreeWriter<'_> {
    /// Removes `key` from the tree under `root`; returns whether it was there.
    pub fn remove(&mut self, root: &mut Option<ChildRef>, key: &[u8]) -> Result<bool> {
        // Look first, so that removing an absent key copies nothing; the path found is
        // followed down again without searching.
        let Some(path) = self.pages().path(*root, key)? else {
            return Ok(false);
        };
        let Some(r) = *root else { return Ok(false) };
        let id = self.own(r)?;
        let old = self.remove_at(id, &path, 0, &mut |leaf, i| leaf.remove(i))?;
        *root = Some(ChildRef { page: id, crc: 0 });
        self.shorten(root);
        self.free_value(&old)?;
        Ok(true)
    }

    /// Removes, from the leaf that holds `first` (a key of the tree under `root`), the
    /// entries from `first` on for as long as `within` holds of their keys, handing each
    /// key to `removed` first, in order; returns how many it removed. A range is removed a
    /// leaf at a time: one descent per leaf, not per key.
    pub fn remove_run(
        &mut self,
        root: &mut Option<ChildRef>,
        first: &[u8],
        within: &dyn Fn(&[u8]) -> bool,
        removed: &mut dyn FnMut(&[u8]),
    ) -> Result<usize> {
        let Some(path) = self.pages().path(*root, first)? else {
            return Ok(0);
        };
        let Some(r) = *root else { return Ok(0) };
        let id = self.own(r)?;
        let olds = self.remove_at(id, &path, 0, &mut |leaf, i| {
            let mut end = i;
            while end < leaf.len() && within(leaf.key(end)?) {
                removed(leaf.key(end)?);
                end += 1;
            }
            // From the back: each removal moves only the entries after it.
            (i..end)
                .rev()
                .map(|j| leaf.remove(j))
                .collect::<Result<Vec<_>>>()
        })?;
        *root = Some(ChildRef { page: id, crc: 0 });
        self.shorten(root);
        for old in &olds {
            self.free_value(old)?;
        }
        Ok(olds.len())
    }

    /// Shortens the tree under an owned `root`: an empty root leaf empties the tree; a
    /// root branch with one child hands the root to that child.
    pub fn shorten(&mut self, root: &mut Option<ChildRef>) {
        while let Some(r) = *root {
            match self.dirty.nodes.get(&r.page) {
                Some(Node::Leaf(l)) if l.is_empty() => {
                    self.free_page(r.page);
                    *root = None;
                }
                Some(Node::Branch(b)) if b.len() == 0 => {
                    let only = b.child(0);
                    self.free_page(r.page);
                    *root = Some(only);
                }
                _ => break,
            }
        }
    }

    /// Follows `path` (child indexes from node `id` down, then an entry's index in its
    /// leaf), copying the nodes on it, and has `at_leaf` remove from the leaf at that
    /// index; then merges the nodes left under a quarter full on the way back up.
    fn remove_at<T>(
        &mut self,
        id: u64,
        path: &[usize],
        depth: usize,
        at_leaf: &mut dyn FnMut(&mut LeafNode, usize) -> Result<T>,
    ) -> Result<T> {
        let (Some(&i), true) = (path.get(depth), depth <= MAX_DEPTH) else {
            return Err(Error::corrupt(id, "internal: removal path too short"));
        };
        let child = match self.node_mut(id)? {
            Node::Leaf(leaf) => return at_leaf(leaf, i),
            Node::Branch(b) if i < b.children() => b.child(i),
            Node::Branch(_) => {
                return Err(Error::corrupt(id, "internal: removal path off the branch"));
            }
        };
        let cid = self.own(child)?;
        let out = self.remove_at(cid, path, depth + 1, at_leaf)?;
        if let Node::Branch(b) = self.node_mut(id)? {
            b.set_child(i, ChildRef { page: cid, crc: 0 });
        }
        self.rebalance(id, i)?;
        Ok(out)
    }

    /// Merges child `i` of branch `parent` with a neighbour when it is under a quarter
    /// full and the two fit in one page.
    fn rebalance(&mut self, parent: u64, i: usize) -> Result<()> {
        let page_size = self.page_size();
        let Node::Branch(p) = self.node_mut(parent)? else {
            return Ok(());
        };
        let child = p.child(i);
        let children = p.children();
        let size = match self.dirty.nodes.get(&child.page) {
            Some(Node::Leaf(l)) => l.size,
            Some(Node::Branch(b)) => b.size,
            None => return Ok(()),
        };
        if size >= page_size / 4 || children < 2 {
            return Ok(());
        }
        let left_idx = if i + 1 < children { i } else { i - 1 };
        let (left_ref, right_ref, sep) = {
            let Node::Branch(p) = self.node_mut(parent)? else {
                return Ok(());
            };
            (
                p.child(left_idx),
                p.child(left_idx + 1),
                Box::<[u8]>::from(p.sep(left_idx)),
            )
        };
        let right = self.read_node(right_ref)?;
        let left = self.read_node(left_ref)?;
        let fits = match (&left, &right) {
            (Node::Leaf(l), Node::Leaf(r)) => l.size + r.size - LEAF_HEADER <= page_size,
            (Node::Branch(l), Node::Branch(r)) => {
                l.size + r.size - BRANCH_HEADER + branch_entry_size(sep.len()) <= page_size
            }
            _ => {
                return Err(Error::corrupt(
                    right_ref.page,
                    "siblings of different kinds",
                ));
            }
        };
        if !fits {
            return Ok(());
        }
        let left_id = self.own(left_ref)?;
        self.free_page(right_ref.page);
        self.absorb(left_id, sep, right)?;
        if let Node::Branch(p) = self.node_mut(parent)? {
            p.remove(left_idx);
            p.set_child(
                left_idx,
                ChildRef {
                    page: left_id,
                    crc: 0,
                },
            );
        }
        Ok(())
    }
}
