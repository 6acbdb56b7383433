//! Inserting into a tree: copy the path down, add or replace in the leaf, split upwards.
//!
//! A leaf that overflows because a key was appended after all others keeps its entries
//! and starts a new right sibling with the new one, so sequential loads fill leaves fully.

use super::writer::split_point;
use super::{BranchNode, LeafNode, MAX_DEPTH, Node, TreeWriter, Value};
use crate::error::{Error, Result};
use crate::format::{BRANCH_HEADER, ChildRef, LEAF_HEADER, ValueRef, branch_entry_size};

/// A node that split: the separator and the page of the new right sibling.
type Split = Option<(Box<[u8]>, u64)>;

fn owned(page: u64) -> ChildRef {
    // The checksum of an owned node is filled in when the commit encodes it.
    ChildRef { page, crc: 0 }
}

impl TreeWriter<'_> {
    /// Inserts or replaces `key` in the tree under `root`; returns whether it existed.
    pub fn insert(
        &mut self,
        root: &mut Option<ChildRef>,
        key: &[u8],
        value: &[u8],
    ) -> Result<bool> {
        let value = self.make_value(key.len(), value);
        let Some(r) = *root else {
            let mut leaf = LeafNode::new();
            leaf.push(key, value);
            *root = Some(owned(self.new_node(Node::Leaf(leaf))));
            return Ok(false);
        };
        let id = self.own(r)?;
        let (old, split) = self.insert_at(id, key, value, 0)?;
        let mut top = owned(id);
        if let Some((sep, right)) = split {
            let mut b = BranchNode::new(top);
            b.push(sep, owned(right));
            top = owned(self.new_node(Node::Branch(b)));
        }
        *root = Some(top);
        let existed = old.is_some();
        if let Some(old) = old {
            self.free_value(&old)?;
        }
        Ok(existed)
    }

    fn insert_at(
        &mut self,
        id: u64,
        key: &[u8],
        value: ValueRef<'_>,
        depth: usize,
    ) -> Result<(Option<Value>, Split)> {
        if depth > MAX_DEPTH {
            return Err(Error::corrupt(id, "tree too deep (a cycle?)"));
        }
        let page_size = self.page_size();
        let (i, child) = match self.node_mut(id)? {
            Node::Branch(b) => {
                let i = b.find_child(key);
                (i, b.child(i))
            }
            Node::Leaf(leaf) => {
                let (old, at) = match leaf.search(key) {
                    Ok(i) => (Some(leaf.replace(i, value)), i),
                    Err(i) => {
                        leaf.insert(i, key, value);
                        (None, i)
                    }
                };
                if leaf.size <= page_size {
                    return Ok((old, None));
                }
                let appended = old.is_none() && at + 1 == leaf.len();
                let right = split_leaf(leaf, appended, page_size);
                let sep: Box<[u8]> = right.key(0).into();
                return Ok((old, Some((sep, self.new_node(Node::Leaf(right))))));
            }
        };
        let cid = self.own(child)?;
        let (old, split) = self.insert_at(cid, key, value, depth + 1)?;
        let Node::Branch(b) = self.node_mut(id)? else {
            return Err(Error::corrupt(id, "internal: branch changed kind"));
        };
        *b.child_mut(i) = owned(cid);
        let Some((sep, right)) = split else {
            return Ok((old, None));
        };
        b.size += branch_entry_size(sep.len());
        b.entries.insert(i, (sep, owned(right)));
        if b.size <= page_size {
            return Ok((old, None));
        }
        let appended = i + 1 == b.entries.len();
        let (sep, right) = split_branch(b, appended, page_size);
        Ok((old, Some((sep, self.new_node(Node::Branch(right))))))
    }
}

/// Moves the upper part of an overfull leaf into a new leaf, which is returned.
fn split_leaf(leaf: &mut LeafNode, appended: bool, page_size: usize) -> LeafNode {
    let n = leaf.len();
    let k = if appended {
        n - 1
    } else {
        let sizes: Vec<usize> = (0..n).map(|i| leaf.entry_size(i)).collect();
        split_point(&sizes, LEAF_HEADER, page_size, false)
    };
    leaf.split_off(k)
}

/// Splits an overfull branch: returns the separator that moves up and the new right branch.
fn split_branch(b: &mut BranchNode, appended: bool, page_size: usize) -> (Box<[u8]>, BranchNode) {
    let n = b.entries.len();
    // Appending: leave the left branch full and give the right one the last two children.
    let m = if appended && n >= 3 {
        n - 1
    } else {
        let sizes: Vec<usize> = b
            .entries
            .iter()
            .map(|(k, _)| branch_entry_size(k.len()))
            .collect();
        split_point(&sizes, BRANCH_HEADER, page_size, true)
    };
    let mut tail = b.entries.split_off(m);
    let (sep, first) = tail.remove(0);
    let mut right = BranchNode::new(first);
    for (key, child) in tail {
        right.push(key, child);
    }
    b.size = BRANCH_HEADER
        + b.entries
            .iter()
            .map(|(k, _)| branch_entry_size(k.len()))
            .sum::<usize>();
    (sep, right)
}
