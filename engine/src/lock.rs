//! Locks between processes, all advisory and all on the database file itself (no lock
//! file beside it):
//!
//! - the writer's exclusive `flock` on the whole file keeps a second writer out;
//! - the writer also holds a POSIX write lock on one byte far past any data, so that a
//!   process refused by the `flock` can ask the kernel who holds the file (for its error
//!   message only: the kernel drops the lock when the writer's process closes any
//!   descriptor of the file);
//! - a reader in another process holds a shared open-file-description lock on byte
//!   `READERS + txid` for each snapshot it reads, and the writer asks the kernel for the
//!   lowest such byte before reusing pages (docs/design.md#readers-in-other-processes);
//! - a writer's opening holds an open-file-description write lock on byte `2^62 + 1`
//!   while it recovers the file, and every read-only handle a shared one on `2^62 + 2`
//!   for as long as it is open.
//!
//! Byte-range locks need no data at their offsets: the ranges used lie far past the end of
//! any database file.
//!
//! Within one process, a second handle opened for writing on a file (by any of its paths)
//! waits on the process's own list of the files it writes ([`WriterClaim`]) rather than on
//! its own `flock`, so that it wakes when the first closes and, when the wait times out,
//! says that this process holds the file.

use std::fs::{File, TryLockError};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, fcntl};
use nix::libc;

use crate::error::{Error, Result};

/// The byte the writer process write-locks, so that others can learn its process id.
const WRITER_BYTE: i64 = 1 << 62;

/// The byte a writer holds an open-file-description write lock on while its opening
/// recovers the file, so that read-only openings and readers elsewhere wait for it.
const RECOVERING: i64 = WRITER_BYTE + 1;

/// The byte every read-only handle of a file holds a shared open-file-description lock on
/// for as long as it is open, so that a writer's opening after a crash can tell whether
/// one may hold a snapshot it has not pinned (`db/after_crash.rs`).
const HANDLES: i64 = WRITER_BYTE + 2;

/// Where the reader locks start: snapshot `txid` is pinned by a shared lock on byte
/// `READERS + txid`.
const READERS: i64 = 1 << 61;

// Every commit id a file may hold, and twice that, pins a byte below the writer's.
const _: () = assert!(READERS as u64 + 2 * crate::format::Slot::TXID_LIMIT <= WRITER_BYTE as u64);

fn range(kind: libc::c_int, start: i64, len: i64) -> libc::flock {
    libc::flock {
        l_type: kind as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: start,
        l_len: len,
        l_pid: 0,
    }
}

/// The reader byte of snapshot `txid` (ids stay below [`crate::format::Slot::TXID_LIMIT`];
/// past `i64::MAX` they would share the last byte).
fn reader_byte(txid: u64) -> i64 {
    READERS.saturating_add(i64::try_from(txid).unwrap_or(i64::MAX))
}

/// When a wait for a lock ends: `None` for a timeout too long to add to the clock
/// (`Duration::MAX`: wait for good).
struct Deadline(Option<Instant>);

impl Deadline {
    fn after(timeout: Duration) -> Deadline {
        Deadline(Instant::now().checked_add(timeout))
    }

    /// The time left (a day at a time for a wait for good).
    fn left(&self) -> Duration {
        match self.0 {
            Some(at) => at.saturating_duration_since(Instant::now()),
            None => Duration::from_secs(86_400),
        }
    }
}

/// The files this process has open for writing, by device and inode, and the signal
/// that one was closed.
static WRITING: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());
static CLOSED: Condvar = Condvar::new();

/// This process's claim to write a file, held as long as its database is open: a second
/// claim on the same file waits for the first to end.
#[derive(Debug)]
pub(crate) struct WriterClaim {
    file: (u64, u64),
}

impl WriterClaim {
    /// Claims `file` (opened from `path`) for writing, waiting up to `timeout` for a
    /// database of this process that has it open to close.
    ///
    /// # Errors
    /// [`Error::AlreadyOpen`] when this process still has it open for writing then.
    pub fn new(file: &File, path: &Path, timeout: Duration) -> Result<WriterClaim> {
        let meta = file.metadata()?;
        let id = (meta.dev(), meta.ino());
        let deadline = Deadline::after(timeout);
        let mut writing = WRITING.lock().unwrap_or_else(PoisonError::into_inner);
        while writing.contains(&id) {
            let left = deadline.left();
            if left.is_zero() {
                return Err(Error::AlreadyOpen {
                    path: path.to_path_buf(),
                });
            }
            writing = CLOSED
                .wait_timeout(writing, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        writing.push(id);
        Ok(WriterClaim { file: id })
    }
}

impl Drop for WriterClaim {
    fn drop(&mut self) {
        let mut writing = WRITING.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = writing.iter().position(|id| *id == self.file) {
            writing.swap_remove(i);
        }
        CLOSED.notify_all();
    }
}

/// Whether a database of this process has `file` open for writing.
pub(crate) fn claimed_here(file: &File) -> io::Result<bool> {
    let meta = file.metadata()?;
    let writing = WRITING.lock().unwrap_or_else(PoisonError::into_inner);
    Ok(writing.contains(&(meta.dev(), meta.ino())))
}

/// Takes an exclusive advisory lock on `file`, retrying until `timeout` has passed; the
/// error names the process holding the file, where the kernel tells.
pub(crate) fn lock_exclusive(file: &File, path: &Path, timeout: Duration) -> Result<()> {
    let deadline = Deadline::after(timeout);
    loop {
        match file.try_lock() {
            Ok(()) => {
                // Informational only: failing to set it costs the pid in others' errors.
                let _ = fcntl(
                    file,
                    FcntlArg::F_SETLK(&range(libc::F_WRLCK, WRITER_BYTE, 1)),
                );
                return Ok(());
            }
            Err(TryLockError::Error(e)) => return Err(Error::Io(e)),
            Err(TryLockError::WouldBlock) if !deadline.left().is_zero() => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(Error::Locked {
                    path: path.to_path_buf(),
                    pid: writer_pid(file),
                });
            }
        }
    }
}

/// Whether a writer holds `file`: its exclusive `flock`, in any process (this one too),
/// through any open file of it. Asks by taking a shared one on `file` (which holds none)
/// and letting it go: a writer starting that moment retries its own within its timeout.
/// Where the file system refuses `flock`, asks for the writer's POSIX byte instead.
///
/// Until the forty-eighth session this asked for the POSIX byte alone, which the kernel
/// drops whenever the writer's process closes any descriptor of the file (a read-only
/// handle it opened and dropped, say), and never reports to the process holding it.
pub(crate) fn writer_alive(file: &File) -> bool {
    match file.try_lock_shared() {
        Ok(()) => {
            // (Failing to unlock keeps writers out until `file` closes.)
            let _ = file.unlock();
            false
        }
        Err(TryLockError::WouldBlock) => true,
        Err(TryLockError::Error(_)) => writer_byte_held(file),
    }
}

/// Whether another process holds the writer's POSIX byte of `file`.
pub(crate) fn writer_byte_held(file: &File) -> bool {
    let mut probe = range(libc::F_WRLCK, WRITER_BYTE, 1);
    fcntl(file, FcntlArg::F_GETLK(&mut probe)).is_ok() && i32::from(probe.l_type) != libc::F_UNLCK
}

/// Whether a writer holds `file` ([`writer_alive`]): `Some` with its process id, where
/// the kernel tells.
pub(crate) fn writer_holding(file: &File) -> Option<Option<u32>> {
    writer_alive(file).then(|| writer_pid(file))
}

/// The process id of the writer holding `file`, if the kernel tells.
fn writer_pid(file: &File) -> Option<u32> {
    let mut probe = range(libc::F_WRLCK, WRITER_BYTE, 1);
    fcntl(file, FcntlArg::F_GETLK(&mut probe)).ok()?;
    (i32::from(probe.l_type) != libc::F_UNLCK)
        .then(|| u32::try_from(probe.l_pid).ok())
        .flatten()
}

/// Takes (or, `F_UNLCK`, lets go of) an open-file-description lock of `kind` on `byte`
/// of `file`, without waiting.
fn set_ofd(file: &File, kind: libc::c_int, byte: i64) -> io::Result<()> {
    fcntl(file, FcntlArg::F_OFD_SETLK(&range(kind, byte, 1)))?;
    Ok(())
}

/// Marks `file` as being recovered by this writer's opening, until [`recovered`] (or
/// until the open file closes). Until it is done, the slots may name a commit the opening
/// is about to refuse (pages a power cut lost): readers elsewhere must not take it.
pub(crate) fn recovering(file: &File) -> io::Result<()> {
    set_ofd(file, libc::F_WRLCK, RECOVERING)
}

/// Ends [`recovering`].
pub(crate) fn recovered(file: &File) -> io::Result<()> {
    set_ofd(file, libc::F_UNLCK, RECOVERING)
}

/// Whether a writer's opening is recovering `file` ([`recovering`]), in any process,
/// through any other open file of it. (Asked of a file that holds no such lock itself.)
pub(crate) fn writer_recovering(file: &File) -> bool {
    let mut probe = range(libc::F_RDLCK, RECOVERING, 1);
    fcntl(file, FcntlArg::F_OFD_GETLK(&mut probe)).is_ok()
        && i32::from(probe.l_type) != libc::F_UNLCK
}

/// Marks `file` as open in a read-only handle, until the open file closes.
pub(crate) fn reading(file: &File) -> io::Result<()> {
    set_ofd(file, libc::F_RDLCK, HANDLES)
}

/// Whether a read-only handle has the file open ([`reading`]), in any process, through
/// any other open file of it; true when the kernel does not say.
pub(crate) fn any_reading(file: &File) -> bool {
    let mut probe = range(libc::F_WRLCK, HANDLES, 1);
    fcntl(file, FcntlArg::F_OFD_GETLK(&mut probe))
        .map_or(true, |_| i32::from(probe.l_type) != libc::F_UNLCK)
}

/// Pins snapshot `txid` for the writer in another process to see.
pub(crate) fn pin(file: &File, txid: u64) -> io::Result<()> {
    set_ofd(file, libc::F_RDLCK, reader_byte(txid))
}

/// Unpins snapshot `txid` (all of this open file's pins of it: callers count).
pub(crate) fn unpin(file: &File, txid: u64) -> io::Result<()> {
    set_ofd(file, libc::F_UNLCK, reader_byte(txid))
}

/// The oldest snapshot below `below` that a reader in another process has pinned.
pub(crate) fn oldest_pinned(file: &File, below: u64) -> io::Result<Option<u64>> {
    let mut end = reader_byte(below);
    let mut oldest = None;
    // The kernel reports one conflicting lock in the range, not necessarily the lowest:
    // narrow the range below each one found until none is left.
    while end > READERS {
        let mut probe = range(libc::F_WRLCK, READERS, end - READERS);
        fcntl(file, FcntlArg::F_OFD_GETLK(&mut probe))?;
        if i32::from(probe.l_type) == libc::F_UNLCK {
            break;
        }
        let start = probe.l_start.max(READERS);
        oldest = Some((start - READERS) as u64);
        end = start;
    }
    Ok(oldest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_sees_the_oldest_pin_of_another_open_file() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f");
        let writer = File::create(&path)?;
        let (a, b) = (File::open(&path)?, File::open(&path)?);
        assert_eq!(oldest_pinned(&writer, 100)?, None);
        pin(&a, 40)?;
        pin(&b, 7)?;
        pin(&a, 90)?;
        assert_eq!(oldest_pinned(&writer, 100)?, Some(7));
        assert_eq!(
            oldest_pinned(&writer, 7)?,
            None,
            "only pins below the bound"
        );
        unpin(&b, 7)?;
        assert_eq!(oldest_pinned(&writer, 100)?, Some(40));
        drop(a);
        assert_eq!(oldest_pinned(&writer, 100)?, None, "closing drops the pins");
        Ok(())
    }
}
