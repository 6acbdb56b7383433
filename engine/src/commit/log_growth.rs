//! When the commit log grows: a commit that syncs because the log was too small for its
//! cycle moves the log to a larger run of pages (docs/design.md#commit-log).
//!
//! A new file's log starts small, so that a database that sees few durable commits keeps a
//! small file; a busy one's cycles fill it, and each sync they end doubles it, up to the
//! size the builder allows. The move happens only at a sync: the new run is written with
//! zeros before it, the slot that names it is durable after it, and the old run is freed
//! by that commit (so reused only once it is durable, like any page of the commit before).

use crate::db::LogState;
use crate::error::Result;
use crate::freelist::FreeList;
use crate::recovery::LARGE_RECORDS_LOG_BYTES;
use crate::storage::Storage;
use crate::verified::VerifiedSet;

/// Why a commit could not take the log, as far as its size goes.
#[derive(Debug, Clone, Copy)]
pub(super) struct LogPressure {
    /// The transaction's changes would not fit the whole log.
    pub outgrew: bool,
    /// The units of the commit's record, when it has one.
    pub record_units: Option<u64>,
    /// Whether the record would have been the cycle's next one.
    pub in_cycle: bool,
    /// Whether more freed pages wait for a sync than the log's size lets a cycle keep.
    pub too_many_waiting: bool,
    /// The pages the commit writes, as far as known (its changed nodes).
    pub pages: u64,
}

/// With the default size (none asked for), the log grows past it for a record longer than
/// half of it (a cycle holds one: every other durable commit of such records synced), to
/// hold this many of them, up to [`LARGE_RECORDS_LOG_BYTES`]; a cycle's sync then writes
/// the pages its commits shared (branches, leaves changed twice) once. Fifty-eighth
/// session, 1 KiB values in durable batches of 2,000 random keys (2 MB records) at 100,000
/// keys: 1.04–1.28× faster than with the 2 MiB default (six alternations), for a file 6 %
/// larger; eight records a cycle gained nothing more, for a file 20 % larger. Batches of
/// 1,000 (records of 1 MB, two a cycle already) gained 1.01–1.12× for a file 18 % larger,
/// so records of half the log or less leave it as it is (docs/benchmark-history.md).
const LARGE_RECORDS_PER_CYCLE: u64 = 4;

/// The log grows for a large record only when its commit writes at least this many times
/// its bytes in pages: where they are nearly as large as the record, logging writes the
/// data twice for little sharing. Fifty-eighth session, 2 KiB values in durable batches of
/// 1,000 random keys (2 MB records, pages about twice that): 0.84–0.93× the speed with the
/// growth; 1 KiB values in batches of 2,000 (pages five times the record): 1.04–1.28×.
const LARGE_RECORD_PAGE_RATIO: u64 = 4;

/// The most pages the log may grow to for a commit that asked `need` of it: its target,
/// or with the default size (`for_large_records`), enough for
/// [`LARGE_RECORDS_PER_CYCLE`] records as large as this commit's, up to
/// [`LARGE_RECORDS_LOG_BYTES`].
fn growth_target(log: &LogState, page_size: usize, need: LogPressure) -> u64 {
    let units_per_page = (page_size / crate::format::LOG_UNIT) as u64;
    match need.record_units {
        Some(units)
            if log.for_large_records
                && need.in_cycle
                && units.saturating_mul(2) > log.target.saturating_mul(units_per_page)
                && need.pages.saturating_mul(page_size as u64)
                    >= units
                        .saturating_mul(crate::format::LOG_UNIT as u64)
                        .saturating_mul(LARGE_RECORD_PAGE_RATIO) =>
        {
            let wanted = units
                .saturating_mul(LARGE_RECORDS_PER_CYCLE)
                .div_ceil(units_per_page);
            let most = LARGE_RECORDS_LOG_BYTES / page_size as u64;
            log.target.max(wanted.min(most))
        }
        _ => log.target,
    }
}

/// The pages the log moves to, if it is too small for what this commit asked of it and
/// may grow: doubled (or as many as the record needs), at most its target
/// ([`growth_target`]); all of that when the transaction outgrew the whole log.
pub(super) fn grown_pages(log: &LogState, page_size: usize, need: LogPressure) -> Option<u64> {
    let target = growth_target(log, page_size, need);
    if log.pages == 0 || log.pages >= target {
        return None;
    }
    let units_per_page = (page_size / crate::format::LOG_UNIT) as u64;
    let short_of = need
        .record_units
        .filter(|&n| need.in_cycle && log.head + n > log.units(page_size));
    let pages = if need.outgrew {
        target
    } else if let Some(n) = short_of {
        (log.pages * 2).max(n.div_ceil(units_per_page))
    } else if need.in_cycle && need.too_many_waiting {
        log.pages * 2
    } else {
        return None;
    };
    Some(pages.min(target))
}

/// The pages compaction moves the log to, if it moves: a log larger than a new file's
/// (the size asked for, or the default's first) starts small again (it grows back as
/// cycles fill it), and one that lies past the pages in use goes lower, so that the file's
/// end can leave — to the lowest run of free pages, when that lies below the log.
pub(crate) fn compacted_pages(log: &LogState, free: &FreeList, page_size: usize) -> Option<u64> {
    if log.pages == 0 {
        return None;
    }
    let initial = log
        .limit
        .filter(|&pages| pages > 0)
        .or_else(|| crate::recovery::log_pages(crate::recovery::INITIAL_LOG_BYTES, page_size))
        .unwrap_or(log.pages);
    let pages = log.pages.min(initial);
    let past_use = log.page + log.pages > free.in_use();
    let first = free.find_run(pages)?;
    (first < log.page && (pages < log.pages || past_use)).then_some(pages)
}

/// Writes zeros over the log's new run of `pages` pages from `first`, as the first log was
/// written (`recovery::write_log_zeros`); its pages are no longer verified tree pages.
pub(super) fn zero_run(
    storage: &dyn Storage,
    first: u64,
    pages: u64,
    page_size: usize,
    verified: &VerifiedSet,
) -> Result<()> {
    for page in first..first + pages {
        verified.remove(page);
    }
    crate::recovery::write_log_zeros(storage, first..first + pages, page_size)
}

#[cfg(test)]
mod tests {
    use super::{LogPressure, grown_pages};
    use crate::db::LogState;

    #[test]
    fn a_full_cycle_doubles_the_log_up_to_its_target_and_nothing_else_moves_it() {
        // Pages of 4 KiB, 8 units each. Per case: the log's pages, its target, the units
        // its cycle holds; what the commit asked (outgrew the whole log, its record's
        // units, whether the record is the cycle's next, too many pages waiting); the
        // pages the log moves to.
        let cases = [
            // 16 pages hold 128 units: a record of 2 after 127 does not fit.
            ((16, 512, 127), (false, Some(2), true, false), Some(32)),
            ((16, 512, 10), (false, Some(2), true, false), None),
            // A record larger than twice the log takes the pages it needs.
            ((16, 512, 0), (false, Some(300), true, false), Some(38)),
            // Outside the cycle (a gap, the first commit after opening) a record says
            // nothing.
            ((16, 512, 127), (false, Some(2), false, false), None),
            ((16, 512, 0), (false, None, true, true), Some(32)),
            ((16, 512, 0), (false, None, false, true), None),
            // A transaction that outgrew the log takes it to its target at once.
            ((16, 512, 0), (true, None, false, false), Some(512)),
            // Never past the target, and a log at it, or none, stays.
            ((384, 512, 3071), (false, Some(2), true, false), Some(512)),
            ((512, 512, 4095), (true, Some(2), true, true), None),
            ((0, 512, 0), (true, None, true, true), None),
        ];
        for ((pages, target, head), (outgrew, record_units, in_cycle, waiting), want) in cases {
            let log = LogState {
                page: 2,
                pages,
                target,
                head,
                ..LogState::default()
            };
            let need = LogPressure {
                outgrew,
                record_units,
                in_cycle,
                too_many_waiting: waiting,
                pages: 0,
            };
            assert_eq!(grown_pages(&log, 4096, need), want, "{log:?}, {need:?}");
        }
    }

    #[test]
    fn with_the_default_size_a_log_grows_past_it_for_large_records() {
        // Pages of 4 KiB, 8 units each; a target of 512 pages (2 MiB). Per case: the log's
        // pages and the units its cycle holds; the commit's record units (the cycle's next,
        // not fitting); the pages the log moves to; and those without the growth for large
        // records (a size asked for, a move that failed, or a commit whose pages are fewer
        // than four times its record's bytes).
        let cases = [
            // A 2 MB record (4,000 units) in a full 2 MiB log: doubled, toward room for
            // four of them (2,000 pages), then to that.
            ((512, 4000), 4000, Some(1024), None),
            ((1024, 4200), 4000, Some(2000), None),
            ((2000, 12_100), 4000, None, None),
            // Records of half the default or less (two a cycle) grow it no further than
            // before.
            ((512, 3000), 2000, None, None),
            ((512, 4095), 2, None, None),
            ((256, 2047), 2, Some(512), Some(512)),
            ((256, 2000), 1000, Some(512), Some(512)),
            // Never past 16 MiB: a record of 6 MiB wants 24.
            ((2048, 12_000), 12_000, Some(4096), None),
            ((4096, 30_000), 12_000, None, None),
        ];
        for ((pages, head), units, want, kept) in cases {
            let mut log = LogState {
                page: 2,
                pages,
                target: 512,
                head,
                for_large_records: true,
                ..LogState::default()
            };
            // The commit writes pages of four times its record's bytes.
            let mut need = LogPressure {
                outgrew: false,
                record_units: Some(units),
                in_cycle: true,
                too_many_waiting: false,
                pages: units * 4 / 8,
            };
            assert_eq!(grown_pages(&log, 4096, need), want, "{log:?}, {need:?}");
            need.pages -= 1;
            assert_eq!(grown_pages(&log, 4096, need), kept, "{log:?}, {need:?}");
            need.pages += 1;
            log.for_large_records = false;
            assert_eq!(grown_pages(&log, 4096, need), kept, "{log:?}, {need:?}");
        }
    }
}
