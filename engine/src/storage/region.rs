//! A readable view of the database's bytes: a memory map of the file, or anonymous
//! memory for in-memory databases. One of the engine's three modules with `unsafe` code
//! (with `ring.rs` beside it and `format/prefetch.rs`).
//!
//! Soundness rests on two rules, both checked or kept by callers of this module:
//! 1. A shared slice is only ever made for bytes inside the mapping *and* inside the
//!    storage's current length (so a file map never touches pages past the end of the
//!    file, which would raise `SIGBUS`).
//! 2. Bytes that a live slice can cover are never written. The engine guarantees this with
//!    copy-on-write: a page is only written while it is free, and a free page belongs to
//!    no snapshot that a reader holds (docs/design.md#page-reuse). Writes to the file go
//!    through `pwrite`, writes to anonymous memory through [`Region::write`], and both
//!    only ever target free pages or the commit slots, which are never handed out as slices.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;

use memmap2::{MmapOptions, MmapRaw};

/// A fixed-capacity mapping through which pages are read without copying.
pub struct Region {
    map: MmapRaw,
    capacity: u64,
    anonymous: bool,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("capacity", &self.capacity)
            .field("anonymous", &self.anonymous)
            .finish()
    }
}

fn to_usize(n: u64) -> io::Result<usize> {
    usize::try_from(n).map_err(|_| io::Error::other("mapping larger than the address space"))
}

impl Region {
    /// Maps `capacity` bytes of `file` read-only. The capacity may exceed the file's length:
    /// the space past the end is reserved but never read until the file has grown into it.
    pub(crate) fn map_file(file: &File, capacity: u64) -> io::Result<Region> {
        let map = MmapOptions::new()
            .len(to_usize(capacity.max(1))?)
            .map_raw_read_only(file)?;
        Ok(Region {
            map,
            capacity: capacity.max(1),
            anonymous: false,
        })
    }

    /// Reserves `capacity` bytes of zeroed anonymous memory (untouched pages cost nothing).
    pub(crate) fn anonymous(capacity: u64) -> io::Result<Region> {
        let map = MmapOptions::new()
            .len(to_usize(capacity.max(1))?)
            .map_anon()?;
        Ok(Region {
            map: MmapRaw::from(map),
            capacity: capacity.max(1),
            anonymous: true,
        })
    }

    /// How many bytes the mapping covers.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The `len` bytes at `offset`, or `None` when they are not all below `limit` (the
    /// storage's length) and inside the mapping.
    #[inline]
    pub fn bytes(&self, offset: u64, len: usize, limit: u64) -> Option<&[u8]> {
        let end = offset.checked_add(len as u64)?;
        if end > limit || end > self.capacity {
            return None;
        }
        let start = usize::try_from(offset).ok()?;
        // SAFETY: `start + len <= capacity`, so the range lies inside the live mapping that
        // `self` owns, which outlives the returned slice. `end <= limit` keeps a file map
        // within the file. By rule 2 of this module, no write touches these bytes while a
        // slice over them lives, so the shared borrow is never aliased by a mutation.
        Some(unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(start), len) })
    }

    /// Copies `data` into anonymous memory at `offset`. Returns `false`, writing nothing,
    /// when the region is a file map or the range does not fit.
    pub(crate) fn write(&self, offset: u64, data: &[u8]) -> bool {
        let Some(end) = offset.checked_add(data.len() as u64) else {
            return false;
        };
        if !self.anonymous || end > self.capacity {
            return false;
        }
        let Ok(start) = usize::try_from(offset) else {
            return false;
        };
        // SAFETY: the range is inside the writable anonymous mapping (checked above), and
        // `data` cannot overlap it (the caller's buffer is not part of a Region mapping that
        // is being written). By rule 2 of this module no slice covers these bytes now, and
        // there is one writer, so nothing reads or writes them concurrently.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.map.as_mut_ptr().add(start),
                data.len(),
            );
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_bounded_by_limit_and_capacity() -> io::Result<()> {
        let r = Region::anonymous(4096)?;
        assert!(r.write(10, b"abc"));
        assert_eq!(r.bytes(10, 3, 4096), Some(&b"abc"[..]));
        assert_eq!(r.bytes(10, 3, 12), None, "past the storage length");
        assert_eq!(r.bytes(4095, 2, u64::MAX), None, "past the mapping");
        assert_eq!(r.bytes(u64::MAX, 2, u64::MAX), None, "overflowing offset");
        assert!(!r.write(4095, b"ab"));
        Ok(())
    }

    #[test]
    fn file_map_may_reserve_past_the_end() -> io::Result<()> {
        use std::io::Write;
        let mut f = tempfile::tempfile()?;
        f.write_all(&[7u8; 100])?;
        let r = Region::map_file(&f, 1 << 20)?;
        assert_eq!(r.bytes(0, 100, 100).map(|b| b[99]), Some(7));
        assert_eq!(r.bytes(0, 101, 100), None);
        assert!(
            !r.write(0, b"x"),
            "file maps are written with pwrite, never through the map"
        );
        Ok(())
    }
}
