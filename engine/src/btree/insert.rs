//! Inserting into a tree: copy the path down, add or replace in the leaf, split upwards.
//!
//! A leaf that overflows because a key was appended after all others keeps its entries
//! and starts a new right sibling with the new one, so sequential loads fill leaves fully.

use super::writer::split_point;
use super::{BranchNode, LeafNode, MAX_DEPTH, Node, TreeWriter, Value};
use crate::error::{Error, Result};
use crate::format::{
    BRANCH_HEADER, ChildRef, LEAF_HEADER, ValueRef, branch_entry_size, leaf_entry_size,
};

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
        let value = self.make_value(key.len(), value)?;
        let Some(r) = *root else {
            let mut leaf = LeafNode::new(self.page_size());
            leaf.push(key, value)?;
            *root = Some(owned(self.new_node(Node::Leaf(leaf))));
            return Ok(false);
        };
        let id = self.own(r)?;
        let (old, split) = self.insert_at(id, key, value, 0)?;
        let mut top = owned(id);
        if let Some((sep, right)) = split {
            let mut b = BranchNode::new(top);
            b.push(&sep, owned(right));
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
                let found = leaf.search(key)?;
                let replaced = match found {
                    Ok(i) => leaf.entry_size(i)?,
                    Err(_) => 0,
                };
                if leaf.size - replaced + leaf_entry_size(key.len(), &value) <= page_size {
                    let old = match found {
                        Ok(i) => Some(leaf.replace(i, value)?),
                        Err(i) => {
                            leaf.insert(i, key, value)?;
                            None
                        }
                    };
                    return Ok((old, None));
                }
                let (old, right) = split_leaf(leaf, found, key, value)?;
                let sep: Box<[u8]> = right.key(0)?.into();
                return Ok((old, Some((sep, self.new_node(Node::Leaf(right))))));
            }
        };
        let cid = self.own(child)?;
        let (old, split) = self.insert_at(cid, key, value, depth + 1)?;
        let Node::Branch(b) = self.node_mut(id)? else {
            return Err(Error::corrupt(id, "internal: branch changed kind"));
        };
        b.set_child(i, owned(cid));
        let Some((sep, right)) = split else {
            return Ok((old, None));
        };
        b.insert(i, &sep, owned(right));
        if b.size <= page_size {
            return Ok((old, None));
        }
        let appended = i + 1 == b.len();
        let (sep, right) = split_branch(b, appended, page_size);
        Ok((old, Some((sep, self.new_node(Node::Branch(right))))))
    }
}

/// Splits a leaf that has no room for `key` and `value` (at `found`, as its search gave):
/// the leaf keeps the lower part, the returned new leaf holds the upper part; also returns
/// the value replaced, if any.
///
/// A key appended after all others starts the new leaf alone and leaves this one full.
fn split_leaf(
    leaf: &mut LeafNode,
    found: std::result::Result<usize, usize>,
    key: &[u8],
    value: ValueRef<'_>,
) -> Result<(Option<Value>, LeafNode)> {
    let page_size = leaf.page_size();
    if found == Err(leaf.len()) {
        let mut right = LeafNode::new(page_size);
        right.push(key, value)?;
        return Ok((None, right));
    }
    let mut entries = leaf.entries()?;
    let old = match found {
        Ok(i) => Some(Value::of(&std::mem::replace(&mut entries[i].1, value))),
        Err(i) => {
            entries.insert(i, (key, value));
            None
        }
    };
    let sizes: Vec<usize> = entries
        .iter()
        .map(|(k, v)| leaf_entry_size(k.len(), v))
        .collect();
    let k = split_point(&sizes, LEAF_HEADER, page_size, false);
    let left = LeafNode::with_entries(page_size, &entries[..k]);
    let right = LeafNode::with_entries(page_size, &entries[k..]);
    *leaf = left;
    Ok((old, right))
}

/// Splits an overfull branch: returns the separator that moves up and the new right branch.
fn split_branch(b: &mut BranchNode, appended: bool, page_size: usize) -> (Box<[u8]>, BranchNode) {
    let n = b.len();
    // Appending: leave the left branch full and give the right one the last two children.
    let m = if appended && n >= 3 {
        n - 1
    } else {
        let sizes: Vec<usize> = b
            .entries()
            .map(|(k, _)| branch_entry_size(k.len()))
            .collect();
        split_point(&sizes, BRANCH_HEADER, page_size, true)
    };
    b.split_off(m)
}
