//! The in-memory backend, for tests and `:memory:` databases.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::{Region, Storage};

const MIN_CAPACITY: u64 = 1 << 24;

/// Bytes in anonymous memory (or a private copy of a file); syncing does nothing.
#[derive(Debug)]
pub struct MemoryStorage {
    len: AtomicU64,
    region: Mutex<Arc<Region>>,
    /// Whether it may grow past its region by copying into a larger one (not a private
    /// copy of a file: copying would read pages another process may have cut off).
    moves: bool,
}

impl MemoryStorage {
    /// An empty store.
    ///
    /// # Errors
    /// When the operating system refuses to reserve memory.
    pub fn new() -> io::Result<MemoryStorage> {
        Ok(MemoryStorage {
            len: AtomicU64::new(0),
            region: Mutex::new(Arc::new(Region::anonymous(MIN_CAPACITY)?)),
            moves: true,
        })
    }

    /// A store of `len` bytes that shows `file` (at least `copy` bytes long) and keeps its
    /// own writes: see [`Region::private_file`] for `map` and `copy`. It grows up to
    /// `capacity` bytes; resizing past that is an error.
    ///
    /// # Errors
    /// When the file cannot be mapped or read, or memory cannot be reserved.
    #[cfg(target_os = "linux")]
    pub(crate) fn private_copy(
        file: &std::fs::File,
        map: u64,
        copy: u64,
        len: u64,
        capacity: u64,
    ) -> io::Result<MemoryStorage> {
        let capacity = capacity.max(len);
        Ok(MemoryStorage {
            len: AtomicU64::new(len),
            region: Mutex::new(Arc::new(Region::private_file(file, map, copy, capacity)?)),
            moves: false,
        })
    }

    /// A store holding a copy of `bytes` (a file image, say).
    ///
    /// # Errors
    /// When the operating system refuses to reserve memory.
    pub fn from_bytes(bytes: &[u8]) -> io::Result<MemoryStorage> {
        let s = MemoryStorage::new()?;
        s.resize(bytes.len() as u64)?;
        s.write(0, bytes)?;
        Ok(s)
    }

    /// A copy of all the bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        let len = self.len();
        let region = self.region();
        let bytes = usize::try_from(len)
            .ok()
            .and_then(|n| region.bytes(0, n, len))
            .unwrap_or_default();
        bytes.to_vec()
    }
}

impl Storage for MemoryStorage {
    fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    fn region(&self) -> Arc<Region> {
        self.region
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let end = offset.saturating_add(data.len() as u64);
        if end > self.len() || !self.region().write(offset, data) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "write past the end of the in-memory store",
            ));
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn resize(&self, len: u64) -> io::Result<()> {
        let mut region = self.region.lock().unwrap_or_else(PoisonError::into_inner);
        let old_len = self.len();
        if len < old_len && !self.moves {
            // A private copy keeps the file's length (the replay's commit would give back
            // its tail): it frees nothing, and the statistics then show the file's size.
            return Ok(());
        }
        if len > region.capacity() && !self.moves {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!(
                    "a private copy of the file cannot grow past the {} bytes reserved for it",
                    region.capacity()
                ),
            ));
        }
        if len > region.capacity() {
            let bigger = Region::anonymous(len.saturating_mul(2))?;
            let keep = usize::try_from(old_len).map_err(io::Error::other)?;
            if let Some(old) = region.bytes(0, keep, old_len) {
                bigger.write(0, old);
            }
            *region = Arc::new(bigger);
        } else if len < old_len {
            // Zero the cut-off tail so that growing again reads zeros, as a file would.
            let cut = usize::try_from(old_len - len).map_err(io::Error::other)?;
            region.write(len, &vec![0; cut]);
        }
        self.len.store(len, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_keeps_bytes_and_shrinks_to_zeros() -> io::Result<()> {
        let s = MemoryStorage::new()?;
        assert!(s.write(0, b"x").is_err(), "no space yet");
        s.resize(8)?;
        s.write(0, b"abcdefgh")?;
        s.resize(MIN_CAPACITY + 1)?;
        let mut buf = [0u8; 8];
        s.read(0, &mut buf)?;
        assert_eq!(&buf, b"abcdefgh");
        s.resize(4)?;
        s.resize(8)?;
        s.read(0, &mut buf)?;
        assert_eq!(&buf, b"abcd\0\0\0\0");
        Ok(())
    }
}
