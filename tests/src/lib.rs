//! Helpers shared by Cairn's integration tests (the tests themselves are in `tests/`).

pub mod fuzz;
pub mod salvaged;

use std::ops::Deref;
use std::sync::Arc;

use cairn_engine::storage::{FaultyStorage, MemoryStorage};
use cairn_engine::{Database, Error};

/// A new database with 1 KiB pages on a fault-injecting store seeded with `seed` (for
/// power cuts: [`FaultyStorage::power_cut`]).
pub fn on_faulty_store(seed: u64) -> Result<(Arc<FaultyStorage>, Database), Error> {
    let storage = FaultyStorage::new(seed)?;
    let db = Database::builder()
        .page_size(1024)
        .with_storage(storage.clone(), true, None)?;
    Ok((storage, db))
}

/// As [`on_faulty_store`], with pages of `page_size` bytes, a commit log of `log_bytes`
/// (`Builder::log_size`; the default when `None`: a small one fills within a few commits,
/// so that the log's cycles end and start again), and the background sync of Eventual
/// commits every `eventual_sync` (its thread's timing is not reproducible from the seed),
/// and write transactions that spill changed pages past `txn_memory` bytes
/// (`Builder::txn_memory`; the default when `None`).
pub fn on_faulty_store_with(
    seed: u64,
    page_size: usize,
    log_bytes: Option<u64>,
    eventual_sync: Option<std::time::Duration>,
    txn_memory: Option<usize>,
) -> Result<(Arc<FaultyStorage>, Database), Error> {
    let storage = FaultyStorage::new(seed)?;
    let mut builder = Database::builder()
        .page_size(page_size)
        .eventual_sync(eventual_sync);
    if let Some(bytes) = log_bytes {
        builder = builder.log_size(bytes);
    }
    if let Some(bytes) = txn_memory {
        builder = builder.txn_memory(bytes);
    }
    let db = builder.with_storage(storage.clone(), true, None)?;
    Ok((storage, db))
}

/// A table's entries, in key order.
pub type Entries = std::collections::BTreeMap<Vec<u8>, Vec<u8>>;

/// Every entry of table `table`, read in a new snapshot.
pub fn entries(db: &Database, table: &str) -> Result<Entries, Error> {
    let r = db.begin_read()?;
    let t = r.open_table(table)?;
    t.iter()?
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect()
}

/// The database a file image (after a power cut, or crafted) opens as, in memory.
pub fn open_image(image: &[u8], read_only: bool) -> Result<Database, Error> {
    Database::builder().read_only(read_only).with_storage(
        Arc::new(MemoryStorage::from_bytes(image)?),
        false,
        None,
    )
}

/// The database a file image opens as read-only from a file (a private map where the log
/// holds commits to apply, pins, readers that follow the slots), with the directory that
/// holds the file.
pub fn open_file_image(image: &[u8]) -> Result<(tempfile::TempDir, Database), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("image.cairn");
    std::fs::write(&path, image)?;
    let db = Database::builder().read_only(true).open(&path)?;
    Ok((dir, db))
}

/// A database that runs the integrity check when dropped, failing the test on a problem.
#[derive(Debug)]
pub struct Checked(pub Database);

impl Deref for Checked {
    type Target = Database;
    fn deref(&self) -> &Database {
        &self.0
    }
}

impl Drop for Checked {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        match self.0.check() {
            Ok(report) => assert!(
                report.is_ok(),
                "integrity check failed: {:?}",
                report.problems
            ),
            Err(e) => panic!("integrity check could not run: {e}"),
        }
    }
}

/// The seed for a random test: `CAIRN_SEED` if set, else a fresh one. Printed, so that a
/// failure can be replayed.
pub fn seed(test: &str) -> u64 {
    let seed = std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
    eprintln!("{test}: CAIRN_SEED={seed}");
    seed
}

/// A number from the environment variable `name`, or `default` (to scale tests up by hand).
pub fn scale(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}
