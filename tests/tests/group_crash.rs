//! Power cuts during group commits: threads commit batches (`Database::commit_batch`, the
//! path the shell's statements take outside a transaction) on a fault-injecting store until
//! the process dies (in a quarter of the lives with online compaction beside them), then
//! the file as a power cut leaves it is opened.
//!
//! Every cut must open and pass `check()`; every batch acknowledged as durable must be
//! there whole, with every batch its thread committed before it; no batch may be there in
//! part. The same holds opened read-only (a quarter of the cuts also from a file, which
//! must show what the bytes show in memory), and after a second cut right after an
//! opening that applied the commit log.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_engine::storage::MemoryStorage;
use cairn_engine::{Batch, Database, Durability, Error};
use cairn_tests::{on_faulty_store_with, open_image, scale, seed};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const THREADS: usize = 4;

/// A table's entries, in key order.
type Rows = BTreeMap<Vec<u8>, Vec<u8>>;

/// A batch one thread committed: its keys and values, and whether it was durable.
#[derive(Debug, Clone)]
struct Sent {
    thread: usize,
    number: usize,
    changes: Vec<(Vec<u8>, Vec<u8>)>,
    durable: bool,
}

/// Keys of several lengths that share long prefixes (the thread's, the batch's).
fn key(thread: usize, number: usize, part: usize) -> Vec<u8> {
    match part % 3 {
        0 => format!("t{thread}/b{number}/{part}").into_bytes(),
        1 => format!("t{thread}/batch/{number:06}/part{part}").into_bytes(),
        _ => {
            let mut k = vec![thread as u8];
            k.extend_from_slice(&(number as u64).to_be_bytes());
            k.push(part as u8);
            k
        }
    }
}

fn value(rng: &mut SmallRng) -> Vec<u8> {
    let len = if rng.random_bool(0.05) {
        rng.random_range(1500..5000)
    } else {
        rng.random_range(0..120)
    };
    vec![rng.random::<u8>(); len]
}

/// One thread's batches until the store dies (three fail in a row): the batches
/// acknowledged, in order, and those that failed (in doubt: each may be there after the
/// cut, but whole).
fn commit_until_dead(db: &Database, thread: usize, seed: u64) -> (Vec<Sent>, Vec<Sent>) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut sent, mut failed) = (Vec::new(), Vec::new());
    let mut failed_in_a_row = 0;
    for number in 0.. {
        let durable = rng.random_bool(0.8);
        let changes: Vec<_> = (0..rng.random_range(1..4))
            .map(|part| (key(thread, number, part), value(&mut rng)))
            .collect();
        let mut b = Batch::new();
        for (k, v) in &changes {
            b.put("t", k, v);
        }
        b.set_durability(if durable {
            Durability::Immediate
        } else {
            Durability::Eventual
        });
        let batch = Sent {
            thread,
            number,
            changes,
            durable,
        };
        if db.commit_batch(b).is_ok() {
            sent.push(batch);
            failed_in_a_row = 0;
        } else {
            failed.push(batch);
            failed_in_a_row += 1;
            if failed_in_a_row == 3 {
                break;
            }
        }
    }
    (sent, failed)
}

/// What one life did and found.
#[derive(Debug, Default)]
struct Tally {
    lives: usize,
    /// Lives with a problem, and batches acknowledged as durable.
    failed: usize,
    durable_batches: usize,
    /// Batches in doubt that the cut kept.
    in_doubt_kept: usize,
    /// Online compactions that committed a step beside the group commits.
    compactions: usize,
    /// Cuts also opened read-only from a file.
    file_openings: usize,
}

/// `image` written to a file and opened read-only from there: whether a private copy, and
/// what it holds.
fn read_only_from_a_file(image: &[u8]) -> Result<(bool, Rows), Error> {
    let (_dir, db) = cairn_tests::open_file_image(image)?;
    Ok((db.is_private_copy(), table(&db)?))
}

/// One life: threads commit batches until the process dies, then a power cut. Returns
/// the problems found (none is the only pass).
fn life(seed: u64, tally: &mut Tally) -> Result<Vec<String>, Error> {
    let mut rng = SmallRng::seed_from_u64(seed);
    // Half the lives get the smallest log, a quarter the default page size (4 KiB).
    let small_log = rng.random_bool(0.5);
    let page_size = if rng.random_bool(0.25) { 4096 } else { 1024 };
    let log = small_log.then_some(16 * page_size as u64);
    // A quarter of the lives sync Eventual batches in the background, often.
    let background = rng.random_bool(0.25).then_some(Duration::from_micros(200));
    let (storage, db) = on_faulty_store_with(seed, page_size, log, background, None)?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.set_durability(Durability::Immediate);
    w.commit()?;
    let now = storage.operations();
    let death = now + rng.random_range(5..400);
    storage.die_after(death);
    if rng.random_bool(0.5) {
        // One operation fails before: its group fails, and the threads go on.
        storage.fail_at(rng.random_range(now + 1..death));
    }
    let outcomes = Mutex::new((Vec::new(), Vec::new()));
    // A quarter of the lives compact online beside the batches, until the threads are
    // done (its steps move the pages the batches' commits write, and shrink the file).
    let compacting = rng.random_bool(0.25);
    let done = AtomicUsize::new(0);
    let compactions = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for thread in 0..THREADS {
            let (db, outcomes, done) = (&db, &outcomes, &done);
            let seed = rng.random();
            s.spawn(move || {
                let (sent, failed) = commit_until_dead(db, thread, seed);
                let mut o = outcomes.lock().unwrap_or_else(|e| e.into_inner());
                o.0.extend(sent);
                o.1.extend(failed);
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        if compacting {
            let (db, done, compactions) = (&db, &done, &compactions);
            s.spawn(move || {
                while done.load(Ordering::SeqCst) < THREADS {
                    if db.compact().is_ok_and(|r| r.steps > 0) {
                        compactions.fetch_add(1, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_micros(50));
                }
            });
        }
    });
    tally.compactions += compactions.into_inner();
    let (sent, in_doubt) = outcomes.into_inner().unwrap_or_else(|e| e.into_inner());
    tally.durable_batches += sent.iter().filter(|b| b.durable).count();
    let image = storage.power_cut();
    drop(db);
    let reopened = Arc::new(MemoryStorage::from_bytes(&image)?);
    let db = match Database::builder().with_storage(reopened.clone(), false, None) {
        Ok(db) => db,
        Err(e) => return Ok(vec![format!("unopenable: {e}")]),
    };
    let report = db.check()?;
    if !report.is_ok() {
        return Ok(vec![format!("check: {:?}", report.problems)]);
    }
    let found = table(&db)?;
    // Read-only (a private copy where the log holds commits), and after a second cut right
    // after an opening that applied the log: what this opening found.
    // (Not applying the log, a read-only opening may open a newer commit whose record was
    // not yet durable, which a writable one drops: it is judged as the cut's state is.)
    let mut wrong = Vec::new();
    let read_only = open_image(&image, true).and_then(|ro| Ok((ro.is_private_copy(), table(&ro)?)));
    if rng.random_bool(0.25) {
        // The same bytes as a file, opened read-only: what they show in memory.
        tally.file_openings += 1;
        let from_file = read_only_from_a_file(&image);
        if from_file.as_ref().ok() != read_only.as_ref().ok() {
            wrong.push(format!(
                "read-only from a file {from_file:?}, from memory {read_only:?}"
            ));
        }
    }
    match read_only {
        Ok((true, seen)) if seen == found => {}
        Ok((false, seen)) => wrong.extend(
            problems(&sent, &in_doubt, &seen)
                .into_iter()
                .map(|p| format!("read-only: {p}")),
        ),
        other => wrong.push(format!("read-only opening: {other:?}")),
    }
    if db.io_stats().commits > 0 {
        // (Without applying the records again: a create or drop of a table among them
        // would not apply twice.)
        let again = open_image(&reopened.to_vec(), false)
            .and_then(|again| Ok((again.io_stats().commits, table(&again)?)));
        match again {
            Ok((0, again)) if again == found => {}
            other => wrong.push(format!("a second cut after the replay: {other:?}")),
        }
    }
    if !wrong.is_empty() {
        return Ok(wrong);
    }
    let kept = |b: &&Sent| b.changes.iter().any(|(k, v)| found.get(k) == Some(v));
    tally.in_doubt_kept += in_doubt.iter().filter(kept).count();
    Ok(problems(&sent, &in_doubt, &found))
}

/// Table `t` of `db`.
fn table(db: &Database) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, Error> {
    let r = db.begin_read()?;
    let t = r.open_table("t")?;
    t.iter()?
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect()
}

/// What `found` (the table after the cut) gets wrong about the batches `sent` and those
/// `in_doubt`.
fn problems(sent: &[Sent], in_doubt: &[Sent], found: &BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<String> {
    let mut problems = Vec::new();
    // The newest durable batch acknowledged to each thread: it and every batch the thread
    // committed before it (but those that failed) must be there.
    let mut durable_up_to = [None; THREADS];
    for b in sent.iter().filter(|b| b.durable) {
        let n = &mut durable_up_to[b.thread];
        *n = (*n).max(Some(b.number));
    }
    for (b, acknowledged) in sent
        .iter()
        .map(|b| (b, true))
        .chain(in_doubt.iter().map(|b| (b, false)))
    {
        let there = b
            .changes
            .iter()
            .filter(|(k, v)| found.get(k) == Some(v))
            .count();
        if there != 0 && there != b.changes.len() {
            problems.push(format!(
                "thread {} batch {}: {there} of {} changes",
                b.thread,
                b.number,
                b.changes.len()
            ));
        }
        if acknowledged
            && durable_up_to[b.thread].is_some_and(|n| b.number <= n)
            && there != b.changes.len()
        {
            problems.push(format!(
                "thread {} batch {}: lost (durable up to {:?})",
                b.thread, b.number, durable_up_to[b.thread]
            ));
        }
    }
    let put: usize = sent.iter().chain(in_doubt).map(|b| b.changes.len()).sum();
    if found.len() > put {
        problems.push(format!("{} keys no batch put", found.len() - put));
    }
    problems
}

#[test]
fn power_cuts_during_group_commits_lose_no_acknowledged_batch_and_split_none() -> Result<(), Error>
{
    let base = seed("group_crash");
    let mut tally = Tally::default();
    for i in 0..scale("CAIRN_GROUP_CUTS", 150) as u64 {
        let problems = life(base.wrapping_add(i), &mut tally)?;
        tally.lives += 1;
        if !problems.is_empty() {
            tally.failed += 1;
            eprintln!("seed {}: {problems:?}", base.wrapping_add(i));
        }
    }
    eprintln!("{tally:?}");
    assert_eq!(
        tally.failed, 0,
        "lives that lost or split batches: {tally:?}"
    );
    assert!(
        tally.durable_batches > tally.lives,
        "the threads committed before the cuts: {tally:?}"
    );
    Ok(())
}
