//! Reading the pages of one committed snapshot.
//!
//! Every page is checked against the checksum its parent recorded the first time it is
//! read after the file was opened or the page was rewritten; a lock-free bitmap remembers
//! which pages passed, so steady-state reads pay nothing for verification, and beside it
//! the shape of each verified leaf whose entries all look alike (`verified.rs`,
//! `format/shape.rs`).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{
    BranchPage, ChildRef, Known, LeafPage, OVERFLOW_HEADER, OverflowRef, PageKind, Slot, checksum,
    page_kind,
};
use crate::storage::Region;
pub(crate) use crate::verified::VerifiedSet;

/// The first page that can hold data: pages 0 and 1 hold the header and commit slots.
pub(crate) const FIRST_DATA_PAGE: u64 = 2;

/// One committed state, as readers see it.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub slot: Slot,
    pub page_size: usize,
    pub region: Arc<Region>,
    pub verified: Arc<VerifiedSet>,
    /// The catalog entries of the tables readers opened in this snapshot.
    pub tables: crate::table_cache::TableCache,
}

/// A tree page, typed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TreePage<'a> {
    Leaf(LeafPage<'a>),
    Branch(BranchPage<'a>),
}

impl<'a> TreePage<'a> {
    /// The tree page stored at page `id` as `bytes` (verified by the caller).
    pub fn parse(bytes: &'a [u8], id: u64) -> Result<TreePage<'a>> {
        match page_kind(bytes) {
            Some(PageKind::Leaf) => Ok(TreePage::Leaf(LeafPage::new(bytes, id)?)),
            Some(PageKind::Branch) => Ok(TreePage::Branch(BranchPage::new(bytes, id)?)),
            other => Err(Error::corrupt(
                id,
                format!("expected a tree page, found {other:?}"),
            )),
        }
    }
}

impl Snapshot {
    pub fn new(
        slot: Slot,
        page_size: usize,
        region: Arc<Region>,
        verified: Arc<VerifiedSet>,
    ) -> Snapshot {
        Snapshot {
            slot,
            page_size,
            region,
            verified,
            tables: crate::table_cache::TableCache::default(),
        }
    }

    pub fn txid(&self) -> u64 {
        self.slot.txid
    }

    fn limit(&self) -> u64 {
        self.slot.page_count.saturating_mul(self.page_size as u64)
    }

    /// The raw bytes of `len` bytes from the start of page `id`, without verification.
    pub fn raw(&self, id: u64, len: usize) -> Result<&[u8]> {
        if id < FIRST_DATA_PAGE {
            return Err(Error::corrupt(
                id,
                "a reference points into the file header",
            ));
        }
        id.checked_mul(self.page_size as u64)
            .and_then(|at| self.region.bytes(at, len, self.limit()))
            .ok_or_else(|| {
                Error::corrupt(
                    id,
                    format!(
                        "referenced past the end of the file ({} pages)",
                        self.slot.page_count
                    ),
                )
            })
    }

    /// The page `r` points at, verified against `r.crc` unless verified before.
    #[inline]
    pub fn page(&self, r: ChildRef) -> Result<&[u8]> {
        let bytes = self.raw(r.page, self.page_size)?;
        if !self.verified.contains(r.page) {
            verify(r.page, bytes, r.crc)?;
            self.verified.insert(r.page);
        }
        Ok(bytes)
    }

    /// The tree page `r` points at (its first lines asked for: a search is coming).
    ///
    /// A leaf comes with what readers know of its shape (kept beside its verified bit).
    pub fn tree_page(&self, r: ChildRef) -> Result<TreePage<'_>> {
        let bytes = self.raw(r.page, self.page_size)?;
        crate::format::prefetch::page_start(bytes);
        let fresh = !self.verified.contains(r.page);
        if fresh {
            verify(r.page, bytes, r.crc)?;
        }
        if page_kind(bytes) == Some(PageKind::Leaf) {
            let known = if fresh {
                self.verified.insert(r.page);
                Known::Unexamined
            } else {
                self.verified.shape(r.page)
            };
            return Ok(TreePage::Leaf(
                LeafPage::new(bytes, r.page)?.with_shape(known),
            ));
        }
        if fresh {
            self.verified.insert(r.page);
        }
        TreePage::parse(bytes, r.page)
    }

    /// Leaf `page`, if it is one and was verified (as a page of this snapshot read before).
    pub fn verified_leaf(&self, page: u64) -> Option<LeafPage<'_>> {
        if !self.verified.contains(page) {
            return None;
        }
        let bytes = self.raw(page, self.page_size).ok()?;
        (page_kind(bytes) == Some(PageKind::Leaf))
            .then(|| LeafPage::new(bytes, page).ok())
            .flatten()
            .map(|leaf| leaf.with_shape(self.verified.shape(page)))
    }

    /// The value stored in overflow run `o`, verified on first read.
    #[inline]
    pub fn overflow(&self, o: OverflowRef) -> Result<&[u8]> {
        self.overflow_with(o, true)
    }

    /// [`Snapshot::overflow`], verified against `o`'s checksum at every read: for salvage,
    /// which may meet one run under two references (a damaged file's older version of a
    /// leaf, say, naming a run since given to another value), and must not take the
    /// second for the first because the first verified. (Tree pages need no such read:
    /// salvage's walk refuses a page it reaches twice.)
    pub fn overflow_checked(&self, o: OverflowRef) -> Result<&[u8]> {
        self.overflow_with(o, false)
    }

    #[inline]
    fn overflow_with(&self, o: OverflowRef, trust_verified: bool) -> Result<&[u8]> {
        let total = OVERFLOW_HEADER + o.len as usize;
        let bytes = self.raw(o.page, total)?;
        if !(trust_verified && self.verified.contains(o.page)) {
            verify(o.page, bytes, o.crc)?;
            self.verified.insert(o.page);
        }
        // (Checked even for a page verified before: under damage a page may have been
        // verified as something else, a tree page that salvage took for a catalog's root,
        // whose bytes would otherwise be handed over as the value.)
        if page_kind(bytes) != Some(PageKind::Overflow) {
            return Err(Error::corrupt(o.page, "expected an overflow page"));
        }
        Ok(&bytes[OVERFLOW_HEADER..])
    }
}

/// Checks `bytes`, stored at page `id`, against the checksum `expected`.
pub(crate) fn verify(id: u64, bytes: &[u8], expected: u32) -> Result<()> {
    let actual = checksum(id, bytes);
    if actual != expected {
        return Err(Error::corrupt(
            id,
            format!("checksum mismatch (expected {expected:08x}, found {actual:08x})"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Slot;
    use crate::storage::{MemoryStorage, Storage};

    #[test]
    fn salvage_checks_an_overflow_run_against_every_reference() -> Result<()> {
        let (page_size, page) = (1024, 3);
        let storage = MemoryStorage::new()?;
        storage.resize(4 * page_size as u64)?;
        let mut run = vec![0u8; page_size];
        run[0] = PageKind::Overflow as u8;
        run[OVERFLOW_HEADER..OVERFLOW_HEADER + 8].copy_from_slice(b"value 01");
        storage.write(page * page_size as u64, &run)?;
        let right = OverflowRef {
            page,
            len: 8,
            crc: checksum(page, &run[..OVERFLOW_HEADER + 8]),
        };
        // Another reference to the run: an older value's, whose bytes were these.
        let other = OverflowRef {
            crc: right.crc ^ 1,
            ..right
        };
        let slot = Slot {
            page_count: 4,
            ..Slot::default()
        };
        let verified = Arc::new(VerifiedSet::with_capacity(4));
        let snap = Snapshot::new(slot, page_size, storage.region(), verified);
        assert!(snap.overflow(other).is_err(), "a first read verifies");
        assert_eq!(snap.overflow(right)?, b"value 01");
        // Verified once, the run is trusted by reads (in a sound file one reference names
        // it)...
        assert_eq!(snap.overflow(other)?, b"value 01");
        // ...and not by salvage's.
        assert!(matches!(
            snap.overflow_checked(other),
            Err(Error::Corruption { .. })
        ));
        assert_eq!(snap.overflow_checked(right)?, b"value 01");
        Ok(())
    }
}
