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
//! a checksum that holds. A root's checksum is in its parent, which failed: where that
//! page still parses, [`vouched`] compares them; everything under a root is verified as
//! in any walk.
//!
//! A root gets its table's name back when an older version of the catalog, still in a
//! free page, names it: an entry whose root reference is that page with that very
//! checksum (the page's bytes, its writer's id among them, are those the entry named).
//! A table the last commits left alone is found that way; others stay unnamed.
//!
//! A subtree of the catalog itself (under a failed catalog branch) is found the same way,
//! and walked as the catalog is: each table it names comes back under its own name. It
//! is told from a table by its leftmost leaf, every entry of which is a table's record,
//! one of them at least naming a root whose checksum holds (a table whose values all
//! happen to be 20 bytes long would need a checksum to match by chance).

use std::collections::{HashMap, HashSet};

use crate::btree::MAX_DEPTH;
use crate::format::{
    ChildRef, LeafPage, TableMeta, ValueRef, checksum, decode_freelist, page_txid,
};
use crate::pager::{FIRST_DATA_PAGE, Snapshot, TreePage, verify};

/// A subtree no walked page leads to: its root, and the name an older catalog gives it.
pub(super) struct Orphan {
    pub root: ChildRef,
    pub name: Option<String>,
    /// Whether the subtree is part of the catalog, naming tables.
    pub catalog: bool,
    /// Its first and last keys, where the leaves at its two edges verify.
    pub span: Option<(Vec<u8>, Vec<u8>)>,
    /// Whether its root is a leaf: its entries (of a table, or a part of the catalog's
    /// records) are then the root's own bytes, which no checksum covers unless a failed
    /// page vouches for them ([`vouched`]) or an older catalog names the root. (A branch's
    /// children are checked against the checksums it gives them, so the entries under it
    /// verify whatever its bytes.)
    pub leaf: bool,
    /// Whether a found branch names it with a checksum its bytes do not match (it, or that
    /// reference, is damaged: it is that branch's child, not a root of its own).
    pub mismatched: bool,
}

/// The subtrees no walked page leads to, in page order; `seen` holds the tree pages the
/// walk visited (those that failed too), `free` the snapshot's free set ([`free_pages`]:
/// the caller searches only where it is recorded and verifies).
pub(super) fn orphans(snap: &Snapshot, seen: &HashSet<u64>, free: &[u64]) -> Vec<Orphan> {
    let s = snap.slot;
    let mut accounted: HashSet<u64> = free.iter().copied().collect();
    accounted.extend(s.log_page..s.log_page.saturating_add(s.log_pages));
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
    let mut mismatched = HashSet::new();
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
            } else {
                mismatched.insert(child.page);
            }
        }
    }
    let names = older_names(snap, free);
    found
        .into_iter()
        .filter(|page| !children.contains(page))
        .filter_map(|page| {
            let bytes = snap.raw(page, p).ok()?;
            let root = ChildRef {
                page,
                crc: checksum(page, bytes),
            };
            let leaf = matches!(TreePage::parse(bytes, page), Ok(TreePage::Leaf(_)));
            let name = names.get(&(root.page, root.crc)).cloned();
            let catalog = is_catalog_part(snap, page);
            let first = edge_leaf(snap, page, true).and_then(|l| l.key(0).ok());
            let last = edge_leaf(snap, page, false)
                .and_then(|l| l.len().checked_sub(1).and_then(|i| l.key(i).ok()));
            let span = first.zip(last).map(|(a, b)| (a.to_vec(), b.to_vec()));
            Some(Orphan {
                root,
                name,
                catalog,
                span,
                leaf,
                mismatched: mismatched.contains(&page),
            })
        })
        .collect()
}

/// The pages of the snapshot's free set and its own pages, in page order, if the free set
/// is recorded and verifies.
pub(super) fn free_pages(snap: &Snapshot) -> Option<Vec<u64>> {
    let s = snap.slot;
    if !s.records_freelist() {
        return None;
    }
    let mut pages = Vec::new();
    let p = snap.page_size as u64;
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

/// The names older versions of the catalog in the `free` pages give roots: a leaf whose
/// every entry holds a table's record, each root reference `(page, checksum)` to the name.
/// (A name two versions give different roots is kept for each.)
fn older_names(snap: &Snapshot, free: &[u64]) -> HashMap<(u64, u32), String> {
    let mut names = HashMap::new();
    for &page in free {
        let Ok(bytes) = snap.raw(page, snap.page_size) else {
            continue;
        };
        let Ok(TreePage::Leaf(leaf)) = TreePage::parse(bytes, page) else {
            continue;
        };
        for (name, meta) in table_records(&leaf).unwrap_or_default() {
            if let (Some(root), Ok(name)) = (meta.root, std::str::from_utf8(name)) {
                names.insert((root.page, root.crc), name.to_owned());
            }
        }
    }
    names
}

/// The entries of a leaf of the catalog: each table's name and record; `None` when an
/// entry is not a table's record.
fn table_records<'a>(leaf: &LeafPage<'a>) -> Option<Vec<(&'a [u8], TableMeta)>> {
    (0..leaf.len())
        .map(|i| match leaf.entry(i) {
            Ok((name, ValueRef::Inline(v))) => TableMeta::decode(v).map(|m| (name, m)),
            _ => None,
        })
        .collect()
}

/// Whether a reference's checksum holds for the page it names.
fn holds(snap: &Snapshot, r: ChildRef) -> bool {
    snap.raw(r.page, snap.page_size)
        .is_ok_and(|bytes| checksum(r.page, bytes) == r.crc)
}

/// The leaf at the left (`leftmost`) or right edge of the subtree at `root`, reached
/// through children whose checksums hold.
fn edge_leaf(snap: &Snapshot, root: u64, leftmost: bool) -> Option<LeafPage<'_>> {
    let mut page = root;
    for _ in 0..MAX_DEPTH {
        match TreePage::parse(snap.raw(page, snap.page_size).ok()?, page).ok()? {
            TreePage::Branch(b) => {
                let child = b.child(if leftmost { 0 } else { b.keys() }).ok()?;
                page = holds(snap, child).then_some(child.page)?;
            }
            TreePage::Leaf(leaf) => return Some(leaf),
        }
    }
    None
}

/// Whether the subtree at `root` is part of a catalog: its leftmost leaf holds tables'
/// records only, and one of them at least names a root whose checksum holds.
pub(super) fn is_catalog_part(snap: &Snapshot, root: u64) -> bool {
    edge_leaf(snap, root, true)
        .and_then(|leaf| table_records(&leaf))
        .is_some_and(|records| {
            records.iter().any(|(name, meta)| {
                std::str::from_utf8(name).is_ok() && meta.root.is_some_and(|r| holds(snap, r))
            })
        })
}

/// What the failed pages say of `root`: a failed branch that still parses names it with a
/// checksum, or a failed leaf of the catalog does in a table's record (since the
/// forty-third session), which its bytes match (`Some(true)`) or not (`Some(false)`: the
/// root is damaged too, or an older version of its page); `None` when no failed page that
/// parses names it.
pub(super) fn vouched(snap: &Snapshot, failed: &[u64], root: ChildRef) -> Option<bool> {
    failed.iter().find_map(|&page| {
        let bytes = snap.raw(page, snap.page_size).ok()?;
        let named = match TreePage::parse(bytes, page).ok()? {
            TreePage::Branch(b) => (0..=b.keys())
                .filter_map(|i| b.child(i).ok())
                .find(|child| child.page == root.page),
            TreePage::Leaf(leaf) => table_records(&leaf)?
                .into_iter()
                .filter_map(|(_, meta)| meta.root)
                .find(|r| r.page == root.page),
        };
        named.map(|r| r.crc == root.crc)
    })
}
