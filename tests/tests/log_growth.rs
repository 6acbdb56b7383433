//! The commit log starts small and moves to a larger run of pages when a cycle of durable
//! commits fills it (docs/design.md#commit-log): a new file stays small, a busy one gets
//! the log it needs, and a power cut around a move loses no acknowledged commit.

use cairn_engine::storage::FaultyStorage;
use cairn_engine::{Database, Error};
use cairn_tests::{Checked, on_faulty_store, open_image, seed};
use rand::{Rng, SeedableRng, rngs::SmallRng};

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

/// Creates table `t`.
fn create_table(db: &Database) -> Result<(), Error> {
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.commit()
}

/// Commits `n` durable single puts of keys `from..from + n`.
fn durable_puts(db: &Database, from: u32, n: u32) -> Result<(), Error> {
    for i in from..from + n {
        let mut w = db.begin_write()?;
        w.open_table("t")?.insert(&key(i), &[i as u8; 40])?;
        w.commit()?;
    }
    Ok(())
}

/// The pages of the log, from the page map.
fn log_run(db: &Database) -> Result<Vec<u64>, Error> {
    Ok(db
        .pages()?
        .into_iter()
        .filter(|p| p.kind == "log")
        .map(|p| p.page)
        .collect())
}

#[test]
fn a_new_file_is_small_and_its_log_doubles_as_durable_commits_fill_it() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("small.cairn");
    let db = Checked(Database::create(&path)?);
    create_table(&db)?;
    durable_puts(&db, 0, 1)?;
    let size = std::fs::metadata(&path)?.len();
    assert!(
        size <= 160 << 10,
        "a file holding one key takes {size} bytes"
    );
    assert_eq!(db.stats()?.log_pages, 16);

    // 4 KiB pages of 8 units: a single-put record takes one, so the 16-page log holds 128
    // of a cycle's records, the next 256, and so on; 2 MiB (512 pages) at most.
    let mut sizes = vec![16];
    for round in 0..40u32 {
        durable_puts(&db, 1 + round * 200, 200)?;
        let pages = db.stats()?.log_pages;
        if sizes.last() != Some(&pages) {
            sizes.push(pages);
        }
    }
    assert_eq!(
        sizes,
        [16, 32, 64, 128, 256, 512],
        "the log's sizes, in order"
    );
    // The runs left behind are free, and the lowest are reused: the first log's pages
    // hold tree pages now (`Checked` makes sure that no page leaked).
    let first_log: Vec<_> = db
        .pages()?
        .into_iter()
        .filter(|p| (2..18).contains(&p.page))
        .collect();
    assert!(
        first_log
            .iter()
            .any(|p| p.kind == "leaf" || p.kind == "branch"),
        "{first_log:?}"
    );
    drop(db);

    // Reopened, the log is where the last slot says, and goes on serving.
    let db = Checked(Database::open(&path)?);
    assert_eq!(db.stats()?.log_pages, 512);
    durable_puts(&db, 10_000, 300)?;
    assert_eq!(db.begin_read()?.open_table("t")?.len(), 8_301);
    assert_eq!(log_run(&db)?.len(), 512);
    Ok(())
}

#[test]
fn a_transaction_too_large_for_the_log_grows_it_whole_at_its_sync() -> Result<(), Error> {
    let (storage, db) = on_faulty_store(1)?;
    create_table(&db)?;
    let start = db.stats()?.log_pages;
    // Pages of 1 KiB: the 64 KiB log is 64 pages; 2 MiB is 2,048.
    assert_eq!(start, 64);
    let mut w = db.begin_write()?;
    for i in 0..2_000 {
        w.open_table("t")?.insert(&key(i), &[1u8; 60])?;
    }
    w.commit()?;
    assert_eq!(db.stats()?.log_pages, 2048);
    assert!(db.check()?.is_ok());
    // The next durable commits log into the new run: a power cut that loses every page
    // they wrote leaves their records, which opening replays.
    durable_puts(&db, 5_000, 50)?;
    let image = storage.power_cut();
    drop(db);
    let db = Checked(open_image(&image, false)?);
    assert!(db.io_stats().commits > 0, "opening replayed the records");
    assert_eq!(db.begin_read()?.open_table("t")?.len(), 2_050);
    assert_eq!(db.stats()?.log_pages, 2048);
    Ok(())
}

#[test]
fn a_size_asked_for_is_what_the_log_grows_to_and_it_never_shrinks() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("asked.cairn");
    let db = Checked(Database::builder().log_size(128 << 10).create(&path)?);
    assert_eq!(db.stats()?.log_pages, 32);
    create_table(&db)?;
    durable_puts(&db, 0, 600)?;
    assert_eq!(db.stats()?.log_pages, 32, "a size asked for is the most");
    drop(db);
    let db = Checked(Database::builder().log_size(256 << 10).open(&path)?);
    durable_puts(&db, 1_000, 600)?;
    assert_eq!(
        db.stats()?.log_pages,
        64,
        "reopened asking for more, it grows"
    );
    drop(db);
    let db = Checked(Database::builder().log_size(64 << 10).open(&path)?);
    durable_puts(&db, 2_000, 600)?;
    assert_eq!(db.stats()?.log_pages, 64, "asking for less shrinks nothing");
    assert_eq!(db.begin_read()?.open_table("t")?.len(), 1_800);
    drop(db);
    // Over the limit is refused for an existing file too, before anything is written.
    let before = std::fs::read(&path)?;
    let err = Database::builder().log_size((64 << 20) + 1).open(&path);
    assert!(matches!(err, Err(Error::InvalidLogSize(_))), "{err:?}");
    assert_eq!(std::fs::read(&path)?, before);

    // A file made without a log never gets one.
    let none = dir.path().join("none.cairn");
    let db = Checked(Database::builder().log_size(0).create(&none)?);
    create_table(&db)?;
    drop(db);
    let db = Checked(Database::open(&none)?);
    durable_puts(&db, 0, 200)?;
    assert_eq!(db.stats()?.log_pages, 0);
    Ok(())
}

#[test]
fn the_size_asked_for_is_kept_by_the_file_its_compaction_and_its_backups() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let (path, copy) = (dir.path().join("kept.cairn"), dir.path().join("copy.cairn"));
    drop(Checked(
        Database::builder().log_size(128 << 10).create(&path)?,
    ));
    // Opened without a size, the file's own is the most: single puts and a transaction
    // that outgrows the log (which takes a log to its most at once) leave it at 32 pages.
    let db = Checked(Database::open(&path)?);
    assert_eq!(
        db.stats()?.log_limit_pages,
        Some(32),
        "recorded at creation"
    );
    create_table(&db)?;
    durable_puts(&db, 0, 600)?;
    let mut w = db.begin_write()?;
    for i in 1_000..3_000 {
        w.open_table("t")?.insert(&key(i), &[2u8; 60])?;
    }
    w.commit()?;
    assert_eq!(db.stats()?.log_pages, 32);
    // A backup's log is the size asked for, and its file records it.
    db.backup(&copy)?;
    drop(db);
    let copied = Checked(Database::open(&copy)?);
    assert_eq!(copied.stats()?.log_pages, 32);
    assert_eq!(copied.stats()?.log_limit_pages, Some(32));
    durable_puts(&copied, 5_000, 600)?;
    assert_eq!(copied.stats()?.log_pages, 32);
    drop(copied);
    // A size asked for at a later opening replaces it, from that opening's first commit.
    let db = Checked(Database::builder().log_size(256 << 10).open(&path)?);
    durable_puts(&db, 10_000, 1)?;
    assert_eq!(db.stats()?.log_limit_pages, Some(64));
    drop(db);
    let db = Checked(Database::open(&path)?);
    durable_puts(&db, 20_000, 600)?;
    assert_eq!(db.stats()?.log_pages, 64);
    assert_eq!(db.begin_read()?.open_table("t")?.len(), 3_201);
    // Compaction makes a log larger than a new file's the size a new file would get: the
    // one asked for (the first 16 pages of a new file's are for a file at the default).
    let mut w = db.begin_write()?;
    w.open_table("t")?
        .remove_range(&key(1_000)[..]..&key(3_000)[..])?;
    w.commit()?;
    db.compact()?;
    assert_eq!(log_run(&db)?.len(), 64);
    // A file left at the default records none, and grows to 2 MiB.
    let default = dir.path().join("default.cairn");
    let db = Checked(Database::create(&default)?);
    create_table(&db)?;
    assert_eq!(db.stats()?.log_limit_pages, None);
    Ok(())
}

#[test]
fn compaction_moves_a_grown_log_down_and_makes_it_small_again() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("compact.cairn");
    let db = Checked(Database::create(&path)?);
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    for i in 0..20_000 {
        w.open_table("t")?.insert(&key(i), &[3u8; 60])?;
    }
    w.commit()?;
    // The load outgrew the log: it moved past the loaded pages, to the file's end.
    assert_eq!(db.stats()?.log_pages, 512);
    let mut w = db.begin_write()?;
    for i in (0..20_000).filter(|i| i % 10 != 0) {
        w.open_table("t")?.remove(&key(i))?;
    }
    w.commit()?;
    let before = std::fs::metadata(&path)?.len();
    db.compact()?;
    let after = std::fs::metadata(&path)?.len();
    let log = log_run(&db)?;
    assert_eq!(log.len(), 16, "a new file's log again");
    let stats = db.stats()?;
    assert!(
        log.iter().all(|&p| p < stats.page_count),
        "the log lies within the file"
    );
    assert!(after * 4 < before, "{before} -> {after} bytes");
    assert_eq!(db.begin_read()?.open_table("t")?.len(), 2_000);
    // And grows again with use (128 single-put records fill 16 pages).
    durable_puts(&db, 30_000, 300)?;
    assert_eq!(db.stats()?.log_pages, 32);
    drop(db);
    let db = Checked(Database::open(&path)?);
    assert_eq!(db.begin_read()?.open_table("t")?.len(), 2_300);
    Ok(())
}

/// Operations of the store at the end of each commit of a life of durable single puts,
/// and the commits after which the log had moved.
fn life(
    storage: &FaultyStorage,
    db: &Database,
    commits: u32,
) -> Result<(Vec<u64>, Vec<u32>), Error> {
    let (mut ends, mut moves) = (Vec::new(), Vec::new());
    let mut pages = db.stats()?.log_pages;
    for i in 0..commits {
        durable_puts(db, i, 1)?;
        ends.push(storage.operations());
        let now = db.stats()?.log_pages;
        if now != pages {
            moves.push(i);
            pages = now;
        }
    }
    Ok((ends, moves))
}

/// A store with table `t`, its page cache in blocks of `block` bytes (a sector when
/// `None`).
fn started(
    seed: u64,
    block: Option<u64>,
) -> Result<(std::sync::Arc<FaultyStorage>, Database), Error> {
    let (storage, db) = on_faulty_store(seed)?;
    if let Some(bytes) = block {
        storage.set_overlap_block(bytes);
    }
    create_table(&db)?;
    Ok((storage, db))
}

#[test]
fn a_power_cut_during_or_after_a_move_of_the_log_keeps_every_acknowledged_commit()
-> Result<(), Error> {
    cuts_around_moves(None)
}

/// As above, with the page cache in blocks of 32 pages: each moved log (64 pages and
/// more) starts at a block, skipping pages past the file's end that become free.
#[test]
fn a_power_cut_around_a_move_to_a_block_keeps_every_acknowledged_commit() -> Result<(), Error> {
    cuts_around_moves(Some(32 * 1024))
}

/// Power cuts during and right after each move of the log in a thousand durable single
/// puts (`block`: the page cache's, as for [`started`]).
fn cuts_around_moves(block: Option<u64>) -> Result<(), Error> {
    let seed = seed("log_growth");
    let mut rng = SmallRng::seed_from_u64(seed);
    const COMMITS: u32 = 1_000;
    let (storage, db) = started(seed, block)?;
    let (ends, moves) = life(&storage, &db, COMMITS)?;
    // 64 pages of two units, then 128 and 256: three moves in a thousand commits.
    assert_eq!(moves.len(), 3, "moves after commits {moves:?}");
    if let Some(bytes) = block {
        let first = log_run(&db)?.first().copied().unwrap_or(0);
        assert_eq!(first % (bytes / 1024), 0, "the log at page {first}");
    }
    drop(db);
    let mut cuts = 0;
    for &m in &moves {
        // The store dies at some operation of the moving commit (or of the one after).
        let first = ends[m as usize - 1];
        let last = ends[m as usize + 1];
        for _ in 0..20 {
            let die = rng.random_range(first..=last);
            let (storage, db) = started(seed, block)?;
            storage.die_after(die);
            let mut acknowledged = 0;
            for i in 0..COMMITS {
                if durable_puts(&db, i, 1).is_err() {
                    break;
                }
                acknowledged = i + 1;
            }
            let image = storage.power_cut();
            drop(db);
            let db = Checked(open_image(&image, false)?);
            let r = db.begin_read()?;
            let t = r.open_table("t")?;
            let found = t.len() as u32;
            let t = &t;
            assert!(
                (acknowledged..=acknowledged + 1).contains(&found),
                "seed {seed}, died after operation {die}: {acknowledged} acknowledged, {found} found"
            );
            for i in 0..found {
                assert_eq!(
                    t.get(&key(i))?,
                    Some(&[i as u8; 40][..]),
                    "seed {seed}, died after operation {die}: key {i}"
                );
            }
            cuts += 1;
        }
    }
    assert_eq!(cuts, 60);
    Ok(())
}

/// A commit that would move the log fails (here its first write; a full disk, most
/// likely, since the larger run needs more of it): the database stays at the last commit,
/// the log where it was, and it stops growing until the database is opened again, so
/// that the next commits sync as they would have without the move.
#[test]
fn a_failed_move_leaves_the_log_where_it_was_until_the_next_opening() -> Result<(), Error> {
    let (storage, db) = started(7, None)?;
    let (ends, moves) = life(&storage, &db, 300)?;
    let Some(&m) = moves.first() else {
        panic!("no move in 300 commits");
    };
    drop(db);
    let (storage, db) = started(7, None)?;
    let start = db.stats()?.log_pages;
    durable_puts(&db, 0, m)?;
    storage.fail_at(ends[m as usize - 1] + 1);
    assert!(durable_puts(&db, m, 1).is_err(), "the moving commit fails");
    assert_eq!(db.begin_read()?.open_table("t")?.len(), u64::from(m));
    durable_puts(&db, m, 300)?;
    assert_eq!(db.stats()?.log_pages, start, "no move after a failed one");
    assert!(db.check()?.is_ok());
    drop(db);
    let db = Checked(
        Database::builder()
            .page_size(1024)
            .with_storage(storage, false, None)?,
    );
    durable_puts(&db, 1_000, 300)?;
    assert!(db.stats()?.log_pages > start, "opened again, the log grows");
    assert_eq!(db.begin_read()?.open_table("t")?.len(), u64::from(m) + 600);
    Ok(())
}

/// A backup (and `cairn compact SRC DST`, which is one) gets a new file's log, whatever
/// the source's grew to: the copy is dense. (Until the forty-third session it got its
/// source's log, 2 MiB of zeros in a copy of a few keys.)
#[test]
fn a_backup_starts_with_a_new_files_log() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let (path, copy) = (dir.path().join("src.cairn"), dir.path().join("copy.cairn"));
    let db = Checked(Database::create(&path)?);
    create_table(&db)?;
    let mut w = db.begin_write()?;
    for i in 0..2_000 {
        w.open_table("t")?.insert(&key(i), &[5u8; 60])?;
    }
    w.commit()?;
    assert_eq!(db.stats()?.log_pages, 512, "the load grew the source's log");
    assert_eq!(db.backup(&copy)?, 2_000);
    let copied = Checked(Database::open(&copy)?);
    assert_eq!(copied.stats()?.log_pages, 16);
    assert!(
        std::fs::metadata(&copy)?.len() < 1 << 20,
        "{} bytes",
        std::fs::metadata(&copy)?.len()
    );
    assert_eq!(copied.begin_read()?.open_table("t")?.len(), 2_000);
    Ok(())
}

/// Durable transactions of 10,000 random updates of 100-byte values (records of about
/// 1.1 MB, more than half the 2 MiB default: a cycle holds one, and every other commit
/// synced; their pages, every leaf of the table, four times that and more) grow the log
/// past the default, to hold four of them, after which commits log; a size asked for holds
/// the log to it. The log of a file of a backup is a new file's again.
#[test]
fn large_records_grow_a_default_log_past_its_size() -> Result<(), Error> {
    const KEYS: u32 = 40_000;
    let dir = tempfile::tempdir()?;
    let mut rng = SmallRng::seed_from_u64(seed("large_records_grow_a_default_log_past_its_size"));
    for asked in [None, Some(2u64 << 20)] {
        let path = dir.path().join(format!("large-{asked:?}.cairn"));
        let builder = Database::builder().durability(cairn_engine::Durability::Eventual);
        let builder = match asked {
            Some(bytes) => builder.log_size(bytes),
            None => builder,
        };
        let db = Checked(builder.create(&path)?);
        create_table(&db)?;
        let mut w = db.begin_write()?;
        for i in 0..KEYS {
            w.open_table("t")?.insert(&key(i), &[0u8; 100])?;
        }
        w.commit()?;
        db.sync()?;
        let mut logged_after_growth = 0;
        for round in 1..=8u8 {
            let (before, grown) = (db.io_stats().file_syncs, db.stats()?.log_pages > 512);
            let mut w = db.begin_write()?;
            w.set_durability(cairn_engine::Durability::Immediate);
            for _ in 0..10_000 {
                let k = rng.random_range(0..KEYS);
                w.open_table("t")?.insert(&key(k), &[round; 100])?;
            }
            w.commit()?;
            if grown && db.io_stats().file_syncs == before {
                logged_after_growth += 1;
            }
        }
        let pages = db.stats()?.log_pages;
        match asked {
            None => {
                // Four records of ~1.1 MB: about 1,090 pages of 4 KiB.
                assert!((1_000..=1_200).contains(&pages), "{pages} pages");
                assert!(
                    logged_after_growth >= 1,
                    "no commit logged in the grown log"
                );
            }
            Some(_) => assert_eq!(pages, 512),
        }
        assert_eq!(db.begin_read()?.open_table("t")?.len(), u64::from(KEYS));
        let copy = dir.path().join(format!("copy-{asked:?}.cairn"));
        db.backup(&copy)?;
        let copied = Database::open(&copy)?;
        let copy_pages = if asked.is_some() { 512 } else { 16 };
        assert_eq!(copied.stats()?.log_pages, copy_pages);
        drop((db, copied));
        // Reopened (after a clean close), the log stays as it grew.
        let db = Checked(Database::open(&path)?);
        assert_eq!(db.stats()?.log_pages, pages);
        assert!(db.check()?.is_ok());
    }
    Ok(())
}

/// Rounds of 9,800 random updates of 100-byte values (records of about 1.1 MB, more than
/// half of the 2 MiB log; pages of 1 KiB, four times that and more) of a table of 40,000
/// keys, each round one durable transaction, on a store that dies at an operation of the
/// commit that grows the log past 2 MiB for them, or of the one after: the file opens
/// with every acknowledged round, and the dying one whole or not at all.
#[test]
fn a_power_cut_around_a_move_for_large_records_keeps_every_acknowledged_commit() -> Result<(), Error>
{
    const KEYS: u32 = 40_000;
    const UPDATES: usize = 9_800;
    const VALUE: usize = 100;
    const ROUNDS: u8 = 6;
    let seed = seed("log_growth_large_records");
    let rounds: Vec<Vec<u32>> = {
        let mut rng = SmallRng::seed_from_u64(seed);
        (0..ROUNDS)
            .map(|_| (0..UPDATES).map(|_| rng.random_range(0..KEYS)).collect())
            .collect()
    };
    // The value of each key after `done` rounds.
    let model = |done: usize| -> Vec<u8> {
        let mut values = vec![0u8; KEYS as usize];
        for (round, keys) in rounds.iter().take(done).enumerate() {
            for &k in keys {
                values[k as usize] = round as u8 + 1;
            }
        }
        values
    };
    /// A life of the rounds: the store, the database, the rounds acknowledged, the store's
    /// operations at the end of each, and the log's pages after each.
    struct Life {
        storage: std::sync::Arc<FaultyStorage>,
        db: Database,
        done: usize,
        ends: Vec<u64>,
        pages: Vec<u64>,
    }
    // Runs the rounds until the store fails (after operation `die`).
    let run = |die: Option<u64>| -> Result<Life, Error> {
        let (storage, db) = started(seed, None)?;
        let mut w = db.begin_write()?;
        for k in 0..KEYS {
            w.open_table("t")?.insert(&key(k), &[0u8; VALUE])?;
        }
        w.commit()?;
        if let Some(die) = die {
            storage.die_after(die);
        }
        let (mut done, mut ends, mut pages) = (0, Vec::new(), Vec::new());
        for (round, keys) in rounds.iter().enumerate() {
            let committed = (|| {
                let mut w = db.begin_write()?;
                for &k in keys {
                    w.open_table("t")?
                        .insert(&key(k), &[round as u8 + 1; VALUE])?;
                }
                w.commit()
            })();
            if committed.is_err() {
                break;
            }
            done += 1;
            ends.push(storage.operations());
            pages.push(db.stats()?.log_pages);
        }
        Ok(Life {
            storage,
            db,
            done,
            ends,
            pages,
        })
    };
    let Life {
        db,
        done,
        ends,
        pages,
        ..
    } = run(None)?;
    drop(db);
    assert_eq!(done, ROUNDS as usize);
    let Some(m) = pages.iter().position(|&p| p > 2048) else {
        panic!("seed {seed}: the log never grew past 2 MiB: {pages:?}");
    };
    assert!(m >= 1, "seed {seed}: {pages:?}");
    let mut rng = SmallRng::seed_from_u64(seed ^ 1);
    for _ in 0..10 {
        // The store dies at some operation of the moving commit (or of the one after).
        let die = rng.random_range(ends[m - 1]..=ends[(m + 1).min(ends.len() - 1)]);
        let Life {
            storage,
            db,
            done: acknowledged,
            ..
        } = run(Some(die))?;
        let image = storage.power_cut();
        drop(db);
        let db = Checked(open_image(&image, false)?);
        let r = db.begin_read()?;
        let t = r.open_table("t")?;
        assert_eq!(
            t.len(),
            u64::from(KEYS),
            "seed {seed}, died after operation {die}"
        );
        let mut found = vec![0u8; KEYS as usize];
        for entry in t.iter()? {
            let (k, v) = entry?;
            let k = u32::from_be_bytes(
                k.try_into()
                    .map_err(|_| Error::Io(std::io::Error::other("key")))?,
            );
            // A value of one round, whole (else a mark no model holds).
            found[k as usize] = if v.len() == VALUE && v.iter().all(|&b| b == v[0]) {
                v[0]
            } else {
                u8::MAX
            };
        }
        assert!(
            found == model(acknowledged) || found == model(acknowledged + 1),
            "seed {seed}, died after operation {die}: {acknowledged} rounds acknowledged, \
             the file holds neither them nor one more"
        );
    }
    Ok(())
}
