//! Opening after a crash: a newest commit whose pages did not all reach the disk is
//! rejected in favour of the previous one; Eventual commits never overwrite the slot of
//! the last durable commit; a clean close seals the file.

use std::sync::Arc;

use cairn_engine::storage::{MemoryStorage, Storage};
use cairn_engine::{Database, Durability, Error};

const PAGE: usize = 1024;

fn open_image(bytes: &[u8]) -> Result<Database, Error> {
    cairn_tests::open_image(bytes, false)
}

/// `image` with slot 0 or 1 zeroed: what survives if that slot is lost.
fn without_slot(image: &[u8], slot: usize) -> Vec<u8> {
    let mut lost = image.to_vec();
    lost[slot * PAGE + 512..slot * PAGE + 1024].fill(0);
    lost
}

/// The commits the file opens at with either slot lost, in order; each opening is checked.
fn txids_with_either_slot_lost(image: &[u8]) -> Result<Vec<u64>, Error> {
    let mut found = Vec::new();
    for slot in 0..2 {
        let db = open_image(&without_slot(image, slot))?;
        assert!(db.check()?.is_ok());
        found.push(db.begin_read()?.txid());
    }
    found.sort_unstable();
    Ok(found)
}

fn fill(db: &Database, from: u32, to: u32, durability: Durability) -> Result<(), Error> {
    let mut w = db.begin_write()?;
    w.set_durability(durability);
    if !w.table_exists("t")? {
        w.create_table("t")?;
    }
    let mut t = w.open_table("t")?;
    for i in from..to {
        t.insert(&i.to_be_bytes(), &[i as u8; 50])?;
    }
    w.commit()
}

fn keys(db: &Database) -> Result<Vec<u32>, Error> {
    let r = db.begin_read()?;
    r.open_table("t")?
        .iter()?
        .map(|e| e.map(|(k, _)| u32::from_be_bytes(k.try_into().unwrap_or_default())))
        .collect()
}

#[test]
fn a_newest_commit_with_a_damaged_page_falls_back_to_the_previous_one() -> Result<(), Error> {
    let storage = Arc::new(MemoryStorage::new()?);
    let db = Database::builder()
        .page_size(PAGE)
        .with_storage(storage.clone(), true, None)?;
    fill(&db, 0, 300, Durability::Immediate)?;
    let previous_txid = db.begin_read()?.txid();
    let before = storage.to_vec();
    fill(&db, 300, 310, Durability::Immediate)?;
    // The database is still open: the file is as a crash right now would leave it.
    let after = storage.to_vec();
    assert_eq!(keys(&open_image(&after)?)?, (0..310).collect::<Vec<_>>());

    // Pages the commit wrote; the file's tail grown ahead of need is not part of it.
    let page_count = db.stats()?.page_count as usize;
    let written: Vec<usize> = (2..page_count)
        .filter(|&p| before.get(p * PAGE..(p + 1) * PAGE) != Some(&after[p * PAGE..(p + 1) * PAGE]))
        .collect();
    assert!(
        written.len() >= 3,
        "the commit wrote a leaf, the catalog and the freelist"
    );
    for page in written {
        let mut torn = after.clone();
        torn[page * PAGE + PAGE / 2] ^= 1;
        let db = open_image(&torn)?;
        assert_eq!(db.begin_read()?.txid(), previous_txid, "page {page}");
        assert_eq!(keys(&db)?, (0..300).collect::<Vec<_>>(), "page {page}");
        assert!(db.check()?.is_ok());
    }
    Ok(())
}

#[test]
fn eventual_commits_never_overwrite_the_last_durable_slot() -> Result<(), Error> {
    let storage = Arc::new(MemoryStorage::new()?);
    let db = Database::builder()
        .page_size(PAGE)
        .durability(Durability::Eventual)
        .with_storage(storage.clone(), true, None)?;
    fill(&db, 0, 10, Durability::Immediate)?;
    let durable = db.begin_read()?.txid();
    for i in 1..5 {
        fill(&db, i * 10, i * 10 + 10, Durability::Eventual)?;
    }
    let newest = db.begin_read()?.txid();
    let image = storage.to_vec();
    // Losing either slot leaves the other: one is the durable commit, one the newest.
    assert_eq!(txids_with_either_slot_lost(&image)?, vec![durable, newest]);
    Ok(())
}

#[test]
fn a_clean_close_makes_eventual_commits_durable_and_seals() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("s.cairn");
    {
        let db = Database::builder()
            .durability(Durability::Eventual)
            .page_size(PAGE)
            .create(&path)?;
        fill(&db, 0, 100, Durability::Eventual)?;
    }
    let bytes = std::fs::read(&path)?;
    // Both slots now hold the same commit, so losing either one loses nothing.
    for slot in 0..2 {
        let lost = without_slot(&bytes, slot);
        assert_eq!(keys(&open_image(&lost)?)?, (0..100).collect::<Vec<_>>());
    }
    Ok(())
}

#[test]
fn a_file_whose_both_slots_are_damaged_reports_both() -> Result<(), Error> {
    let storage = Arc::new(MemoryStorage::new()?);
    let db = Database::builder()
        .page_size(PAGE)
        .with_storage(storage.clone(), true, None)?;
    fill(&db, 0, 10, Durability::Immediate)?;
    let mut image = storage.to_vec();
    image[512] ^= 1;
    image[PAGE + 512] ^= 1;
    match open_image(&image) {
        Err(Error::NoValidCommit { slot0, slot1 }) => {
            assert!(slot0.contains("checksum") && slot1.contains("checksum"));
        }
        other => panic!("expected NoValidCommit, got {other:?}"),
    }
    assert!(storage.len() > 0);
    Ok(())
}

/// Regression: `sync` once protected the wrong slot, so later Eventual commits could
/// overwrite the commit it had just made durable.
#[test]
fn after_sync_the_synced_commit_is_protected() -> Result<(), Error> {
    let storage = Arc::new(MemoryStorage::new()?);
    let db = Database::builder()
        .page_size(PAGE)
        .durability(Durability::Eventual)
        .with_storage(storage.clone(), true, None)?;
    fill(&db, 0, 10, Durability::Eventual)?;
    db.sync()?;
    let synced = db.begin_read()?.txid();
    for i in 1..4 {
        fill(&db, i * 10, i * 10 + 10, Durability::Eventual)?;
    }
    let newest = db.begin_read()?.txid();
    let image = storage.to_vec();
    assert_eq!(txids_with_either_slot_lost(&image)?, vec![synced, newest]);
    Ok(())
}

/// Regression: a commit that failed after writing its slot left that slot holding itself;
/// a later `sync` made it durable while treating it as the last good commit, and once more
/// commits reused the failed commit's pages, a power cut could leave no intact slot.
#[test]
fn sync_after_a_failed_commit_protects_the_last_good_commit() -> Result<(), Error> {
    use cairn_engine::storage::FaultyStorage;
    let storage = FaultyStorage::new(7)?;
    let db = Database::builder()
        .page_size(PAGE)
        .durability(Durability::Eventual)
        .with_storage(storage.clone(), true, None)?;
    fill(&db, 0, 10, Durability::Immediate)?;
    fill(&db, 10, 20, Durability::Eventual)?;
    let good = db.begin_read()?.txid();
    // The next commit writes its pages and its slot; its final sync fails. How many
    // operations such a commit takes is found on a twin database, so that exactly its last
    // one (the sync) can be failed here.
    let before = storage.operations();
    let probe = FaultyStorage::new(7)?;
    let probe_db = Database::builder()
        .page_size(PAGE)
        .durability(Durability::Eventual)
        .with_storage(probe.clone(), true, None)?;
    fill(&probe_db, 0, 10, Durability::Immediate)?;
    fill(&probe_db, 10, 20, Durability::Eventual)?;
    let start = probe.operations();
    let mut w = probe_db.begin_write()?;
    w.set_durability(Durability::Immediate);
    w.open_table("t")?.insert(b"failed", b"commit")?;
    w.commit()?;
    let ops = probe.operations() - start;
    assert_eq!(before, start, "both databases took the same path");

    storage.fail_at(before + ops);
    let mut w = db.begin_write()?;
    w.set_durability(Durability::Immediate);
    w.open_table("t")?.insert(b"failed", b"commit")?;
    assert!(w.commit().is_err(), "the commit's sync fails");
    assert_eq!(db.begin_read()?.txid(), good);
    db.sync()?;
    // Whatever the slots hold now is durable: both must be commits we can stand behind.
    let image = storage.power_cut();
    for slot in 0..2 {
        if let Ok(db) = open_image(&without_slot(&image, slot)) {
            let r = db.begin_read()?;
            assert!(r.txid() <= good || r.open_table("t")?.get(b"failed")?.is_some());
        }
    }
    let db2 = open_image(&image)?;
    assert_eq!(
        db2.begin_read()?.txid(),
        good,
        "the synced commit is the last good one"
    );
    assert_eq!(keys(&db2)?, (0..20).collect::<Vec<_>>());
    Ok(())
}
