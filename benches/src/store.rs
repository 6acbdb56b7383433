//! What every store in the comparison does, in its own natural way.

use std::error::Error;

use crate::script::Op;

pub type R<T> = Result<T, Box<dyn Error>>;

/// One change: a value to store under a key, or (`None`) a key to remove.
pub type Change<'a> = (&'a [u8], Option<&'a [u8]>);

/// What several threads may call at once: durable single-put commits, each its own
/// transaction, and reads.
pub trait Shared: Sync {
    fn put_durable(&self, key: &[u8], value: &[u8]) -> R<()>;
    /// As [`Store::read`]: every key of `keys` in one read transaction.
    fn read_shared(&self, keys: &[[u8; 8]]) -> R<usize>;
}

/// Why a store has no figure in a row: its adapter does not share it between threads.
pub const NOT_SHARED: &str = "the adapter does not share this store between threads";

/// A key-value store under test. Every write call is one transaction; `durable` says
/// whether it must be on stable storage when the call returns.
pub trait Store {
    /// Applies `changes` in one transaction.
    fn write(&mut self, changes: &mut dyn Iterator<Item = Change<'_>>, durable: bool) -> R<()>;
    /// Reads every key of `keys` in one read transaction; returns the bytes read.
    fn read(&self, keys: &[[u8; 8]]) -> R<usize>;
    /// Reads one key in a read transaction of its own; returns the bytes read.
    fn get(&self, key: &[u8]) -> R<usize>;
    /// Reads up to `limit` entries from `start` in key order; returns how many.
    fn range(&self, start: &[u8], limit: usize) -> R<usize>;
    /// Runs a script's operations in order (writes durable if `durable`); returns the
    /// seconds they took.
    fn replay(&mut self, ops: &[Op], durable: bool) -> R<f64> {
        crate::script::each(self, ops, durable)
    }
    /// The store as several threads can use it, if its adapter allows.
    fn shared(&self) -> Option<&dyn Shared> {
        None
    }
    /// What the store counts of its own work (commits, syncs), for `CAIRN_PEERS_DETAIL`.
    fn counters(&self) -> Option<String> {
        None
    }
}
