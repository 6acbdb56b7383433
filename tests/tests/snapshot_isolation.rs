//! Readers on other threads keep seeing exactly their snapshot while a writer commits
//! hundreds of transactions that insert, overwrite and remove the keys they read (also
//! when those transactions write pages before their commit, past their memory budget).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use cairn_engine::{Database, Durability, Error, ReadTxn};
use cairn_tests::{Checked, scale};

fn contents(r: &ReadTxn) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, Error> {
    r.open_table("t")?
        .iter()?
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect()
}

#[test]
fn readers_see_their_snapshot_while_a_writer_commits() -> Result<(), Error> {
    readers_see_their_snapshot(None)
}

/// The same with the smallest transaction memory budget (16 pages): each transaction
/// writes pages before its commit, which must never be pages a reader's snapshot holds.
#[test]
fn readers_see_their_snapshot_while_a_writer_spills() -> Result<(), Error> {
    readers_see_their_snapshot(Some(16 << 10))
}

fn readers_see_their_snapshot(txn_memory: Option<usize>) -> Result<(), Error> {
    let commits = scale("CAIRN_SNAPSHOT_COMMITS", 300);
    let mut builder = Database::builder()
        .durability(Durability::Eventual)
        .page_size(1024);
    if let Some(bytes) = txn_memory {
        builder = builder.txn_memory(bytes);
    }
    let db = Checked(builder.in_memory()?);
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.commit()?;

    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(5));
    let mut readers = Vec::new();
    for id in 0..4 {
        let (db, stop, start) = (db.0.clone(), stop.clone(), start.clone());
        readers.push(std::thread::spawn(move || -> Result<usize, Error> {
            start.wait();
            let mut checked = 0;
            while !stop.load(Ordering::Relaxed) {
                let r = db.begin_read()?;
                let first = contents(&r)?;
                // Every commit writes one generation to all keys: a snapshot holds one.
                let generations: std::collections::BTreeSet<&[u8]> =
                    first.values().map(|v| &v[..8]).collect();
                assert!(generations.len() <= 1, "reader {id} saw a mix of commits");
                for _ in 0..3 {
                    std::thread::yield_now();
                    assert!(contents(&r)? == first, "reader {id}: snapshot changed");
                    let t = r.open_table("t")?;
                    for (k, v) in &first {
                        assert_eq!(t.get(k)?, Some(&v[..]));
                    }
                }
                checked += 1;
            }
            Ok(checked)
        }));
    }
    start.wait();
    for generation in 0..commits as u64 {
        let mut w = db.begin_write()?;
        let mut t = w.open_table("t")?;
        // Rewrite every key with this generation; drop and add some keys each time.
        let n = 200 + (generation % 50);
        for i in 0..n {
            let mut value = generation.to_be_bytes().to_vec();
            value.resize(8 + (i as usize * 7) % 300, b'x');
            t.insert(&i.to_be_bytes(), &value)?;
        }
        for i in n..260 {
            t.remove(&i.to_be_bytes())?;
        }
        w.commit()?;
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        let checked = r.join().map_err(|_| Error::ReadOnly)??;
        assert!(checked > 0, "every reader checked at least one snapshot");
    }
    assert_eq!(
        db.io_stats().pages_spilled > 0,
        txn_memory.is_some(),
        "transactions spill under the small budget only"
    );
    Ok(())
}

#[test]
fn a_snapshot_outlives_many_commits_unchanged() -> Result<(), Error> {
    let db = Checked(Database::builder().page_size(1024).in_memory()?);
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    let mut t = w.open_table("t")?;
    for i in 0u32..2000 {
        t.insert(&i.to_be_bytes(), &[1; 40])?;
    }
    w.commit()?;
    let old = db.begin_read()?;
    let before = contents(&old)?;
    for round in 0u8..50 {
        let mut w = db.begin_write()?;
        let mut t = w.open_table("t")?;
        for i in 0u32..2000 {
            if i % 3 == 0 {
                t.remove(&i.to_be_bytes())?;
            } else {
                t.insert(&i.to_be_bytes(), &[round; 40])?;
            }
        }
        w.commit()?;
    }
    assert!(contents(&old)? == before);
    assert_eq!(old.open_table("t")?.len(), 2000);
    assert_eq!(db.begin_read()?.open_table("t")?.len(), 1333);
    Ok(())
}
