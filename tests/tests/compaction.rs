//! Online compaction: the file shrinks to about its live data, readers keep working and
//! keep seeing their snapshots, writers go on between steps, and nothing changes content.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use cairn_engine::{Database, Error};
use cairn_tests::Checked;

fn value(i: u64, round: u64) -> Vec<u8> {
    // Every 50th value needs overflow pages, so that runs move too.
    let len = if i.is_multiple_of(50) { 9_000 } else { 100 };
    let mut v = format!("{i}:{round}:").into_bytes();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// Writes `n` keys to table "t" (two tables, so the catalog has work too), then deletes
/// all but every tenth; returns what should remain.
fn fill_then_delete_most(db: &Database, n: u64) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, Error> {
    let mut txn = db.begin_write()?;
    txn.create_table("t")?;
    txn.create_table("u")?;
    for i in 0..n {
        txn.open_table("t")?.insert(&key(i), &value(i, 0))?;
        txn.open_table("u")?.insert(&key(i), b"u")?;
    }
    txn.commit()?;
    let mut model = BTreeMap::new();
    let mut txn = db.begin_write()?;
    for i in 0..n {
        if i % 10 == 0 {
            model.insert(key(i), value(i, 0));
        } else {
            txn.open_table("t")?.remove(&key(i))?;
            txn.open_table("u")?.remove(&key(i))?;
        }
    }
    txn.commit()?;
    Ok(model)
}

fn contents(db: &Database) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, Error> {
    cairn_tests::entries(db, "t")
}

#[test]
fn compaction_returns_the_space_of_deleted_data() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("db");
    let db = Checked(Database::create(&path)?);
    let model = fill_then_delete_most(&db, 20_000)?;
    // Fragment what is left: rewrite every remaining value once, then keep a few keys
    // at the far end of the file by writing them last.
    let mut txn = db.begin_write()?;
    for k in model.keys() {
        txn.open_table("t")?.insert(k, &model[k])?;
    }
    txn.commit()?;
    let before = std::fs::metadata(&path)?.len();

    let report = db.compact()?;
    let after = std::fs::metadata(&path)?.len();
    assert_eq!(report.bytes_before, before);
    assert_eq!(report.bytes_after, after);
    assert!(report.pages_moved > 0, "{report:?}");
    // Live data: 2,000 entries, 40 of them 9 KB, the rest ~120 bytes: well under 1 MB.
    let stats = db.stats()?;
    assert!(
        after * 2 < before,
        "file {before} -> {after} bytes ({report:?}, {stats:?})"
    );
    assert!(
        stats.free_pages * 10 <= stats.page_count,
        "a dense file has few free pages: {stats:?}"
    );
    assert_eq!(contents(&db)?, model);
    drop(db);

    let db = Checked(Database::open(&path)?);
    assert_eq!(contents(&db)?, model);
    assert_eq!(std::fs::metadata(&path)?.len(), after);
    Ok(())
}

#[test]
fn compacting_a_dense_database_changes_nothing_much() -> Result<(), Error> {
    let db = Checked(Database::in_memory()?);
    let mut txn = db.begin_write()?;
    txn.create_table("t")?;
    for i in 0..2_000 {
        txn.open_table("t")?.insert(&key(i), &value(i, 0))?;
    }
    txn.commit()?;
    let report = db.compact()?;
    assert_eq!(report.bytes_after, report.bytes_before, "{report:?}");
    assert_eq!(report.pages_moved + report.nodes_merged, 0, "{report:?}");
    Ok(())
}

#[test]
fn a_reader_open_through_compaction_keeps_its_snapshot() -> Result<(), Error> {
    let db = Checked(Database::in_memory()?);
    let model = fill_then_delete_most(&db, 5_000)?;
    let old = db.begin_read()?;
    let report = db.compact()?;
    // The reader pins what it sees: compaction moved pages but could not hand back the
    // originals; the reader's view is intact.
    let table = old.open_table("t")?;
    let mut seen = BTreeMap::new();
    for entry in table.iter()? {
        let (k, v) = entry?;
        seen.insert(k.to_vec(), v.to_vec());
    }
    assert_eq!(seen, model, "{report:?}");
    drop(old);
    // Once it is gone, a second compaction returns the space.
    let second = db.compact()?;
    assert!(
        second.bytes_after < report.bytes_before,
        "{report:?} then {second:?}"
    );
    assert_eq!(contents(&db)?, model);
    Ok(())
}

#[test]
fn readers_and_a_writer_keep_working_during_compaction() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("db");
    let db = Arc::new(Checked(Database::create(&path)?));
    let model = fill_then_delete_most(&db, 20_000)?;
    // The writer rewrites every key with a new round number in each commit; readers
    // check that every snapshot holds one round throughout (no mixed states).
    let keys: Vec<u64> = (0..20_000).filter(|i| i % 10 == 0).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let snapshots = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (db, stop, keys, snapshots) =
            (db.clone(), stop.clone(), keys.clone(), snapshots.clone());
        readers.push(thread::spawn(move || -> Result<(), String> {
            while !stop.load(Ordering::Relaxed) {
                let read = db.begin_read().map_err(|e| e.to_string())?;
                let table = read.open_table("t").map_err(|e| e.to_string())?;
                let mut round = None;
                for &i in keys.iter().step_by(7) {
                    let v = table
                        .get(&key(i))
                        .map_err(|e| e.to_string())?
                        .ok_or(format!("key {i} missing"))?;
                    let r = v.split(|&b| b == b':').nth(1).map(<[u8]>::to_vec);
                    if round.is_none() {
                        round = r.clone();
                    }
                    if r != round || v.len() != value(i, 0).len() {
                        return Err(format!("mixed snapshot at key {i}"));
                    }
                }
                snapshots.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }));
    }
    let writer = {
        let (db, stop, keys) = (db.clone(), stop.clone(), keys.clone());
        thread::spawn(move || -> Result<u64, Error> {
            let mut round = 1;
            while !stop.load(Ordering::Relaxed) {
                let mut txn = db.begin_write()?;
                for &i in &keys {
                    txn.open_table("t")?.insert(&key(i), &value(i, round))?;
                }
                txn.commit()?;
                round += 1;
            }
            Ok(round)
        })
    };
    let report = db.compact()?;
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join()
            .map_err(|_| Error::Io(std::io::Error::other("reader panicked")))?
            .map_err(|e| Error::Io(std::io::Error::other(e)))?;
    }
    let rounds = writer
        .join()
        .map_err(|_| Error::Io(std::io::Error::other("writer panicked")))??;
    assert!(snapshots.load(Ordering::Relaxed) > 0);
    assert!(rounds > 1, "the writer committed during compaction");
    assert!(report.steps > 0 && report.pages_moved > 0, "{report:?}");
    assert_eq!(contents(&db)?.len(), model.len());
    // With the writer stopped, compaction finishes the job.
    let quiet = db.compact()?;
    let stats = db.stats()?;
    assert!(
        stats.free_pages * 10 <= stats.page_count,
        "{report:?} then {quiet:?}: {stats:?}"
    );
    Ok(())
}

/// A failure at any point of a compaction (once, or a crash with a power cut) leaves a
/// database that opens, passes its check and holds the same data.
#[test]
fn a_failure_anywhere_in_a_compaction_loses_nothing() -> Result<(), Error> {
    use cairn_engine::storage::FaultyStorage;
    let setup = |seed| -> Result<_, Error> {
        let storage = FaultyStorage::new(seed)?;
        let db = Database::builder()
            .page_size(1024)
            .with_storage(storage.clone(), true, None)?;
        let model = fill_then_delete_most(&db, 3_000)?;
        Ok((storage, db, model))
    };
    let (clean, db, _) = setup(1)?;
    let start = clean.operations();
    let report = db.compact()?;
    let total = clean.operations() - start;
    assert!(report.pages_moved > 0 && total > 10, "{report:?}");
    drop(db);

    let mut points = 0;
    for k in (1..=total).step_by((total as usize / 120).max(1)) {
        // A crash: every operation from the k-th on fails, then the power goes.
        let (storage, db, model) = setup(k)?;
        storage.die_after(storage.operations() + k - 1);
        assert!(
            db.compact().is_err(),
            "k={k}: the failure reached compaction"
        );
        let image = storage.power_cut();
        drop(db);
        let reopened = cairn_tests::open_image(&image, false)?;
        assert!(reopened.check()?.is_ok(), "k={k}: check after a crash");
        assert_eq!(contents(&reopened)?, model, "k={k}: data after a crash");

        // A one-off failure: compaction stops with the error, and a second one finishes.
        let (storage, db, model) = setup(k)?;
        storage.fail_at(storage.operations() + k);
        assert!(
            db.compact().is_err(),
            "k={k}: the failure reached compaction"
        );
        assert_eq!(contents(&db)?, model, "k={k}: data after a failed step");
        db.compact()?;
        assert!(db.check()?.is_ok(), "k={k}: check after compacting again");
        assert_eq!(contents(&db)?, model);
        points += 1;
    }
    eprintln!("{points} failure points of {total} operations: 0 losses");
    Ok(())
}

/// Hot backups taken while compaction moves pages between a writer's commits: each backup
/// is the commit before it (every key of that round) and passes its check.
#[test]
fn a_backup_during_compaction_is_one_committed_state() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let db = Arc::new(Checked(Database::create(dir.path().join("db"))?));
    fill_then_delete_most(&db, 20_000)?;
    let keys: Vec<u64> = (0..20_000).filter(|i| i % 10 == 0).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let compactor = {
        let (db, stop) = (db.clone(), stop.clone());
        thread::spawn(move || -> Result<u64, Error> {
            let mut moved = 0;
            while !stop.load(Ordering::Relaxed) {
                moved += db.compact()?.pages_moved;
            }
            Ok(moved)
        })
    };
    for round in 1..=6u64 {
        let mut txn = db.begin_write()?;
        for &i in &keys {
            txn.open_table("t")?.insert(&key(i), &value(i, round))?;
        }
        txn.commit()?;
        let copy = dir.path().join(format!("backup-{round}"));
        db.backup(&copy)?;
        let backup = Database::open(&copy)?;
        assert!(backup.check()?.is_ok(), "backup {round}");
        let read = backup.begin_read()?;
        let table = read.open_table("t")?;
        // The newest commit when the backup began: this round's, whatever compaction
        // steps came after it (they change no value).
        for &i in &keys {
            assert_eq!(
                table.get(&key(i))?,
                Some(&value(i, round)[..]),
                "backup {round}, key {i}"
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    let moved = compactor
        .join()
        .map_err(|_| Error::Io(std::io::Error::other("compactor panicked")))??;
    assert!(moved > 0, "compaction moved pages during the backups");
    Ok(())
}
