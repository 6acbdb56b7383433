//! The real backend: a file read through a memory map and written with positioned writes.

use std::fs::File;
use std::io::{self, IoSlice};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::{Region, Storage};

/// Buffers given to one `pwritev`, at most (Linux refuses more than 1024).
const MAX_IOVECS: usize = 512;

/// Address space reserved for a map beyond the file's length, so that a growing file
/// rarely needs a new map (reserving costs nothing until pages are touched).
const MIN_RESERVATION: u64 = 1 << 30;

/// A database file: `pread`-free reads through a shared read-only map, `pwrite` writes,
/// `fdatasync` for durability.
#[derive(Debug)]
pub struct FileStorage {
    file: File,
    /// The same file opened with `O_DSYNC`, for writes that must be durable on their own
    /// (`None`: read-only, or the file could not be opened again).
    dsync: Option<File>,
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
        Ok(self)
    }

    /// The underlying file.
    pub fn file(&self) -> &File {
        &self.file
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

    /// One `pwritev` per 512 buffers (positioned: the file offset is never used).
    fn write_vectored(&self, offset: u64, bufs: &[&[u8]]) -> io::Result<()> {
        let mut at = offset;
        for chunk in bufs.chunks(MAX_IOVECS) {
            let mut slices: Vec<IoSlice<'_>> = chunk.iter().map(|b| IoSlice::new(b)).collect();
            let mut rest = &mut slices[..];
            // Drops leading empty buffers, so that `Ok(0)` below means the disk took nothing.
            IoSlice::advance_slices(&mut rest, 0);
            while !rest.is_empty() {
                let position = i64::try_from(at).map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidInput, "offset past i64::MAX")
                })?;
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
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn durable_writes(&self) -> bool {
        self.dsync.is_some()
    }

    /// An `O_DSYNC` write: the kernel writes back and flushes this range only (other dirty
    /// pages of the file stay in the page cache), then the device's cache.
    fn write_durable(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        match &self.dsync {
            Some(f) => f.write_all_at(data, offset),
            None => {
                self.write(offset, data)?;
                self.sync()
            }
        }
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
    fn durable_writes_go_to_the_same_file() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        let storage = FileStorage::new(file)?.with_durable_writes(&path)?;
        storage.resize(4096)?;
        storage.write_durable(512, b"logged")?;
        let mut got = [0u8; 6];
        storage.read(512, &mut got)?;
        assert_eq!(&got, b"logged", "seen through the map");
        assert_eq!(&std::fs::read(&path)?[512..518], b"logged");
        Ok(())
    }
}
