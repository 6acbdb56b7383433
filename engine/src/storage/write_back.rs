//! Starting the write-back of a range of the file without waiting for it
//! (`sync_file_range`, which neither `std` nor `nix` offers).

#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::AsRawFd;

/// Asks the kernel to start writing back the dirty pages of `len` bytes at `offset` of
/// `file`, and returns at once. A hint: a failure is ignored here (a range the kernel
/// cannot write back fails the sync that follows, which reports it).
pub(super) fn start(file: &File, offset: u64, len: u64) {
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return;
    };
    // SAFETY: `sync_file_range` reads no memory of this process; it takes a file
    // descriptor, which `file` keeps open for the length of the call, and two integers.
    let _ = unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
    };
}
