//! The pages a commit wrote since the last durable one: what recovery verifies before it
//! trusts a commit (docs/design.md#recovery), and what a sync after a failed one writes
//! again (`resync.rs`).

use super::references::{Reference, references};
use crate::error::{Error, Result};
use crate::format::{ChildRef, OVERFLOW_HEADER, OverflowRef, PageKind, Slot, page_kind, page_txid};
use crate::pager::{Snapshot, verify};

/// What a page handed to the visitor of [`walk`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NewPage {
    /// The commit's freelist run (always handed over when the slot names one).
    Freelist,
    /// A branch or leaf.
    Tree,
    /// An overflow run: the header and the value (not the last page's padding).
    Overflow,
    /// A tree page or overflow run written at or before the durable commit that a newer
    /// page points at, by this reference: not descended into (what a newer commit shares
    /// with it). Checked against it only when [`walk`] is asked to: the bytes are then
    /// the page, or the run's header and value; else the page, or the run's header, as
    /// read, or none for a page taken for older without reading it.
    Older(Older),
}

/// A reference to an older page (see [`NewPage::Older`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Older {
    Tree(ChildRef),
    Overflow(OverflowRef),
}

impl Older {
    /// Its first page.
    pub fn page(&self) -> u64 {
        match self {
            Older::Tree(r) => r.page,
            Older::Overflow(o) => o.page,
        }
    }
}

/// Whether [`walk`] checks the older pages it hands over.
#[derive(Clone, Copy)]
pub(crate) enum CheckOlder<'a> {
    /// Each against its reference, before handing it over.
    Now,
    /// Not: the caller checks each, or proves it unchanged since the durable commit.
    /// A page the function names as one the durable commit's trees use is taken for
    /// older without being read (a newer page cannot be one of them: they are not reused
    /// before the next sync); others are told apart by their header.
    ByCaller(Option<&'a dyn Fn(u64) -> bool>),
}

impl CheckOlder<'_> {
    /// Whether `page` is older whatever it holds.
    fn known_older(&self, page: u64) -> bool {
        matches!(self, CheckOlder::ByCaller(Some(used)) if used(page))
    }
}

/// What [`walk`] hands each page to: its first page, what it is, its bytes.
pub(crate) type Visit<'v> = dyn FnMut(u64, NewPage, &[u8]) -> Result<()> + 'v;

/// Hands `visit` every page of `snap` written after commit `durable_txid`, checked against
/// the checksum that points at it: the freelist run, the tree pages newer than that commit
/// (older ones not descended into), and the newer overflow runs of their values; and the
/// older pages and runs those point at, as
/// [`NewPage::Older`], checked as `older` says. `visit` gets the first page, what it is,
/// and the bytes.
///
/// A page that should be newer but reads as older (its write lost to a power cut, and
/// the disk holding what the page had before) fails its check, made now or by the caller.
pub(crate) fn walk(
    snap: &Snapshot,
    durable_txid: u64,
    older: CheckOlder<'_>,
    visit: &mut Visit<'_>,
) -> Result<()> {
    let s = snap.slot;
    if let Some(bytes) = freelist_run(snap, &s)? {
        visit(s.freelist_page, NewPage::Freelist, bytes)?;
    }
    if s.catalog.page != 0 {
        let mut walk = Walk {
            snap,
            durable_txid,
            older,
            visit,
        };
        walk.tree(s.catalog, true, 0)?;
    }
    Ok(())
}

/// The freelist run `slot` names, read from `snap`'s file and checked; `None` when it
/// names none (or keeps its free set in memory or implied).
pub(super) fn freelist_run<'a>(snap: &'a Snapshot, slot: &Slot) -> Result<Option<&'a [u8]>> {
    if slot.freelist_page == 0 || !slot.records_freelist() {
        return Ok(None);
    }
    let page = slot.freelist_page;
    let len = usize::try_from(slot.freelist_len)
        .map_err(|_| Error::corrupt(page, "freelist length out of range"))?;
    let bytes = snap.raw(page, len)?;
    verify(page, bytes, slot.freelist_crc)?;
    if page_kind(bytes) != Some(PageKind::Freelist) {
        return Err(Error::corrupt(page, "expected a freelist page"));
    }
    Ok(Some(bytes))
}

struct Walk<'a, 'v> {
    snap: &'a Snapshot,
    durable_txid: u64,
    older: CheckOlder<'a>,
    visit: &'v mut Visit<'v>,
}

impl Walk<'_, '_> {
    fn tree(&mut self, r: ChildRef, catalog: bool, depth: usize) -> Result<()> {
        if depth > crate::btree::MAX_DEPTH {
            return Err(Error::corrupt(r.page, "tree too deep (a cycle?)"));
        }
        let snap = self.snap;
        if self.older.known_older(r.page) {
            return (self.visit)(r.page, NewPage::Older(Older::Tree(r)), &[]);
        }
        let page = match self.older {
            CheckOlder::Now => snap.page(r)?,
            CheckOlder::ByCaller(_) => snap.raw(r.page, snap.page_size)?,
        };
        if page_txid(page).unwrap_or(0) <= self.durable_txid {
            return (self.visit)(r.page, NewPage::Older(Older::Tree(r)), page);
        }
        // (Checked whether or not it was just now: only once.)
        let page = snap.page(r)?;
        (self.visit)(r.page, NewPage::Tree, page)?;
        references(snap.tree_page(r)?, r.page, catalog, &mut |to| match to {
            Reference::Child(child) => self.tree(child, catalog, depth + 1),
            Reference::Table(root) => self.tree(root, false, 0),
            Reference::Overflow(o) => self.overflow(o),
        })
    }

    /// Hands over overflow run `o`, as newer or older than the durable commit.
    fn overflow(&mut self, o: OverflowRef) -> Result<()> {
        if self.older.known_older(o.page) {
            return (self.visit)(o.page, NewPage::Older(Older::Overflow(o)), &[]);
        }
        let snap = self.snap;
        let header = snap.raw(o.page, OVERFLOW_HEADER)?;
        let newer = page_txid(header).unwrap_or(0) > self.durable_txid;
        let run = match (newer, self.older) {
            (false, CheckOlder::ByCaller(_)) => header,
            _ => {
                let value = snap.overflow(o)?;
                snap.raw(o.page, OVERFLOW_HEADER + value.len())?
            }
        };
        let kind = match newer {
            true => NewPage::Overflow,
            false => NewPage::Older(Older::Overflow(o)),
        };
        (self.visit)(o.page, kind, run)
    }
}
