//! One writer moves value between accounts (the total never changes) while readers, some
//! holding their snapshot for a long time, check the total and compare whole scans with
//! the state the writer recorded for their snapshot's transaction id.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_engine::{Database, Durability, Error};
use cairn_tests::{Checked, scale, seed};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const ACCOUNTS: u64 = 500;
const TOTAL: u64 = ACCOUNTS * 1000;

type Snapshot = BTreeMap<Vec<u8>, Vec<u8>>;

fn scan(r: &cairn_engine::ReadTxn) -> Result<Snapshot, Error> {
    r.open_table("accounts")?
        .iter()?
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect()
}

fn balance(v: &[u8]) -> u64 {
    u64::from_be_bytes(v.try_into().unwrap_or_default())
}

#[test]
fn readers_never_see_the_invariant_broken_nor_a_state_not_committed() -> Result<(), Error> {
    let millis = scale("CAIRN_CONCURRENCY_MS", 1500) as u64;
    let db = Checked(
        Database::builder()
            .durability(Durability::Eventual)
            .page_size(1024)
            .in_memory()?,
    );
    // The state of every commit, by transaction id, for the readers to compare with.
    let states: Arc<Mutex<HashMap<u64, Snapshot>>> = Arc::new(Mutex::new(HashMap::new()));
    let mut w = db.begin_write()?;
    w.create_table("accounts")?;
    {
        let mut t = w.open_table("accounts")?;
        for a in 0..ACCOUNTS {
            t.insert(&a.to_be_bytes(), &1000u64.to_be_bytes())?;
        }
    }
    w.commit()?;
    {
        let r = db.begin_read()?;
        states
            .lock()
            .map_err(|_| Error::ReadOnly)?
            .insert(r.txid(), scan(&r)?);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for id in 0..3u64 {
        let (db, stop, states) = (db.0.clone(), stop.clone(), states.clone());
        readers.push(std::thread::spawn(move || -> Result<u64, Error> {
            let mut checked = 0;
            while !stop.load(Ordering::Relaxed) {
                let r = db.begin_read()?;
                let seen = scan(&r)?;
                let total: u64 = seen.values().map(|v| balance(v)).sum();
                assert_eq!(
                    total,
                    TOTAL,
                    "reader {id}: the invariant broke at txid {}",
                    r.txid()
                );
                let expected = states
                    .lock()
                    .map_err(|_| Error::ReadOnly)?
                    .get(&r.txid())
                    .cloned();
                assert!(
                    expected.as_ref() == Some(&seen),
                    "reader {id}: txid {} differs from its commit",
                    r.txid()
                );
                if id == 0 {
                    // A long reader: hold the snapshot a while, then check it is unchanged.
                    std::thread::sleep(Duration::from_millis(200));
                    assert!(scan(&r)? == seen, "a long reader's snapshot changed");
                }
                checked += 1;
            }
            Ok(checked)
        }));
    }
    let mut rng = SmallRng::seed_from_u64(seed("concurrency"));
    let mut model: Snapshot = states
        .lock()
        .map_err(|_| Error::ReadOnly)?
        .values()
        .next()
        .cloned()
        .unwrap_or_default();
    let started = Instant::now();
    let mut commits = 0u64;
    while started.elapsed() < Duration::from_millis(millis) {
        let mut w = db.begin_write()?;
        let txid = w.txid();
        {
            let mut t = w.open_table("accounts")?;
            for _ in 0..rng.random_range(1..10) {
                let (from, to) = (rng.random_range(0..ACCOUNTS), rng.random_range(0..ACCOUNTS));
                let a = balance(t.get(&from.to_be_bytes())?.unwrap_or_default());
                let amount = rng.random_range(0..=a);
                t.insert(&from.to_be_bytes(), &(a - amount).to_be_bytes())?;
                let b = balance(t.get(&to.to_be_bytes())?.unwrap_or_default());
                t.insert(&to.to_be_bytes(), &(b + amount).to_be_bytes())?;
                model.insert(
                    from.to_be_bytes().to_vec(),
                    (a - amount).to_be_bytes().to_vec(),
                );
                model.insert(
                    to.to_be_bytes().to_vec(),
                    (b + amount).to_be_bytes().to_vec(),
                );
            }
        }
        // Recorded before the commit is visible, so that a reader always finds its state.
        states
            .lock()
            .map_err(|_| Error::ReadOnly)?
            .insert(txid, model.clone());
        w.commit()?;
        commits += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let mut checked = 0;
    for r in readers {
        checked += r.join().map_err(|_| Error::ReadOnly)??;
    }
    let stats = db.stats()?;
    eprintln!(
        "{commits} commits, {checked} snapshots checked in {millis} ms, 0 violations; {} pages",
        stats.page_count
    );
    assert!(commits > 50 && checked > 10);
    // With no long reader left, churn does not grow the file without bound.
    let before = db.stats()?.page_count;
    for i in 0..300u64 {
        let mut w = db.begin_write()?;
        w.open_table("accounts")?
            .insert(&(i % ACCOUNTS).to_be_bytes(), &1000u64.to_be_bytes())?;
        w.commit()?;
        if i % 50 == 0 {
            db.sync()?;
        }
    }
    assert!(
        db.stats()?.page_count <= before + 64,
        "bounded: {before} -> {}",
        db.stats()?.page_count
    );
    Ok(())
}
