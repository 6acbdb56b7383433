//! The write side of a tree: owning (copying) nodes, allocating and freeing their pages.

use std::sync::OnceLock;

use super::{BranchNode, Dirty, LeafNode, Node, NodeView, Pages, Run, Value};
use crate::error::{Error, Result};
use crate::format::{
    ChildRef, OVERFLOW_HEADER, OverflowRef, PageKind, ValueRef, ZERO_PAGE, checksum_parts,
    leaf_entry_size, max_inline_entry, write_page_header,
};
use crate::freelist::FreeList;
use crate::pager::{Snapshot, TreePage};

/// A write transaction's view of one or more trees, with what it needs to change them.
#[derive(Debug)]
pub(crate) struct TreeWriter<'a> {
    pub snapshot: &'a Snapshot,
    pub dirty: &'a mut Dirty,
    pub alloc: &'a mut FreeList,
    pub txid: u64,
}

impl TreeWriter<'_> {
    pub fn page_size(&self) -> usize {
        self.snapshot.page_size
    }

    pub fn pages(&self) -> Pages<'_> {
        Pages {
            snapshot: self.snapshot,
            dirty: Some(self.dirty),
        }
    }

    /// An owned copy of the node at `r`, without taking ownership of its page.
    pub fn read_node(&self, r: ChildRef) -> Result<Node> {
        if let Some(n) = self.dirty.nodes.get(&r.page) {
            return Ok(n.clone());
        }
        let spilled = self.dirty.spilled_once(r, self.page_size())?;
        let page = match &spilled {
            Some(bytes) => TreePage::parse(bytes, r.page)?,
            None => self.snapshot.tree_page(r)?,
        };
        Ok(match page {
            TreePage::Leaf(l) => Node::Leaf(LeafNode::from_page(&l)?),
            TreePage::Branch(b) => Node::Branch(BranchNode::from_page(&b)?),
        })
    }

    /// Makes the node at `r` owned by this transaction and returns its page id: the same
    /// id if it already is, else a newly allocated one (the old page is freed).
    pub fn own(&mut self, r: ChildRef) -> Result<u64> {
        if self.dirty.nodes.contains_key(&r.page) {
            return Ok(r.page);
        }
        let node = self.read_node(r)?;
        self.dirty.note_spilled(r.page);
        self.dirty.spilled.remove(&r.page);
        self.alloc.free(r.page, self.txid);
        Ok(self.new_node(node))
    }

    /// Allocates a page for a new node.
    pub fn new_node(&mut self, node: Node) -> u64 {
        let id = self.alloc.alloc();
        self.dirty.note_node(id);
        self.dirty.nodes.insert(id, node);
        id
    }

    pub fn node_mut(&mut self, id: u64) -> Result<&mut Node> {
        self.dirty.note_node(id);
        self.dirty
            .nodes
            .get_mut(&id)
            .ok_or_else(|| Error::corrupt(id, "internal: node is not owned by the transaction"))
    }

    /// Appends node `right` (the right neighbour of owned node `left`, of the same kind)
    /// to `left`; `sep`, the separator between them, comes along for branches.
    pub fn absorb(&mut self, left: u64, sep: Box<[u8]>, right: Node) -> Result<()> {
        match (self.node_mut(left)?, right) {
            (Node::Leaf(l), Node::Leaf(r)) => l.append(&r)?,
            (Node::Branch(l), Node::Branch(r)) => {
                l.push(&sep, r.child(0));
                for (k, c) in r.entries() {
                    l.push(k, c);
                }
            }
            _ => return Err(Error::corrupt(left, "siblings of different kinds")),
        }
        Ok(())
    }

    /// Frees the page of a node (owned or committed).
    pub fn free_page(&mut self, id: u64) {
        self.dirty.note_node(id);
        self.dirty.note_spilled(id);
        self.dirty.nodes.remove(&id);
        self.dirty.spilled.remove(&id);
        self.alloc.free(id, self.txid);
    }

    /// Frees the overflow run of a value, if it has one.
    ///
    /// # Errors
    /// Corruption when the run lies outside the file: freeing it would poison the freelist.
    pub fn free_value(&mut self, v: &Value) -> Result<()> {
        if let Value::Overflow(o) = v {
            let first = o.page;
            let end = first.saturating_add(o.pages(self.page_size()));
            if first < crate::pager::FIRST_DATA_PAGE || end > self.alloc.page_count {
                return Err(Error::corrupt(first, "overflow run outside the file"));
            }
            self.dirty.note_overflow(first);
            self.dirty.overflow.remove(&first);
            for p in first..end {
                self.alloc.free(p, self.txid);
            }
        }
        Ok(())
    }

    /// The stored form of `value` under a key of `key_len` bytes: inline when the entry
    /// fits half a leaf, else a new overflow run, written at once when the transaction
    /// has its storage at hand (into free pages, which no snapshot can see), else kept for
    /// the commit to write.
    ///
    /// # Errors
    /// An I/O error writing the run (its pages are then free again).
    pub fn make_value<'v>(&mut self, key_len: usize, value: &'v [u8]) -> Result<ValueRef<'v>> {
        if leaf_entry_size(key_len, &ValueRef::Inline(value)) <= max_inline_entry(self.page_size())
        {
            return Ok(ValueRef::Inline(value));
        }
        let len = value.len() as u32;
        let probe = OverflowRef {
            page: 0,
            len,
            crc: 0,
        };
        let pages = probe.pages(self.page_size());
        let page = self.alloc.alloc_run(pages);
        let mut header = [0u8; OVERFLOW_HEADER];
        write_page_header(&mut header, PageKind::Overflow, 0, self.txid);
        let crc = checksum_parts(page, &[&header, value]);
        let run = match self.dirty.storage.clone() {
            Some(storage) => {
                let p = self.page_size() as u64;
                let pad = (pages * p) as usize - OVERFLOW_HEADER - value.len();
                let log = self.dirty.log_bytes;
                let written = crate::commit::grow(storage.as_ref(), (page + pages) * p, p, log)
                    .and_then(|()| {
                        let bufs = [&header[..], value, &ZERO_PAGE[..pad]];
                        let write_back = &mut self.dirty.write_back;
                        Ok(write_back.write(storage.as_ref(), page * p, &bufs)?)
                    });
                if let Err(e) = written {
                    for q in page..page + pages {
                        self.alloc.free(q, self.txid);
                    }
                    return Err(e);
                }
                Run::Written {
                    len: OVERFLOW_HEADER + value.len(),
                    read_back: OnceLock::new(),
                }
            }
            None => {
                // Not zeroed first: the header, then the value, are the only writes.
                let mut run = Vec::with_capacity(OVERFLOW_HEADER + value.len());
                run.extend_from_slice(&header);
                run.extend_from_slice(value);
                Run::Held(run.into_boxed_slice())
            }
        };
        self.dirty.note_overflow(page);
        self.dirty.overflow.insert(page, run);
        Ok(ValueRef::Overflow(OverflowRef { page, len, crc }))
    }

    /// Frees every page of the tree under `root`: its nodes and overflow runs.
    pub fn free_tree(&mut self, root: ChildRef) -> Result<()> {
        let mut stack = vec![(root, 0usize)];
        while let Some((r, depth)) = stack.pop() {
            if depth > super::MAX_DEPTH {
                return Err(Error::corrupt(r.page, "tree too deep (a cycle?)"));
            }
            let mut runs = Vec::new();
            match self.pages().node(r)? {
                NodeView::Branch(b) => {
                    for i in 0..b.children() {
                        stack.push((b.child(i)?, depth + 1));
                    }
                }
                NodeView::Leaf(l) => {
                    for i in 0..l.len() {
                        if let (_, ValueRef::Overflow(o)) = l.entry(i)? {
                            runs.push(o);
                        }
                    }
                }
            }
            for o in runs {
                self.free_value(&Value::Overflow(o))?;
            }
            self.free_page(r.page);
        }
        Ok(())
    }
}

/// Where to split a node whose entries take `sizes` bytes: the index `k` at which the right
/// half starts, chosen so that both halves fit in `capacity` (with `header` bytes each) and
/// are as even as possible. With `promote`, entry `k` moves up to the parent instead of
/// into the right half (a branch split). Entries are each under half of a page, so a
/// fitting split exists whenever the node holds at most a page and an entry.
pub(crate) fn split_point(sizes: &[usize], header: usize, capacity: usize, promote: bool) -> usize {
    let total: usize = sizes.iter().sum();
    let mut best = (usize::MAX, sizes.len() / 2);
    let mut left = 0;
    for k in 1..sizes.len() {
        left += sizes[k - 1];
        let right = total - left - if promote { sizes[k] } else { 0 };
        if header + left <= capacity && header + right <= capacity {
            let skew = left.abs_diff(right);
            if skew < best.0 {
                best = (skew, k);
            }
        }
    }
    best.1.max(1)
}
