//! The exclusive lock that keeps a second process from opening a file for writing.

use std::fs::{File, TryLockError};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Takes an exclusive advisory lock on `file`, retrying until `timeout` has passed.
pub(crate) fn lock_exclusive(file: &File, path: &Path, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::Error(e)) => return Err(Error::Io(e)),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(Error::Locked {
                    path: path.to_path_buf(),
                });
            }
        }
    }
}
