//! For tests: memory that records the reads and vectored writes that reach it.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use super::{MemoryStorage, Region, Storage};

/// Memory that records each read and each vectored write: offset and length.
#[derive(Debug)]
pub(crate) struct Recording {
    memory: MemoryStorage,
    reads: Mutex<Vec<(u64, u64)>>,
    vectored: Mutex<Vec<(u64, u64)>>,
}

impl Recording {
    pub fn new() -> io::Result<Recording> {
        Ok(Recording {
            memory: MemoryStorage::new()?,
            reads: Mutex::default(),
            vectored: Mutex::default(),
        })
    }

    /// The reads so far.
    pub fn reads(&self) -> Vec<(u64, u64)> {
        self.reads
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
    fn sync(&self) -> io::Result<()> {
        self.memory.sync()
    }
    fn resize(&self, len: u64) -> io::Result<()> {
        self.memory.resize(len)
    }
}
