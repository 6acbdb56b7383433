//! Page allocation: which pages are free now, which were freed but may still be seen, and
//! which the transaction under way has allocated.
//!
//! A page freed by commit N becomes reusable once no reader holds a snapshot older than N
//! and commit N (or a later one) is durable, so that neither a reader nor crash recovery
//! can still need its old contents (docs/design.md#page-reuse). A page written after the
//! last durable commit ("young") waits for readers only: recovery never needs it.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashSet;

use crate::format::FreeRun;

/// How many of the lowest free pages a commit looks through for runs to place its pages in,
/// at most, and per page it places (a commit of a few pages gains little from a run and
/// would pay the whole scan: 5 % of a durable single put's CPU in a profile).
const PLACE_SCAN: usize = 1024;
const PLACE_SCAN_PER_PAGE: usize = 64;

/// How many free pages a commit of `n` pages looks through.
fn place_scan(n: usize) -> usize {
    n.saturating_mul(PLACE_SCAN_PER_PAGE).min(PLACE_SCAN)
}

/// How many runs (of two pages or more) a commit's pages are placed in at most, before the
/// rest take the lowest free pages.
const PLACE_RUNS: usize = 8;

/// A change to the free set by the transaction under way, undone if it does not commit.
#[derive(Debug, Clone, Copy)]
enum Undo {
    Took(u64),
    Gave(u64),
    /// A young page the transaction freed (it left `young`).
    Aged(u64),
}

/// The allocator state that a write transaction works on and a commit persists.
///
/// A write transaction changes it in place (it is not copied per transaction, so a large
/// free set costs nothing to begin a transaction with): every change to `free` after
/// [`FreeList::begin`] is logged, and [`FreeList::rollback`] undoes them all.
#[derive(Debug, Clone, Default)]
pub(crate) struct FreeList {
    /// Pages that may be overwritten now. During a transaction, changed only through the
    /// methods below, which log each change.
    pub free: BTreeSet<u64>,
    /// Pages freed by a commit that a reader or recovery may still need: `(page, freed_by)`,
    /// in the order they were freed (so by `freed_by`: releasing them takes a prefix).
    pending: Vec<(u64, u64)>,
    /// Young pages freed by a commit, waiting for readers only: `(page, freed_by)`, in the
    /// order they were freed.
    pending_young: Vec<(u64, u64)>,
    /// The pages of both lists by page number (page to `freed_by`), so that listing the
    /// runs of a commit merges two ordered sets instead of sorting the waiting pages.
    waiting: BTreeMap<u64, u64>,
    /// Pages written by commits since the last durable one, still in use. Recovery never
    /// needs one once a later commit frees it: the durable commit does not contain it, and
    /// a newer commit whose page was overwritten fails verification, so that recovery falls
    /// back to the durable commit (and the commit log after it).
    young: FxHashSet<u64>,
    /// Pages allocated by the transaction under way (never seen by anyone else).
    pub fresh: FxHashSet<u64>,
    /// One past the highest page in use: the file's size in pages.
    pub page_count: u64,
    /// The transaction's changes to `free`, in order.
    undo: Vec<Undo>,
    /// `page_count` and the lengths of the two waiting lists when the transaction began.
    start: (u64, usize, usize),
    /// While the transaction has savepoints: pages it allocated and then freed, kept out of
    /// `free` until the last savepoint goes, since a rollback to one may need their bytes
    /// again (a spilled page, an overflow run written when put).
    held: Option<Vec<u64>>,
}

/// The free set's state at a savepoint, for [`FreeList::rollback_to`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct FreeMark {
    undo: usize,
    page_count: u64,
    pending: usize,
    pending_young: usize,
    held: usize,
}

impl FreeList {
    /// An empty free set for a file of `page_count` pages.
    pub fn with_pages(page_count: u64) -> FreeList {
        FreeList {
            page_count,
            ..FreeList::default()
        }
    }

    /// Moves every free page to the waiting ones, as if commit `txid` (the next) had freed
    /// them: until a later commit is durable, pages are allocated past the end only. For a
    /// private copy of a file, whose free pages another process may reuse or cut off.
    pub fn withhold(&mut self, txid: u64) {
        for page in std::mem::take(&mut self.free) {
            self.wait(page, txid);
        }
    }

    /// Makes every page free or waiting now, and every page from the end to `pages` (the
    /// file's length in pages), wait as if commit `txid` had freed them: until no reader
    /// is older than `txid` and a commit from `txid` on is durable, pages are allocated
    /// past the file's end only. For a writer that opened an older commit than a crashed
    /// writer's newest, whose snapshots readers elsewhere may still hold: the pages those
    /// use are unknown, free in the opened commit or past its end. Outside a transaction.
    pub fn hold_all(&mut self, txid: u64, pages: u64) {
        let mut held: Vec<u64> = std::mem::take(&mut self.free).into_iter().collect();
        held.extend(std::mem::take(&mut self.waiting).into_keys());
        held.extend(self.page_count..pages);
        self.pending.clear();
        self.pending_young.clear();
        held.sort_unstable();
        held.dedup();
        for page in held {
            self.wait(page, txid);
        }
        self.page_count = self.page_count.max(pages);
    }

    /// Lists `page`, freed by commit `freed_by`, as waiting for the readers that may still
    /// see it (none in this process at an opening, but a reader process may hold an older
    /// snapshot). Called in the order of `freed_by`, outside a transaction; false when the
    /// page waits already.
    pub fn wait(&mut self, page: u64, freed_by: u64) -> bool {
        debug_assert!(
            self.pending.last().is_none_or(|&(_, by)| by <= freed_by),
            "pages wait in commit order"
        );
        if self.waiting.insert(page, freed_by).is_some() {
            return false;
        }
        self.pending.push((page, freed_by));
        true
    }

    /// Starts a transaction's changes: from here on, [`FreeList::rollback`] returns here.
    pub fn begin(&mut self) {
        self.undo.clear();
        self.fresh.clear();
        self.held = None;
        self.start = (
            self.page_count,
            self.pending.len(),
            self.pending_young.len(),
        );
    }

    /// Undoes every change since [`FreeList::begin`].
    pub fn rollback(&mut self) {
        for u in self.undo.drain(..).rev() {
            match u {
                Undo::Took(p) => self.free.insert(p),
                Undo::Gave(p) => self.free.remove(&p),
                Undo::Aged(p) => self.young.insert(p),
            };
        }
        (self.page_count, _, _) = self.start;
        for (page, _) in self.pending.drain(self.start.1..) {
            self.waiting.remove(&page);
        }
        for (page, _) in self.pending_young.drain(self.start.2..) {
            self.waiting.remove(&page);
        }
        self.fresh.clear();
        // Held pages were allocated by the transaction: the undo above gave them back.
        self.held = None;
    }

    /// The state to return to with [`FreeList::rollback_to`]; from here until
    /// [`FreeList::release_held`], pages the transaction allocated and frees are held.
    pub fn mark(&mut self) -> FreeMark {
        let held = self.held.get_or_insert_with(Vec::new).len();
        FreeMark {
            undo: self.undo.len(),
            page_count: self.page_count,
            pending: self.pending.len(),
            pending_young: self.pending_young.len(),
            held,
        }
    }

    /// Undoes every change since `mark` was taken (a later mark's changes too). The pages
    /// allocated since are free again (or past the end), those freed since are in use
    /// again: the allocated ones as the transaction's own, the committed ones no longer
    /// waiting.
    pub fn rollback_to(&mut self, mark: &FreeMark) {
        // Pages taken from the free set since the mark; those past its end grew the file.
        let mut taken = rustc_hash::FxHashSet::default();
        // (The lists only grow during a transaction: the `min`s guard nothing but bugs.)
        for u in self.undo.drain(mark.undo.min(self.undo.len())..).rev() {
            match u {
                Undo::Took(p) => {
                    self.free.insert(p);
                    taken.insert(p);
                }
                Undo::Gave(p) => {
                    self.free.remove(&p);
                    self.fresh.insert(p);
                }
                Undo::Aged(p) => {
                    self.young.insert(p);
                }
            }
        }
        // The pages allocated since are no longer the transaction's (a walk of what changed
        // since the mark, not of every page the transaction holds).
        let since = |p: &u64| *p >= mark.page_count || taken.contains(p);
        for p in taken
            .iter()
            .copied()
            .chain(mark.page_count..self.page_count)
        {
            self.fresh.remove(&p);
        }
        if let Some(held) = self.held.as_mut() {
            for p in held.drain(mark.held.min(held.len())..) {
                if !since(&p) {
                    self.fresh.insert(p);
                }
            }
        }
        self.page_count = mark.page_count;
        for (page, _) in self.pending.drain(mark.pending.min(self.pending.len())..) {
            self.waiting.remove(&page);
        }
        let young = mark.pending_young.min(self.pending_young.len());
        for (page, _) in self.pending_young.drain(young..) {
            self.waiting.remove(&page);
        }
    }

    /// The transaction has no savepoints any more: the pages held for them are free.
    pub fn release_held(&mut self) {
        for p in self.held.take().unwrap_or_default() {
            self.free.insert(p);
            self.undo.push(Undo::Gave(p));
        }
    }

    /// Keeps the transaction's changes (it committed; `durable`: and a sync made it
    /// durable): a later rollback returns here.
    pub fn settle(&mut self, durable: bool) {
        if durable {
            self.young.clear();
        } else {
            self.young.extend(self.fresh.iter().copied());
        }
        self.begin();
    }

    /// Whether the transaction under way freed committed pages.
    pub fn freed_committed_pages(&self) -> bool {
        self.pending.len() != self.start.1 || self.pending_young.len() != self.start.2
    }

    /// Takes free page `page` out of the free set; whether it was there.
    pub fn take(&mut self, page: u64) -> bool {
        let taken = self.free.remove(&page);
        if taken {
            self.undo.push(Undo::Took(page));
        }
        taken
    }

    fn take_lowest(&mut self) -> Option<u64> {
        let page = self.free.pop_first()?;
        self.undo.push(Undo::Took(page));
        Some(page)
    }

    /// Pages of the durable commit freed since, `(page, freed_by)`, in the order they
    /// were freed.
    #[cfg(test)]
    pub fn pending(&self) -> &[(u64, u64)] {
        &self.pending
    }

    /// How many freed pages wait (for a sync or for readers) that commits after `txid`
    /// freed: the pages a reader of snapshot `txid` keeps from reuse.
    pub fn waiting_freed_after(&self, txid: u64) -> usize {
        self.waiting.values().filter(|&&by| by > txid).count()
    }

    /// How many waiting pages were freed by commits after `txid`.
    pub fn waiting_after(&self, txid: u64) -> usize {
        self.pending.len() - self.pending.partition_point(|&(_, by)| by <= txid)
    }

    /// Makes young pages freed by commits up to `upto` reusable (no reader is older).
    /// During a transaction, only before it frees a page or takes a savepoint (the pages
    /// it frees are listed after those released, and a rollback keeps the release).
    pub fn release_young(&mut self, upto: u64) {
        let released = release(
            &mut self.pending_young,
            &mut self.waiting,
            &mut self.free,
            upto,
        );
        self.start.2 = self.start.2.saturating_sub(released);
    }

    /// Whether any freed page waits.
    pub fn any_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Makes pages freed by commits up to `upto` reusable. During a transaction, as
    /// [`FreeList::release_young`].
    pub fn release(&mut self, upto: u64) {
        let released = release(&mut self.pending, &mut self.waiting, &mut self.free, upto);
        self.start.1 = self.start.1.saturating_sub(released);
    }

    /// One page to write.
    pub fn alloc(&mut self) -> u64 {
        let page = self.take_lowest().unwrap_or_else(|| {
            self.page_count += 1;
            self.page_count - 1
        });
        self.fresh.insert(page);
        page
    }

    /// How many pages the file would need if it were dense.
    pub fn in_use(&self) -> u64 {
        self.page_count
            .saturating_sub(self.free.len() as u64 + self.waiting.len() as u64)
    }

    /// How many pages at the end of the file no commit uses (free, or waiting for a sync
    /// or a reader), counted up to `limit`.
    pub fn unused_tail(&self, limit: u64) -> u64 {
        // Both sets walked down from the end side by side, a step per page, instead of a
        // lookup in each per page: a logged commit asks this of a tail of up to thousands
        // of waiting pages (8 % of an Eventual single put's samples with lookups).
        let end = self.page_count;
        let mut free = self.free.range(..end).rev().copied().peekable();
        let mut waiting = self.waiting.range(..end).rev().map(|(&p, _)| p).peekable();
        let mut n = 0;
        while n < limit && n < end {
            let page = end - 1 - n;
            let in_free = free.next_if_eq(&page).is_some();
            let in_waiting = waiting.next_if_eq(&page).is_some();
            if !in_free && !in_waiting {
                break;
            }
            n += 1;
        }
        n
    }

    /// The lowest page that may be overwritten now, or `u64::MAX`.
    pub fn lowest_free(&self) -> u64 {
        self.free.first().copied().unwrap_or(u64::MAX)
    }

    /// The first page of the lowest `n` contiguous free pages, if there are such.
    pub fn find_run(&self, n: u64) -> Option<u64> {
        self.find_aligned_run(n, 1)
    }

    /// `n` contiguous pages past the end of the file; returns the first.
    pub fn alloc_at_end(&mut self, n: u64) -> u64 {
        let first = self.page_count;
        self.page_count += n;
        self.fresh.extend(first..first + n);
        first
    }

    /// `n` contiguous pages; returns the first.
    pub fn alloc_run(&mut self, n: u64) -> u64 {
        if n <= 1 {
            return self.alloc();
        }
        let first = self.find_run(n).unwrap_or_else(|| {
            self.page_count += n;
            self.page_count - n
        });
        for p in first..first + n {
            self.take(p);
            self.fresh.insert(p);
        }
        first
    }

    /// `n` contiguous pages for the commit log; returns the first. They start at a
    /// multiple of `align` pages where that costs the file little: the lowest free run
    /// that holds them so, else past the file's end when the pages skipped to reach such
    /// a start are at most a quarter of the file with the log (they are free then, as is
    /// any unaligned run the log could have taken: the next commits fill them). Otherwise
    /// as [`FreeList::alloc_run`].
    pub fn alloc_log_run(&mut self, n: u64, align: u64) -> u64 {
        if align <= 1 {
            return self.alloc_run(n);
        }
        let first = match self.find_aligned_run(n, align) {
            Some(first) => first,
            None => {
                let Some(first) = self.page_count.checked_next_multiple_of(align) else {
                    return self.alloc_run(n);
                };
                let skipped = first - self.page_count;
                if skipped.saturating_mul(4) > self.page_count + n {
                    return self.alloc_run(n);
                }
                for p in self.page_count..first {
                    self.free.insert(p);
                    self.undo.push(Undo::Gave(p));
                }
                self.page_count = first + n;
                first
            }
        };
        for p in first..first + n {
            self.take(p);
            self.fresh.insert(p);
        }
        first
    }

    /// The first page of the lowest `n` contiguous free pages that start at a multiple of
    /// `align` (at least 1), if there are such.
    fn find_aligned_run(&self, n: u64, align: u64) -> Option<u64> {
        let (mut start, mut end) = (0, 0);
        for &p in &self.free {
            if p != end {
                start = p;
            }
            end = p + 1;
            if let Some(at) = start.checked_next_multiple_of(align.max(1))
                && at.saturating_add(n) <= end
            {
                return Some(at);
            }
        }
        None
    }

    /// `n` pages in few runs of consecutive pages: the first free run that holds them all,
    /// else the longest runs first, then the lowest free pages, then the end of the file.
    /// Only the lowest [`place_scan`] free pages are looked at, so that a commit's cost
    /// does not grow with a large free set. Returned in page order, so that they are
    /// written with few positioned writes.
    pub fn alloc_many(&mut self, n: usize) -> Vec<u64> {
        // The longest runs of two pages or more seen so far, longest first (among equals
        // the lowest, which keeps the file's tail free): kept as the scan goes, so that a
        // free set of scattered single pages costs one pass and nothing more.
        let mut longest = [(0u64, 0u64); PLACE_RUNS];
        let mut offer = |run: (u64, u64)| {
            if run.1 >= 2
                && let Some(at) = longest.iter().position(|&(_, len)| len < run.1)
            {
                longest.copy_within(at..PLACE_RUNS - 1, at + 1);
                longest[at] = run;
            }
        };
        let (mut run, mut fit) = ((0u64, 0u64), None);
        for &p in self.free.iter().take(place_scan(n)) {
            if run.1 > 0 && run.0 + run.1 == p {
                run.1 += 1;
            } else {
                offer(run);
                run = (p, 1);
            }
            if run.1 as usize >= n {
                fit = Some(run.0);
                break;
            }
        }
        let mut pages = Vec::with_capacity(n);
        if let Some(first) = fit {
            pages.extend(first..first + n as u64);
        } else {
            offer(run);
            for (first, len) in longest {
                if len < 2 || pages.len() == n {
                    break;
                }
                let take = len.min((n - pages.len()) as u64);
                pages.extend(first..first + take);
            }
        }
        for &p in &pages {
            self.take(p);
        }
        while pages.len() < n {
            pages.push(self.take_lowest().unwrap_or_else(|| {
                self.page_count += 1;
                self.page_count - 1
            }));
        }
        pages.sort_unstable();
        self.fresh.extend(pages.iter().copied());
        pages
    }

    /// Gives back `page`, freed by transaction `txid`: at once if the transaction under
    /// way allocated it, else when nobody can see it any more.
    pub fn free(&mut self, page: u64, txid: u64) {
        if self.fresh.remove(&page) {
            match self.held.as_mut() {
                None => {
                    self.free.insert(page);
                    self.undo.push(Undo::Gave(page));
                }
                Some(held) => held.push(page),
            }
        } else {
            let list = if self.young.remove(&page) {
                self.undo.push(Undo::Aged(page));
                &mut self.pending_young
            } else {
                &mut self.pending
            };
            debug_assert!(
                list.last().is_none_or(|&(_, by)| by <= txid),
                "pages are freed in commit order"
            );
            list.push((page, txid));
            let before = self.waiting.insert(page, txid);
            debug_assert!(before.is_none(), "page {page} freed twice");
        }
    }

    /// Every free page as runs of consecutive pages freed by the same commit (0: reusable
    /// now), in page order: the free set and the waiting pages, both kept in page order,
    /// merged.
    pub fn runs(&self) -> Vec<FreeRun> {
        let mut free = self.free.iter().map(|&p| (p, 0)).peekable();
        let mut waiting = self.waiting.iter().map(|(&p, &by)| (p, by)).peekable();
        let mut runs: Vec<FreeRun> = Vec::new();
        loop {
            let next = match (free.peek(), waiting.peek()) {
                (Some(a), Some(b)) if a <= b => free.next(),
                (Some(_), None) => free.next(),
                (_, Some(_)) => waiting.next(),
                (None, None) => break,
            };
            let Some((page, freed_by)) = next else { break };
            match runs.last_mut() {
                Some((first, count, by))
                    if *by == freed_by
                        && *first + u64::from(*count) == page
                        && *count < u32::MAX =>
                {
                    *count += 1;
                }
                _ => runs.push((page, 1, freed_by)),
            }
        }
        runs
    }
}

/// Moves the pages of `list` (in the order they were freed) freed by commits up to `upto`
/// from `waiting` to `free`; returns how many.
fn release(
    list: &mut Vec<(u64, u64)>,
    waiting: &mut BTreeMap<u64, u64>,
    free: &mut BTreeSet<u64>,
    upto: u64,
) -> usize {
    // The prefix freed by commits up to `upto` (a scan, not a binary search: were the order
    // ever broken, a page would be released late, never early).
    let released = list
        .iter()
        .position(|&(_, by)| by > upto)
        .unwrap_or(list.len());
    for (page, _) in list.drain(..released) {
        waiting.remove(&page);
        free.insert(page);
    }
    released
}

/// Takes pages `first..first + n`, which lie in one run reusable now (or past every run),
/// out of `runs`, as [`FreeList::alloc_run`] took them from the free set.
pub(crate) fn carve(runs: &mut Vec<FreeRun>, first: u64, n: u64) {
    let Some(i) = runs
        .iter()
        .position(|&(f, count, by)| by == 0 && f <= first && first < f + u64::from(count))
    else {
        return;
    };
    let (f, count, _) = runs[i];
    let end = f + u64::from(count);
    let mut pieces = Vec::with_capacity(2);
    if f < first {
        pieces.push((f, (first - f) as u32, 0));
    }
    if first + n < end {
        pieces.push((first + n, (end - first - n) as u32, 0));
    }
    runs.splice(i..=i, pieces);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_pages_return_at_once_others_wait_for_release() {
        let mut f = FreeList {
            page_count: 2,
            ..FreeList::default()
        };
        let a = f.alloc();
        assert_eq!((a, f.page_count), (2, 3));
        f.free(a, 5);
        assert!(f.free.contains(&a), "fresh page reusable at once");
        f.fresh.clear();
        let b = f.alloc();
        f.fresh.clear();
        f.free(b, 5);
        assert_eq!(f.pending(), [(b, 5)]);
        assert_eq!(f.waiting_after(4), 1);
        assert_eq!(f.waiting_after(5), 0);
        f.release(4);
        assert!(!f.free.contains(&b));
        f.release(5);
        assert!(f.free.contains(&b) && f.pending().is_empty() && f.runs() == [(b, 1, 0)]);
    }

    #[test]
    fn withheld_pages_stay_listed_and_are_not_reused_before_a_later_durable_commit() {
        let mut f = FreeList::with_pages(10);
        f.free.extend([3, 4, 7]);
        f.withhold(6);
        f.begin();
        assert_eq!(f.alloc(), 10, "past the end, not a withheld page");
        assert_eq!(f.alloc_run(2), 11);
        f.free(5, 6);
        f.settle(true);
        assert_eq!(
            f.runs(),
            vec![(3, 3, 6), (7, 1, 6)],
            "still free in the record"
        );
        f.release(5);
        assert!(f.free.is_empty());
        f.release(6);
        assert_eq!(f.free.len(), 4, "commit 6 durable, its frees are reusable");
    }

    #[test]
    fn pages_written_since_the_durable_commit_wait_for_readers_only() {
        let mut f = FreeList::with_pages(2);
        f.begin();
        let old = f.alloc();
        f.settle(true);
        let young = f.alloc();
        f.settle(false);
        // Commit 7 frees both; a rolled-back transaction first, which must change nothing.
        f.free(old, 7);
        f.free(young, 7);
        f.rollback();
        assert!(!f.any_waiting() && f.runs().is_empty());
        f.free(old, 7);
        f.free(young, 7);
        f.settle(false);
        assert_eq!(f.runs(), vec![(old, 2, 7)], "both listed as waiting");
        assert_eq!(f.in_use(), 2);
        f.release_young(6);
        assert!(f.free.is_empty(), "a reader older than commit 7 holds them");
        f.release_young(7);
        assert_eq!(f.free.iter().copied().collect::<Vec<_>>(), vec![young]);
        assert_eq!(
            f.pending(),
            [(old, 7)],
            "the durable commit's page waits for a sync"
        );
        f.release(7);
        assert!(!f.any_waiting() && f.free.len() == 2);
    }

    #[test]
    fn a_rollback_to_a_mark_puts_back_the_free_set_and_the_transactions_pages() {
        let mut f = FreeList::with_pages(10);
        f.free.extend([3, 4, 7]);
        f.begin();
        let (own, committed) = (f.alloc(), 5);
        assert_eq!(own, 3);
        let before = (f.free.clone(), f.fresh.clone(), f.page_count);
        let mark = f.mark();
        // Since the mark: pages from the free set and past the end, the transaction's own
        // page freed (held, not free), a committed page freed (waiting).
        let taken = [f.alloc(), f.alloc(), f.alloc(), f.alloc()];
        assert_eq!(taken, [4, 7, 10, 11]);
        f.free(own, 9);
        f.free(committed, 9);
        assert!(!f.free.contains(&own), "held while a mark is out");
        assert!(f.any_waiting());
        f.rollback_to(&mark);
        assert_eq!((f.free.clone(), f.fresh.clone(), f.page_count), before);
        assert!(!f.any_waiting());
        // Once no mark is left, held pages are free.
        f.free(own, 9);
        f.release_held();
        assert!(f.free.contains(&own) && !f.fresh.contains(&own));
        // And the whole transaction still rolls back.
        f.rollback();
        assert_eq!(f.free.iter().copied().collect::<Vec<_>>(), [3, 4, 7]);
        assert_eq!(f.page_count, 10);
    }

    #[test]
    fn runs_come_from_contiguous_free_pages_or_the_end() {
        let mut f = FreeList {
            page_count: 20,
            ..FreeList::default()
        };
        f.free.extend([3, 5, 6, 7, 9]);
        assert_eq!(f.alloc_run(3), 5);
        assert_eq!(f.free.iter().copied().collect::<Vec<_>>(), vec![3, 9]);
        assert_eq!(f.alloc_run(2), 20);
        assert_eq!(f.page_count, 22);
        assert_eq!(f.runs(), vec![(3, 1, 0), (9, 1, 0)]);
        f.free.extend([4, 5]);
        f.settle(true);
        f.free(6, 8);
        f.free(7, 8);
        f.free(10, 9);
        assert_eq!(f.runs(), vec![(3, 3, 0), (6, 2, 8), (9, 1, 0), (10, 1, 9)]);
        let mut runs = f.runs();
        let first = f.alloc_run(2);
        carve(&mut runs, first, 2);
        assert_eq!((first, runs.clone()), (3, f.runs()));
        let first = f.alloc_run(2);
        carve(&mut runs, first, 2);
        assert_eq!((first, runs), (22, f.runs()));
    }

    /// A transaction that releases pages before it frees any (a group's, whose record goes
    /// first): a rollback keeps the release and forgets only what the transaction freed.
    #[test]
    fn a_release_during_a_transaction_survives_its_rollback() {
        let mut f = FreeList::with_pages(20);
        for (page, by) in [(3, 1), (4, 2), (5, 3)] {
            f.wait(page, by);
        }
        f.begin();
        f.release(2);
        assert!(f.free.contains(&3) && f.free.contains(&4));
        f.free(9, 6);
        assert_eq!(f.pending(), [(5, 3), (9, 6)]);
        f.rollback();
        assert_eq!(
            f.pending(),
            [(5, 3)],
            "the transaction's freed page forgotten"
        );
        assert!(f.free.contains(&3) && f.free.contains(&4) && !f.free.contains(&9));
        assert_eq!(f.waiting_after(0), 1);
    }

    #[test]
    fn a_log_run_starts_at_a_multiple_of_its_alignment_when_that_costs_little() {
        // Free runs 3..12 (holds 8 from 3, none from 8) and 14..26 (8 from 16).
        let mut f = FreeList::with_pages(60);
        f.free.extend((3..12).chain(14..26));
        f.begin();
        assert_eq!(f.alloc_log_run(8, 8), 16);
        assert!((16..24).all(|p| !f.free.contains(&p) && f.fresh.contains(&p)));
        // None left inside: past the end, the pages up to the next multiple free.
        assert_eq!(f.alloc_log_run(4, 16), 64);
        assert_eq!(f.page_count, 68);
        assert!((60..64).all(|p| f.free.contains(&p)));
        f.rollback();
        assert_eq!(f.page_count, 60);
        assert_eq!(
            f.free.len(),
            9 + 12,
            "the skipped pages and the runs undone"
        );
        // Skipping more than a quarter of the file with the log: the lowest run, unaligned.
        let mut f = FreeList::with_pages(100);
        f.free.extend(3..12);
        assert_eq!(f.alloc_log_run(8, 128), 3);
        assert_eq!(f.alloc_log_run(8, 128), 100);
        assert_eq!(f.page_count, 108);
        // Alignment 1: as `alloc_run`.
        let mut f = FreeList::with_pages(10);
        f.free.extend([5, 6]);
        assert_eq!(f.alloc_log_run(2, 1), 5);
    }

    #[test]
    fn many_pages_come_from_the_longest_runs_then_the_end() {
        let mut f = FreeList {
            page_count: 30,
            ..FreeList::default()
        };
        f.free.extend([3, 5, 6, 7, 10, 11, 20, 21, 22, 23]);
        assert_eq!(f.alloc_many(6), vec![5, 6, 20, 21, 22, 23]);
        assert_eq!(
            f.free.iter().copied().collect::<Vec<_>>(),
            vec![3, 7, 10, 11]
        );
        assert_eq!(f.alloc_many(6), vec![3, 7, 10, 11, 30, 31]);
        assert_eq!(f.page_count, 32);
        assert!(f.free.is_empty() && f.fresh.len() == 12);
    }

    #[test]
    fn the_unused_tail_counts_free_and_waiting_pages_up_to_the_first_in_use() {
        let mut f = FreeList::with_pages(20);
        assert_eq!(f.unused_tail(100), 0, "page 19 is in use");
        f.free.extend([12, 17, 19]);
        f.free(18, 3);
        f.free(16, 3);
        assert_eq!(f.unused_tail(100), 4, "19, 18, 17, 16; 15 is in use");
        assert_eq!(f.unused_tail(2), 2, "counted up to the limit");
    }

    /// The unused tail as the walk down both sets counts it, against a lookup per page,
    /// over random sets whose ends are dense (pages past `page_count` listed too).
    #[test]
    fn the_unused_tail_matches_a_lookup_per_page() {
        let mut next = xorshift(0x5eed);
        for _ in 0..500 {
            let mut f = FreeList::with_pages(10 + next(200));
            let txid = 1 + next(5);
            for page in 2..f.page_count + 3 {
                match next(8) {
                    0..=3 => {
                        f.free.insert(page);
                    }
                    4..=5 => f.free(page, txid),
                    _ => {}
                }
            }
            for limit in [0, 1, 5, 50, 1000] {
                let naive = (0..limit.min(f.page_count))
                    .take_while(|n| {
                        let page = f.page_count - 1 - n;
                        f.free.contains(&page) || f.waiting.contains_key(&page)
                    })
                    .count() as u64;
                assert_eq!(f.unused_tail(limit), naive, "limit {limit}");
            }
        }
    }

    #[test]
    fn rollback_returns_to_where_the_transaction_began() {
        let mut f = FreeList::with_pages(40);
        f.free.extend([3, 4, 5, 9, 12, 13, 14, 15, 30]);
        f.free(7, 2);
        let before = |f: &FreeList| (f.free.clone(), f.pending().to_vec(), f.runs(), f.page_count);
        let start = before(&f);
        f.begin();
        let a = f.alloc();
        let run = f.alloc_run(4);
        assert!(f.take(30) && !f.take(30));
        let many = f.alloc_many(5);
        f.alloc_at_end(3);
        f.free(a, 6); // fresh: back to the free set at once
        f.free(many[0], 6);
        f.free(20, 6); // committed: waits
        assert!(f.freed_committed_pages());
        assert_ne!(before(&f), start);
        f.rollback();
        assert_eq!(before(&f), start, "after {a}, {run}, {many:?}");
        assert!(f.fresh.is_empty() && !f.freed_committed_pages());

        // After a commit (settle), a rollback keeps what was settled.
        f.begin();
        let b = f.alloc();
        f.settle(true);
        let settled = before(&f);
        f.begin();
        f.free(b, 7);
        f.alloc_many(3);
        f.rollback();
        assert_eq!(before(&f), settled);
    }

    /// The runs as the free set and the waiting pages describe them, computed naively.
    fn naive_runs(f: &FreeList) -> Vec<FreeRun> {
        let mut pages: Vec<(u64, u64)> = f.free.iter().map(|&p| (p, 0)).collect();
        pages.extend(f.pending().iter().copied());
        pages.sort_unstable();
        let mut runs: Vec<FreeRun> = Vec::new();
        for (page, by) in pages {
            match runs.last_mut() {
                Some((first, count, b)) if *b == by && *first + u64::from(*count) == page => {
                    *count += 1;
                }
                _ => runs.push((page, 1, by)),
            }
        }
        runs
    }

    /// A small deterministic generator: each call gives a number below `n`.
    fn xorshift(mut x: u64) -> impl FnMut(u64) -> u64 {
        move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        }
    }

    /// What [`FreeList::alloc_many`] promises, done the plain way: every run among the
    /// lowest [`place_scan`] free pages listed, then chosen.
    fn alloc_many_as_specified(free: &BTreeSet<u64>, page_count: u64, n: usize) -> Vec<u64> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for &p in free.iter().take(place_scan(n)) {
            match runs.last_mut() {
                Some((first, len)) if *first + *len == p => *len += 1,
                _ => runs.push((p, 1)),
            }
        }
        if let Some(&(first, _)) = runs.iter().find(|&&(_, len)| len as usize >= n) {
            return (first..first + n as u64).collect();
        }
        runs.sort_by_key(|&(first, len)| (std::cmp::Reverse(len), first));
        let mut pages: Vec<u64> = Vec::new();
        for &(first, len) in runs.iter().take(PLACE_RUNS).filter(|r| r.1 >= 2) {
            let take = len.min((n - pages.len()) as u64);
            pages.extend(first..first + take);
        }
        let rest: Vec<u64> = free
            .iter()
            .filter(|p| !pages.contains(p))
            .copied()
            .collect();
        let missing = n - pages.len();
        pages.extend(rest.into_iter().chain(page_count..).take(missing));
        pages.sort_unstable();
        pages
    }

    #[test]
    fn many_pages_are_placed_as_specified_over_random_free_sets() {
        let mut next = xorshift(0x2545_F491_4F6C_DD1D);
        let (mut fits, mut spread) = (0, 0);
        for _ in 0..400 {
            // Runs of random lengths at random gaps: past the scan at times.
            let mut free = BTreeSet::new();
            let mut at = 2 + next(4);
            let runs = next(300);
            for _ in 0..runs {
                let len = if next(3) == 0 { 1 + next(12) } else { 1 };
                free.extend(at..at + len);
                at += len + 1 + next(5);
            }
            let n = 1 + next(40) as usize;
            let mut f = FreeList {
                page_count: at,
                free: free.clone(),
                ..FreeList::default()
            };
            let expect = alloc_many_as_specified(&free, at, n);
            let got = f.alloc_many(n);
            assert_eq!(got, expect, "n = {n}, free = {free:?}");
            let contiguous = got.windows(2).all(|w| w[0] + 1 == w[1]);
            if contiguous {
                fits += 1
            } else {
                spread += 1
            }
            assert!(got.iter().all(|p| !f.free.contains(p)));
        }
        assert!(fits > 50 && spread > 50, "both cases met: {fits} {spread}");
    }

    #[test]
    fn runs_follow_frees_releases_and_rollbacks() {
        let mut f = FreeList::with_pages(2);
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
        let mut live: Vec<u64> = Vec::new();
        let mut mixed = 0;
        for txid in 1..400u64 {
            f.release(txid.saturating_sub(1 + next(4)));
            f.begin();
            for _ in 0..next(6) {
                live.push(f.alloc());
            }
            live.extend(f.alloc_many(next(5) as usize));
            for _ in 0..next(6) {
                if !live.is_empty() {
                    let page = live.swap_remove(next(live.len() as u64) as usize);
                    f.free(page, txid);
                }
            }
            if next(5) == 0 {
                f.rollback();
            } else {
                f.settle(true);
            }
            // The pages in use: neither free nor waiting.
            let unused: BTreeSet<u64> = f.pending().iter().map(|&(p, _)| p).collect();
            live = (2..f.page_count)
                .filter(|p| !unused.contains(p) && !f.free.contains(p))
                .collect();
            assert_eq!(f.runs(), naive_runs(&f), "after transaction {txid}");
            mixed += usize::from(!f.pending().is_empty() && !f.free.is_empty());
            assert_eq!(
                f.waiting_after(txid - 1),
                f.pending().iter().filter(|&&(_, by)| by > txid - 1).count()
            );
        }
        assert!(
            mixed > 100,
            "free and waiting pages together in {mixed} runs only"
        );
    }
}
