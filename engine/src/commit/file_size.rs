//! How the file grows when a commit needs more pages, and when its free tail is long
//! enough to cut. Both go by what the file holds besides its commit log (`log` bytes): a
//! file holding one key grows by [`MIN_GROWTH_PAGES`], not by a quarter of its log.

use crate::error::Result;
use crate::storage::Storage;

/// The least the file grows by when it must grow (it also grows by a quarter of its size,
/// less its log).
pub(super) const MIN_GROWTH_PAGES: u64 = 16;

/// Whether a file of `len` bytes, `log` of them its commit log, of which a commit uses
/// `used`, has a free tail to cut (down to `used` plus [`MIN_GROWTH_PAGES`]): one longer
/// than a quarter of the file less its log, so that a growth step (a quarter of the old
/// size, a fifth of the new) stays until the file shrinks, instead of being cut by the
/// commit that grew the file and grown again a few commits later.
pub(super) fn tail_to_cut(len: u64, used: u64, page_size: u64, log: u64) -> bool {
    len > used + MIN_GROWTH_PAGES * page_size + len.saturating_sub(log) / 4
}

/// The fewest unused pages at the end of `used` bytes that give a file of `len` bytes a
/// tail to cut, when it has none without them: [`tail_to_cut`] solved for the tail.
pub(super) fn pages_to_cut(len: u64, used: u64, page_size: u64, log: u64) -> u64 {
    let keep = used + MIN_GROWTH_PAGES * page_size + len.saturating_sub(log) / 4;
    keep.saturating_sub(len) / page_size + 1
}

/// Makes `storage`, whose commit log takes `log` bytes, at least `needed` bytes long: when
/// it must grow, by at least a quarter of its length less the log and [`MIN_GROWTH_PAGES`]
/// pages of `p` bytes, so that a growing file is resized rarely.
pub(crate) fn grow(storage: &dyn Storage, needed: u64, p: u64, log: u64) -> Result<()> {
    if storage.len() < needed {
        let step = (storage.len().saturating_sub(log) / 4).max(MIN_GROWTH_PAGES * p);
        let grown = needed.max(storage.len() + step).next_multiple_of(p);
        storage.resize(grown)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::storage::{MemoryStorage, Storage};

    /// The scan of the file's unused tail stops at the first count that makes the tail worth
    /// cutting: exactly the count at which [`super::tail_to_cut`] turns true.
    #[test]
    fn the_tail_scan_stops_where_the_tail_becomes_worth_cutting() {
        let mut checked = 0;
        for p in [512u64, 4096, 65536] {
            for len_pages in [16u64, 17, 40, 100, 257, 1000, 4099] {
                for log_pages in [0, 16, 512].into_iter().filter(|l| l + 2 <= len_pages) {
                    let (len, log) = (len_pages * p, log_pages * p);
                    for used_pages in (log_pages + 2..=len_pages).step_by(3) {
                        let used = used_pages * p;
                        if super::tail_to_cut(len, used, p, log) {
                            continue;
                        }
                        let need = super::pages_to_cut(len, used, p, log);
                        for tail in 0..=used_pages {
                            let cut = super::tail_to_cut(len, used - tail * p, p, log);
                            let at = format!("p {p} len {len} log {log} used {used} tail {tail}");
                            assert_eq!(cut, tail >= need, "{at}");
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }

    /// A file grows by a quarter of what it holds besides its log, and by 16 pages at
    /// least: a new file with a 2 MiB log grows by 16 pages, not by 512 KiB.
    #[test]
    fn growth_leaves_the_log_out() -> crate::Result<()> {
        let p = 4096;
        let log = 512 * p;
        let storage = MemoryStorage::new()?;
        storage.resize(2 * p + log)?;
        super::grow(&storage, 2 * p + log + 1, p, log)?;
        assert_eq!(storage.len(), (2 + 512 + 16) * p);
        // Past 64 pages besides the log, the quarter is the larger step.
        storage.resize(400 * p + log)?;
        super::grow(&storage, 400 * p + log + 1, p, log)?;
        assert_eq!(storage.len(), (500 * p) + log);
        // Without a log, the quarter of the whole file.
        super::grow(&storage, storage.len() + 1, p, 0)?;
        assert_eq!(storage.len(), (500 * p + log) * 5 / 4);
        // Nothing changes when the file is long enough.
        super::grow(&storage, p, p, log)?;
        assert_eq!(storage.len(), (500 * p + log) * 5 / 4);
        Ok(())
    }
}
