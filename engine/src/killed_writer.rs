//! For tests: the file a writer leaves when its process is killed.

use std::sync::Arc;

use crate::storage::FaultyStorage;
use crate::{Database, Result};

/// A writer on a fault-injecting store, 1 KiB pages, no background sync.
pub(crate) struct KilledWriter {
    storage: Arc<FaultyStorage>,
    pub db: Database,
}

impl KilledWriter {
    /// A new database with a commit log of `log_size` bytes (0: none); `seed` drives the
    /// store's faults (none unless asked for).
    pub fn new(seed: u64, log_size: u64) -> Result<KilledWriter> {
        let storage = FaultyStorage::new(seed)?;
        let db = Database::builder()
            .page_size(1024)
            .log_size(log_size)
            .eventual_sync(None)
            .with_storage(storage.clone(), true, None)?;
        Ok(KilledWriter { storage, db })
    }

    /// The file as the writer leaves it killed now: every write it made, synced or not
    /// (the kernel keeps them), and nothing a close would have done.
    pub fn kill(self) -> Vec<u8> {
        let image = self.storage.live_image();
        std::mem::forget(self.db);
        image
    }
}
