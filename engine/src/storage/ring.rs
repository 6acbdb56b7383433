//! A durable write that runs while the writer does other work: the commit log's record goes
//! to the disk through an `io_uring`, and the commit writes its tree pages while the device
//! works, instead of before the record (which made a single-put commit wait for both, one
//! after the other). Only for a writer that polls for the write's end (see
//! `FileStorage::poll_waits` for why).
//!
//! One submission at a time, always waited for before the call returns: the kernel never
//! holds a buffer past the call that lent it, except after a failed wait, when the buffer
//! is leaked rather than reused.

#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use io_uring::{IoUring, opcode, types};

use crate::poll::PollBound;

/// A ring of one submission, shared by the writes of one file.
pub(super) struct Ring {
    ring: Mutex<IoUring>,
    /// Set for good after a submission or a wait failed: later writes go without the ring.
    broken: AtomicBool,
    /// How long the last write took, so that the next one's wait polls about as long.
    write_time: PollBound,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("broken", &self.broken.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// What [`Ring::write_while`] did: `meanwhile`'s outcome, then the write's (bytes written).
pub(super) type Overlapped = (io::Result<()>, io::Result<usize>);

impl Ring {
    /// A ring, or `None` where the kernel has none to give (an old kernel, or one that
    /// refuses `io_uring` to this process).
    pub(super) fn new() -> Option<Ring> {
        let ring = IoUring::new(2).ok()?;
        Some(Ring {
            ring: Mutex::new(ring),
            broken: AtomicBool::new(false),
            write_time: PollBound::default(),
        })
    }

    /// How long the next write's wait would poll.
    #[cfg(test)]
    pub(super) fn poll_limit(&self) -> std::time::Duration {
        self.write_time.limit()
    }

    /// Writes `buf[range]` at `offset` of `file` and runs `meanwhile` while the write is
    /// under way; returns when both are done. `None` when the write could not be started
    /// (`meanwhile` has not run then, and nothing was written).
    ///
    /// `buf` is the caller's buffer: after a wait that failed, the kernel may still read
    /// it, so it is leaked (left empty for the caller) instead of being reused.
    pub(super) fn write_while(
        &self,
        file: &File,
        offset: u64,
        buf: &mut Vec<u8>,
        range: std::ops::Range<usize>,
        meanwhile: &mut dyn FnMut() -> io::Result<()>,
    ) -> Option<Overlapped> {
        if self.broken.load(Ordering::Relaxed) {
            return None;
        }
        let data = buf.get(range)?;
        let len = u32::try_from(data.len()).ok()?;
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = opcode::Write::new(types::Fd(file.as_raw_fd()), data.as_ptr(), len)
            .offset(offset)
            .build();
        // SAFETY: the entry reads `len` bytes from `data`, which lies in `buf`; this call
        // holds `buf` mutably borrowed until the kernel reports the write complete (the
        // loop below), or leaks it when the wait fails, so those bytes stay allocated and
        // unchanged for as long as the kernel may read them. The ring has room (one entry
        // at a time, and the queue holds two).
        if unsafe { ring.submission().push(&entry) }.is_err() {
            self.broken.store(true, Ordering::Relaxed);
            return None;
        }
        let submitted = std::time::Instant::now();
        loop {
            match ring.submit() {
                Ok(1) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Not taken by the kernel: it never will be, as this ring is not used again.
                Ok(_) | Err(_) => {
                    self.broken.store(true, Ordering::Relaxed);
                    return None;
                }
            }
        }
        // A panic in `meanwhile` waits for the write too before it goes on unwinding.
        let during = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut *meanwhile));
        // The completion, polled for about twice as long as the last write took, then slept
        // for (see `poll.rs`): single-put durable commits on one thread ran 3–35 % faster
        // polling than asleep (six alternations). Each yield enters the kernel, which
        // posts the completion then.
        self.write_time.poll(|| !ring.completion().is_empty());
        let written = loop {
            if let Some(done) = ring.completion().next() {
                break usize::try_from(done.result())
                    .map_err(|_| io::Error::from_raw_os_error(done.result().saturating_neg()));
            }
            match ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.broken.store(true, Ordering::Relaxed);
                    std::mem::forget(std::mem::take(buf));
                    break Err(e);
                }
            }
        };
        self.write_time.record(submitted.elapsed());
        match during {
            Ok(during) => Some((during, written)),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}
