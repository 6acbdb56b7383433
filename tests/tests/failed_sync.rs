//! A sync that fails, then one that succeeds. After a write-back error Linux marks the
//! pages it could not write clean: the process still reads them, but a later sync does not
//! write them (the fault-injecting store does the same). The sync that follows a failed
//! one must write them again, or it declares durable commits whose pages are not on the
//! disk; and where the cache lost them too, it must say so instead.

use std::collections::BTreeMap;

use cairn_engine::SlotInfo;
use cairn_engine::storage::FaultyStorage;
use cairn_engine::{Database, Durability, Error};
use cairn_tests::{on_faulty_store_with, open_image};

type State = BTreeMap<Vec<u8>, Vec<u8>>;

const SEEDS: u64 = 48;

fn contents(db: &Database) -> Result<State, Error> {
    cairn_tests::entries(db, "t")
}

/// Eventual commits of `n` puts each over 1 KiB pages (a few leaves and a branch apiece,
/// some values in overflow runs); the state they leave.
fn eventual_commits(db: &Database, state: &mut State, commits: u32) -> Result<(), Error> {
    for c in 0..commits {
        let mut w = db.begin_write()?;
        w.set_durability(Durability::Eventual);
        let mut t = w.open_table("t")?;
        for i in 0..40u32 {
            let key = ((i * 7919 + c * 104_729) % 1000).to_be_bytes().to_vec();
            let value = vec![c as u8 + 1; if i % 17 == 0 { 2000 } else { 30 }];
            t.insert(&key, &value)?;
            state.insert(key, value);
        }
        w.commit()?;
    }
    Ok(())
}

/// A database on a fault-injecting store with one durable commit: an empty table "t".
fn start(seed: u64, log: Option<u64>) -> Result<(std::sync::Arc<FaultyStorage>, Database), Error> {
    let (storage, db) = on_faulty_store_with(seed, 1024, log, None, None)?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.commit()?;
    Ok((storage, db))
}

/// What the disk holds after the process is gone (nothing is waiting for a sync).
fn reopened(storage: &FaultyStorage) -> Result<State, Error> {
    contents(&open_image(&storage.durable_image(), false)?)
}

#[test]
fn the_sync_after_a_failed_one_makes_the_commits_durable() -> Result<(), Error> {
    // Without a log every durable commit syncs; with the smallest one, the sync comes
    // when the log is full, and the records carry the commits until then.
    for log in [Some(0), Some(16 * 1024)] {
        for seed in 0..SEEDS {
            let (storage, db) = start(seed, log)?;
            let mut state = State::new();
            eventual_commits(&db, &mut state, 6)?;
            storage.fail_next_sync();
            assert!(db.sync().is_err(), "seed {seed}: the injected failure");
            db.sync()?;
            assert_eq!(
                reopened(&storage)?,
                state,
                "seed {seed}, log {log:?}: after sync"
            );

            // The same through durable commits: the failed one's sync, then the next.
            eventual_commits(&db, &mut state, 4)?;
            let commit_one = |state: &mut State, v: u8| -> Result<(), Error> {
                let mut w = db.begin_write()?;
                w.open_table("t")?.insert(b"last", &[v])?;
                w.commit()?;
                state.insert(b"last".to_vec(), vec![v]);
                Ok(())
            };
            // (Without a log the commit syncs at once; with one, when the log is full.)
            storage.fail_next_sync();
            let mut failed = false;
            for _ in 0..4000 {
                let before = state.clone();
                if commit_one(&mut state, 1).is_err() {
                    state = before;
                    failed = true;
                    break;
                }
            }
            assert!(failed, "seed {seed}: a commit failed");
            commit_one(&mut state, 2)?;
            let mut w = db.begin_write()?;
            w.open_table("t")?;
            w.commit()?;
            db.sync()?;
            assert_eq!(
                reopened(&storage)?,
                state,
                "seed {seed}, log {log:?}: after commits"
            );
        }
    }
    Ok(())
}

#[test]
fn pages_the_cache_lost_after_a_failed_sync_are_reported_not_declared_durable() -> Result<(), Error>
{
    let mut reported = 0;
    for seed in 0..SEEDS {
        let (storage, db) = start(seed, Some(0))?;
        let mut state = State::new();
        eventual_commits(&db, &mut state, 6)?;
        storage.evict_after_failed_syncs(true);
        storage.fail_next_sync();
        assert!(db.sync().is_err(), "seed {seed}: the injected failure");
        match db.sync() {
            // Every page happened to reach the disk.
            Ok(()) => assert_eq!(reopened(&storage)?, state, "seed {seed}"),
            Err(Error::Corruption { reason, .. }) => {
                assert!(
                    reason.contains("lost with the cache") && reason.contains("reopening"),
                    "seed {seed}: the error says what happened and what to do: {reason}"
                );
                reported += 1;
                // Readers check the pages again: they see the loss, never the old bytes
                // as if they were the commit's.
                match contents(&db) {
                    Err(Error::Corruption { .. }) => {}
                    Ok(found) => assert_eq!(found, state, "seed {seed}: readers"),
                    Err(e) => panic!("seed {seed}: {e}"),
                }
                // Nothing was declared durable: the disk holds the table's empty state.
                assert_eq!(reopened(&storage)?, State::new(), "seed {seed}: on disk");
                // And no later commit declares it durable either.
                let commit = (|| {
                    let mut w = db.begin_write()?;
                    w.set_durability(Durability::Immediate);
                    w.open_table("t")?.insert(b"k", b"v")?;
                    w.commit()
                })();
                assert!(commit.is_err(), "seed {seed}: a durable commit");
            }
            Err(e) => panic!("seed {seed}: {e}"),
        }
    }
    eprintln!("{reported} of {SEEDS} seeds lost a page with the cache");
    assert!(
        reported > SEEDS / 2,
        "most failed syncs lost a page: {reported}"
    );
    Ok(())
}

#[test]
fn a_process_that_died_after_a_failed_sync_loses_nothing_at_the_next_open() -> Result<(), Error> {
    for seed in 0..SEEDS {
        let (storage, db) = start(seed, Some(0))?;
        let mut state = State::new();
        eventual_commits(&db, &mut state, 6)?;
        storage.fail_next_sync();
        assert!(db.sync().is_err(), "seed {seed}: the injected failure");
        // The process dies without closing; the next one opens the file. It finds the
        // newest commit whole (the cache still serves its pages), and makes it durable.
        std::mem::forget(db);
        let db = Database::builder().with_storage(storage.clone(), false, None)?;
        assert_eq!(contents(&db)?, state, "seed {seed}: opened");
        drop(db);
        assert_eq!(reopened(&storage)?, state, "seed {seed}: on disk");
    }
    Ok(())
}

/// `Database::close` returns what its final sync meets, which dropping the handle cannot:
/// a sync that fails is an error (the disk then holds a committed state: the one before
/// the Eventual commits, or with them), one that succeeds leaves every commit on the disk
/// and the file sealed, with nothing to replay or verify. A handle that is not the last
/// only syncs, and the others go on.
#[test]
fn close_returns_what_its_final_sync_meets() -> Result<(), Error> {
    for seed in 0..SEEDS {
        let (storage, db) = start(seed, Some(16 * 1024))?;
        let mut state = State::new();
        eventual_commits(&db, &mut state, 3)?;
        db.clone().close()?;
        assert_eq!(
            reopened(&storage)?,
            state,
            "seed {seed}: a clone's close syncs"
        );
        let synced = state.clone();
        eventual_commits(&db, &mut state, 3)?;
        if seed % 2 == 0 {
            storage.fail_next_sync();
            assert!(
                matches!(db.close(), Err(Error::Io(_))),
                "seed {seed}: the injected failure"
            );
            let on_disk = reopened(&storage)?;
            assert!(on_disk == synced || on_disk == state, "seed {seed}");
        } else {
            db.close()?;
            assert_eq!(reopened(&storage)?, state, "seed {seed}: after close");
            // Sealed: the newest slot says its own commit is durable.
            let dir = tempfile::tempdir()?;
            let file = dir.path().join("closed.cairn");
            std::fs::write(&file, storage.durable_image())?;
            let newest = cairn_engine::inspect(&file)?
                .slots
                .into_iter()
                .filter_map(|slot| match slot {
                    SlotInfo::Valid {
                        txid, durable_txid, ..
                    } => Some((txid, durable_txid)),
                    SlotInfo::Invalid => None,
                })
                .max();
            assert!(
                newest.is_some_and(|(txid, durable)| txid == durable),
                "seed {seed}: {newest:?}"
            );
        }
    }
    Ok(())
}
