//! Online compaction: live pages near the end of the file move into free pages near its
//! start, in short durable write transactions, until the end of the file is free and
//! leaves it.
//!
//! Each step is an ordinary write transaction, so readers keep their snapshots and other
//! writers wait at most for one step: a walk of every tree that changes at most
//! [`STEP_PAGES`] pages, and one durable commit. Pages a step
//! frees become reusable, as always, once no reader can see them; a reader that stays
//! open through the whole compaction keeps the pages it sees, and the file then shrinks
//! less (the report says by how much it did).

use crate::btree::{Node, NodeView, Run, TreeWriter, Value};
use crate::db::{Database, Durability};
use crate::error::{Error, Result};
use crate::format::{
    BRANCH_HEADER, ChildRef, LEAF_HEADER, OVERFLOW_HEADER, OverflowRef, ValueRef,
    branch_entry_size, checksum,
};
use crate::write_txn::WriteTxn;

/// Pages moved by one step, at most: bounds how long a writer waits for compaction.
const STEP_PAGES: usize = 8192;

/// Steps, at most: a bound that a compaction making progress never reaches.
const MAX_STEPS: usize = 100_000;

/// Evacuations of overflow runs, at most, in one compaction (each must shrink the file).
const MAX_EVACUATIONS: usize = 8;

/// Free pages a step leaves for the copies of ancestors (which move whenever a descendant
/// does).
const ANCESTOR_SLACK: usize = 8;

/// What [`Database::compact`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactReport {
    /// The file's size before, in bytes.
    pub bytes_before: u64,
    /// The file's size after, in bytes.
    pub bytes_after: u64,
    /// Pages moved towards the start of the file.
    pub pages_moved: u64,
    /// Tree nodes merged into a neighbour (each frees a page).
    pub nodes_merged: u64,
    /// Write transactions committed.
    pub steps: u64,
}

impl Database {
    /// Rewrites the live pages densely at the start of the file and gives the rest back to
    /// the file system, while readers and writers go on (a writer waits at most for one
    /// step: a walk of the trees that changes at most a few thousand pages). The commit log
    /// moves down with them, at a new file's size (64 KiB; it grows again as durable
    /// commits fill it, see [`crate::Builder::log_size`]).
    ///
    /// # Errors
    /// [`Error::ReadOnly`], an I/O error (the database stays at its last commit, which
    /// is a consistent state whatever step failed), or corruption found while moving.
    pub fn compact(&self) -> Result<CompactReport> {
        let bytes_before = self.io_stats().file_size;
        let mut report = CompactReport {
            bytes_before,
            bytes_after: bytes_before,
            pages_moved: 0,
            nodes_merged: 0,
            steps: 0,
        };
        // The commit log first, in a step of its own: it takes the lowest run of free
        // pages that holds it while the free pages are where the deletes left them, and the
        // pages moved after it settle around it. (Moved in a step that also moves pages, it
        // took a run above the pages the step took, and stayed there.)
        let mut txn = self.begin_write()?;
        let log_moves = txn.original.as_ref().is_some_and(|ws| {
            crate::commit::compacted_pages(&ws.log, &txn.freelist, self.page_size()).is_some()
        });
        if log_moves {
            txn.set_durability(Durability::Immediate);
            txn.compacting = true;
            txn.commit()?;
            report.steps += 1;
        } else {
            txn.rollback();
        }
        // Progress is a move, or pages leaving the file. Pages freed by one step return
        // at the start of the next, so two steps without progress in a row end a phase.
        // Overflow runs move only into holes that fit them; when holes between runs are
        // too small and the end of the file is stuck behind runs, one step evacuates the
        // runs past the first hole to the end of the file, so that the holes they leave
        // join up and the next steps pack everything (a phase that must shrink the file).
        let (mut idle, mut evacuate, mut evacuations) = (0, false, 0);
        let mut best = u64::MAX;
        while idle < 2 && (report.steps as usize) < MAX_STEPS {
            let mut txn = self.begin_write()?;
            txn.set_durability(Durability::Immediate);
            let pages_before = txn.freelist.page_count;
            let (moved, merged) = txn.relocate(STEP_PAGES, std::mem::take(&mut evacuate))?;
            let target = txn.freelist.in_use();
            let loose = txn.freelist.free.range(target..).next().is_some();
            // (A step that moves nothing may still move the commit log down.)
            let log_moves = txn.original.as_ref().is_some_and(|ws| {
                crate::commit::compacted_pages(&ws.log, &txn.freelist, self.page_size()).is_some()
            });
            if moved == 0 && merged == 0 && !loose && !log_moves {
                // Nothing to move and nothing free to cut: done (or waiting for a reader).
                break;
            }
            txn.compacting = true;
            txn.commit()?;
            let pages_after = self.inner.state().latest.slot.page_count;
            report.steps += 1;
            report.pages_moved += moved as u64;
            report.nodes_merged += merged as u64;
            idle = if moved == 0 && merged == 0 && pages_after >= pages_before {
                idle + 1
            } else {
                0
            };
            if idle == 2 && loose && pages_after < best && evacuations < MAX_EVACUATIONS {
                (best, evacuate, idle) = (pages_after, true, 0);
                evacuations += 1;
            }
        }
        report.bytes_after = self.io_stats().file_size;
        Ok(report)
    }
}

impl WriteTxn {
    /// Moves pages that lie past the dense size into free pages below it, and merges
    /// neighbouring nodes that fit in one page, changing about `limit` pages at most;
    /// returns how many pages moved and how many nodes were merged away. With `evacuate`,
    /// overflow runs past the first free page move to the end of the file instead.
    pub(crate) fn relocate(&mut self, limit: usize, evacuate: bool) -> Result<(usize, usize)> {
        let in_use = self.freelist.in_use();
        let mut mover = Mover {
            target: in_use,
            evacuate_from: evacuate.then(|| self.freelist.lowest_free()),
            moves: limit.min(self.freelist.free.len().saturating_sub(ANCESTOR_SLACK)),
            work: limit,
            moved: 0,
            merged: 0,
        };
        let tables = self.list_tables()?;
        for info in tables {
            if mover.work == 0 {
                break;
            }
            let Some(id) = self.load(&info.name)? else {
                continue;
            };
            self.with_tree(id, |w, meta| {
                if let Some(root) = meta.root {
                    meta.root = Some(mover.subtree(w, root, 0)?);
                    w.shorten(&mut meta.root);
                }
                Ok(())
            })?;
        }
        self.with_catalog(|w, root| {
            if let Some(r) = *root {
                *root = Some(mover.subtree(w, r, 0)?);
                w.shorten(root);
            }
            Ok(())
        })?;
        Ok((mover.moved, mover.merged))
    }
}

/// One step's walk: moves pages at or past `target` into free pages below it while
/// `moves` lasts, and merges neighbouring nodes that fit in one page while `work` lasts.
struct Mover {
    target: u64,
    /// Overflow runs past this page move to the end of the file.
    evacuate_from: Option<u64>,
    moves: usize,
    work: usize,
    moved: usize,
    merged: usize,
}

impl Mover {
    /// Moves and merges what lies under `r` (and `r` itself, when it or a child changes);
    /// returns where the node is now.
    fn subtree(&mut self, w: &mut TreeWriter<'_>, r: ChildRef, depth: usize) -> Result<ChildRef> {
        if depth > crate::btree::MAX_DEPTH {
            return Err(Error::corrupt(r.page, "tree too deep (a cycle?)"));
        }
        // Children (or overflow runs) first, so that the node is copied once, after them.
        let (children, runs) = match w.pages().node(r)? {
            NodeView::Branch(b) => {
                let children = (0..b.children())
                    .map(|i| b.child(i))
                    .collect::<Result<Vec<_>>>()?;
                (children, Vec::new())
            }
            NodeView::Leaf(l) => {
                let mut runs = Vec::new();
                for i in 0..l.len() {
                    if let (_, ValueRef::Overflow(o)) = l.entry(i)?
                        && (o.page >= self.target || self.evacuate_from.is_some_and(|f| o.page > f))
                    {
                        runs.push((i, o));
                    }
                }
                (Vec::new(), runs)
            }
        };
        let mut now = children.clone();
        for (child, at) in children.iter().zip(now.iter_mut()) {
            if self.work == 0 {
                break;
            }
            *at = self.subtree(w, *child, depth + 1)?;
        }
        let mut moved_runs = Vec::new();
        for (i, o) in runs {
            if let Some(now) = self.move_run(w, o)? {
                moved_runs.push((i, now));
            }
        }
        let groups = if self.work > 0 && now.len() > 1 {
            merge_groups(w, r, &now)?
        } else {
            Vec::new()
        };
        let move_self = r.page >= self.target && self.moves > 0 && w.alloc.lowest_free() < r.page;
        if now == children && moved_runs.is_empty() && groups.is_empty() && !move_self {
            return Ok(r);
        }
        let id = w.own(r)?;
        if id != r.page && r.page >= self.target {
            self.moved += 1;
            self.moves = self.moves.saturating_sub(1);
        }
        self.work = self.work.saturating_sub(1);
        match w.node_mut(id)? {
            Node::Branch(b) => {
                for (i, c) in now.iter().enumerate() {
                    b.set_child(i, *c);
                }
            }
            Node::Leaf(l) => {
                for (i, now) in moved_runs {
                    l.set_overflow(i, now)?;
                }
            }
        }
        // Right to left, so that the indexes of groups still to merge stay put.
        for (first, last) in groups.into_iter().rev() {
            self.merge(w, id, first, last)?;
        }
        Ok(ChildRef { page: id, crc: 0 })
    }

    /// Merges children `first..=last` of the owned branch `parent` into child `first`.
    fn merge(
        &mut self,
        w: &mut TreeWriter<'_>,
        parent: u64,
        first: usize,
        last: usize,
    ) -> Result<()> {
        let (left_ref, rest) = match w.node_mut(parent)? {
            Node::Branch(b) => {
                let rest = b.drain(first, last);
                (b.child(first), rest)
            }
            Node::Leaf(_) => return Err(Error::corrupt(parent, "internal: merging under a leaf")),
        };
        let left = w.own(left_ref)?;
        for (sep, right_ref) in rest {
            let right = w.read_node(right_ref)?;
            w.free_page(right_ref.page);
            w.absorb(left, sep, right)?;
            self.merged += 1;
        }
        if let Node::Branch(b) = w.node_mut(parent)? {
            b.set_child(first, ChildRef { page: left, crc: 0 });
        }
        self.work = self.work.saturating_sub(1);
        Ok(())
    }

    /// Copies overflow run `o` into the lowest free pages that fit it, if they lie before it.
    fn move_run(&mut self, w: &mut TreeWriter<'_>, o: OverflowRef) -> Result<Option<OverflowRef>> {
        let n = o.pages(w.page_size());
        let evacuate = self.evacuate_from.is_some_and(|f| o.page > f) && o.page < self.target;
        if evacuate {
            if self.work < n as usize {
                return Ok(None);
            }
        } else if self.moves < n as usize || w.alloc.find_run(n).is_none_or(|p| p >= o.page) {
            return Ok(None);
        }
        let mut run = w
            .snapshot
            .raw(o.page, OVERFLOW_HEADER + o.len as usize)?
            .to_vec();
        // Verify before copying: a damaged run must not get a fresh, valid checksum.
        crate::pager::verify(o.page, &run, o.crc)?;
        w.free_value(&Value::Overflow(o))?;
        let page = if evacuate {
            w.alloc.alloc_at_end(n)
        } else {
            w.alloc.alloc_run(n)
        };
        crate::format::write_page_header(&mut run, crate::format::PageKind::Overflow, 0, w.txid);
        let crc = checksum(page, &run);
        w.dirty
            .overflow
            .insert(page, Run::Held(run.into_boxed_slice()));
        self.moves = self.moves.saturating_sub(n as usize);
        self.work = self.work.saturating_sub(n as usize);
        self.moved += n as usize;
        Ok(Some(OverflowRef { page, crc, ..o }))
    }
}

/// Runs of neighbouring children of branch `r` (now at `children`) that fit in one page
/// together, as `(first, last)` index pairs with `first < last`.
fn merge_groups(
    w: &TreeWriter<'_>,
    r: ChildRef,
    children: &[ChildRef],
) -> Result<Vec<(usize, usize)>> {
    let page_size = w.page_size();
    let pages = w.pages();
    let parent = match pages.node(r)? {
        NodeView::Branch(b) => b,
        NodeView::Leaf(_) => return Ok(Vec::new()),
    };
    let mut groups = Vec::new();
    let (mut first, mut size, mut leaf) = (0, 0, true);
    for (i, &c) in children.iter().enumerate() {
        let node = pages.node(c)?;
        let this = node.size()?;
        let header = match node {
            NodeView::Leaf(_) => LEAF_HEADER,
            NodeView::Branch(_) => BRANCH_HEADER,
        };
        let is_leaf = matches!(node, NodeView::Leaf(_));
        // A branch joining its left neighbour takes the separator between them along.
        let joined = if i == 0 || is_leaf != leaf {
            None
        } else if is_leaf {
            Some(size + this - header)
        } else {
            Some(size + this - header + branch_entry_size(parent.key(i)?.len()))
        };
        match joined {
            Some(total) if total <= page_size => size = total,
            _ => {
                if i > first + 1 {
                    groups.push((first, i - 1));
                }
                (first, size, leaf) = (i, this, is_leaf);
            }
        }
    }
    if children.len() > first + 1 {
        groups.push((first, children.len() - 1));
    }
    Ok(groups)
}
