//! The background sync of Eventual commits.
//!
//! An Eventual commit is durable at the next Immediate commit, `Database::sync` or close;
//! a process that commits Eventual transactions and then goes quiet would keep them at the
//! mercy of a crash for as long as it stays open. A thread therefore wakes every interval
//! (`Builder::eventual_sync`, one second by default for a file) and, when commits since the
//! last sync are not durable and no write transaction holds the writer, syncs as
//! `Database::sync` does: an Eventual commit is durable within about one interval, and a
//! quiet database costs a check of two locks per interval.
//!
//! The thread holds the database weakly, taking it only for a sync. The last `Database`
//! handle stops the thread and waits for it before its own reference goes, so that closing
//! the file (the final sync, the seal, the lock's release) happens on the application's
//! thread, before `drop` returns. The thread never waits for the writer, so that wait
//! cannot deadlock against a thread that drops its last handle while holding a write
//! transaction.

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

fn run(inner: &Weak<Inner>, stop: &Stop, every: Duration) {
    let mut stopped = stop.stopped.lock().unwrap_or_else(PoisonError::into_inner);
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
        match inner.upgrade() {
            Some(inner) => inner.sync_if_idle(),
            None => return,
        }
        stopped = stop.stopped.lock().unwrap_or_else(PoisonError::into_inner);
    }
}
