//! Waiting by polling, for the short waits of a durable commit. A thread that sleeps
//! until another wakes it (or until the disk's interrupt does) runs again only once the
//! kernel has scheduled it, late on a virtual machine whose processors were idle
//! meanwhile. On the development machine (twenty-third session), group commits of four
//! threads spent 34–58 µs gathering the batches of the threads the last group released,
//! 5–6 µs when those polled; the leader's wait for its record took 155–198 µs asleep,
//! 102–108 µs while the others polled. A thread that polls yields its processor between
//! tries. Polling spends an otherwise idle processor, so it is bounded: about twice as
//! long as the same wait took last time, after which the waiter sleeps as before; not at
//! all when that would be more than [`MAX`] (a slow disk, whose waits a late wake-up
//! hardly lengthens), nor when the database was opened with `Builder::poll_waits(false)`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The shortest a poll is allowed to run, whatever the last wait took.
const MIN: Duration = Duration::from_micros(20);

/// The longest a poll runs: a wait that took more than half of this (a slow disk, a sync
/// of the whole file) is long enough that being woken late costs little beside it, and
/// the next one sleeps at once.
pub(crate) const MAX: Duration = Duration::from_millis(1);

/// How long to poll for one kind of wait, learnt from how long the last one took.
#[derive(Debug, Default)]
pub(crate) struct PollBound {
    last_nanos: AtomicU64,
    off: AtomicBool,
}

impl PollBound {
    /// Records how long a wait of this kind took.
    pub fn record(&self, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.last_nanos.store(nanos, Relaxed);
    }

    /// Turns polling on or off.
    pub fn set_enabled(&self, yes: bool) {
        self.off.store(!yes, Relaxed);
    }

    /// How long the next wait polls before it sleeps.
    pub fn limit(&self) -> Duration {
        let twice = Duration::from_nanos(self.last_nanos.load(Relaxed).saturating_mul(2));
        if !self.enabled() || twice > MAX {
            Duration::ZERO
        } else {
            twice.max(MIN)
        }
    }

    /// Whether waits poll at all.
    pub fn enabled(&self) -> bool {
        !self.off.load(Relaxed)
    }

    /// Tries `done` until it returns `true` (then `true`) or the bound has passed (`false`),
    /// yielding the processor between tries.
    pub fn poll(&self, done: impl FnMut() -> bool) -> bool {
        poll_for(self.limit(), done)
    }
}

/// Tries `done` until it returns `true` (then `true`) or `limit` has passed (`false`),
/// yielding the processor between tries.
pub(crate) fn poll_for(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_follows_the_last_wait_within_its_limits() {
        let b = PollBound::default();
        assert_eq!(b.limit(), MIN);
        b.record(Duration::from_micros(150));
        assert_eq!(b.limit(), Duration::from_micros(300));
        b.record(MAX / 2);
        assert_eq!(b.limit(), MAX);
        b.record(MAX);
        assert_eq!(b.limit(), Duration::ZERO);
        b.record(Duration::from_nanos(10));
        assert_eq!(b.limit(), MIN);
        b.set_enabled(false);
        assert_eq!(b.limit(), Duration::ZERO);
        b.set_enabled(true);
        assert_eq!(b.limit(), MIN);
    }

    #[test]
    fn a_poll_returns_when_done_and_gives_up_after_its_bound() {
        let b = PollBound::default();
        let mut tries = 0;
        assert!(b.poll(|| {
            tries += 1;
            true
        }));
        assert_eq!(tries, 1);
        let start = Instant::now();
        assert!(!b.poll(|| false));
        assert!(start.elapsed() >= MIN);
        // Off, a wait that is not over yet is tried once and goes to sleep.
        b.set_enabled(false);
        let mut tries = 0;
        assert!(!b.poll(|| {
            tries += 1;
            false
        }));
        assert_eq!(tries, 1);
    }
}
