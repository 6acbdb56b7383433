//! Simulated power cuts: random transactions on a fault-injecting store (a third of them
//! taking savepoints, rolling back to and releasing them; online compactions among them,
//! the cut sometimes in one of its steps), then the file as a cut would
//! leave it (each unsynced write kept, dropped or torn at 512-byte sectors, in
//! any order; unsynced growth lost at random), opened with the normal engine.
//!
//! Every cut must open, pass `check()`, and hold one whole committed state: the last
//! acknowledged durable commit or a later one. A commit that failed with an I/O error (or
//! was cut short) is in doubt: its state may appear, but never half of it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cairn_engine::storage::{FaultyStorage, MemoryStorage, Storage};
use cairn_engine::{Database, Durability, Error, Savepoint};
use cairn_tests::{on_faulty_store_with, open_image, scale, seed};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

type State = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Default, Debug)]
struct Tally {
    cuts: usize,
    lost: usize,
    unopenable: usize,
    mixed: usize,
    failed_checks: usize,
    injected_errors: usize,
    /// Cuts whose reopening replayed commits from the commit log.
    replayed: usize,
    /// Lives whose write transactions spilled pages before their commit.
    spilled: usize,
    /// Rollbacks to a savepoint.
    savepoint_rollbacks: usize,
    /// Transactions that renamed the table, changed it and renamed it back (such a commit
    /// is not logged: its durable commit syncs).
    renames: usize,
    /// Online compactions run (the cut may come during one).
    compactions: usize,
    /// Lives whose commit log ended at another size than it began (it moved to a larger
    /// run, or compaction made it small again; since the forty-third session).
    log_moves: usize,
    /// Cuts whose read-only opening applied the log to a private copy.
    private_copies: usize,
    /// Cuts also opened read-only from a file.
    file_openings: usize,
    /// Read-only openings that failed, or showed other than the writable opening where
    /// they replayed the same log (or, not replaying, a state never committed), or, opened
    /// from a file, other than the same bytes in memory.
    read_only_wrong: usize,
    /// Cuts whose reopening wrote the commit it opened again as its own durable commit
    /// (without replaying: it named an older durable commit; since the forty-seventh
    /// session).
    sealed: usize,
    /// Second power cuts right after an opening (everything it wrote synced), or in the
    /// middle of it, whose file did not open at the same state or did not pass `check`.
    /// (Until the forty-seventh session only after openings that replayed.)
    second_cut_wrong: usize,
    /// Openings whose file did not record the commit log's size the life asked for at
    /// creation (every slot records it since the forty-fourth session).
    log_limit_wrong: usize,
}

fn contents(db: &Database) -> Result<State, Error> {
    cairn_tests::entries(db, "t")
}

/// `image` written to a file and opened read-only from there: whether a private copy, and
/// what it holds.
fn read_only_from_a_file(image: &[u8]) -> Result<(bool, State), Error> {
    let (_dir, db) = cairn_tests::open_file_image(image)?;
    Ok((db.is_private_copy(), contents(&db)?))
}

fn change(
    rng: &mut SmallRng,
    state: &mut State,
    t: &mut cairn_engine::TableMut<'_>,
) -> Result<(), Error> {
    let key = rng.random_range(0u32..400).to_be_bytes().to_vec();
    if rng.random_bool(0.01) {
        // A range of up to 30 keys: a removal per key in the commit's log record.
        let end = (u32::from_be_bytes([key[0], key[1], key[2], key[3]]) + rng.random_range(1..30))
            .to_be_bytes()
            .to_vec();
        let removed = t.remove_range(&key[..]..&end[..])?;
        let gone: Vec<Vec<u8>> = state.range(key..end).map(|(k, _)| k.clone()).collect();
        assert_eq!(removed, gone.len() as u64);
        for k in gone {
            state.remove(&k);
        }
    } else if rng.random_bool(0.25) {
        t.remove(&key)?;
        state.remove(&key);
    } else {
        let len = if rng.random_bool(0.003) {
            // A value whose record is too large to log: a durable commit then syncs, and
            // its run goes to the disk's write-back in pieces as it is written (one piece
            // up to 1 MiB, two past it).
            rng.random_range(130_000..1_600_000)
        } else if rng.random_bool(0.05) {
            rng.random_range(600..5000)
        } else {
            rng.random_range(0..80)
        };
        let value = vec![rng.random::<u8>(); len];
        t.insert(&key, &value)?;
        state.insert(key, value);
    }
    Ok(())
}

/// One life of a database ended by a power cut.
fn life(seed: u64, tally: &mut Tally, lie: bool) -> Result<(), Error> {
    let mut rng = SmallRng::seed_from_u64(seed);
    // Half the lives get the smallest log (16 pages), which their commits fill and sync.
    // (Their first runs found an owned leaf, emptied and given a key of its old key's
    // length, searched with the old key's bytes: leaves out of order, one life in 16,000.)
    let small_log = rng.random_bool(0.5);
    // A quarter of the lives get the default page size (4 KiB: wider leaves, values
    // inline up to a larger size), the others 1 KiB pages (deeper trees for the keys).
    let page_size = if rng.random_bool(0.25) { 4096 } else { 1024 };
    let log = small_log.then_some(16 * page_size as u64);
    // A quarter of the lives sync Eventual commits in the background, often, so that the
    // thread's syncs land among the commits, the injected errors and the cut (its timing
    // is not reproducible from the seed).
    let background = rng.random_bool(0.25).then_some(Duration::from_micros(200));
    // A third of the lives give write transactions the smallest budget (16 pages), so
    // that larger ones write leaves and branches before their commit (`commit/spill.rs`).
    let budget = rng.random_bool(0.33).then_some(16 * page_size);
    // A third of the lives keep the page cache in blocks of 16 pages (a file's are up to
    // 2 MiB) rather than sectors: a commit's pages beside the log and its slot then go
    // after its record, and a log that grows to fill a block starts at one.
    let blocks = rng.random_bool(0.33);
    let (storage, db) = on_faulty_store_with(seed, page_size, log, background, budget)?;
    if blocks {
        storage.set_overlap_block(16 * page_size as u64);
    }
    storage.lie_about_syncs(lie);
    let log_pages = db.stats()?.log_pages;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.commit()?;
    // Every committed state, in order; the index of the newest known durable; states in doubt.
    let mut history: Vec<State> = vec![State::new()];
    let mut durable = 0;
    let mut in_doubt: Vec<State> = Vec::new();
    let txns = rng.random_range(1..40);
    for n in 0..txns {
        if n + 1 == txns && rng.random_bool(0.7) {
            // The cut comes in the middle of this commit.
            storage.die_after(storage.operations() + rng.random_range(0..10));
        } else if rng.random_bool(0.1) {
            storage.fail_at(storage.operations() + rng.random_range(1..8));
        }
        let mut state = history.last().cloned().unwrap_or_default();
        let mut w = db.begin_write()?;
        let immediate = rng.random_bool(0.5);
        w.set_durability(if immediate {
            Durability::Immediate
        } else {
            Durability::Eventual
        });
        // A large value is written when it is put: the error may come before the commit,
        // which then does not happen (the state is not in doubt).
        let savepoints = rng.random_bool(0.3);
        let renaming = !savepoints && rng.random_bool(0.1);
        tally.renames += usize::from(renaming);
        let filled = (|| {
            let table = if renaming { "moved" } else { "t" };
            if renaming {
                w.rename_table("t", table)?;
            }
            // (Four times as many changes under the small budget: some spill.)
            let scale = if budget.is_some() { 4 } else { 1 };
            let mut saved: Vec<(Savepoint, State)> = Vec::new();
            for _ in 0..rng.random_range(1..30) * scale {
                if savepoints && rng.random_bool(0.15) {
                    match rng.random_range(0..3) {
                        1 if !saved.is_empty() => {
                            let at = rng.random_range(0..saved.len());
                            saved.truncate(at + 1);
                            w.rollback_to(&saved[at].0)?;
                            state = saved[at].1.clone();
                            tally.savepoint_rollbacks += 1;
                        }
                        2 if !saved.is_empty() => {
                            let at = rng.random_range(0..saved.len());
                            if let Some((sp, _)) = saved.drain(at..).next() {
                                w.release(sp)?;
                            }
                        }
                        _ => match w.savepoint() {
                            Ok(sp) => saved.push((sp, state.clone())),
                            Err(Error::SavepointsTooLarge { .. }) => {}
                            Err(e) => return Err(e),
                        },
                    }
                }
                change(&mut rng, &mut state, &mut w.open_table(table)?)?;
            }
            if renaming {
                w.rename_table(table, "t")?;
            }
            Ok::<(), Error>(())
        })();
        let committing = filled.is_ok();
        match filled.and_then(|()| w.commit()) {
            Ok(()) => {
                history.push(state);
                if immediate {
                    durable = history.len() - 1;
                }
            }
            Err(_) => {
                tally.injected_errors += 1;
                if committing {
                    in_doubt.push(state);
                }
                // The database stays at its last commit.
                if !lie && contents(&db).ok().as_ref() != history.last() {
                    tally.mixed += 1;
                }
            }
        }
        if rng.random_bool(0.1) && db.sync().is_ok() {
            durable = history.len() - 1;
        }
        if rng.random_bool(0.05) {
            // Online compaction: durable steps that move pages and shrink the file, the
            // contents unchanged (a failed step leaves them so too); the cut may come in
            // one of its steps.
            if rng.random_bool(0.3) {
                storage.die_after(storage.operations() + rng.random_range(0..40));
            }
            tally.compactions += 1;
            match db.compact() {
                // (Each step is a durable commit; with nothing to move there is none.)
                Ok(report) if report.steps > 0 => durable = history.len() - 1,
                Ok(_) => {}
                Err(_) => tally.injected_errors += 1,
            }
            if !lie && contents(&db).ok().as_ref() != history.last() {
                tally.mixed += 1;
            }
        }
    }
    tally.spilled += usize::from(db.io_stats().pages_spilled > 0);
    tally.log_moves += usize::from(db.stats().is_ok_and(|s| s.log_pages != log_pages));
    let image = storage.power_cut();
    drop(db);
    tally.cuts += 1;
    // Read-only first (the image stays as the cut left it): a private copy, where the log
    // holds commits to apply.
    let read_only = open_image(&image, true).and_then(|ro| {
        tally.private_copies += usize::from(ro.is_private_copy());
        Ok((ro.is_private_copy(), contents(&ro)?))
    });
    if !lie && rng.random_bool(0.25) {
        // The same bytes as a file, opened read-only (a private map, pins, a reader that
        // follows the slots): it must show what they show in memory.
        tally.file_openings += 1;
        let from_file = read_only_from_a_file(&image);
        if from_file.as_ref().ok() != read_only.as_ref().ok() {
            eprintln!(
                "seed {seed}: read-only from a file {from_file:?}, from memory {read_only:?}"
            );
            tally.read_only_wrong += 1;
        }
    }
    let reopened = Arc::new(MemoryStorage::from_bytes(&image)?);
    let db = match Database::builder().with_storage(reopened.clone(), false, None) {
        Ok(db) => db,
        Err(e) => {
            if !lie {
                eprintln!("seed {seed}: unopenable: {e}");
                tally.unopenable += 1;
            }
            return Ok(());
        }
    };
    // The log's size asked for at creation is the file's, whatever commit the cut left.
    // (Not asked of a disk that lied: its file may hold damage that `stats` meets.)
    if !lie {
        let log_limit = db.stats().map(|s| s.log_limit_pages);
        if log_limit.as_ref().ok() != Some(&small_log.then_some(16)) {
            eprintln!("seed {seed}: the file records a log limit of {log_limit:?}");
            tally.log_limit_wrong += 1;
        }
    }
    // Opening commits only to apply the commit log; without one to apply, it may write
    // the commit it opened again, as its own durable commit.
    let replayed = db.io_stats().commits > 0;
    tally.replayed += usize::from(replayed);
    let reopened_image = reopened.to_vec();
    tally.sealed += usize::from(!replayed && reopened_image != image);
    if !lie {
        // A second cut now (the opening synced what it wrote): the same state again, not
        // the log's records applied a second time. (A disk that lied may hold damage the
        // first opening did not read, which the second may meet.)
        let second = open_image(&reopened_image, false).and_then(|again| {
            Ok(again.io_stats().commits == 0
                && contents(&again)? == contents(&db)?
                && again.check()?.is_ok())
        });
        if !matches!(second, Ok(true)) {
            eprintln!("seed {seed}: a second cut after the opening: {second:?}");
            tally.second_cut_wrong += 1;
        }
        // A power cut in the middle of that opening (after any of its first 60 writes and
        // syncs): the next opening reaches the same state.
        let during = cut_during_opening(&image, seed, rng.random_range(0..60)).and_then(|cut| {
            let again = open_image(&cut, false)?;
            Ok(contents(&again)? == contents(&db)? && again.check()?.is_ok())
        });
        if !matches!(during, Ok(true)) {
            eprintln!("seed {seed}: a cut during the opening: {during:?}");
            tally.second_cut_wrong += 1;
        }
    }
    let report = db.check()?;
    if !report.is_ok() {
        if !lie {
            eprintln!("seed {seed}: check: {:?}", report.problems);
            tally.failed_checks += 1;
        }
        return Ok(());
    }
    let allowed = if lie {
        &history[..]
    } else {
        &history[durable..]
    };
    let found = contents(&db);
    if !lie {
        // Not replaying, a read-only opening may open a newer commit whose record was not
        // yet durable (its slot and pages were), which a writable one drops: either is
        // allowed. Replaying, it does what the writable opening does, on a copy.
        let right = match (&read_only, &found) {
            (Ok((true, seen)), Ok(written)) => seen == written,
            (Ok((false, seen)), _) => allowed.contains(seen) || in_doubt.contains(seen),
            _ => false,
        };
        if !right {
            eprintln!("seed {seed}: read-only opening: {read_only:?}");
            tally.read_only_wrong += 1;
        }
    }
    match found {
        Ok(found) => {
            if allowed.contains(&found) || in_doubt.contains(&found) {
                return Ok(());
            }
            if history[..durable].contains(&found) {
                eprintln!("seed {seed}: went back before the last durable commit");
                tally.lost += 1;
            } else {
                eprintln!("seed {seed}: a state that was never committed");
                tally.mixed += 1;
            }
        }
        // A lying disk may leave damage that reads find: a clean error is allowed then.
        Err(e) if lie => drop(e),
        Err(e) => {
            eprintln!("seed {seed}: reading failed: {e}");
            tally.failed_checks += 1;
        }
    }
    Ok(())
}

/// The file a power cut leaves when it comes `ops` storage operations into an opening of
/// `image` (which the opening may not survive: that is the point).
fn cut_during_opening(image: &[u8], seed: u64, ops: u64) -> Result<Vec<u8>, Error> {
    let faulty = FaultyStorage::new(seed)?;
    faulty.resize(image.len() as u64)?;
    faulty.write(0, image)?;
    faulty.sync()?;
    faulty.die_after(faulty.operations() + ops);
    drop(Database::builder().with_storage(faulty.clone(), false, None));
    Ok(faulty.power_cut())
}

#[test]
fn power_cuts_never_lose_acknowledged_commits_nor_mix_states() -> Result<(), Error> {
    let base = seed("crash");
    let mut tally = Tally::default();
    for i in 0..scale("CAIRN_CRASH_CUTS", 300) as u64 {
        life(base.wrapping_add(i), &mut tally, false)?;
    }
    eprintln!("{tally:?}");
    assert_eq!(
        (
            tally.lost,
            tally.unopenable,
            tally.mixed,
            tally.failed_checks,
            tally.read_only_wrong,
            tally.second_cut_wrong,
            tally.log_limit_wrong
        ),
        (0, 0, 0, 0, 0, 0, 0),
        "{tally:?}"
    );
    assert!(tally.injected_errors > 0, "the test injected failures");
    assert!(tally.private_copies > 0, "some read-only openings replayed");
    assert!(
        tally.replayed > 0,
        "some cuts left commits only the log held"
    );
    assert!(
        tally.sealed > 0,
        "some openings sealed the commit they recovered"
    );
    assert!(tally.spilled > 0, "some transactions spilled pages");
    assert!(
        tally.savepoint_rollbacks > 0,
        "some transactions rolled back to savepoints"
    );
    assert!(tally.renames > 0, "some transactions renamed the table");
    Ok(())
}

#[test]
fn a_disk_that_lies_about_syncs_gives_committed_states_or_clean_errors() -> Result<(), Error> {
    let base = seed("crash_lie");
    let mut tally = Tally::default();
    for i in 0..scale("CAIRN_CRASH_CUTS", 300) as u64 / 2 {
        life(base.wrapping_add(i), &mut tally, true)?;
    }
    eprintln!("{tally:?}");
    assert_eq!(
        tally.mixed, 0,
        "never a state that was not committed: {tally:?}"
    );
    Ok(())
}
