//! Salvage of a file neither of whose commit slots can be read (both damaged, or naming
//! no commit that fits the file): the slots are the only record of where the trees start,
//! so the newest tree is looked for among the pages themselves.
//!
//! Every page that parses as a tree page is a candidate; a catalog's root is a candidate
//! that no candidate branch names with a checksum that holds and that is a part of a
//! catalog (`orphans.rs`: its leftmost leaf holds tables' records, one naming a root whose
//! checksum holds). Every commit rewrites the catalog's root, so each root found is one
//! commit's, and the id in its page header is that commit's: the candidates are the few
//! newest, each walked as a commit slot's tree is (every page under the root checked
//! against the checksum its parent gives it), and [`super::salvage_storage`] reads the one
//! that scores best. The root itself has nothing to check it against: a leaf's names of
//! tables are reported unverified. Nothing says which commits came after it (the log's
//! place is in the slots too): that is reported lost.

use std::collections::HashSet;
use std::sync::Arc;

use super::orphans::is_catalog_part;
use crate::format::{
    ChildRef, MAX_PAGE_SIZE, MIN_PAGE_SIZE, PAGE_HEADER, SLOT_LEN, SLOT_OFFSET, Slot, checksum,
    looks_like_a_page, page_txid,
};
use crate::pager::{FIRST_DATA_PAGE, Snapshot, TreePage, VerifiedSet};
use crate::storage::Storage;

/// How many of the newest catalog roots found are walked to choose from.
const CANDIDATES: usize = 4;

/// Bytes read at a time by the look for pages' headers.
const CHUNK: usize = 1 << 20;

/// A commit found by its catalog's root, as a slot would name it (no free set, no log).
pub(super) struct Found {
    pub slot: Slot,
    /// Whether the catalog's root is a leaf (the names it gives are checked by nothing).
    pub leaf_root: bool,
}

/// The newest catalog roots among the pages of `storage`, newest first, at most
/// [`CANDIDATES`], each as a slot naming it.
pub(super) fn catalog_roots(storage: &dyn Storage, page_size: usize) -> Vec<Found> {
    let p = page_size as u64;
    let in_file = storage.len() / p;
    if in_file <= FIRST_DATA_PAGE {
        return Vec::new();
    }
    let whole = slot(in_file, ChildRef::default(), 0);
    let snap = Snapshot::new(
        whole,
        page_size,
        storage.region(),
        Arc::new(VerifiedSet::with_capacity(in_file)),
    );
    let mut trees = Vec::new();
    let mut children = HashSet::new();
    for page in FIRST_DATA_PAGE..in_file {
        let Ok(bytes) = snap.raw(page, page_size) else {
            break;
        };
        match TreePage::parse(bytes, page) {
            Ok(TreePage::Branch(b)) => {
                trees.push(page);
                for child in (0..=b.keys()).filter_map(|i| b.child(i).ok()) {
                    let holds = snap
                        .raw(child.page, page_size)
                        .is_ok_and(|c| checksum(child.page, c) == child.crc);
                    if holds {
                        children.insert(child.page);
                    }
                }
            }
            Ok(TreePage::Leaf(_)) => trees.push(page),
            Err(_) => {}
        }
    }
    let mut roots: Vec<(u64, u64)> = trees
        .into_iter()
        .filter(|page| !children.contains(page))
        .filter_map(|page| {
            let txid = snap.raw(page, page_size).ok().and_then(page_txid)?;
            (txid < Slot::TXID_LIMIT && is_catalog_part(&snap, page)).then_some((txid, page))
        })
        .collect();
    roots.sort_unstable_by(|a, b| b.cmp(a));
    roots
        .into_iter()
        .take(CANDIDATES)
        .filter_map(|(txid, page)| {
            let bytes = snap.raw(page, page_size).ok()?;
            let leaf_root = matches!(TreePage::parse(bytes, page), Ok(TreePage::Leaf(_)));
            let root = ChildRef {
                page,
                crc: checksum(page, bytes),
            };
            Some(Found {
                slot: slot(in_file, root, txid),
                leaf_root,
            })
        })
        .collect()
}

/// A page size found from the pages, with the catalog roots found at it when that is how
/// it was found (so that they are not searched for twice).
pub(super) struct PageSize {
    pub size: usize,
    pub roots: Option<Vec<Found>>,
}

/// The page size of a file whose header is unreadable in both copies, from the pages
/// themselves: the one at which slot 1 (one page in) reads, else the one at which a
/// catalog's root is found (a tree page whose children's checksums, taken over whole
/// pages, hold: at any other size, none does). `None` for a file that shows neither: not
/// a database, or one with nothing left to read.
pub(super) fn page_size_from_pages(storage: &dyn Storage) -> Option<PageSize> {
    let sizes = || {
        (MIN_PAGE_SIZE.trailing_zeros()..=MAX_PAGE_SIZE.trailing_zeros())
            .map(|shift| 1usize << shift)
            .filter(|&p| storage.len() >= 2 * p as u64)
    };
    let slot_1 = |p: usize| {
        let mut raw = [0u8; SLOT_LEN];
        storage.read((p + SLOT_OFFSET) as u64, &mut raw).is_ok() && Slot::decode(&raw).is_some()
    };
    if let Some(size) = sizes().find(|&p| slot_1(p)) {
        return Some(PageSize { size, roots: None });
    }
    let showing = sizes_showing_pages(storage);
    sizes().filter(|p| showing.contains(p)).find_map(|size| {
        let roots = catalog_roots(storage, size);
        (!roots.is_empty()).then_some(PageSize {
            size,
            roots: Some(roots),
        })
    })
}

/// The page sizes at which some page of `storage` (past the header pages) starts as a
/// database's page does, found in one reading of the file at most: only at those can a
/// search for catalogs find one. (Until the forty-second session each size's search read
/// the whole file: seven readings of a file that was not a database before refusing it.)
fn sizes_showing_pages(storage: &dyn Storage) -> Vec<usize> {
    let all: Vec<usize> = (MIN_PAGE_SIZE.trailing_zeros()..=MAX_PAGE_SIZE.trailing_zeros())
        .map(|shift| 1usize << shift)
        .collect();
    let mut showing = Vec::new();
    let mut chunk = vec![0u8; CHUNK];
    let mut at = 2 * MIN_PAGE_SIZE as u64;
    while at < storage.len() && showing.len() < all.len() {
        let len = (storage.len() - at).min(CHUNK as u64) as usize;
        if storage.read(at, &mut chunk[..len]).is_err() {
            break;
        }
        for (i, head) in chunk[..len].chunks(MIN_PAGE_SIZE).enumerate() {
            let offset = at + (i * MIN_PAGE_SIZE) as u64;
            if head.len() < PAGE_HEADER || !looks_like_a_page(head) {
                continue;
            }
            for &p in &all {
                let p64 = p as u64;
                if offset.is_multiple_of(p64) && offset >= 2 * p64 && !showing.contains(&p) {
                    showing.push(p);
                }
            }
        }
        at += len as u64;
    }
    showing
}

/// A slot naming the catalog at `root` as commit `txid`'s, over `page_count` pages, with
/// no free set on disk (so that salvage searches no free pages) and no log.
fn slot(page_count: u64, root: ChildRef, txid: u64) -> Slot {
    Slot {
        txid,
        durable_txid: txid,
        page_count,
        catalog: root,
        freelist_page: Slot::FREELIST_IN_MEMORY,
        freelist_len: 0,
        freelist_crc: 0,
        log_page: 0,
        log_pages: 0,
        log_limit: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemoryStorage;
    use crate::{Database, Result};
    use rand::{Rng, SeedableRng, rngs::StdRng};

    fn storage_of(bytes: &[u8]) -> Result<MemoryStorage> {
        Ok(MemoryStorage::from_bytes(bytes)?)
    }

    #[test]
    fn a_file_that_is_not_a_database_shows_no_pages() -> Result<()> {
        let mut random = vec![0u8; 4 << 20];
        StdRng::seed_from_u64(7).fill(&mut random[..]);
        let text: Vec<u8> = b"not a database, only text\n".repeat(160_000);
        for bytes in [random, text, vec![0u8; 4 << 20]] {
            let storage = storage_of(&bytes)?;
            assert_eq!(sizes_showing_pages(&storage), Vec::<usize>::new());
            assert!(page_size_from_pages(&storage).is_none());
        }
        Ok(())
    }

    #[test]
    fn a_databases_pages_show_its_page_size_and_it_is_found() -> Result<()> {
        let storage = Arc::new(MemoryStorage::new()?);
        let db = Database::builder().page_size(4096).with_storage(
            Arc::clone(&storage) as Arc<dyn Storage>,
            true,
            None,
        )?;
        let mut w = db.begin_write()?;
        {
            let mut t = w.open_or_create_table("t")?;
            for i in 0u32..20_000 {
                t.insert(&i.to_be_bytes(), &[7u8; 40])?;
            }
        }
        w.commit()?;
        db.close()?;
        let mut bytes = storage.to_vec();
        // Both header copies and both slots gone.
        bytes[..8192].fill(0);
        let storage = storage_of(&bytes)?;
        let showing = sizes_showing_pages(&storage);
        for p in [1024, 2048, 4096] {
            assert!(showing.contains(&p), "{showing:?}");
        }
        let found = page_size_from_pages(&storage);
        assert!(found.is_some_and(|f| f.size == 4096 && f.roots.is_some_and(|r| !r.is_empty())));
        Ok(())
    }
}
