//! A readable view of the database's bytes: a memory map of the file, anonymous memory
//! for in-memory databases, or a private copy-on-write map of the file (a read-only opening
//! that applies the commit log in memory). One of the engine's three modules with `unsafe` code
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
//!
//! A private map ([`Region::private_file`]) is writable memory whose start shows the file:
//! writes copy the page they touch and never reach the file. Only its first pages come from
//! the file; the rest is anonymous memory, filled by copying. A writer in another process
//! may shorten the file later, and the kernel then drops even written pages past the new
//! end (touching them would raise `SIGBUS`): the caller pins the commits whose pages it
//! reads or writes there, which keeps them inside the file
//! (docs/design.md#readers-in-other-processes), and allocates new pages only past them.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;

use memmap2::{MmapOptions, MmapRaw};

/// A fixed-capacity mapping through which pages are read without copying.
pub struct Region {
    map: MmapRaw,
    capacity: u64,
    /// Whether [`Region::write`] may copy into it: anonymous memory or a private map.
    writable: bool,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("capacity", &self.capacity)
            .field("writable", &self.writable)
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
            writable: false,
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
            writable: true,
        })
    }

    /// Reserves `capacity` bytes of writable memory holding the first `copy` bytes of
    /// `file` (which must be at least that long), whose writes stay in this process. The
    /// whole system pages of the first `map` bytes (at most `copy`) are mapped from the
    /// file privately (the kernel copies a page when it is first written); the bytes after
    /// them, up to `copy`, are copied in; the rest is zeros.
    #[cfg(target_os = "linux")]
    pub(crate) fn private_file(
        file: &File,
        map: u64,
        copy: u64,
        capacity: u64,
    ) -> io::Result<Region> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::FileExt;

        use nix::libc;

        let capacity = capacity.max(copy).max(1);
        // Without swap reserved for all of it: only the pages written need memory.
        let reserved = MmapRaw::from(
            MmapOptions::new()
                .len(to_usize(capacity)?)
                .no_reserve_swap()
                .map_anon()?,
        );
        let system_page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .and_then(|n| u64::try_from(n).ok())
            .filter(|n| n.is_power_of_two())
            .unwrap_or(4096);
        let mapped = map.min(copy) & !(system_page - 1);
        if mapped > 0 {
            // SAFETY: the range `[start, start + mapped)` lies inside the anonymous mapping
            // that `reserved` owns (`mapped <= copy <= capacity`) and that nothing refers
            // to yet, so replacing it (`MAP_FIXED`) unmaps nothing in use; the drop of
            // `reserved` later unmaps the whole reservation, this part with it. The file is
            // at least `mapped` bytes long (the caller's condition), so every page is backed.
            let at = unsafe {
                libc::mmap(
                    reserved.as_mut_ptr().cast(),
                    to_usize(mapped)?,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_FIXED,
                    file.as_raw_fd(),
                    0,
                )
            };
            if at == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
        }
        let region = Region {
            map: reserved,
            capacity,
            writable: true,
        };
        let mut buf = vec![0u8; 1 << 20];
        let mut at = mapped;
        while at < copy {
            let n = to_usize((copy - at).min(buf.len() as u64))?;
            file.read_exact_at(&mut buf[..n], at)?;
            region.write(at, &buf[..n]);
            at += n as u64;
        }
        Ok(region)
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

    /// Copies `data` into anonymous memory or a private map at `offset`. Returns `false`,
    /// writing nothing, when the region is a shared file map or the range does not fit.
    pub(crate) fn write(&self, offset: u64, data: &[u8]) -> bool {
        let Some(end) = offset.checked_add(data.len() as u64) else {
            return false;
        };
        if !self.writable || end > self.capacity {
            return false;
        }
        let Ok(start) = usize::try_from(offset) else {
            return false;
        };
        // SAFETY: the range is inside the writable mapping (checked above), and
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

    #[cfg(target_os = "linux")]
    #[test]
    fn a_private_map_shows_the_file_and_keeps_its_writes() -> io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::FileExt;
        let page = 4096u64;
        let mut f = tempfile::tempfile()?;
        let image: Vec<u8> = (0..3 * page + 100).map(|i| (i % 251) as u8).collect();
        f.write_all(&image)?;
        // Two pages mapped (2.5 asked: whole system pages only), the rest copied.
        let r = Region::private_file(&f, 2 * page + page / 2, 3 * page + 50, 1 << 20)?;
        assert_eq!(
            r.bytes(0, 3 * page as usize + 50, u64::MAX),
            Some(&image[..3 * page as usize + 50])
        );
        assert_eq!(
            r.bytes(3 * page + 50, 50, u64::MAX),
            Some(&[0u8; 50][..]),
            "not copied"
        );
        assert!(r.write(10, b"mine") && r.write(5 * page, b"grown"));
        assert_eq!(r.bytes(10, 4, u64::MAX), Some(&b"mine"[..]));
        assert_eq!(r.bytes(5 * page, 5, u64::MAX), Some(&b"grown"[..]));
        let mut back = vec![0u8; image.len()];
        f.read_exact_at(&mut back, 0)?;
        assert!(back == image, "the file is not written");
        // A page not written since shows the file as it is now (a map); a copied one not.
        f.write_all_at(b"later", page)?;
        f.write_all_at(b"later", 2 * page + 8)?;
        assert_eq!(r.bytes(page, 5, u64::MAX), Some(&b"later"[..]));
        assert_eq!(
            r.bytes(2 * page + 8, 5, u64::MAX),
            Some(&image[2 * page as usize + 8..][..5])
        );
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
