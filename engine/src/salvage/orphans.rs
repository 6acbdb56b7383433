//! Trees the walk could not reach. When a page fails (a damaged catalog, a damaged branch),
//! the pages under it that still verify have no parent to lead the walk to them: their
//! subtrees are found among the pages that neither the walk, the free set nor the commit
//! log account for, and handed over as tables of their own, `lost_and_found_<page>` (as
//! SQLite's `.recover` does). A clean close writes the newest commit into both slots, so a
//! damaged catalog there has no older commit to fall back to: without this, salvage lost
//! every table.
//!
//! Only a snapshot whose free set is recorded and verifies is searched: a free page may
//! hold an old version of a page, whose entries would come back from the dead. A page
//! found this way is a tree page that parses, written by the snapshot's commit or an
//! earlier one; the subtrees' roots are those that no other found branch points at with
//! a checksum that holds. A root itself has no checksum to verify (its parent failed);
//! everything under it is verified as in any walk.

use std::collections::{HashMap, HashSet};

use crate::format::{ChildRef, checksum, decode_freelist, page_txid};
use crate::pager::{FIRST_DATA_PAGE, Snapshot, TreePage, verify};

/// The roots of the subtrees no walked page leads to, in page order; `seen` holds the
/// tree pages the walk visited (those that failed too). Empty when the snapshot's free set
/// is not recorded or does not verify.
pub(super) fn roots(snap: &Snapshot, seen: &HashSet<u64>) -> Vec<ChildRef> {
    let Some(mut accounted) = free_and_log_pages(snap) else {
        return Vec::new();
    };
    accounted.extend(seen.iter().copied());
    let p = snap.page_size;
    let mut found = Vec::new();
    for page in FIRST_DATA_PAGE..snap.slot.page_count {
        if accounted.contains(&page) {
            continue;
        }
        let Ok(bytes) = snap.raw(page, p) else { break };
        if page_txid(bytes).is_some_and(|t| t <= snap.slot.txid)
            && TreePage::parse(bytes, page).is_ok()
        {
            found.push(page);
        }
    }
    // Each candidate's checksum, computed once however many branches point at it.
    let mut sums: HashMap<u64, Option<u32>> = found.iter().map(|&page| (page, None)).collect();
    let mut children = HashSet::new();
    for &page in &found {
        let Ok(bytes) = snap.raw(page, p) else {
            continue;
        };
        let Ok(TreePage::Branch(b)) = TreePage::parse(bytes, page) else {
            continue;
        };
        for i in 0..=b.keys() {
            let Ok(child) = b.child(i) else { continue };
            let Some(sum) = sums.get_mut(&child.page) else {
                continue;
            };
            let sum = *sum.get_or_insert_with(|| {
                snap.raw(child.page, p)
                    .map_or(0, |c| checksum(child.page, c))
            });
            if sum == child.crc {
                children.insert(child.page);
            }
        }
    }
    found
        .into_iter()
        .filter(|page| !children.contains(page))
        .filter_map(|page| {
            let bytes = snap.raw(page, p).ok()?;
            Some(ChildRef {
                page,
                crc: checksum(page, bytes),
            })
        })
        .collect()
}

/// The pages the snapshot's free set (and its own pages) and commit log take, if the free
/// set is recorded and verifies.
fn free_and_log_pages(snap: &Snapshot) -> Option<HashSet<u64>> {
    let s = snap.slot;
    if !s.records_freelist() {
        return None;
    }
    let mut pages = HashSet::new();
    let p = snap.page_size as u64;
    pages.extend(s.log_page..s.log_page.saturating_add(s.log_pages));
    if s.freelist_page != 0 {
        let len = usize::try_from(s.freelist_len).ok()?;
        let bytes = snap.raw(s.freelist_page, len).ok()?;
        verify(s.freelist_page, bytes, s.freelist_crc).ok()?;
        pages.extend(s.freelist_page..s.freelist_page + s.freelist_len.div_ceil(p));
        for (first, count, _) in decode_freelist(bytes)? {
            pages.extend(first..first.saturating_add(u64::from(count)).min(s.page_count));
        }
    }
    Some(pages)
}
