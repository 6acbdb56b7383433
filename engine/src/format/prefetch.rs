//! A hint to the processor that a byte of a page will be read soon.
//!
//! A binary search in a page that is not in the cache waits for memory at every probe, one
//! probe after another. Asking at the start for the entries of the first probes, whichever
//! way each goes, lets those waits overlap. Measured (100,000 keys, one read transaction):
//! random gets 11–15 % faster, sequential gets 3–4 % slower. Asking again before every
//! probe, or reading the probes' slots to ask for their exact entries, cost searches in a
//! cached page more (sequential gets 14–17 % slower); asking for a branch's separators,
//! which lie a few to a cache line, did not pay.
#![allow(unsafe_code)]

/// Asks for the cache line holding `bytes[at]`, if `at` is inside `bytes`. Never faults
/// and changes nothing a program can observe but its speed.
#[inline(always)]
pub(crate) fn prefetch(bytes: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if at < bytes.len() {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch reads nothing a program can see and never faults; the
        // address is inside `bytes` anyway. The `sse` feature it needs is part of every
        // x86_64 target.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(bytes[at..].as_ptr().cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, at);
}

/// How many bytes at the start of a tree page [`page_start`] asks for.
const PAGE_START: usize = 1024;

/// Asks for the first kibibyte of a tree page about to be searched (16 cache lines; all
/// of a smaller page): the header, the slot array behind it, and the first entries.
///
/// Without it, a get in a leaf that is not in the cache waits for memory three times, one
/// wait after another: for the header (the slot count), then for the slots, then for the
/// entry the search found. Asking for these lines together with the header makes the
/// first two waits one, and a run of 16 lines rising through the page sets the second-level
/// cache's stream prefetcher going, which brings more of the page, the entry most often,
/// while the search runs. Measured (100,000 keys × 100 bytes, 4 KiB pages, random gets,
/// docs/benchmark-history.md, twenty-fifth session): 4 lines (header and slots only) bought
/// nothing, 16 lines 35–45 % more gets per second, 32 lines less than 16, the whole page
/// (64 lines) less again: more requests than the first-level cache can hold in flight stall
/// the search behind them. At 10,000 keys (every page cached) it costs nothing measurable.
///
/// A page of at least a kibibyte (every page size the engine accepts) takes one bounds
/// check and fifteen prefetch instructions; a loop checking each line cost 96 instructions
/// a page, a tenth of a get's.
#[inline(always)]
pub(crate) fn page_start(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    if bytes.len() >= PAGE_START {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let start = bytes.as_ptr();
        for line in 1..PAGE_START / 64 {
            // SAFETY: `line * 64 < PAGE_START <= bytes.len()`, so the address is inside
            // `bytes`; a prefetch reads nothing a program can see and never faults.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.add(line * 64).cast()) };
        }
        return;
    }
    for at in (64..bytes.len()).step_by(64) {
        prefetch(bytes, at);
    }
}

/// Calls `ahead` with the indexes a binary search over `0..n` probes in its first three
/// steps, whichever way each goes: seven indexes, or none when `n` is under seven (such a
/// range's entries lie a few cache lines apart).
#[inline(always)]
pub(crate) fn first_probes(n: usize, mut ahead: impl FnMut(usize)) {
    if n < 7 {
        return;
    }
    // The middle of `lo..hi`, and of its two halves.
    let split = |lo: usize, hi: usize| {
        let mid = lo + (hi - lo) / 2;
        (mid, lo + (mid - lo) / 2, mid + 1 + (hi - mid - 1) / 2)
    };
    let (m, l, r) = split(0, n);
    ahead(m);
    ahead(l);
    ahead(r);
    let (_, ll, lr) = split(0, m);
    let (_, rl, rr) = split(m + 1, n);
    ahead(ll);
    ahead(lr);
    ahead(rl);
    ahead(rr);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The indexes a plain binary search over `0..n` probes for every possible outcome.
    fn probed(n: usize, depth: usize) -> Vec<usize> {
        fn walk(lo: usize, hi: usize, depth: usize, out: &mut Vec<usize>) {
            if lo < hi && depth > 0 {
                let mid = lo + (hi - lo) / 2;
                out.push(mid);
                walk(lo, mid, depth - 1, out);
                walk(mid + 1, hi, depth - 1, out);
            }
        }
        let mut out = Vec::new();
        walk(0, n, depth, &mut out);
        out.sort_unstable();
        out
    }

    #[test]
    fn first_probes_are_those_of_the_first_three_steps() {
        for n in [7, 8, 9, 33, 157, 400] {
            let mut asked = Vec::new();
            first_probes(n, |i| asked.push(i));
            asked.sort_unstable();
            assert_eq!(asked, probed(n, 3), "n = {n}");
        }
        for n in 0..7 {
            first_probes(n, |i| panic!("asked for {i} of {n}"));
        }
    }

    #[test]
    fn prefetch_outside_the_slice_does_nothing() {
        let bytes = [1u8; 16];
        prefetch(&bytes, 0);
        prefetch(&bytes, 16);
        prefetch(&bytes, usize::MAX);
        page_start(&bytes);
        page_start(&[]);
        assert_eq!(bytes, [1u8; 16]);
    }
}
