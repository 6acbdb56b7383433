//! Freed pages are reused: with no long reader, update/delete cycles stop growing the
//! file; with one, nothing it can see is overwritten, and reuse resumes when it ends.

use cairn_engine::{Database, Durability, Error};
use cairn_tests::Checked;

fn churn(db: &Database, round: u32) -> Result<(), Error> {
    let mut w = db.begin_write()?;
    let mut t = w.open_table("t")?;
    for i in 0u32..500 {
        if (i + round).is_multiple_of(4) {
            t.remove(&i.to_be_bytes())?;
        } else {
            t.insert(&i.to_be_bytes(), &[round as u8; 100])?;
        }
    }
    // An overflow value rewritten every round, to reuse runs as well as pages.
    t.insert(b"big", &vec![round as u8; 20_000])?;
    w.commit()
}

/// A database in memory whose table `t` had one round of churn.
fn churned_once() -> Result<Checked, Error> {
    let db = Checked(Database::in_memory()?);
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.commit()?;
    churn(&db, 0)?;
    Ok(db)
}

fn file_size(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

#[test]
fn churn_without_readers_stops_growing_the_file() -> Result<(), Error> {
    for durability in [Durability::Immediate, Durability::Eventual] {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("reuse.cairn");
        let db = Checked(Database::builder().durability(durability).create(&path)?);
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        for round in 0..50 {
            churn(&db, round)?;
            if durability == Durability::Eventual && round % 10 == 0 {
                db.sync()?;
            }
        }
        let pages_after_warmup = db.stats()?.page_count;
        for round in 50..300 {
            churn(&db, round)?;
            if durability == Durability::Eventual && round % 10 == 0 {
                db.sync()?;
            }
        }
        let stats = db.stats()?;
        assert!(
            stats.page_count <= pages_after_warmup + 8,
            "{durability:?}: file kept growing: {pages_after_warmup} -> {} pages",
            stats.page_count
        );
        assert!(stats.free_pages > 0);
        assert!(file_size(&path) <= stats.page_count * 4096 * 2);
    }
    Ok(())
}

#[test]
fn a_long_reader_pins_its_pages_and_reuse_resumes_after_it() -> Result<(), Error> {
    let db = churned_once()?;
    let reader = db.begin_read()?;
    let seen: Vec<(Vec<u8>, Vec<u8>)> = reader
        .open_table("t")?
        .iter()?
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()?;
    let pages_before = db.stats()?.page_count;
    for round in 1..60 {
        churn(&db, round)?;
    }
    let pages_pinned = db.stats()?.page_count;
    assert!(
        pages_pinned > pages_before,
        "a long reader makes the file grow"
    );
    let still: Vec<(Vec<u8>, Vec<u8>)> = reader
        .open_table("t")?
        .iter()?
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()?;
    assert!(still == seen, "pages the reader sees were overwritten");
    drop(reader);
    for round in 60..200 {
        churn(&db, round)?;
    }
    assert!(
        db.stats()?.page_count <= pages_pinned + 8,
        "reuse resumes once the reader is gone"
    );
    Ok(())
}

/// Past 64 at once, read transactions register under the state lock instead of in a
/// slot of their own (`reader_slots.rs`); either way they pin what they see.
#[test]
fn readers_past_the_slots_pin_their_pages_too() -> Result<(), Error> {
    let db = churned_once()?;
    let contents = |r: &cairn_engine::ReadTxn| -> Result<Vec<Vec<u8>>, Error> {
        r.open_table("t")?
            .iter()?
            .map(|e| e.map(|(k, v)| [k, v].concat()))
            .collect()
    };
    let first = db.begin_read()?;
    let others = (0..98)
        .map(|_| db.begin_read())
        .collect::<Result<Vec<_>, _>>()?;
    let last = db.begin_read()?;
    drop(others);
    let seen = contents(&last)?;
    assert_eq!(contents(&first)?, seen);
    for round in 1..40 {
        churn(&db, round)?;
    }
    assert!(
        contents(&first)? == seen,
        "a reader in a slot lost its pages"
    );
    drop(first);
    for round in 40..80 {
        churn(&db, round)?;
    }
    assert!(
        contents(&last)? == seen,
        "a reader under the lock lost its pages"
    );
    Ok(())
}

#[test]
fn stats_name_the_oldest_reader_and_the_pages_it_pins() -> Result<(), Error> {
    let db = churned_once()?;
    assert_eq!(db.stats()?.oldest_reader_txid, None);
    let reader = db.begin_read()?;
    for round in 1..10 {
        churn(&db, round)?;
    }
    let s = db.stats()?;
    assert_eq!(s.oldest_reader_txid, Some(reader.txid()));
    assert!(s.oldest_reader_age.is_some());
    assert!(
        s.pages_pinned_by_readers > 10,
        "{}",
        s.pages_pinned_by_readers
    );
    drop(reader);
    churn(&db, 10)?;
    let s = db.stats()?;
    assert_eq!((s.oldest_reader_txid, s.pages_pinned_by_readers), (None, 0));
    Ok(())
}

#[test]
fn deleting_most_of_a_database_makes_its_file_smaller() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("shrink.cairn");
    let db = Checked(Database::create(&path)?);
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    let mut t = w.open_table("t")?;
    for i in 0u32..50_000 {
        t.insert(&i.to_be_bytes(), &[7; 100])?;
    }
    w.commit()?;
    let full = file_size(&path);
    // Delete the newest 90% of the keys, then go on working a little.
    for chunk in (5_000u32..50_000).collect::<Vec<_>>().chunks(5_000) {
        let mut w = db.begin_write()?;
        let mut t = w.open_table("t")?;
        for i in chunk {
            t.remove(&i.to_be_bytes())?;
        }
        w.commit()?;
    }
    for i in 0u32..20 {
        let mut w = db.begin_write()?;
        w.open_table("t")?.insert(&i.to_be_bytes(), &[8; 100])?;
        w.commit()?;
    }
    let small = file_size(&path);
    // The commit log's fixed pages apart, and the free pages below it: the load's grown
    // log starts at a block of the page cache (2 MiB), skipping fewer pages than a
    // block's, which the kept keys partly fill (docs/design.md#commit-log).
    let log = db.stats()?.log_pages * 4096;
    let pages = db.pages()?;
    let log_start = pages
        .iter()
        .find(|p| p.kind == "log")
        .map_or(u64::MAX, |p| p.page);
    let free_below = pages
        .iter()
        .filter(|p| p.page < log_start && (p.kind == "free" || p.kind == "unused"))
        .count() as u64;
    assert!(free_below < 512, "{free_below} free pages below the log");
    assert!(
        (small - log - free_below * 4096) * 3 < full - log,
        "the file shrank from {full} to {small} bytes, {log} of them the commit log, \
         {free_below} pages free below it"
    );
    assert_eq!(db.begin_read()?.open_table("t")?.len(), 5_000);
    drop(db);
    let reopened = Checked(Database::open(&path)?);
    assert_eq!(reopened.begin_read()?.open_table("t")?.len(), 5_000);
    Ok(())
}

#[test]
fn a_growing_file_is_not_cut_back_after_each_growth() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("grow.cairn");
    let db = Database::builder()
        .durability(Durability::Immediate)
        .create(&path)?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    let mut t = w.open_table("t")?;
    for i in 0u32..2_000 {
        t.insert(&i.to_be_bytes(), &[1; 1000])?;
    }
    w.commit()?;
    // Durable appends: the file grows by steps, and a step is not given back by the next
    // commit (which would make every few commits grow, sync and cut the file again).
    let mut sizes = vec![file_size(&path)];
    for i in 2_000u32..2_300 {
        let mut w = db.begin_write()?;
        w.open_table("t")?.insert(&i.to_be_bytes(), &[2; 1000])?;
        w.commit()?;
        sizes.push(file_size(&path));
    }
    assert!(
        sizes.windows(2).all(|w| w[0] <= w[1]),
        "appending shrank the file: {sizes:?}"
    );
    sizes.dedup();
    assert!(
        sizes.len() <= 3,
        "grew {} times: {sizes:?}",
        sizes.len() - 1
    );
    Ok(())
}

/// Pages freed since the file's last sync wait for the next one, at most eight for each
/// page of the commit log (and half the file): a database made with a smaller log keeps
/// fewer of them, and its file stays smaller.
#[test]
fn a_smaller_log_keeps_fewer_freed_pages_waiting() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let mut most_waiting = Vec::new();
    for log_pages in [64u64, 512] {
        let path = dir.path().join(format!("log{log_pages}.cairn"));
        let db = Checked(
            Database::builder()
                .log_size(log_pages * 4096)
                .create(&path)?,
        );
        let mut w = db.begin_write()?;
        let mut t = w.open_or_create_table("t")?;
        for i in 0u64..100_000 {
            t.insert(&i.to_be_bytes(), &[1; 100])?;
        }
        w.commit()?;
        // Durable commits of two scattered keys each: small records, which a small log
        // holds hundreds of, each freeing a few pages.
        let mut most = 0;
        for c in 0u64..1_500 {
            let mut w = db.begin_write()?;
            let mut t = w.open_table("t")?;
            for j in 0..2 {
                let key = (c * 7_919 + j * 50_021) % 100_000;
                t.insert(&key.to_be_bytes(), &[2; 100])?;
            }
            w.commit()?;
            if c % 10 == 9 {
                most = most.max(db.stats()?.free_pages);
            }
        }
        most_waiting.push(most);
        // The waiting pages are the ones freed since the file's last sync, which frees
        // them all. (`sync` does not sync the file when the log holds the last commit;
        // `check` does, to write the free set the log's commits keep in memory.)
        assert!(db.stats()?.pages_awaiting_sync > 0);
        db.sync()?;
        assert!(db.stats()?.pages_awaiting_sync > 0);
        assert!(db.check()?.is_ok());
        let synced = db.stats()?;
        assert_eq!(synced.pages_awaiting_sync, 0, "{synced:?}");
        assert!(synced.free_pages > 0);
    }
    let [small, large] = most_waiting[..] else {
        unreachable!()
    };
    assert!(small <= 8 * 64 + 32, "{most_waiting:?}");
    assert!(large > 2 * small, "{most_waiting:?}");
    Ok(())
}

/// A read-only handle's `check`, `stats` and page map read a snapshot they pin, the
/// newest: the one the handle saw when it opened (or last read) is not pinned, and a writer
/// reuses its pages. (They used it, unpinned, until the thirty-ninth session: `cairn check`
/// beside a busy writer reported checksum mismatches that were not there.)
#[test]
fn a_read_only_handles_check_and_page_map_read_a_pinned_snapshot() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("busy.cairn");
    let writer = Database::create(&path)?;
    let mut w = writer.begin_write()?;
    w.create_table("t")?;
    w.commit()?;
    churn(&writer, 0)?;
    writer.sync()?;
    let reader = Database::builder().read_only(true).open(&path)?;
    // The writer goes on; nothing pins the snapshot the reader opened at.
    for round in 1..40 {
        churn(&writer, round)?;
        writer.sync()?;
    }
    let report = reader.check()?;
    assert!(report.is_ok(), "{:?}", report.problems);
    assert!(reader.stats()?.entries > 0);
    let pages = reader.pages()?;
    assert!(pages.iter().any(|p| p.kind == "leaf" && p.owner == "t"));
    let leaf = pages.iter().find(|p| p.kind == "leaf").map(|p| p.page);
    if let Some(leaf) = leaf {
        reader.page(leaf)?;
    }
    Ok(())
}

/// Eventual commits that do not log, with no background sync, let at most 4,096 freed
/// pages wait for a sync (until the forty-fifth session 1,024): past that one syncs, so
/// that the file does not grow without end.
#[test]
fn unlogged_eventual_commits_sync_once_4096_pages_wait() -> Result<(), Error> {
    let db = Database::builder()
        .page_size(1024)
        .log_size(0)
        .eventual_sync(None)
        .with_storage(
            std::sync::Arc::new(cairn_engine::storage::MemoryStorage::new()?),
            true,
            None,
        )?;
    // About 7,000 full leaves, more than the bound, so that random updates free more.
    let keys = 120_000u32;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    for i in 0..keys {
        w.open_table("t")?.insert(&i.to_be_bytes(), &[1; 40])?;
    }
    w.commit()?;
    let syncs = db.io_stats().syncs;
    let (mut most, mut x) = (0, 0x2545_f491_4f6c_dd1du64);
    for n in 0..10_000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut w = db.begin_write()?;
        w.set_durability(Durability::Eventual);
        w.open_table("t")?
            .insert(&((x % u64::from(keys)) as u32).to_be_bytes(), &[2; 40])?;
        w.commit()?;
        if n % 100 == 0 {
            let waiting = db.stats()?.pages_awaiting_sync;
            // (The commit past the bound syncs; the one before it may free a few more.)
            assert!(waiting <= 4096 + 16, "{waiting} waited");
            most = most.max(waiting);
        }
    }
    assert!(db.io_stats().syncs > syncs, "no commit synced");
    assert!(most > 2048, "at most {most} waited");
    Ok(())
}
