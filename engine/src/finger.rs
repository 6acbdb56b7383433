//! The finger of a read transaction: the leaf its last get ended in, tried first by the
//! next get.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::btree::Pages;
use crate::error::Result;
use crate::format::{ChildRef, LeafPage, compare};

/// The leaf where a read transaction's last get ended, with its tree's root: a get of a
/// key between that leaf's first and last keys searches the leaf alone, since no other
/// leaf of the tree can hold it, and sequential gets skip most descents. The finger is
/// tried only after two descents in a row ended in the same leaf (a "streak"): reading a
/// leaf the get does not need costs random gets two cache misses, a fifth of their time.
/// A streak whose leaf did not hold the next key is carried to the leaf the descent then
/// found, for one try: gets in key order go on from leaf to leaf with one descent per
/// leaf (in leaves of three entries, a third of the gets instead of two thirds), and
/// gets in no order drop the streak after that try.
/// Root, leaf and the two marks share one word (`streak << 63 | root << 32 | carried << 31
/// | leaf`), so that threads sharing the transaction never see one's root with another's
/// leaf; files past 2^31 pages go without. The leaf is used only if the snapshot verified
/// it: its reader keeps it from being rewritten.
#[derive(Debug)]
pub(crate) struct Finger(AtomicU64);

const NO_FINGER: u64 = u64::MAX;
const STREAK: u64 = 1 << 63;
const CARRIED: u64 = 1 << 31;
const ROOT_LIMIT: u64 = (1 << 31) - 1;
const LEAF_MASK: u64 = (1 << 31) - 1;

/// How a finger's leaf may be tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    /// Two descents in a row ended in it.
    Streak,
    /// A streak's leaf did not hold the last get's key, whose descent ended here.
    Carried,
}

impl Default for Finger {
    fn default() -> Finger {
        Finger(AtomicU64::new(NO_FINGER))
    }
}

impl Finger {
    /// The leaf to try for a get in the tree under `root`, with its mark.
    fn leaf_of(&self, root: u64) -> Option<(u64, Mark)> {
        let packed = self.0.load(Relaxed);
        if packed == NO_FINGER || (packed >> 32) & ROOT_LIMIT != root {
            return None;
        }
        let mark = if packed & STREAK != 0 {
            Mark::Streak
        } else if packed & CARRIED != 0 {
            Mark::Carried
        } else {
            return None;
        };
        Some((packed & LEAF_MASK, mark))
    }

    /// A get in the tree under `root` found its key's place in `leaf`: by a descent
    /// (`tried`: the finger's mark, if its leaf was tried first and did not hold the key),
    /// or through the finger (`found_by_finger`).
    fn point(&self, root: u64, leaf: u64, tried: Option<Mark>, found_by_finger: bool) {
        if root >= ROOT_LIMIT || leaf >= LEAF_MASK {
            return;
        }
        let old = self.0.load(Relaxed);
        let same = old != NO_FINGER && old & !(STREAK | CARRIED) == root << 32 | leaf;
        let mark = if same || found_by_finger {
            STREAK
        } else if tried == Some(Mark::Streak) {
            CARRIED
        } else {
            0
        };
        if old != mark | root << 32 | leaf {
            self.0.store(mark | root << 32 | leaf, Relaxed);
        }
    }
}

impl Finger {
    /// The value stored under `key` in the tree under `root`: through the finger's leaf
    /// when it may hold the key, else by a descent, which moves the finger.
    ///
    /// # Errors
    /// Corruption found on the way.
    #[inline]
    pub(crate) fn get<'t>(
        &self,
        pages: Pages<'t>,
        root: ChildRef,
        key: &[u8],
    ) -> Result<Option<&'t [u8]>> {
        let finger = self.leaf_of(root.page);
        if let Some((leaf, mark)) = finger
            && let Some(l) = pages.snapshot.verified_leaf(leaf)
            && within(&l, key)?
        {
            if mark == Mark::Carried {
                self.point(root.page, leaf, None, true);
            }
            return pages.value_in(l, key);
        }
        let (value, leaf) = pages.get_in_leaf(Some(root), key)?;
        self.point(root.page, leaf, finger.map(|(_, mark)| mark), false);
        Ok(value)
    }
}

/// Whether `key` lies between the first and the last key of leaf `l` (both included),
/// so that no other leaf of its tree can hold it. A leaf with a shape answers from its
/// heads, without reading an entry.
fn within(l: &LeafPage<'_>, key: &[u8]) -> Result<bool> {
    if let Some(shape) = l.shape() {
        return Ok(shape.covers(l, key));
    }
    let Some(last) = l.len().checked_sub(1) else {
        return Ok(false);
    };
    Ok(compare(key, l.key(0)?).is_ge() && compare(key, l.key(last)?).is_le())
}

#[cfg(test)]
mod tests {
    use crate::{Database, Error};

    fn key(i: u32) -> [u8; 4] {
        i.to_be_bytes()
    }

    /// Every get agrees with the model: even keys below 20,000 hold their number.
    fn agrees(t: &crate::Table<'_>, i: u32) -> Result<bool, Error> {
        let expected = (i.is_multiple_of(2) && i < 20_000).then(|| key(i).to_vec());
        Ok(t.get(&key(i))?.map(<[u8]>::to_vec) == expected)
    }

    #[test]
    fn a_streak_is_carried_to_the_next_leaf_once() {
        use super::{Finger, Mark};
        let f = Finger::default();
        assert_eq!(f.leaf_of(1), None);
        // Two descents in a row end in leaf 10: a streak.
        f.point(1, 10, None, false);
        assert_eq!(f.leaf_of(1), None);
        f.point(1, 10, None, false);
        assert_eq!(f.leaf_of(1), Some((10, Mark::Streak)));
        assert_eq!(f.leaf_of(2), None, "another tree's finger");
        // Leaf 10 did not hold the next key; the descent ended in 11: carried there.
        f.point(1, 11, Some(Mark::Streak), false);
        assert_eq!(f.leaf_of(1), Some((11, Mark::Carried)));
        // 11 held the next key: a streak again.
        f.point(1, 11, None, true);
        assert_eq!(f.leaf_of(1), Some((11, Mark::Streak)));
        // Carried to 12, which did not hold the next key either: no finger.
        f.point(1, 12, Some(Mark::Streak), false);
        f.point(1, 40, Some(Mark::Carried), false);
        assert_eq!(f.leaf_of(1), None);
        // Pages past the word's room are never pointed at.
        f.point(1, 1 << 31, None, false);
        f.point(1, 1 << 31, None, false);
        assert_eq!(f.leaf_of(1), None);
    }

    #[test]
    fn gets_through_the_finger_agree_with_descents_in_every_order() -> Result<(), Error> {
        let db = Database::in_memory()?;
        let mut w = db.begin_write()?;
        w.create_table("a")?;
        w.create_table("b")?;
        for i in (0..20_000).step_by(2) {
            w.open_table("a")?.insert(&key(i), &key(i))?;
            // Table b holds other values under the same keys: a finger into a's leaves
            // must never answer for b.
            w.open_table("b")?.insert(&key(i), b"b")?;
        }
        w.commit()?;
        let r = db.begin_read()?;
        let (a, b) = (r.open_table("a")?, r.open_table("b")?);
        // Forwards and backwards, present and absent keys, past both ends.
        for i in (0..20_010).chain((0..20_010).rev()) {
            assert!(agrees(&a, i)?, "key {i}");
        }
        // Alternating tables (two gets in a's leaf make a streak first), scattered keys.
        for i in 0..20_000u32 {
            assert!(agrees(&a, i)?, "key {i}");
            assert!(agrees(&a, i)?, "key {i}");
            let other = b.get(&key(i))?;
            assert_eq!(
                other,
                i.is_multiple_of(2).then_some(&b"b"[..]),
                "b, key {i}"
            );
            let j = i.wrapping_mul(7919) % 20_010;
            assert!(agrees(&a, j)?, "key {j}");
        }
        // Threads sharing the transaction and the table.
        std::thread::scope(|s| {
            for t in 0..3u32 {
                let a = &a;
                s.spawn(move || {
                    for i in 0..20_010 {
                        let i = (i + t * 6_000) % 20_010;
                        assert!(agrees(a, i).unwrap_or(false), "thread {t}, key {i}");
                    }
                });
            }
        });
        Ok(())
    }
}
