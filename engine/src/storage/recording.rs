//! For tests: memory that records the reads, vectored writes, write-back hints and
//! cache drops that reach it.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use super::{MemoryStorage, Region, Storage};

/// Memory that records each read and each vectored write: offset and length.
#[derive(Debug)]
pub(crate) struct Recording {
    memory: MemoryStorage,
    reads: Mutex<Vec<(u64, u64)>>,
    vectored: Mutex<Vec<(u64, u64)>>,
    write_backs: Mutex<Vec<(u64, u64)>>,
    dropped: Mutex<Vec<(u64, u64)>>,
    /// Whether it says its durable writes sync only their range (a database on it keeps a
    /// commit log then).
    pub durable_writes: bool,
}

impl Recording {
    pub fn new() -> io::Result<Recording> {
        Ok(Recording {
            memory: MemoryStorage::new()?,
            reads: Mutex::default(),
            vectored: Mutex::default(),
            write_backs: Mutex::default(),
            dropped: Mutex::default(),
            durable_writes: false,
        })
    }

    /// The reads so far.
    pub fn reads(&self) -> Vec<(u64, u64)> {
        self.reads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The ranges handed to write-back so far.
    pub fn write_backs(&self) -> Vec<(u64, u64)> {
        self.write_backs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The ranges whose cached pages the engine asked to drop so far.
    pub fn dropped(&self) -> Vec<(u64, u64)> {
        self.dropped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The vectored writes since the last call.
    pub fn take_vectored(&self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.vectored.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Storage for Recording {
    fn len(&self) -> u64 {
        self.memory.len()
    }
    fn region(&self) -> Arc<Region> {
        self.memory.region()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut reads = self.reads.lock().unwrap_or_else(PoisonError::into_inner);
        reads.push((offset, buf.len() as u64));
        self.memory.read(offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.memory.write(offset, data)
    }
    fn write_vectored(&self, offset: u64, bufs: &[&[u8]]) -> io::Result<()> {
        let len = bufs.iter().map(|b| b.len() as u64).sum();
        let mut calls = self.vectored.lock().unwrap_or_else(PoisonError::into_inner);
        calls.push((offset, len));
        self.memory.write_vectored(offset, bufs)
    }
    fn durable_writes(&self) -> bool {
        self.durable_writes
    }
    fn drop_cached(&self, offset: u64, len: u64) {
        let mut calls = self.dropped.lock().unwrap_or_else(PoisonError::into_inner);
        calls.push((offset, len));
    }
    fn start_write_back(&self, offset: u64, len: u64) {
        let mut calls = self
            .write_backs
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        calls.push((offset, len));
    }
    fn sync(&self) -> io::Result<()> {
        self.memory.sync()
    }
    fn resize(&self, len: u64) -> io::Result<()> {
        self.memory.resize(len)
    }
}
