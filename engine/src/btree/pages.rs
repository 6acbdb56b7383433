//! Where a tree's nodes come from: the committed snapshot, overlaid by the nodes a write
//! transaction owns.

use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

use super::{BranchView, Node, NodeView};
use crate::error::{Error, Result};
use crate::format::{ChildRef, Known, LeafPage, OVERFLOW_HEADER, OverflowRef, Shape};
use crate::pager::{Snapshot, TreePage};
use crate::storage::Storage;

/// What a write transaction has changed and not yet committed.
#[derive(Debug, Default)]
pub(crate) struct Dirty {
    /// Tree nodes by their new page id (page ids need no DoS-resistant hash).
    pub nodes: FxHashMap<u64, Node>,
    /// New overflow runs by first page id.
    pub overflow: FxHashMap<u64, Run>,
    /// Where new overflow runs are written as they are made (none: the commit writes them).
    pub storage: Option<Arc<dyn Storage>>,
    /// How they are written there.
    pub write_back: super::EarlyWriteBack,
    /// The bytes of the file's commit log, which its growth leaves out.
    pub log_bytes: u64,
    /// Tree pages written before the commit, to bound the transaction's memory
    /// (`commit/spill.rs`), by page id: their parents record their checksums, as for
    /// committed pages, and each is read back only if the transaction reads it again.
    pub spilled: FxHashMap<u64, OnceLock<Box<[u8]>>>,
    /// How many spilled pages were read back since the copies were last dropped.
    pub read_back: AtomicUsize,
    /// One per open savepoint, oldest first: what changed since (`journal.rs`). Every change
    /// to `nodes`, `overflow` or `spilled` is noted first (`Dirty::note_node` and the like).
    pub journals: Vec<super::journal::Journal>,
}

impl Dirty {
    /// Writes the overflow runs still gathered (`EarlyWriteBack::write`): before the
    /// commit and before a spill writes pages. With every run's write, which writes what is
    /// gathered first unless it follows it, no write of the transaction precedes gathered
    /// bytes, so those never land over a page taken again since (a replaced value's, or
    /// one a rollback to a savepoint freed).
    pub fn flush_gathered(&mut self) -> Result<()> {
        match &self.storage {
            Some(storage) => Ok(self.write_back.flush(storage.as_ref())?),
            None => Ok(()),
        }
    }

    /// The bytes of spilled page `r`, read back (and checked against `r.crc`) the first
    /// time and kept; `None` when `r` is not a spilled page.
    pub fn spilled_page(&self, r: ChildRef, page_size: usize) -> Result<Option<&[u8]>> {
        let Some(copy) = self.spilled.get(&r.page) else {
            return Ok(None);
        };
        if let Some(bytes) = copy.get() {
            return Ok(Some(bytes));
        }
        let bytes = self.read_spilled(r, page_size)?;
        self.read_back.fetch_add(1, Relaxed);
        Ok(Some(copy.get_or_init(|| bytes)))
    }

    /// The bytes of spilled page `r`, from the copy kept if there is one, else read back
    /// (and checked) without keeping them: for a node about to be owned again, whose page
    /// is then freed. `None` when `r` is not a spilled page.
    pub fn spilled_once(&self, r: ChildRef, page_size: usize) -> Result<Option<Cow<'_, [u8]>>> {
        Ok(match self.spilled.get(&r.page) {
            None => None,
            Some(copy) => Some(match copy.get() {
                Some(bytes) => Cow::Borrowed(bytes),
                None => Cow::Owned(self.read_spilled(r, page_size)?.into_vec()),
            }),
        })
    }

    /// Reads spilled page `r` from the storage and checks it against `r.crc`.
    fn read_spilled(&self, r: ChildRef, page_size: usize) -> Result<Box<[u8]>> {
        self.read_written(r.page, page_size, r.crc, page_size)
    }

    /// Reads back the `len` bytes this transaction wrote from page `page` on (a spilled
    /// page, an overflow run written when put), checked against `crc`: the first read of a
    /// rewritten page verifies it, as for committed pages.
    fn read_written(&self, page: u64, len: usize, crc: u32, page_size: usize) -> Result<Box<[u8]>> {
        let at = page * page_size as u64;
        if let Some(gathered) = self.write_back.gathered(at, len) {
            return Ok(gathered.into());
        }
        let storage = self
            .storage
            .as_ref()
            .ok_or_else(|| Error::corrupt(page, "internal: a written page without storage"))?;
        let mut bytes = vec![0u8; len].into_boxed_slice();
        storage.read(at, &mut bytes)?;
        crate::pager::verify(page, &bytes, crc)?;
        Ok(bytes)
    }
}

/// A new overflow run.
#[derive(Debug)]
pub(crate) enum Run {
    /// The run's bytes, header included, for the commit to write.
    Held(Box<[u8]>),
    /// Written to its free pages when it was made, straight from the caller's value (a
    /// large value is neither copied into memory nor written twice): `len` bytes, header
    /// included, read back only if the transaction reads the value.
    Written {
        len: usize,
        read_back: OnceLock<Box<[u8]>>,
    },
}

/// A source of nodes: a snapshot, and for a write transaction its owned nodes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pages<'a> {
    pub snapshot: &'a Snapshot,
    pub dirty: Option<&'a Dirty>,
}

impl<'a> Pages<'a> {
    pub fn node(&self, r: ChildRef) -> Result<NodeView<'a>> {
        if let Some(node) = self.dirty.and_then(|d| d.nodes.get(&r.page)) {
            return Ok(match node {
                Node::Leaf(l) => NodeView::Leaf(l.page(r.page)),
                Node::Branch(b) => NodeView::Branch(BranchView::Owned(b)),
            });
        }
        if let Some(bytes) = self.spilled(r)? {
            return Ok(match TreePage::parse(bytes, r.page)? {
                TreePage::Leaf(l) => NodeView::Leaf(l),
                TreePage::Branch(b) => NodeView::Branch(BranchView::Page(b)),
            });
        }
        Ok(match self.snapshot.tree_page(r)? {
            TreePage::Leaf(l) => NodeView::Leaf(l),
            TreePage::Branch(b) => NodeView::Branch(BranchView::Page(b)),
        })
    }

    /// The bytes of `r` if the write transaction spilled it.
    #[inline]
    fn spilled(&self, r: ChildRef) -> Result<Option<&'a [u8]>> {
        match self.dirty {
            Some(d) if !d.spilled.is_empty() => d.spilled_page(r, self.snapshot.page_size),
            _ => Ok(None),
        }
    }

    pub fn overflow(&self, o: OverflowRef) -> Result<&'a [u8]> {
        let Some(dirty) = self.dirty else {
            return self.snapshot.overflow(o);
        };
        let bytes = match dirty.overflow.get(&o.page) {
            None => return self.snapshot.overflow(o),
            Some(Run::Held(bytes)) => bytes,
            Some(Run::Written { len, read_back }) => match read_back.get() {
                Some(bytes) => bytes,
                None => {
                    let page_size = self.snapshot.page_size;
                    let bytes = dirty.read_written(o.page, *len, o.crc, page_size)?;
                    read_back.get_or_init(|| bytes)
                }
            },
        };
        Ok(&bytes[OVERFLOW_HEADER..])
    }
}

impl<'a> Pages<'a> {
    /// The bytes of committed page `page` (its first 4 KiB), which a scan is about to
    /// read, for the caller to ask the processor for; `None` for an owned page or one
    /// outside the file.
    pub fn ahead(&self, page: u64) -> Option<&'a [u8]> {
        if self
            .dirty
            .is_some_and(|d| d.nodes.contains_key(&page) || d.spilled.contains_key(&page))
        {
            return None;
        }
        let len = self.snapshot.page_size.min(4096);
        self.snapshot.raw(page, len).ok()
    }

    /// The value stored under `key` in leaf `l`.
    pub fn value_in(&self, l: LeafPage<'a>, key: &[u8]) -> Result<Option<&'a [u8]>> {
        let shape = match l.known_shape() {
            Known::Shaped(shape) => Some(shape),
            Known::Shapeless => None,
            // The first get to reach this verified leaf works its shape out for the others.
            Known::Unexamined => {
                let shape = Shape::of(&l);
                self.snapshot.verified.set_shape(l.id(), shape);
                shape
            }
        };
        if let Some(shape) = shape {
            return shape.value(&l, key);
        }
        let Ok(i) = l.search(key)? else {
            return Ok(None);
        };
        Ok(Some(match l.entry(i)?.1 {
            crate::format::ValueRef::Inline(v) => v,
            crate::format::ValueRef::Overflow(o) => self.overflow(o)?,
        }))
    }

    /// The way to `key` in the tree under `root`: the child taken at each branch, then the
    /// key's index in its leaf; `None` when the key is not there.
    pub fn path(&self, root: Option<ChildRef>, key: &[u8]) -> Result<Option<Vec<usize>>> {
        let Some(mut r) = root else { return Ok(None) };
        let mut path = Vec::with_capacity(4);
        for _ in 0..=super::MAX_DEPTH {
            match self.node(r)? {
                NodeView::Branch(b) => {
                    let i = b.find_child(key)?;
                    path.push(i);
                    r = b.child(i)?;
                }
                NodeView::Leaf(l) => {
                    let Ok(i) = l.search(key)? else {
                        return Ok(None);
                    };
                    path.push(i);
                    return Ok(Some(path));
                }
            }
        }
        Err(crate::error::Error::corrupt(
            r.page,
            "tree too deep (a cycle?)",
        ))
    }

    /// The value stored under `key` in the tree under `root`.
    pub fn get(&self, root: Option<ChildRef>, key: &[u8]) -> Result<Option<&'a [u8]>> {
        Ok(self.get_in_leaf(root, key)?.0)
    }

    /// As [`Pages::get`], with the page of the leaf where the search ended (0: none).
    pub fn get_in_leaf(
        &self,
        root: Option<ChildRef>,
        key: &[u8],
    ) -> Result<(Option<&'a [u8]>, u64)> {
        let Some(mut r) = root else {
            return Ok((None, 0));
        };
        for _ in 0..=super::MAX_DEPTH {
            match self.node(r)? {
                NodeView::Branch(b) => r = b.child(b.find_child(key)?)?,
                NodeView::Leaf(l) => return Ok((self.value_in(l, key)?, r.page)),
            }
        }
        Err(crate::error::Error::corrupt(
            r.page,
            "tree too deep (a cycle?)",
        ))
    }
}
