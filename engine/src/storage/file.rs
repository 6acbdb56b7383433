//! The real backend: a file read through a memory map and written with positioned writes.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::{Region, Storage};

/// Address space reserved for a map beyond the file's length, so that a growing file
/// rarely needs a new map (reserving costs nothing until pages are touched).
const MIN_RESERVATION: u64 = 1 << 30;

/// A database file: `pread`-free reads through a shared read-only map, `pwrite` writes,
/// `fdatasync` for durability.
#[derive(Debug)]
pub struct FileStorage {
    file: File,
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
            len: AtomicU64::new(len),
            region: Mutex::new(Arc::new(region)),
        })
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

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
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
