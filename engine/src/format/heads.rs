//! Key heads, shared by leaves (format version 4) and branches (version 5): a slot holds
//! its entry's offset and the four key bytes that follow the prefix all the page's keys
//! share, zero-padded, whose length the page header holds. Read as big-endian numbers,
//! heads order as keys do wherever they differ, so a search compares heads, which lie
//! together in the slot array, and reads a stored key only where the heads are equal.
//! Layout: docs/design.md#leaf-page.

use super::page::{LEGACY_BRANCH, LEGACY_LEAF};
use super::{PageKind, get_u16, put_u16, write_page_header};
use crate::error::Result;

/// Bytes of a key's head.
pub(super) const HEAD: usize = 4;
/// Where the header holds the length of the prefix all keys share (`u16`).
pub(super) const PREFIX_LEN: usize = 4;

/// The slot layout of a tree page (leaf or branch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Offset and head: what this build writes.
    Heads,
    /// The offset alone: a leaf written before format version 4, a branch before 5.
    Legacy,
}

impl Layout {
    /// The layout of tree page `bytes`, from its kind byte.
    pub(super) fn of(bytes: &[u8]) -> Layout {
        if matches!(bytes.first(), Some(&(LEGACY_LEAF | LEGACY_BRANCH))) {
            Layout::Legacy
        } else {
            Layout::Heads
        }
    }

    /// Bytes of one slot.
    #[inline(always)]
    pub(super) const fn slot(self) -> usize {
        match self {
            Layout::Heads => 2 + HEAD,
            Layout::Legacy => 2,
        }
    }
}

/// Writes the header of a tree page of `kind` (leaf or branch) in `layout`: its kind byte
/// (the legacy one for a page without heads), count and transaction. The prefix is
/// recorded separately ([`record_prefix`], [`set_prefix`]).
pub(super) fn write_header(
    page: &mut [u8],
    kind: PageKind,
    layout: Layout,
    count: usize,
    txid: u64,
) {
    write_page_header(page, kind, count as u16, txid);
    if layout == Layout::Legacy {
        page[0] = match kind {
            PageKind::Branch => LEGACY_BRANCH,
            _ => LEGACY_LEAF,
        };
    }
}

/// The head of `key` in a page whose keys share a prefix of `prefix` bytes: the four bytes
/// after it, zero-padded, as a big-endian number (so heads order as keys do: keys whose
/// heads differ compare as their heads do).
#[inline(always)]
pub(super) fn head(key: &[u8], prefix: usize) -> u32 {
    let rest = key.get(prefix..).unwrap_or(&[]);
    if let Some(&four) = rest.first_chunk::<HEAD>() {
        return u32::from_be_bytes(four);
    }
    // Fewer than four bytes: left-aligned in the top half of `tail`'s word (a copy into a
    // padded array compiled to a call to `memcpy`).
    (super::keys::tail(rest) >> 32) as u32
}

/// How many leading bytes `a` and `b` share.
pub(super) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The prefix that the keys of a sorted run from `first` to `last` share, as a header
/// records it (0 when the run is empty).
fn shared_prefix(first: Option<&[u8]>, last: Option<&[u8]>) -> usize {
    match (first, last) {
        (Some(first), Some(last)) => common_prefix(first, last).min(usize::from(u16::MAX)),
        _ => 0,
    }
}

/// Records in the header of `page`, written whole in `layout` with the sorted `keys`, the
/// length of the prefix they share; returns it (0 in a legacy page).
pub(super) fn record_prefix<'e>(
    page: &mut [u8],
    layout: Layout,
    mut keys: impl Iterator<Item = &'e [u8]>,
) -> usize {
    let prefix = match layout {
        Layout::Heads => {
            let first = keys.next();
            shared_prefix(first, keys.last().or(first))
        }
        Layout::Legacy => 0,
    };
    set_prefix(page, layout, prefix);
    prefix
}

/// The length of the prefix the header of tree page `page` records (0 in a legacy page).
pub(super) fn recorded_prefix(page: &[u8]) -> usize {
    match Layout::of(page) {
        Layout::Heads => get_u16(page, PREFIX_LEN).map_or(0, usize::from),
        Layout::Legacy => 0,
    }
}

/// Records in the header the length of the prefix the keys share (nothing in a legacy
/// page).
pub(super) fn set_prefix(page: &mut [u8], layout: Layout, prefix: usize) {
    if layout == Layout::Heads {
        put_u16(page, PREFIX_LEN, prefix as u16);
    }
}

/// The head recorded in slot `i` of a slot array with heads starting at byte `slots`.
#[inline(always)]
pub(super) fn slot_head(page: &[u8], slots: usize, i: usize) -> Option<u32> {
    let at = slots + Layout::Heads.slot() * i + 2;
    Some(u32::from_be_bytes(
        page.get(at..at + HEAD)?.try_into().ok()?,
    ))
}

/// How many of `n` entries come before head `h` by `before` (true for the entries that
/// come first, false for every one after), given `first` and `last`, the heads of the
/// first and the last entry.
///
/// A binary search probes about `log2(n)` entries one after another, each waiting for the
/// one before. Heads of keys spread evenly (counters, timestamps, hashes) lie on a line
/// from `first` to `last`, so the search starts where `h` falls on that line, then gallops
/// away from the guess in steps that double, and ends with a binary search between the
/// last two probes: a guess off by `d` entries costs about `2 log2(d)` probes, by none
/// two, and keys that are not spread evenly at most about twice a binary search's.
#[inline(always)]
pub(super) fn partition(
    n: usize,
    h: u32,
    first: u32,
    last: u32,
    mut before: impl FnMut(usize) -> Result<bool>,
) -> Result<usize> {
    if n == 0 {
        return Ok(0);
    }
    let guess = if h <= first {
        0
    } else if h >= last {
        n - 1
    } else {
        // `first < h < last`, so the quotient is below `n - 1`.
        (u64::from(h - first) * (n as u64 - 1) / u64::from(last - first)) as usize
    };
    // Gallop from the guess to bracket the boundary: `before` holds below `lo` and fails
    // from `hi` on.
    let (mut lo, mut hi);
    if before(guess)? {
        (lo, hi) = (guess + 1, n);
        let mut step = 1;
        while lo + step - 1 < hi {
            let probe = lo + step - 1;
            if before(probe)? {
                lo = probe + 1;
                step *= 2;
            } else {
                hi = probe;
                break;
            }
        }
    } else {
        (lo, hi) = (0, guess);
        let mut step = 1;
        while step <= hi {
            let probe = hi - step;
            if before(probe)? {
                lo = probe + 1;
                break;
            }
            hi = probe;
            step *= 2;
        }
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid)? {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// Writes `head` into slot `i` of a slot array with heads starting at byte `slots`.
pub(super) fn put_head(page: &mut [u8], slots: usize, i: usize, head: u32) {
    let at = slots + Layout::Heads.slot() * i + 2;
    page[at..at + HEAD].copy_from_slice(&head.to_be_bytes());
}

/// The first of a page's `count` keys (read with `key`) that does not start with the first
/// key's `prefix` bytes, or whose slot (in the slot array with heads at byte `slots`) does
/// not hold its head; `None` when every key is as it should be.
pub(super) fn first_mismatch<'a>(
    page: &[u8],
    slots: usize,
    prefix: usize,
    count: usize,
    key: impl Fn(usize) -> Result<&'a [u8]>,
) -> Result<Option<usize>> {
    if count == 0 {
        return Ok(None);
    }
    let Some(shared) = key(0)?.get(..prefix) else {
        return Ok(Some(0));
    };
    for i in 0..count {
        let k = key(i)?;
        if k.get(..prefix) != Some(shared) || slot_head(page, slots, i) != Some(head(k, prefix)) {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Runs `partition` over `n` entries of which the first `boundary` come before,
    /// counting the probes.
    fn run(n: usize, boundary: usize, h: u32, first: u32, last: u32) -> Result<(usize, usize)> {
        let mut probes = 0;
        let found = partition(n, h, first, last, |i| {
            assert!(i < n, "probe {i} of {n}");
            probes += 1;
            Ok(i < boundary)
        })?;
        Ok((found, probes))
    }

    #[test]
    fn partition_finds_the_boundary_whatever_the_guess() -> Result<()> {
        let heads = [0, 1, 7, 1_000, u32::MAX / 2, u32::MAX - 1, u32::MAX];
        for n in 0..80 {
            for boundary in 0..=n {
                for &h in &heads {
                    for &first in &heads {
                        for &last in &heads {
                            let (found, probes) = run(n, boundary, h, first, last)?;
                            assert_eq!(found, boundary, "n {n}, h {h}, {first}..{last}");
                            // At most about twice a binary search's probes.
                            let log = usize::BITS - n.leading_zeros();
                            assert!(probes <= 2 * log as usize + 2, "{probes} probes, n {n}");
                        }
                    }
                }
            }
        }
        Ok(())
    }

    #[test]
    fn evenly_spread_heads_take_a_few_probes() -> Result<()> {
        // 145 entries whose heads rise by 1,000: a head's entry is where the line puts it.
        let n = 145;
        for boundary in 0..n {
            let h = boundary as u32 * 1_000;
            let (found, probes) = run(n, boundary, h, 0, (n as u32 - 1) * 1_000)?;
            assert_eq!(found, boundary);
            assert!(probes <= 2, "{probes} probes for entry {boundary}");
        }
        Ok(())
    }

    #[test]
    fn an_error_from_a_probe_is_returned() {
        let failed = partition(10, 5, 0, 9, |i| match i {
            5 => Err(Error::corrupt(3, "probe")),
            _ => Ok(i < 5),
        });
        assert!(failed.is_err());
    }
}
