//! The copy-on-write B+tree: nodes, cursors, and the insert and remove algorithms.
//!
//! Committed pages are read in place through [`Pages`]; a write transaction copies each
//! page it changes into an owned [`Node`] under a newly allocated page id, and the commit
//! encodes those nodes (see `commit.rs`).

mod branch_node;
mod cursor;
mod early_write_back;
mod insert;
mod journal;
mod node;
mod pages;
mod remove;
mod writer;

pub(crate) use cursor::RangeIter;
pub(crate) use early_write_back::{EarlyWriteBack, PIECE};
pub(crate) use insert::Tail;
pub(crate) use node::{BranchNode, BranchView, LeafNode, LeafView, Node, NodeView, Value};
pub(crate) use pages::{Dirty, Pages, Run};
pub(crate) use writer::TreeWriter;

/// The deepest tree the engine will descend: deeper means a cycle or damage.
pub(crate) const MAX_DEPTH: usize = 48;
