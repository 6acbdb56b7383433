//! The pages a commit wrote since the last durable one: what recovery verifies before it
//! trusts a commit (docs/design.md#recovery), and what a sync after a failed one writes
//! again (`resync.rs`).

use crate::error::{Error, Result};
use crate::format::{
    ChildRef, OVERFLOW_HEADER, PageKind, TableMeta, ValueRef, page_kind, page_txid,
};
use crate::pager::{Snapshot, TreePage, verify};

/// What a page handed to the visitor of [`walk`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NewPage {
    /// The commit's freelist run (always handed over when the slot names one).
    Freelist,
    /// A branch or leaf.
    Tree,
    /// An overflow run: the header and the value (not the last page's padding).
    Overflow,
}

/// What [`walk`] hands each page to: its first page, what it is, its bytes.
pub(crate) type Visit<'v> = dyn FnMut(u64, NewPage, &[u8]) -> Result<()> + 'v;

/// Hands `visit` every page of `snap` written after commit `durable_txid`, checked against
/// the checksum that points at it: the freelist run, the tree pages newer than that commit
/// (each child of those is checked too, and older ones not descended into), and the newer
/// overflow runs of their values. `visit` gets the first page, what it is, and the bytes.
pub(crate) fn walk(snap: &Snapshot, durable_txid: u64, visit: &mut Visit<'_>) -> Result<()> {
    let s = snap.slot;
    if s.freelist_page != 0 && s.records_freelist() {
        let len = usize::try_from(s.freelist_len)
            .map_err(|_| Error::corrupt(s.freelist_page, "freelist length out of range"))?;
        let bytes = snap.raw(s.freelist_page, len)?;
        verify(s.freelist_page, bytes, s.freelist_crc)?;
        if page_kind(bytes) != Some(PageKind::Freelist) {
            return Err(Error::corrupt(s.freelist_page, "expected a freelist page"));
        }
        visit(s.freelist_page, NewPage::Freelist, bytes)?;
    }
    if s.catalog.page != 0 {
        let mut walk = Walk {
            snap,
            durable_txid,
            visit,
        };
        walk.tree(s.catalog, true, 0)?;
    }
    Ok(())
}

struct Walk<'a, 'v> {
    snap: &'a Snapshot,
    durable_txid: u64,
    visit: &'v mut Visit<'v>,
}

impl Walk<'_, '_> {
    fn tree(&mut self, r: ChildRef, catalog: bool, depth: usize) -> Result<()> {
        if depth > crate::btree::MAX_DEPTH {
            return Err(Error::corrupt(r.page, "tree too deep (a cycle?)"));
        }
        let snap = self.snap;
        let page = snap.page(r)?;
        if page_txid(page).unwrap_or(0) <= self.durable_txid {
            return Ok(());
        }
        (self.visit)(r.page, NewPage::Tree, page)?;
        match snap.tree_page(r)? {
            TreePage::Branch(b) => {
                for i in 0..=b.keys() {
                    self.tree(b.child(i)?, catalog, depth + 1)?;
                }
            }
            TreePage::Leaf(l) => {
                for i in 0..l.len() {
                    match l.entry(i)? {
                        (name, ValueRef::Inline(v)) if catalog => {
                            let meta = TableMeta::decode(v).ok_or_else(|| {
                                Error::corrupt(r.page, format!("bad catalog entry for {name:?}"))
                            })?;
                            if let Some(root) = meta.root {
                                self.tree(root, false, 0)?;
                            }
                        }
                        (_, ValueRef::Overflow(o)) if !catalog => {
                            let value = snap.overflow(o)?;
                            let run = snap.raw(o.page, OVERFLOW_HEADER + value.len())?;
                            if page_txid(run).unwrap_or(0) > self.durable_txid {
                                (self.visit)(o.page, NewPage::Overflow, run)?;
                            }
                        }
                        (_, ValueRef::Inline(_)) => {}
                        (_, ValueRef::Overflow(_)) => {
                            return Err(Error::corrupt(r.page, "overflow value in the catalog"));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
