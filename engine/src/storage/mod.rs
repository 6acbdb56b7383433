//! All file I/O: one trait, [`Storage`], and its backends.
//!
//! Reads go through a [`Region`] (a memory map, or anonymous memory for the in-memory
//! backend); writes are positioned writes. [`FaultyStorage`] fails chosen operations and
//! produces the file as a power cut would leave it, for tests. `region.rs` (maps),
//! `ring.rs` (writes the kernel does while the writer goes on) and `write_back.rs` (asking
//! for a range's write-back to start) hold the storage's `unsafe` code.

mod backend;
mod counted;
mod faulty;
mod file;
#[cfg(test)]
mod hooked;
mod memory;
#[cfg(test)]
mod recording;
mod region;
#[cfg(target_os = "linux")]
mod ring;
#[cfg(target_os = "linux")]
mod write_back;

pub use backend::Storage;
pub(crate) use counted::{Counted, IoCounters};
pub use faulty::{FaultyStorage, SECTOR};
pub use file::FileStorage;
#[cfg(test)]
pub(crate) use hooked::{Call, Hooked};
pub use memory::MemoryStorage;
#[cfg(test)]
pub(crate) use recording::Recording;
pub use region::Region;
