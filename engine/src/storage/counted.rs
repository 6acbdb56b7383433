//! A storage wrapper that counts what reaches the backend: bytes written and syncs.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Region, Storage};

/// Counters of the I/O a database has done since it was opened.
#[derive(Debug, Default)]
pub(crate) struct IoCounters {
    pub writes: AtomicU64,
    pub bytes_written: AtomicU64,
    pub syncs: AtomicU64,
    pub file_syncs: AtomicU64,
}

/// Passes every call through to `inner`, counting writes and syncs.
#[derive(Debug)]
pub(crate) struct Counted {
    pub inner: Arc<dyn Storage>,
    pub counters: Arc<IoCounters>,
}

impl Counted {
    fn wrote(&self, bytes: usize) {
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes_written
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

impl Storage for Counted {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn region(&self) -> Arc<Region> {
        self.inner.region()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read(offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.inner.write(offset, data)?;
        self.wrote(data.len());
        Ok(())
    }
    fn write_vectored(&self, offset: u64, bufs: &[&[u8]]) -> io::Result<()> {
        self.inner.write_vectored(offset, bufs)?;
        self.wrote(bufs.iter().map(|b| b.len()).sum());
        Ok(())
    }
    fn start_write_back(&self, offset: u64, len: u64) {
        self.inner.start_write_back(offset, len);
    }
    fn drop_cached(&self, offset: u64, len: u64) {
        self.inner.drop_cached(offset, len);
    }
    fn sync(&self) -> io::Result<()> {
        self.inner.sync()?;
        self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        self.counters.file_syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn write_durable(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.inner.write_durable(offset, data)?;
        self.wrote(data.len());
        self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn write_durable_while(
        &self,
        offset: u64,
        data: &[u8],
        meanwhile: &mut dyn FnMut() -> io::Result<()>,
    ) -> io::Result<()> {
        self.inner.write_durable_while(offset, data, meanwhile)?;
        self.wrote(data.len());
        self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn overlap_block(&self) -> u64 {
        self.inner.overlap_block()
    }
    fn durable_writes(&self) -> bool {
        self.inner.durable_writes()
    }
    fn refresh(&self) -> io::Result<()> {
        self.inner.refresh()
    }

    fn resize(&self, len: u64) -> io::Result<()> {
        self.inner.resize(len)
    }
}
