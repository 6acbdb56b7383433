//! Key order: bytewise, shorter first on a common prefix — the order of `[u8]`'s `Ord`.
//!
//! Searches compare a key against a dozen stored keys per page. The standard comparison
//! calls the C library's `memcmp` for every one of them, which for the short keys typical
//! of a key-value store costs more than the comparison itself; this one reads eight bytes
//! at a time as big-endian integers and is inlined into the search loops.

use std::cmp::Ordering;

/// `a.cmp(b)`, eight bytes at a time.
#[inline(always)]
pub(crate) fn compare(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let whole = n - n % 8;
    // Indexes rather than `chunks_exact(..).zip(..)`: the iterator's constructor was
    // sometimes left as a call in the search loops.
    let mut at = 0;
    while at < whole {
        let (x, y) = (word(&a[at..at + 8]), word(&b[at..at + 8]));
        if x != y {
            return x.cmp(&y);
        }
        at += 8;
    }
    let (a_rest, b_rest) = (&a[whole..n], &b[whole..n]);
    // Fewer than eight bytes are left of the common length: padded with zeros alike, they
    // compare as the bytes themselves do.
    match tail(a_rest).cmp(&tail(b_rest)) {
        Ordering::Equal => a.len().cmp(&b.len()),
        unequal => unequal,
    }
}

/// The smallest key after every key that starts with `prefix`, if there is one: `None`
/// when `prefix` is empty or all `0xff` bytes, so that every key from it on starts with it.
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let keep = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut end = prefix[..=keep].to_vec();
    end[keep] += 1;
    Some(end)
}

/// Eight bytes as a big-endian integer.
#[inline(always)]
fn word(c: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(c);
    u64::from_be_bytes(w)
}

/// Up to seven bytes, left-aligned in a big-endian integer: read as four, two and one
/// bytes as the length has them (a copy of `c.len()` bytes compiled to a call to `memcpy`,
/// which cost a branch search's comparison with its prefix more than the rest of it).
#[inline(always)]
pub(super) fn tail(c: &[u8]) -> u64 {
    let (mut w, mut free, mut rest) = (0u64, 64, c);
    if let Some((four, r)) = rest.split_first_chunk::<4>() {
        free -= 32;
        w |= u64::from(u32::from_be_bytes(*four)) << free;
        rest = r;
    }
    if let Some((two, r)) = rest.split_first_chunk::<2>() {
        free -= 16;
        w |= u64::from(u16::from_be_bytes(*two)) << free;
        rest = r;
    }
    if let Some(&one) = rest.first() {
        w |= u64::from(one) << (free - 8);
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ends_skip_trailing_ff() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[1, 0xff, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff]), None);
        assert_eq!(prefix_end(b""), None);
    }

    #[test]
    fn agrees_with_slice_order() {
        let keys: Vec<Vec<u8>> = {
            let mut v = vec![
                vec![],
                vec![0],
                vec![0, 0],
                vec![255],
                vec![1; 7],
                vec![1; 8],
            ];
            let mut s = 0x9e37_79b9_7f4a_7c15u64;
            for _ in 0..400 {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let len = (s % 20) as usize;
                // Few distinct byte values, so long common prefixes are frequent.
                v.push((0..len).map(|i| ((s >> (i % 8 * 8)) % 3) as u8).collect());
            }
            v
        };
        for a in &keys {
            for b in &keys {
                assert_eq!(compare(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }
}
