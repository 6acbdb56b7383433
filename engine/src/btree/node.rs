//! Tree nodes: owned ones being changed by a write transaction, and read-only views that
//! cover both those and committed pages.

pub(crate) use super::branch_node::BranchNode;
use crate::error::Result;
use crate::format::{
    BRANCH_HEADER, BranchPage, ChildRef, LEAF_HEADER, LeafPage, branch_entry_size, leaf_entry_size,
};
pub(crate) use crate::format::{LeafNode, Value};

/// A tree node owned by a write transaction.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Leaf(LeafNode),
    Branch(BranchNode),
}

/// A leaf to read: a committed page, or the page of a leaf the transaction is editing.
pub(crate) type LeafView<'a> = LeafPage<'a>;

/// A branch to read: a committed page or an owned node.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BranchView<'a> {
    Page(BranchPage<'a>),
    Owned(&'a BranchNode),
}

/// A node to read.
#[derive(Debug, Clone, Copy)]
pub(crate) enum NodeView<'a> {
    Leaf(LeafView<'a>),
    Branch(BranchView<'a>),
}

impl BranchView<'_> {
    /// The separator before child `i` (for `i` ≥ 1).
    pub fn key(&self, i: usize) -> Result<&[u8]> {
        match self {
            BranchView::Page(p) => p.key(i - 1),
            BranchView::Owned(n) => Ok(n.sep(i - 1)),
        }
    }

    /// The number of children.
    pub fn children(&self) -> usize {
        match self {
            BranchView::Page(p) => p.keys() + 1,
            BranchView::Owned(n) => n.children(),
        }
    }

    pub fn child(&self, i: usize) -> Result<ChildRef> {
        match self {
            BranchView::Page(p) => p.child(i),
            BranchView::Owned(n) => Ok(n.child(i)),
        }
    }

    pub fn find_child(&self, key: &[u8]) -> Result<usize> {
        match self {
            BranchView::Page(p) => p.find_child(key),
            BranchView::Owned(n) => Ok(n.find_child(key)),
        }
    }
}

impl NodeView<'_> {
    /// The bytes the node takes in a page, header included.
    pub fn size(&self) -> Result<usize> {
        Ok(match self {
            NodeView::Branch(BranchView::Owned(n)) => n.size,
            NodeView::Leaf(l) => {
                let mut size = LEAF_HEADER;
                for i in 0..l.len() {
                    let (k, v) = l.entry(i)?;
                    size += leaf_entry_size(k.len(), &v);
                }
                size
            }
            NodeView::Branch(b) => {
                let mut size = BRANCH_HEADER;
                for i in 1..b.children() {
                    size += branch_entry_size(b.key(i)?.len());
                }
                size
            }
        })
    }
}
