//! Reading the pages of one committed snapshot.
//!
//! Every page is checked against the checksum its parent recorded the first time it is
//! read after the file was opened or the page was rewritten; a lock-free bitmap remembers
//! which pages passed, so steady-state reads pay nothing for verification.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::format::{
    BranchPage, ChildRef, LeafPage, OVERFLOW_HEADER, OverflowRef, PageKind, Slot, TableMeta,
    checksum, page_kind,
};
use crate::storage::Region;

/// The first page that can hold data: pages 0 and 1 hold the header and commit slots.
pub(crate) const FIRST_DATA_PAGE: u64 = 2;

/// Which pages have been verified since they were last written.
#[derive(Debug)]
pub(crate) struct VerifiedSet {
    words: Box<[AtomicU64]>,
}

impl VerifiedSet {
    pub fn with_capacity(pages: u64) -> VerifiedSet {
        let words = usize::try_from(pages.div_ceil(64)).unwrap_or(0).max(1);
        VerifiedSet {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub fn capacity(&self) -> u64 {
        self.words.len() as u64 * 64
    }

    fn word(&self, page: u64) -> Option<(&AtomicU64, u64)> {
        let w = self.words.get(usize::try_from(page / 64).ok()?)?;
        Some((w, 1 << (page % 64)))
    }

    #[inline]
    pub fn contains(&self, page: u64) -> bool {
        self.word(page)
            .is_some_and(|(w, bit)| w.load(Ordering::Relaxed) & bit != 0)
    }

    pub fn insert(&self, page: u64) {
        if let Some((w, bit)) = self.word(page) {
            w.fetch_or(bit, Ordering::Relaxed);
        }
    }

    pub fn remove(&self, page: u64) {
        if let Some((w, bit)) = self.word(page) {
            w.fetch_and(!bit, Ordering::Relaxed);
        }
    }

    /// A copy with room for at least `pages` pages (twice that, so copies stay rare).
    pub fn grown(&self, pages: u64) -> VerifiedSet {
        let bigger = VerifiedSet::with_capacity(pages.saturating_mul(2));
        for (dst, src) in bigger.words.iter().zip(self.words.iter()) {
            dst.store(src.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        bigger
    }
}

/// One committed state, as readers see it.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub slot: Slot,
    pub page_size: usize,
    pub region: Arc<Region>,
    pub verified: Arc<VerifiedSet>,
    /// The catalog entry of the first table a reader opened in this snapshot, so that
    /// the read transactions that each open the same table (one per operation, often)
    /// skip the catalog's tree.
    pub first_table: OnceLock<(Box<str>, TableMeta)>,
}

/// A tree page, typed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TreePage<'a> {
    Leaf(LeafPage<'a>),
    Branch(BranchPage<'a>),
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
            first_table: OnceLock::new(),
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
    pub fn tree_page(&self, r: ChildRef) -> Result<TreePage<'_>> {
        let bytes = self.page(r)?;
        crate::format::prefetch::page_start(bytes);
        match page_kind(bytes) {
            Some(PageKind::Leaf) => Ok(TreePage::Leaf(LeafPage::new(bytes, r.page)?)),
            Some(PageKind::Branch) => Ok(TreePage::Branch(BranchPage::new(bytes, r.page)?)),
            other => Err(Error::corrupt(
                r.page,
                format!("expected a tree page, found {other:?}"),
            )),
        }
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
    }

    /// The value stored in overflow run `o`, verified on first read.
    pub fn overflow(&self, o: OverflowRef) -> Result<&[u8]> {
        let total = OVERFLOW_HEADER + o.len as usize;
        let bytes = self.raw(o.page, total)?;
        if !self.verified.contains(o.page) {
            verify(o.page, bytes, o.crc)?;
            if page_kind(bytes) != Some(PageKind::Overflow) {
                return Err(Error::corrupt(o.page, "expected an overflow page"));
            }
            self.verified.insert(o.page);
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

    #[test]
    fn verified_set_marks_and_grows() {
        let v = VerifiedSet::with_capacity(10);
        assert!(!v.contains(3));
        v.insert(3);
        v.insert(1_000_000); // out of range: ignored
        assert!(v.contains(3) && !v.contains(1_000_000));
        let g = v.grown(1000);
        assert!(g.capacity() >= 1000 && g.contains(3));
        g.remove(3);
        assert!(!g.contains(3) && v.contains(3));
    }
}
