//! The real backend: a file read through a memory map and written with positioned writes.

use std::fs::File;
use std::io::{self, IoSlice};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::{Region, Storage};

/// Buffers given to one `pwritev`, at most (Linux refuses more than 1024).
const MAX_IOVECS: usize = 512;

/// The largest stretch of the file one buffered write covers. The kernel caches a file in
/// blocks ("folios") as large as the write that first fills them allows, up to 2 MiB, and
/// on ext4 every later write of one page into a block, and the block's write-back, walk
/// all of the block's 4 KiB parts: a commit that rewrites a page inside a 2 MiB block
/// pays for 512. Tree pages are written in long runs when the file grows and rewritten one
/// at a time ever after, so runs of pages are cut into blocks of this size (16 parts): a
/// million 1 KiB values inserted in random batches of 2,000 went 25–38 % faster. A large
/// value is written whole (cut, 1 MiB values took 8 % more system time).
const CACHE_BLOCK: u64 = 64 << 10;

/// Address space reserved for a map beyond the file's length, so that a growing file
/// rarely needs a new map (reserving costs nothing until pages are touched).
const MIN_RESERVATION: u64 = 1 << 30;

/// What a direct write's offset and length must be multiples of: the logical block size
/// of nearly every disk (a disk with larger blocks refuses the write with `EINVAL`, and the
/// durable write falls back to the page cache).
const DIRECT_UNIT: u64 = 512;

/// What a direct write's buffer address is aligned to: a page, which every device accepts.
const DIRECT_MEMORY_ALIGN: usize = 4096;

/// A database file: `pread`-free reads through a shared read-only map, `pwrite` writes,
/// `fdatasync` for durability.
#[derive(Debug)]
pub struct FileStorage {
    file: File,
    /// The same file opened with `O_DSYNC`, for writes that must be durable on their own
    /// (`None`: read-only, or the file could not be opened again).
    dsync: Option<File>,
    /// The same file opened with `O_DSYNC | O_DIRECT`, for durable writes of whole 512-byte
    /// units: they skip the page cache (`None`: the file system refuses `O_DIRECT`).
    direct: Option<Direct>,
    len: AtomicU64,
    region: Mutex<Arc<Region>>,
}

fn reservation_for(len: u64) -> u64 {
    len.saturating_mul(2).max(MIN_RESERVATION)
}

impl FileStorage {
    /// Wraps an open file (opened for reading, and for writing unless read-only).
    ///
    /// # Errors
    /// When the file's length cannot be read or the file cannot be mapped.
    pub fn new(file: File) -> io::Result<FileStorage> {
        let len = file.metadata()?.len();
        let region = Region::map_file(&file, reservation_for(len))?;
        Ok(FileStorage {
            file,
            dsync: None,
            direct: None,
            len: AtomicU64::new(len),
            region: Mutex::new(Arc::new(region)),
        })
    }

    /// Opens `path` (the file this storage wraps) a second time with `O_DSYNC`, so that
    /// [`Storage::write_durable`] syncs only its own range instead of the whole file.
    ///
    /// # Errors
    /// When the file cannot be opened for writing, or `path` now names another file (it was
    /// replaced since this one was opened).
    pub fn with_durable_writes(mut self, path: &std::path::Path) -> io::Result<FileStorage> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let dsync = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_DSYNC)
            .open(path)?;
        let (a, b) = (self.file.metadata()?, dsync.metadata()?);
        if (a.dev(), a.ino()) != (b.dev(), b.ino()) {
            return Err(io::Error::other(format!(
                "{} was replaced while it was being opened",
                path.display()
            )));
        }
        self.dsync = Some(dsync);
        self.direct = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_DSYNC | nix::libc::O_DIRECT)
            .open(path)
            .ok()
            .and_then(|f| {
                let c = f.metadata().ok()?;
                ((a.dev(), a.ino()) == (c.dev(), c.ino())).then(|| Direct::new(f))
            });
        Ok(self)
    }

    /// Whether a durable write's caller polls for its completion before it sleeps (see
    /// `Builder::poll_waits`). A write that does not poll goes without the ring: the
    /// caller writes, then sleeps in the kernel until the disk has the bytes and has
    /// flushed its cache. Through the ring, the flush that follows the write is the work of
    /// a kernel worker thread, which on processors busy with other threads waits for one of
    /// them while the caller sleeps: beside two reading threads on 2 vCPUs, durable single
    /// puts that slept on the ring committed 265–316 times a second, 5,300–6,600 without
    /// it; alone, 133–141 µs each against 140–144 µs (docs/benchmark-history.md,
    /// thirtieth session).
    pub fn poll_waits(mut self, yes: bool) -> FileStorage {
        #[cfg(target_os = "linux")]
        if let Some(direct) = self.direct.as_mut() {
            direct.ring = if yes {
                direct.ring.take().or_else(super::ring::Ring::new)
            } else {
                None
            };
        }
        #[cfg(not(target_os = "linux"))]
        let _ = yes;
        self
    }

    /// The underlying file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Writes all of `slices` at `offset`, in as many `pwritev`s as the kernel needs.
    fn pwritev_all(&self, offset: u64, slices: &mut [IoSlice<'_>]) -> io::Result<()> {
        let mut rest = slices;
        // Drops leading empty buffers, so that `Ok(0)` below means the disk took nothing.
        IoSlice::advance_slices(&mut rest, 0);
        let mut at = offset;
        while !rest.is_empty() {
            let position = i64::try_from(at)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset past i64::MAX"))?;
            match nix::sys::uio::pwritev(&self.file, rest, position) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    IoSlice::advance_slices(&mut rest, n);
                    at += n as u64;
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// Cuts the write of `bufs` at `offset` after each buffer that reaches or crosses a
/// multiple of [`CACHE_BLOCK`], or that brings a piece to [`MAX_IOVECS`] buffers, and hands
/// each piece, with its offset, to `write`. A buffer is never split: a run of pages is cut
/// at the blocks' edges, a large value goes whole.
fn for_each_block(
    offset: u64,
    bufs: &[&[u8]],
    mut write: impl FnMut(u64, &mut [IoSlice<'_>]) -> io::Result<()>,
) -> io::Result<()> {
    let mut piece: Vec<IoSlice<'_>> = Vec::new();
    let (mut start, mut end) = (offset, offset);
    for buf in bufs.iter().filter(|b| !b.is_empty()) {
        piece.push(IoSlice::new(buf));
        end += buf.len() as u64;
        if end / CACHE_BLOCK > start / CACHE_BLOCK || piece.len() == MAX_IOVECS {
            write(start, &mut piece)?;
            piece.clear();
            start = end;
        }
    }
    if piece.is_empty() {
        Ok(())
    } else {
        write(start, &mut piece)
    }
}

impl Storage for FileStorage {
    fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    fn region(&self) -> Arc<Region> {
        self.region
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.file.write_all_at(data, offset)
    }

    /// One `pwritev` per 64 KiB block of the file (`CACHE_BLOCK`, see there why),
    /// positioned: the file offset is never used.
    fn write_vectored(&self, offset: u64, bufs: &[&[u8]]) -> io::Result<()> {
        for_each_block(offset, bufs, |at, slices| self.pwritev_all(at, slices))
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// `sync_file_range(SYNC_FILE_RANGE_WRITE)`: the kernel starts writing the range's
    /// dirty pages back and returns. (Its error, if any, is left to the sync that follows,
    /// which reports a failed write-back.)
    fn start_write_back(&self, offset: u64, len: u64) {
        #[cfg(target_os = "linux")]
        super::write_back::start(&self.file, offset, len);
        #[cfg(not(target_os = "linux"))]
        let _ = (offset, len);
    }

    /// `posix_fadvise(POSIX_FADV_DONTNEED)` where the log's records go straight to the disk
    /// (`O_DIRECT` through the ring): a direct write submitted to the ring over a page the
    /// page cache holds cannot drop the page without blocking, so the kernel hands it to a
    /// worker thread, which wakes late. Dirty pages, and pages a process maps, stay.
    fn drop_cached(&self, offset: u64, len: u64) {
        #[cfg(target_os = "linux")]
        if let Some(direct) = &self.direct
            && direct.ring.is_some()
            && let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len))
        {
            use nix::fcntl::{PosixFadviseAdvice, posix_fadvise};
            // A hint: should it fail, the writes it was for go through a worker thread.
            let _ = posix_fadvise(
                &self.file,
                offset,
                len,
                PosixFadviseAdvice::POSIX_FADV_DONTNEED,
            );
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (offset, len);
    }

    fn durable_writes(&self) -> bool {
        self.dsync.is_some()
    }

    /// An `O_DSYNC` write: the kernel writes back and flushes this range only (other dirty
    /// pages of the file stay in the page cache), then the device's cache.
    ///
    /// Whole 512-byte units at a unit's offset go with `O_DIRECT` as well: straight from an
    /// aligned buffer to the disk, then the device's cache flush, without the page cache's
    /// writeback (on the development machine's virtual disk, 512 bytes took 55.9–62.5 µs
    /// against 73.6–79.4 µs through the page cache: docs/benchmark-history.md, fifteenth
    /// session).
    fn write_durable(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        if let Some(direct) = &self.direct
            && direct.write(offset, data)?
        {
            return Ok(());
        }
        match &self.dsync {
            Some(f) => f.write_all_at(data, offset),
            None => {
                self.write(offset, data)?;
                self.sync()
            }
        }
    }

    /// As [`Storage::write_durable`]; a direct write goes through an `io_uring` where the
    /// kernel offers one and waits poll, and `meanwhile` runs while the disk writes.
    fn write_durable_while(
        &self,
        offset: u64,
        data: &[u8],
        meanwhile: &mut dyn FnMut() -> io::Result<()>,
    ) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        if let Some(direct) = &self.direct
            && let Some((during, written)) = direct.write_while(offset, data, meanwhile)
        {
            during?;
            if written? {
                return Ok(());
            }
            return self.write_durable(offset, data);
        }
        meanwhile()?;
        self.write_durable(offset, data)
    }

    /// The largest block the page cache may hold the file in (a huge page: the memory
    /// page size times the entries of a page table, 2 MiB on x86-64): a direct write fails
    /// to drop a cached block that a buffered write changes meanwhile (the kernel then
    /// reports an I/O error, and the stale block could later be written over the direct
    /// write's bytes).
    fn overlap_block(&self) -> u64 {
        #[cfg(target_os = "linux")]
        if let Some(direct) = &self.direct
            && direct.ring.is_some()
        {
            return direct.huge_page;
        }
        u64::MAX
    }

    fn refresh(&self) -> io::Result<()> {
        let len = self.file.metadata()?.len();
        let mut region = self.region.lock().unwrap_or_else(PoisonError::into_inner);
        if len > region.capacity() {
            *region = Arc::new(Region::map_file(&self.file, reservation_for(len))?);
        }
        self.len.store(len, Ordering::Release);
        Ok(())
    }

    fn resize(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        let mut region = self.region.lock().unwrap_or_else(PoisonError::into_inner);
        if len > region.capacity() {
            // Readers keep the old map alive through their own `Arc` until they finish.
            *region = Arc::new(Region::map_file(&self.file, reservation_for(len))?);
        }
        self.len.store(len, Ordering::Release);
        Ok(())
    }
}

/// A file opened with `O_DIRECT | O_DSYNC`, with the aligned buffer its writes go through.
#[derive(Debug)]
struct Direct {
    file: File,
    /// Longer than the longest write so far by [`DIRECT_MEMORY_ALIGN`], so that an aligned
    /// stretch of it holds the write (found by address: no `unsafe` allocation).
    buf: Mutex<Vec<u8>>,
    /// Cleared for good when the file system refuses a direct write's alignment.
    usable: AtomicBool,
    /// Where the kernel offers one, the ring that lets a write run while the caller works.
    #[cfg(target_os = "linux")]
    ring: Option<super::ring::Ring>,
    /// The memory page size times the entries of a page table (`u64::MAX` if unknown).
    #[cfg(target_os = "linux")]
    huge_page: u64,
}

impl Direct {
    fn new(file: File) -> Direct {
        Direct {
            file,
            buf: Mutex::new(Vec::new()),
            usable: AtomicBool::new(true),
            #[cfg(target_os = "linux")]
            ring: super::ring::Ring::new(),
            #[cfg(target_os = "linux")]
            huge_page: nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
                .ok()
                .flatten()
                .and_then(|page| u64::try_from(page).ok())
                .and_then(|page| page.checked_mul(page / 8))
                .and_then(u64::checked_next_power_of_two)
                .unwrap_or(u64::MAX),
        }
    }

    /// Whether a write of `len` bytes at `offset` can go direct: whole units at a unit's
    /// offset, while the file system has not refused one.
    fn takes(&self, offset: u64, len: usize) -> bool {
        self.usable.load(Ordering::Relaxed)
            && offset.is_multiple_of(DIRECT_UNIT)
            && (len as u64).is_multiple_of(DIRECT_UNIT)
            && len > 0
    }

    /// Copies `data` into the buffer at an aligned address; returns where it lies there.
    fn stage(buf: &mut Vec<u8>, data: &[u8]) -> std::ops::Range<usize> {
        if buf.len() < data.len() + DIRECT_MEMORY_ALIGN {
            buf.resize(data.len() + DIRECT_MEMORY_ALIGN, 0);
        }
        let skip = (DIRECT_MEMORY_ALIGN - buf.as_ptr() as usize % DIRECT_MEMORY_ALIGN)
            % DIRECT_MEMORY_ALIGN;
        buf[skip..skip + data.len()].copy_from_slice(data);
        skip..skip + data.len()
    }

    /// What a direct write's outcome means: `Ok(false)` when the file system refused it
    /// (the alignment, or direct I/O at all, for good).
    fn written(&self, outcome: io::Result<()>) -> io::Result<bool> {
        match outcome {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(nix::libc::EINVAL) => {
                // (Refused before any byte went, or after some went: the caller's write
                // then writes them again.)
                self.usable.store(false, Ordering::Relaxed);
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// As [`Direct::write`], through the ring, running `meanwhile` while the disk writes:
    /// `meanwhile`'s outcome and the write's. `None` (and `meanwhile` has not run) when the
    /// write cannot go direct, or there is no ring.
    #[cfg(target_os = "linux")]
    fn write_while(
        &self,
        offset: u64,
        data: &[u8],
        meanwhile: &mut dyn FnMut() -> io::Result<()>,
    ) -> Option<(io::Result<()>, io::Result<bool>)> {
        let ring = self.ring.as_ref()?;
        if !self.takes(offset, data.len()) {
            return None;
        }
        let mut buf = self.buf.lock().unwrap_or_else(PoisonError::into_inner);
        let range = Direct::stage(&mut buf, data);
        let (during, written) = ring.write_while(&self.file, offset, &mut buf, range, meanwhile)?;
        let written = match written {
            Ok(n) if n == data.len() => Ok(true),
            // A short write (which a direct write of whole units does not make): the
            // caller's write through the page cache writes it all again.
            Ok(_) => Ok(false),
            Err(e) => self.written(Err(e)),
        };
        Some((during, written))
    }

    /// Writes `data` at `offset` durably if it can: `Ok(false)` when the write is not in
    /// whole units, or the file system refuses direct writes of this alignment (nothing
    /// is written then, and the caller writes through the page cache instead).
    fn write(&self, offset: u64, data: &[u8]) -> io::Result<bool> {
        if !self.takes(offset, data.len()) {
            return Ok(false);
        }
        let mut buf = self.buf.lock().unwrap_or_else(PoisonError::into_inner);
        let range = Direct::stage(&mut buf, data);
        self.written(self.file.write_all_at(&buf[range], offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectored_writes_land_in_order_past_the_iovec_limit() -> io::Result<()> {
        let file = tempfile::tempfile()?;
        let storage = FileStorage::new(file)?;
        storage.resize(8192)?;
        // 1,300 buffers (more than one `writev` takes), some empty, of varied lengths.
        let pieces: Vec<Vec<u8>> = (0..1300u32)
            .map(|i| vec![(i % 251) as u8; (i % 7) as usize])
            .collect();
        let bufs: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
        storage.write_vectored(100, &bufs)?;
        let expect: Vec<u8> = pieces.concat();
        let mut got = vec![0u8; expect.len()];
        storage.read(100, &mut got)?;
        assert_eq!(got, expect);
        let mut before = [1u8; 100];
        storage.read(0, &mut before)?;
        assert_eq!(before, [0u8; 100], "nothing written before the offset");
        Ok(())
    }

    #[test]
    fn runs_are_cut_at_cache_blocks_and_at_the_iovec_limit() -> io::Result<()> {
        // A run of pages, a value three blocks long, many small pieces, some empty.
        let block = usize::try_from(CACHE_BLOCK).map_err(io::Error::other)?;
        let long = vec![7u8; 3 * block + 5];
        let pages: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 4096]).collect();
        let small: Vec<Vec<u8>> = (0..1500u32)
            .map(|i| vec![i as u8; (i % 3) as usize])
            .collect();
        let mut bufs: Vec<&[u8]> = pages.iter().map(Vec::as_slice).collect();
        bufs.push(&long);
        bufs.extend(small.iter().map(Vec::as_slice));
        let offset = 3 * CACHE_BLOCK - 5 * 4096;
        // Each piece: its offset, its bytes, its buffers' lengths.
        let mut calls: Vec<(u64, Vec<u8>, Vec<usize>)> = Vec::new();
        for_each_block(offset, &bufs, |at, slices| {
            let bytes: Vec<u8> = slices.iter().flat_map(|s| s.iter().copied()).collect();
            calls.push((at, bytes, slices.iter().map(|s| s.len()).collect()));
            Ok(())
        })?;
        let mut next = offset;
        for (at, bytes, lens) in &calls {
            assert_eq!(*at, next, "pieces follow each other");
            assert!(!lens.is_empty() && lens.len() <= MAX_IOVECS && !lens.contains(&0));
            // Everything but the piece's last buffer lies in the block the piece starts in.
            let last_start = at + (bytes.len() - lens[lens.len() - 1]) as u64;
            assert!(last_start == *at || last_start / CACHE_BLOCK == at / CACHE_BLOCK);
            next = at + bytes.len() as u64;
        }
        let joined: Vec<u8> = calls.iter().flat_map(|c| c.1.iter().copied()).collect();
        assert_eq!(joined, bufs.concat());
        let lens: Vec<&Vec<usize>> = calls.iter().map(|c| &c.2).collect();
        assert_eq!(
            lens[0],
            &vec![4096; 5],
            "the pages up to the first block's edge"
        );
        assert_eq!(lens[1], &vec![4096; block / 4096], "a whole block of pages");
        assert!(
            lens.iter().any(|l| l.contains(&long.len())),
            "the value goes whole"
        );
        assert!(
            lens.iter().any(|l| l.len() == MAX_IOVECS),
            "1,000 small pieces are cut"
        );
        Ok(())
    }

    /// A new file in a new folder, wrapped with durable writes as a writable database's is.
    fn durable_file() -> io::Result<(tempfile::TempDir, std::path::PathBuf, FileStorage)> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f");
        let storage = with_durable_writes(&path)?;
        Ok((dir, path, storage))
    }

    /// A new file at `path`, wrapped with durable writes as a writable database's is.
    fn with_durable_writes(path: &std::path::Path) -> io::Result<FileStorage> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        FileStorage::new(file)?.with_durable_writes(path)
    }

    /// `poll_waits(false)` reaches the durable writes: they go without the ring (whose
    /// waits poll), and with the ring again when polling is turned back on; either way
    /// they land.
    #[test]
    fn durable_writes_that_do_not_poll_go_without_the_ring() -> io::Result<()> {
        let (_dir, path, storage) = durable_file()?;
        let limit = |s: &FileStorage| {
            s.direct
                .as_ref()
                .and_then(|d| d.ring.as_ref())
                .map(super::super::ring::Ring::poll_limit)
        };
        // (Without an `io_uring` from this kernel there is no ring, and nothing polls.)
        let had_ring = limit(&storage).is_some();
        if let Some(on) = limit(&storage) {
            assert!(on > std::time::Duration::ZERO);
        }
        let storage = storage.poll_waits(false);
        assert_eq!(limit(&storage), None);
        assert_eq!(
            storage.overlap_block(),
            u64::MAX,
            "no write overlaps another"
        );
        storage.resize(4096)?;
        let mut ran = false;
        storage.write_durable_while(512, &[7u8; 512], &mut || {
            ran = true;
            storage.write(2048, b"meanwhile")
        })?;
        assert!(ran);
        let storage = storage.poll_waits(true);
        assert_eq!(limit(&storage).is_some(), had_ring);
        storage.write_durable(1024, &[9u8; 512])?;
        let file = std::fs::read(&path)?;
        assert_eq!(
            (&file[512..1024], &file[1024..1536]),
            (&[7u8; 512][..], &[9u8; 512][..])
        );
        assert_eq!(&file[2048..2057], b"meanwhile");
        Ok(())
    }

    #[test]
    fn durable_writes_go_to_the_same_file() -> io::Result<()> {
        let (_dir, path, storage) = durable_file()?;
        storage.resize(4096)?;
        storage.write_durable(512, b"logged")?;
        let mut got = [0u8; 6];
        storage.read(512, &mut got)?;
        assert_eq!(&got, b"logged", "seen through the map");
        assert_eq!(&std::fs::read(&path)?[512..518], b"logged");
        Ok(())
    }

    #[test]
    fn a_durable_write_and_the_writes_made_during_it_all_land() -> io::Result<()> {
        let (_dir, path, storage) = durable_file()?;
        let block = storage.overlap_block();
        assert!(block == u64::MAX || (block.is_power_of_two() && block >= 4096));
        let far = if block == u64::MAX { 8192 } else { block };
        storage.resize(far + 8192)?;
        let units: Vec<u8> = (0..1024u32).map(|i| (i % 253) as u8).collect();
        let mut runs = 0;
        storage.write_durable_while(1024, &units, &mut || {
            runs += 1;
            storage.write_vectored(far, &[b"during", b" the write"])
        })?;
        assert_eq!(runs, 1, "meanwhile runs once");
        // A write that cannot go direct (not in whole units) runs it too.
        storage.write_durable_while(100, b"odd", &mut || {
            runs += 1;
            storage.write(far + 100, b"too")
        })?;
        assert_eq!(runs, 2);
        let file = std::fs::read(&path)?;
        let far = far as usize;
        assert_eq!(&file[1024..2048], &units[..]);
        assert_eq!(&file[100..103], b"odd");
        assert_eq!(&file[far..far + 16], b"during the write");
        assert_eq!(&file[far + 100..far + 103], b"too");
        Ok(())
    }

    #[test]
    fn a_failure_during_a_durable_write_is_returned_after_it() -> io::Result<()> {
        let (_dir, path, storage) = durable_file()?;
        storage.resize(8192)?;
        let err = storage
            .write_durable_while(512, &[5u8; 512], &mut || {
                Err(io::Error::other("the pages failed"))
            })
            .err()
            .map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("the pages failed"));
        // The storage serves on: the next durable write lands.
        storage.write_durable_while(512, &[6u8; 512], &mut || Ok(()))?;
        assert_eq!(&std::fs::read(&path)?[512..1024], &[6u8; 512][..]);
        Ok(())
    }

    #[test]
    fn a_panic_during_a_durable_write_leaves_the_next_ones_whole() -> io::Result<()> {
        let (_dir, path, storage) = durable_file()?;
        storage.resize(64 * 1024)?;
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            storage.write_durable_while(512, &[7u8; 512], &mut || panic!("during the write"))
        }));
        assert!(caught.is_err(), "the panic goes on to the caller");
        // Each later write is complete when its call returns (none takes the completion
        // of a write before it for its own).
        for round in 0..20u8 {
            let at = 1024 + u64::from(round) * 512;
            storage.write_durable_while(at, &[round; 512], &mut || Ok(()))?;
            let mut got = [0u8; 512];
            std::fs::File::open(&path)?.read_exact_at(&mut got, at)?;
            assert_eq!(got, [round; 512], "round {round}");
        }
        Ok(())
    }

    #[test]
    fn durable_unit_writes_are_seen_by_the_map_and_by_reads() -> io::Result<()> {
        let (_dir, path, storage) = durable_file()?;
        storage.resize(3 * 4096)?;
        storage.write(0, &[7u8; 3 * 4096])?;
        storage.sync()?;
        // The map has the pages cached before the direct writes go past the page cache.
        let region = storage.region();
        let len = storage.len();
        assert_eq!(region.bytes(4096, 4096, len), Some(&[7u8; 4096][..]));
        let units: Vec<u8> = (0..1536u32).map(|i| (i % 251) as u8).collect();
        storage.write_durable(4096 + 512, &units)?;
        // Units that end in another page, and one write of a whole page.
        storage.write_durable(2 * 4096 - 512, &[9u8; 1024])?;
        let mut expect = vec![7u8; 3 * 4096];
        expect[4096 + 512..4096 + 2048].copy_from_slice(&units);
        expect[2 * 4096 - 512..2 * 4096 + 512].fill(9);
        assert_eq!(region.bytes(0, 3 * 4096, len), Some(&expect[..]));
        let mut got = vec![0u8; 3 * 4096];
        storage.read(0, &mut got)?;
        assert_eq!(got, expect);
        assert_eq!(std::fs::read(&path)?, expect);
        // A buffered write after a direct one, over the same page, is seen too.
        storage.write(4096 + 600, b"after")?;
        expect[4096 + 600..4096 + 605].copy_from_slice(b"after");
        assert_eq!(region.bytes(0, 3 * 4096, len), Some(&expect[..]));
        storage.write_durable(4096 + 512, &expect[4096 + 512..4096 + 1024])?;
        assert_eq!(std::fs::read(&path)?, expect);
        Ok(())
    }
}
