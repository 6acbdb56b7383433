//! The storage trait every backend implements.

use std::io;
use std::sync::Arc;

use super::Region;

/// The byte store under a database: read, write, sync, length, resize.
///
/// Invariants the engine keeps, which backends may rely on:
/// - bytes that any live snapshot can see are never written;
/// - [`Storage::region`] is called again after [`Storage::resize`] to see new space.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// The current length in bytes.
    fn len(&self) -> u64;

    /// Whether the store is zero bytes long.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A readable view covering at least the first [`Storage::len`] bytes. A view stays
    /// valid (and keeps showing later writes to the bytes it covers) for as long as it is held.
    fn region(&self) -> Arc<Region>;

    /// Copies `buf.len()` bytes starting at `offset` into `buf`.
    ///
    /// # Errors
    /// An `UnexpectedEof` error when the range is past the end.
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let region = self.region();
        let len = self.len();
        let bytes = region.bytes(offset, buf.len(), len).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of the file",
            )
        })?;
        buf.copy_from_slice(bytes);
        Ok(())
    }

    /// Writes `data` at `offset`; the range must lie within [`Storage::len`].
    ///
    /// # Errors
    /// Any I/O error of the operating system.
    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()>;

    /// Writes `bufs` one after another from `offset`, as one [`Storage::write`] of their
    /// concatenation would (backends may do it with one system call, without copying).
    ///
    /// # Errors
    /// As [`Storage::write`]; some of the buffers may have been written.
    fn write_vectored(&self, offset: u64, bufs: &[&[u8]]) -> io::Result<()> {
        let mut at = offset;
        for b in bufs {
            self.write(at, b)?;
            at += b.len() as u64;
        }
        Ok(())
    }

    /// Makes every completed write durable.
    ///
    /// # Errors
    /// Any I/O error of the operating system; the writes may or may not be durable.
    fn sync(&self) -> io::Result<()>;

    /// Asks the backend to start writing `len` bytes at `offset` to the disk now, without
    /// waiting: a hint that a sync will follow soon, so that the disk works while the
    /// caller goes on (the default does nothing). It makes nothing durable.
    fn start_write_back(&self, _offset: u64, _len: u64) {}

    /// Asks the backend to forget the clean cached pages of `len` bytes at `offset`: a hint
    /// for a range the commit log writes directly, which a cached page makes the kernel
    /// write from a worker thread (the default does nothing).
    fn drop_cached(&self, _offset: u64, _len: u64) {}

    /// Writes `data` at `offset` and makes that write durable before returning, without
    /// making other writes durable (for the commit log: the file's other unsynced pages stay
    /// unsynced). The default writes, then syncs everything.
    ///
    /// # Errors
    /// As [`Storage::write`] and [`Storage::sync`]; the write may or may not be durable.
    fn write_durable(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write(offset, data)?;
        self.sync()
    }

    /// As [`Storage::write_durable`], running `meanwhile` while the write is under way where
    /// the backend can start a durable write without waiting for it; returns when both are
    /// done. The default runs `meanwhile` first, then writes (nothing, when it fails).
    ///
    /// `meanwhile` writes only outside the blocks of [`Storage::overlap_block`] bytes that
    /// the range touches. When it fails, its error is returned, and the write may or may
    /// not have been made durable.
    ///
    /// # Errors
    /// `meanwhile`'s error, else as [`Storage::write_durable`].
    fn write_durable_while(
        &self,
        offset: u64,
        data: &[u8],
        meanwhile: &mut dyn FnMut() -> io::Result<()>,
    ) -> io::Result<()> {
        meanwhile()?;
        self.write_durable(offset, data)
    }

    /// The size of the aligned blocks (a power of two) that [`Storage::write_durable_while`]'s
    /// other writes must keep out of: a backend whose cache holds the file in blocks that a
    /// durable write must find unchanged meanwhile says how large they can be. `u64::MAX`
    /// (the default): every other write goes first.
    fn overlap_block(&self) -> u64 {
        u64::MAX
    }

    /// Whether [`Storage::write_durable`] syncs its own range only, so that a commit log
    /// pays (the engine keeps one only then).
    fn durable_writes(&self) -> bool {
        false
    }

    /// Sets the length, growing with zeros or shrinking.
    ///
    /// # Errors
    /// Any I/O error of the operating system (a full disk, say).
    fn resize(&self, len: u64) -> io::Result<()>;

    /// Learns the length anew after another process may have changed it (for readers
    /// following a writer elsewhere); the default has nobody else to follow.
    ///
    /// # Errors
    /// When the length cannot be read or the larger file cannot be mapped.
    fn refresh(&self) -> io::Result<()> {
        Ok(())
    }
}
