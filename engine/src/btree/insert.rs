//! Inserting into a tree: copy the path down, add or replace in the leaf, split upwards.
//!
//! A leaf that overflows because a key was appended after all others keeps its entries
//! and starts a new right sibling with the new one, so sequential loads fill leaves fully.
//! The insert that ends in the tree's last leaf remembers it (a [`Tail`]): a key after all
//! others then goes straight into that leaf, without descending the tree again.

use super::writer::split_point;
use super::{BranchNode, LeafNode, MAX_DEPTH, Node, TreeWriter, Value};
use crate::error::{Error, Result};
use crate::format::{
    BRANCH_HEADER, ChildRef, LEAF_HEADER, ValueRef, branch_entry_size, compare, leaf_entry_size,
};

/// A node that split: the separator and the page of the new right sibling.
type Split = Option<(Box<[u8]>, u64)>;

fn owned(page: u64) -> ChildRef {
    // The checksum of an owned node is filled in when the commit encodes it.
    ChildRef { page, crc: 0 }
}

/// The last leaf of a tree, owned by the transaction along with every branch above it, as
/// the last insert into the tree left it. It stays right only as long as nothing else
/// changes the tree: whoever changes the tree otherwise forgets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tail {
    /// The tree's root page when the tail was found.
    root: u64,
    leaf: u64,
}

impl Tail {
    /// The tail leaf's page.
    pub fn leaf(&self) -> u64 {
        self.leaf
    }
}

impl TreeWriter<'_> {
    /// Inserts or replaces `key` in the tree under `root`; returns whether it existed.
    pub fn insert(
        &mut self,
        root: &mut Option<ChildRef>,
        key: &[u8],
        value: &[u8],
    ) -> Result<bool> {
        self.insert_with_tail(root, key, value, &mut None)
    }

    /// As [`TreeWriter::insert`], appending through `tail` (the tree's last leaf, as the
    /// previous insert left it) when `key` goes after every key and fits that leaf, and
    /// leaving in `tail` the last leaf as this insert leaves it (if it knows it). An error
    /// after the value is made leaves `tail` empty: the tree may be half changed.
    pub fn insert_with_tail(
        &mut self,
        root: &mut Option<ChildRef>,
        key: &[u8],
        value: &[u8],
        tail: &mut Option<Tail>,
    ) -> Result<bool> {
        let value = self.make_value(key.len(), value)?;
        let previous = tail.take();
        let Some(r) = *root else {
            let mut leaf = LeafNode::new(self.page_size());
            leaf.push(key, value)?;
            let id = self.new_node(Node::Leaf(leaf));
            *root = Some(owned(id));
            *tail = Some(Tail { root: id, leaf: id });
            return Ok(false);
        };
        if let Some(t) = previous.filter(|t| t.root == r.page) {
            let page_size = self.page_size();
            self.dirty.note_node(t.leaf);
            if let Some(Node::Leaf(leaf)) = self.dirty.nodes.get_mut(&t.leaf) {
                let after = match leaf.len().checked_sub(1) {
                    Some(last) => compare(key, leaf.key(last)?).is_gt(),
                    None => false,
                };
                if after && leaf.size + leaf_entry_size(key.len(), &value) <= page_size {
                    leaf.push(key, value)?;
                    *tail = Some(t);
                    return Ok(false);
                }
            }
        }
        let id = self.own(r)?;
        let mut last_leaf = None;
        let (old, split) = self.insert_at(id, key, value, 0, Some(&mut last_leaf))?;
        let mut top = owned(id);
        if let Some((sep, right)) = split {
            let mut b = BranchNode::new(top);
            b.push(&sep, owned(right));
            top = owned(self.new_node(Node::Branch(b)));
        }
        *root = Some(top);
        *tail = last_leaf.map(|leaf| Tail {
            root: top.page,
            leaf,
        });
        let existed = old.is_some();
        if let Some(old) = old {
            self.free_value(&old)?;
        }
        Ok(existed)
    }

    /// Inserts under owned node `id`. `last_leaf` is given when `id` is on the tree's right
    /// edge (every branch above took its last child): it gets the tree's last leaf, if the
    /// insert ends there.
    fn insert_at(
        &mut self,
        id: u64,
        key: &[u8],
        value: ValueRef<'_>,
        depth: usize,
        last_leaf: Option<&mut Option<u64>>,
    ) -> Result<(Option<Value>, Split)> {
        if depth > MAX_DEPTH {
            return Err(Error::corrupt(id, "tree too deep (a cycle?)"));
        }
        let page_size = self.page_size();
        let (i, child, last) = match self.node_mut(id)? {
            Node::Branch(b) => {
                let i = b.find_child(key);
                (i, b.child(i), i + 1 == b.children())
            }
            Node::Leaf(leaf) => {
                leaf.prefetch_insert_room();
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
                    if let Some(last_leaf) = last_leaf {
                        *last_leaf = Some(id);
                    }
                    return Ok((old, None));
                }
                let (old, right) = split_leaf(leaf, found, key, value)?;
                let sep: Box<[u8]> = right.key(0)?.into();
                let right = self.new_node(Node::Leaf(right));
                if let Some(last_leaf) = last_leaf {
                    // The upper part, wherever the key went, is the last leaf now.
                    *last_leaf = Some(right);
                }
                return Ok((old, Some((sep, right))));
            }
        };
        let cid = self.own(child)?;
        let last_leaf = last_leaf.filter(|_| last);
        let (old, split) = self.insert_at(cid, key, value, depth + 1, last_leaf)?;
        if split.is_none() && child == owned(cid) {
            // The child was owned already and did not split: this branch points at it as
            // it is, and is left alone (no second look-up of it, no rewrite of the same
            // pointer). A load in one transaction goes this way at every level.
            return Ok((old, None));
        }
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

#[cfg(test)]
mod tests {
    use super::Tail;
    use crate::btree::Node;
    use crate::write_txn::WriteTxn;
    use crate::{Database, Error};

    fn key(i: u32) -> [u8; 4] {
        i.to_be_bytes()
    }

    fn tail(w: &WriteTxn) -> Option<Tail> {
        w.tables.by_name("t").and_then(|t| t.tail)
    }

    /// The last key of the leaf `t` names, when `t` is still the tree's root-and-leaf pair.
    fn last_key_of(w: &WriteTxn, t: Tail) -> Option<Vec<u8>> {
        let root = w.tables.by_name("t")?.current.root?;
        let Some(Node::Leaf(leaf)) = w.dirty.nodes.get(&t.leaf) else {
            return None;
        };
        let last = leaf.key(leaf.len().checked_sub(1)?).ok()?;
        (root.page == t.root).then(|| last.to_vec())
    }

    #[test]
    fn appends_go_through_the_last_leaf_and_other_changes_forget_it() -> Result<(), Error> {
        let db = Database::builder().page_size(1024).in_memory()?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        let mut leaves = std::collections::HashSet::new();
        for i in (0..4_000).step_by(2) {
            w.open_table("t")?.insert(&key(i), &[7; 40])?;
            let Some(t) = tail(&w) else {
                panic!("no tail after appending {i}");
            };
            assert_eq!(last_key_of(&w, t), Some(key(i).to_vec()), "after {i}");
            leaves.insert(t.leaf);
        }
        // Many leaves, each the tail while it filled.
        assert!(leaves.len() > 100, "{} leaves", leaves.len());
        // A remove forgets the tail; so does an insert away from the end.
        w.open_table("t")?.remove(&key(3_998))?;
        assert_eq!(tail(&w), None);
        w.open_table("t")?.insert(&key(3_999), &[7; 40])?;
        assert!(tail(&w).is_some());
        w.open_table("t")?.insert(&key(1), &[1; 40])?;
        assert_eq!(tail(&w), None);
        // The next append finds the last leaf by descending, then goes through it again.
        for i in 4_000..4_010 {
            w.open_table("t")?.insert(&key(i), &[8; 40])?;
            let Some(t) = tail(&w) else {
                panic!("no tail after appending {i}");
            };
            assert_eq!(last_key_of(&w, t), Some(key(i).to_vec()));
        }
        w.commit()?;
        let r = db.begin_read()?;
        let t = r.open_table("t")?;
        assert_eq!(t.len(), 2_000 + 1 + 10);
        let keys: Vec<Vec<u8>> = t
            .iter()?
            .map(|e| e.map(|(k, _)| k.to_vec()))
            .collect::<Result<_, _>>()?;
        let mut want: Vec<u32> = (0..3_998)
            .step_by(2)
            .chain([1, 3_999])
            .chain(4_000..4_010)
            .collect();
        want.sort_unstable();
        assert_eq!(
            keys,
            want.into_iter()
                .map(|i| key(i).to_vec())
                .collect::<Vec<_>>()
        );
        Ok(())
    }
}
