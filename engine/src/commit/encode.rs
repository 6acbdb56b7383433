//! Turning the transaction's owned nodes into pages: each gets its final page, then each is
//! encoded with its children's checksums; and the free set's own encoding.

use rustc_hash::FxHashMap;

use crate::btree::Node;
use crate::error::Result;
use crate::format::{ChildRef, checksum, encode_freelist, freelist_len};
use crate::freelist::FreeList;

/// Gives every owned node its final page: the transaction allocated pages as it went, one
/// at a time, wherever one was free; now that it knows how many it needs, it takes them
/// in as few runs as the free pages allow, so that the commit writes them with few
/// positioned writes (a scattered write costs a sync much more than a contiguous one).
/// Leaves take the lower pages, branches the upper, so that the branches, which the next
/// commit likely rewrites, free a run together. Returns the pages that changed.
///
/// With `log_pages` (`(pages, align)`), a run of that many pages for the commit log is
/// taken first, once the nodes' pages are free again: the lowest that holds it, starting
/// at a multiple of `align` pages where that costs the file little
/// ([`FreeList::alloc_log_run`]); its first page is returned with the pages.
pub(super) fn place(
    nodes: &FxHashMap<u64, Node>,
    freelist: &mut FreeList,
    txid: u64,
    log_pages: Option<(u64, u64)>,
) -> (FxHashMap<u64, u64>, Option<(u64, u64)>) {
    let ids = nodes
        .iter()
        .map(|(&id, node)| (matches!(node, Node::Branch(_)), id))
        .collect();
    place_ids(ids, freelist, txid, log_pages)
}

/// As [`place`], for the nodes `ids` (each with whether it is a branch).
pub(super) fn place_ids(
    mut ids: Vec<(bool, u64)>,
    freelist: &mut FreeList,
    txid: u64,
    log_pages: Option<(u64, u64)>,
) -> (FxHashMap<u64, u64>, Option<(u64, u64)>) {
    ids.sort_unstable();
    for &(_, id) in &ids {
        // Pages the transaction allocated: free again at once.
        freelist.free(id, txid);
    }
    let log = log_pages.map(|(n, align)| (freelist.alloc_log_run(n, align), n));
    let pages = freelist.alloc_many(ids.len());
    let placed = ids
        .iter()
        .map(|&(_, id)| id)
        .zip(pages)
        .filter(|(old, new)| old != new)
        .collect();
    (placed, log)
}

/// Encodes the owned node at `r` and every owned node under it, leaves first, so that
/// each parent records its children's checksums; returns where `r` now is (its page from
/// `placed`, if it moved) with its checksum. Owned children are those whose pointer has
/// checksum 0 (see [`ChildRef`]): the others are not looked up (a branch may have
/// hundreds of children, and a single-put commit owns one of them).
pub(super) fn finalize(
    nodes: &mut FxHashMap<u64, Node>,
    placed: &FxHashMap<u64, u64>,
    r: ChildRef,
    txid: u64,
    page_size: usize,
    out: &mut Vec<(u64, Box<[u8]>)>,
) -> Result<ChildRef> {
    let Some(node) = nodes.remove(&r.page) else {
        return Ok(r);
    };
    let page = match node {
        Node::Branch(mut b) => {
            for i in 0..b.children() {
                if nodes.is_empty() {
                    // Every owned node is encoded: the other children are as committed.
                    break;
                }
                let child = b.child(i);
                if child.crc != 0 {
                    // A committed child: an owned one's checksum is 0 until it is encoded.
                    continue;
                }
                let done = finalize(nodes, placed, child, txid, page_size, out)?;
                if done != child {
                    b.set_child(i, done);
                }
            }
            b.finish(r.page, txid, page_size)?
        }
        Node::Leaf(l) => l.finish(txid)?,
    };
    let id = placed.get(&r.page).copied().unwrap_or(r.page);
    let crc = checksum(id, &page);
    out.push((id, page));
    Ok(ChildRef { page: id, crc })
}

/// Encodes `freelist`'s free set, as of commit `txid`, into a run of pages it takes from
/// the set (or the file's end): returns the run's first page and its bytes.
pub(crate) fn encode_free_set(freelist: &mut FreeList, txid: u64, p: u64) -> (u64, Vec<u8>) {
    // Allocating the run takes pages from the front of free runs, so it never adds a run:
    // the count before allocating (plus one, to spare) bounds the count after.
    let mut runs = freelist.runs();
    let run_pages = (freelist_len(runs.len() + 1) as u64).div_ceil(p);
    let page = freelist.alloc_run(run_pages);
    crate::freelist::carve(&mut runs, page, run_pages);
    debug_assert_eq!(runs, freelist.runs(), "carved runs");
    (page, encode_freelist(txid, &runs, (run_pages * p) as usize))
}
