//! The registry of live read transactions in this process that have no reader slot
//! (`reader_slots.rs`): a read-only process's readers, which pin their snapshots in the
//! file too, and readers past the slots' number. It counts how many read each snapshot,
//! and since when. The writer asks it and the slots for the oldest snapshot still read
//! before reusing freed pages; `stats` for the oldest reader's age.
//!
//! Beginning and ending a read transaction each touch it under the state lock, so it is
//! a short vector in snapshot order, not a map: new readers take the newest snapshot, so
//! an entry is found at the end or added there, and the vector keeps its capacity (a
//! `BTreeMap` allocated a node whenever the first reader of a snapshot began, which was
//! a third of a read transaction's cost). The time a snapshot's first reader began is
//! read from the coarse monotonic clock (a few milliseconds' resolution, for `stats`):
//! the precise one cost another quarter on this machine.

use std::time::Duration;

use nix::time::{ClockId, clock_gettime};

/// The coarse monotonic clock (zero if it cannot be read: ages then read as zero).
pub(crate) fn coarse_now() -> Duration {
    clock_gettime(ClockId::CLOCK_MONOTONIC_COARSE).map_or(Duration::ZERO, Duration::from)
}

#[derive(Debug, Default)]
pub(crate) struct Readers {
    /// `(snapshot txid, readers, when the first began)`, by txid.
    live: Vec<(u64, usize, Duration)>,
}

impl Readers {
    /// A reader of snapshot `txid` begins; whether it is the snapshot's first.
    pub fn enter(&mut self, txid: u64) -> bool {
        match self.find(txid) {
            Ok(i) => {
                self.live[i].1 += 1;
                false
            }
            Err(i) => {
                self.live.insert(i, (txid, 1, coarse_now()));
                true
            }
        }
    }

    /// A reader of snapshot `txid` ends; whether it was the snapshot's last.
    pub fn leave(&mut self, txid: u64) -> bool {
        let Ok(i) = self.find(txid) else {
            return false;
        };
        self.live[i].1 -= 1;
        let last = self.live[i].1 == 0;
        if last {
            self.live.remove(i);
        }
        last
    }

    /// The oldest snapshot still read, and for how long it has been.
    pub fn oldest(&self) -> Option<(u64, Duration)> {
        self.live
            .first()
            .map(|&(txid, _, since)| (txid, coarse_now().saturating_sub(since)))
    }

    fn find(&self, txid: u64) -> Result<usize, usize> {
        // The newest snapshot first: nearly every call is for it.
        match self.live.last() {
            Some(&(last, ..)) if last == txid => Ok(self.live.len() - 1),
            Some(&(last, ..)) if last < txid => Err(self.live.len()),
            _ => self.live.binary_search_by_key(&txid, |&(t, ..)| t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_readers_per_snapshot_and_keeps_the_oldest_first() {
        let mut r = Readers::default();
        assert_eq!(r.oldest(), None);
        assert!(r.enter(7));
        assert!(!r.enter(7));
        assert!(r.enter(9));
        assert!(r.enter(3), "an older snapshot (a follower's) goes first");
        assert_eq!(r.oldest().map(|(t, _)| t), Some(3));
        assert!(r.leave(3));
        assert!(!r.leave(7), "one reader of 7 is left");
        assert_eq!(r.oldest().map(|(t, _)| t), Some(7));
        assert!(r.leave(7));
        assert!(!r.leave(7), "no reader of 7 is left to end");
        assert!(r.leave(9));
        assert_eq!(r.oldest(), None);
    }
}
