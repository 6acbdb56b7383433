//! The background sync of Eventual commits.
//!
//! An Eventual commit is durable at the next Immediate commit, `Database::sync` or close;
//! a process that commits Eventual transactions and then goes quiet would keep them at the
//! mercy of a crash for as long as it stays open. A thread therefore wakes every interval
//! (`Builder::eventual_sync`, one second by default for a file) and, when commits since the
//! last sync are not durable and no write transaction holds the writer, syncs as
//! `Database::sync` does. While the writer keeps committing the sync is put off, up to four
//! intervals: an Eventual commit is durable within two intervals of the writer's last one,
//! and within five while it goes on; a quiet database costs a look at a counter and two
//! locks per interval.
//!
//! The thread holds the database weakly, taking it only for a sync. The last `Database`
//! handle stops the thread and waits for it before its own reference goes, so that closing
//! the file (the final sync, the seal, the lock's release) happens on the application's
//! thread, before `drop` returns. The thread never waits for the writer, so that wait
//! cannot deadlock against a thread that drops its last handle while holding a write
//! transaction.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::db::Inner;

/// The shortest interval between looks.
const MIN_INTERVAL: Duration = Duration::from_micros(100);

/// The running thread, and the flag that stops it.
#[derive(Debug)]
pub(crate) struct Syncer {
    stop: Arc<Stop>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct Stop {
    stopped: Mutex<bool>,
    cv: Condvar,
}

impl Syncer {
    /// Starts the thread for `inner`, syncing every `every`.
    ///
    /// # Errors
    /// When the thread cannot be started.
    pub fn start(inner: &Arc<Inner>, every: Duration) -> std::io::Result<Syncer> {
        // A zero interval would keep a processor busy looking.
        let every = every.max(MIN_INTERVAL);
        let stop = Arc::new(Stop::default());
        let (weak, flag) = (Arc::downgrade(inner), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("cairn-eventual-sync".into())
            .spawn(move || run(&weak, &flag, every))?;
        Ok(Syncer {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread and waits for it (for the end of a sync it is in).
    pub fn stop(mut self) {
        *self
            .stop
            .stopped
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        self.stop.cv.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Intervals a sync may be put off while the writer keeps committing.
const BUSY_INTERVALS: u32 = 4;

fn run(inner: &Weak<Inner>, stop: &Stop, every: Duration) {
    let mut stopped = stop.stopped.lock().unwrap_or_else(PoisonError::into_inner);
    let (mut commits_seen, mut put_off) = (0, 0);
    loop {
        stopped = stop
            .cv
            .wait_timeout_while(stopped, every, |stopped| !*stopped)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
        if *stopped {
            return;
        }
        // The flag is free while syncing, for `stop` to raise it and then wait.
        drop(stopped);
        let Some(inner) = inner.upgrade() else { return };
        // A writer that committed during the interval is likely to go on: its own syncs
        // (a full log, freed pages) may come first, and a sync now would hold up its
        // commits. It is put off, a few intervals at most.
        let commits = inner.commits.load(Ordering::Relaxed);
        if commits != commits_seen && put_off < BUSY_INTERVALS {
            put_off += 1;
        } else {
            put_off = 0;
            inner.sync_if_idle();
        }
        commits_seen = commits;
        drop(inner);
        stopped = stop.stopped.lock().unwrap_or_else(PoisonError::into_inner);
    }
}
