//! Eventual commits made durable in the background: within about one interval, without
//! a later commit, sync or close; and the thread that does it never delays closing nor
//! holds the file after the last handle is gone.

use std::time::{Duration, Instant};

use cairn_engine::storage::FaultyStorage;
use cairn_engine::{Database, Durability, Error};
use cairn_tests::open_image;

/// A database on a fault-injecting store, syncing Eventual commits every `every`.
fn eventual(every: Option<Duration>) -> Result<(std::sync::Arc<FaultyStorage>, Database), Error> {
    let storage = FaultyStorage::new(7)?;
    let db = Database::builder()
        .page_size(1024)
        .durability(Durability::Eventual)
        .eventual_sync(every)
        .with_storage(storage.clone(), true, None)?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.commit()?;
    db.sync()?;
    let mut w = db.begin_write()?;
    w.open_table("t")?.insert(b"k", b"eventual")?;
    w.commit()?;
    Ok((storage, db))
}

/// What a power cut that loses every unsynced write leaves under key `k`.
fn after_cut(storage: &FaultyStorage) -> Result<Option<Vec<u8>>, Error> {
    let db = open_image(&storage.durable_image(), false)?;
    let r = db.begin_read()?;
    Ok(r.open_table("t")?.get(b"k")?.map(<[u8]>::to_vec))
}

#[test]
fn an_eventual_commit_becomes_durable_without_a_later_commit() -> Result<(), Error> {
    let (storage, db) = eventual(Some(Duration::from_millis(20)))?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while after_cut(&storage)?.is_none() {
        assert!(Instant::now() < deadline, "not synced in 20 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(after_cut(&storage)?.as_deref(), Some(&b"eventual"[..]));
    // Once durable, nothing more to do: a quiet database is not synced again.
    let syncs = db.io_stats().syncs;
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(db.io_stats().syncs, syncs);

    // Without the background sync (the default on given storage) the commit waits for a
    // later one, a sync or close: a power cut loses it.
    let (storage, db) = eventual(None)?;
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(after_cut(&storage)?, None);
    db.sync()?;
    assert_eq!(after_cut(&storage)?.as_deref(), Some(&b"eventual"[..]));
    Ok(())
}

/// The last handle stops the thread before it goes, so the file is closed (and its lock
/// released) when `drop` returns, never later on the thread: an open right after, with no
/// lock timeout, always succeeds. A write transaction held while the last handle goes does
/// not make the drop wait for the thread forever.
#[test]
fn the_last_handle_closes_the_file_itself() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("e.cairn");
    for i in 0u32..100 {
        let db = Database::builder()
            .durability(Durability::Eventual)
            .eventual_sync(Some(Duration::from_micros(50)))
            .lock_timeout(Duration::ZERO)
            .create(&path)?;
        let mut w = db.begin_write()?;
        if i == 0 {
            w.create_table("t")?;
        }
        w.open_table("t")?.insert(&i.to_be_bytes(), b"v")?;
        w.commit()?;
        let clone = db.clone();
        drop(db);
        if i % 2 == 0 {
            // Dropped while this thread holds the writer.
            let w = clone.begin_write()?;
            drop(clone);
            drop(w);
        } else {
            std::thread::sleep(Duration::from_micros(u64::from(i) * 10));
            drop(clone);
        }
    }
    let db = Database::builder()
        .lock_timeout(Duration::ZERO)
        .open(&path)?;
    assert_eq!(db.begin_read()?.open_table("t")?.len(), 100);
    Ok(())
}

/// A background sync that fails is not swallowed: the next `Database::sync` returns its
/// error (once; the call after it syncs).
#[test]
fn a_failed_background_sync_is_reported_by_the_next_sync() -> Result<(), Error> {
    let (storage, db) = eventual(Some(Duration::from_millis(20)))?;
    // The next operation is the background thread's sync: it fails, once.
    let failing = storage.operations() + 1;
    storage.fail_at(failing);
    let deadline = Instant::now() + Duration::from_secs(20);
    while storage.operations() < failing {
        assert!(Instant::now() < deadline, "no background sync in 20 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        matches!(db.sync(), Err(Error::Io(_))),
        "the failure was swallowed"
    );
    db.sync()?;
    assert_eq!(after_cut(&storage)?.as_deref(), Some(&b"eventual"[..]));
    Ok(())
}
