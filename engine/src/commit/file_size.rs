//! How the file grows when a commit needs more pages, and when its free tail is long
//! enough to cut.

use crate::error::Result;
use crate::storage::Storage;

/// The least the file grows by when it must grow (it also grows by a quarter of its size).
pub(super) const MIN_GROWTH_PAGES: u64 = 16;

/// Whether a file of `len` bytes, of which a commit uses `used`, has a free tail to cut
/// (down to `used` plus [`MIN_GROWTH_PAGES`]): one longer than a quarter of the file, so
/// that a growth step (a quarter of the old size, a fifth of the new) stays until the file
/// shrinks, instead of being cut by the commit that grew the file and grown again a few
/// commits later.
pub(super) fn tail_to_cut(len: u64, used: u64, page_size: u64) -> bool {
    len > used + MIN_GROWTH_PAGES * page_size + len / 4
}

/// The fewest unused pages at the end of `used` bytes that give a file of `len` bytes a
/// tail to cut, when it has none without them: [`tail_to_cut`] solved for the tail.
pub(super) fn pages_to_cut(len: u64, used: u64, page_size: u64) -> u64 {
    (used + MIN_GROWTH_PAGES * page_size + len / 4).saturating_sub(len) / page_size + 1
}

/// Makes `storage` at least `needed` bytes long: when it must grow, by at least a quarter
/// of its length and [`MIN_GROWTH_PAGES`] pages of `p` bytes, so that a growing file is
/// resized rarely.
pub(crate) fn grow(storage: &dyn Storage, needed: u64, p: u64) -> Result<()> {
    if storage.len() < needed {
        let step = (storage.len() / 4).max(MIN_GROWTH_PAGES * p);
        let grown = needed.max(storage.len() + step).next_multiple_of(p);
        storage.resize(grown)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The scan of the file's unused tail stops at the first count that makes the tail worth
    /// cutting: exactly the count at which [`super::tail_to_cut`] turns true.
    #[test]
    fn the_tail_scan_stops_where_the_tail_becomes_worth_cutting() {
        let mut checked = 0;
        for p in [512u64, 4096, 65536] {
            for len_pages in [16u64, 17, 40, 100, 257, 1000, 4099] {
                let len = len_pages * p;
                for used_pages in (0..=len_pages).step_by(3) {
                    let used = used_pages * p;
                    if super::tail_to_cut(len, used, p) {
                        continue;
                    }
                    let need = super::pages_to_cut(len, used, p);
                    for tail in 0..=used_pages {
                        let cut = super::tail_to_cut(len, used - tail * p, p);
                        assert_eq!(cut, tail >= need, "p {p} len {len} used {used} tail {tail}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }
}
