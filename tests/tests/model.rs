//! Random operations on several tables, checked against a `BTreeMap` model: inserts,
//! removes (of keys, of ranges, by a rule on key and value, of the first or last entry),
//! gets, ranges both ways, commits, rollbacks, savepoints (taken, rolled back to and
//! released, nested), table drops, online compaction and reopening the file, with the
//! integrity check clean after every reopen; a read-only handle on the file follows the
//! commits and must show them.

use std::collections::BTreeMap;
use std::ops::Bound;

use cairn_engine::{Database, Durability, Error, Savepoint, WriteTxn};
use cairn_tests::{Checked, scale, seed};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

const TABLES: [&str; 3] = ["alpha", "beta", "gamma"];

fn key(rng: &mut SmallRng, max: usize) -> Vec<u8> {
    match rng.random_range(0..13) {
        0 => Vec::new(),
        1 => (0..max).map(|_| rng.random()).collect(),
        2 => (0..rng.random_range(0..=max))
            .map(|_| rng.random())
            .collect(),
        // Integers as the language stores them (8 big-endian bytes): keys of one length
        // sharing most of their bytes, the leaves that keep a prefix and take a shape.
        10..=12 => rng.random_range(0u64..3000).to_be_bytes().to_vec(),
        // Short keys from a small alphabet, so that keys collide and ranges hit.
        _ => (0..rng.random_range(1..4))
            .map(|_| b'a' + rng.random_range(0..6))
            .collect(),
    }
}

fn value(rng: &mut SmallRng) -> Vec<u8> {
    let len = match rng.random_range(0..100) {
        0 => rng.random_range(0..=1 << 20),
        1..=5 => rng.random_range(0..20_000),
        // One length, the other half of a leaf's shape.
        6..=40 => 8,
        _ => rng.random_range(0..64),
    };
    let byte: u8 = rng.random();
    (0..len).map(|i| byte.wrapping_add(i as u8)).collect()
}

fn bound(rng: &mut SmallRng, max: usize) -> Bound<Vec<u8>> {
    match rng.random_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(key(rng, max)),
        _ => Bound::Excluded(key(rng, max)),
    }
}

/// Whether `BTreeMap::range` takes these bounds (it panics on a range that ends before
/// it starts, where the engine finds nothing).
fn valid(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    match (lo, hi) {
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a < b || (a == b && matches!((lo, hi), (Bound::Included(_), Bound::Included(_))))
        }
        _ => true,
    }
}

/// The keys of `m` in `lo..hi` that `keep` rejects (none for bounds `BTreeMap::range`
/// refuses).
fn rejected(
    m: &BTreeMap<Vec<u8>, Vec<u8>>,
    lo: &Bound<Vec<u8>>,
    hi: &Bound<Vec<u8>>,
    keep: impl Fn(&[u8], &[u8]) -> bool,
) -> Vec<Vec<u8>> {
    if !valid(lo, hi) {
        return Vec::new();
    }
    m.range::<Vec<u8>, _>((lo.clone(), hi.clone()))
        .filter(|(k, v)| !keep(k, v))
        .map(|(k, _)| k.clone())
        .collect()
}

fn open(path: &std::path::Path, page_size: usize, txn_memory: Option<usize>) -> Checked {
    let mut builder = Database::builder()
        .page_size(page_size)
        .durability(Durability::Eventual);
    if let Some(bytes) = txn_memory {
        builder = builder.txn_memory(bytes);
    }
    let db = builder.create(path).unwrap_or_else(|e| panic!("open: {e}"));
    let report = db.check().unwrap_or_else(|e| panic!("check: {e}"));
    assert!(report.is_ok(), "after open: {:?}", report.problems);
    Checked(db)
}

fn assert_matches(db: &Database, model: &Model) -> Result<(), Error> {
    let r = db.begin_read()?;
    let listed: Vec<(String, u64)> = r
        .list_tables()?
        .into_iter()
        .map(|t| (t.name, t.len))
        .collect();
    let expected: Vec<(String, u64)> = model
        .iter()
        .map(|(n, m)| (n.clone(), m.len() as u64))
        .collect();
    assert_eq!(listed, expected);
    for (name, m) in model {
        let t = r.open_table(name)?;
        let all: Vec<(Vec<u8>, Vec<u8>)> = t
            .iter()?
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<_, _>>()?;
        let want: Vec<(Vec<u8>, Vec<u8>)> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert!(all == want, "table {name} differs from the model");
    }
    Ok(())
}

/// Whether the write transaction sees what `model` holds.
fn assert_txn_matches(txn: &mut WriteTxn, model: &Model, step: usize) -> Result<(), Error> {
    let listed: Vec<String> = txn.list_tables()?.into_iter().map(|t| t.name).collect();
    assert!(
        listed.iter().eq(model.keys()),
        "step {step}: tables {listed:?}"
    );
    for (name, m) in model {
        let t = txn.open_table(name)?;
        assert_eq!(t.len(), m.len() as u64, "step {step}: {name}");
        let all: Vec<(Vec<u8>, Vec<u8>)> = t
            .iter()?
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<_, _>>()?;
        assert!(
            all.iter().map(|(k, v)| (k, v)).eq(m.iter()),
            "step {step}: table {name} differs from the model"
        );
    }
    Ok(())
}

/// A savepoint operation: take one, roll back to one, or release one (and the later ones),
/// with `saves` the open savepoints and the model at each; now and then a stale one is
/// refused.
fn savepoint_op(
    rng: &mut SmallRng,
    txn: &mut WriteTxn,
    working: &mut Model,
    saves: &mut Vec<(Savepoint, Model)>,
    stale: &mut Option<Savepoint>,
    step: usize,
) -> Result<(), Error> {
    if let Some(old) = stale.take_if(|_| rng.random_bool(0.2)) {
        assert!(
            matches!(txn.rollback_to(&old), Err(Error::NoSuchSavepoint)),
            "step {step}: a stale savepoint"
        );
    }
    let roll = rng.random_range(0..3);
    if roll == 0 || saves.is_empty() {
        match txn.savepoint() {
            Ok(sp) => saves.push((sp, working.clone())),
            // The savepoints' copies past the transaction's budget (the spilling run's is
            // small): the transaction goes on without a new one.
            Err(Error::SavepointsTooLarge { .. }) if !saves.is_empty() => {}
            Err(e) => return Err(e),
        }
        return Ok(());
    }
    match roll {
        1 => {
            let at = rng.random_range(0..saves.len());
            *stale = saves
                .drain(at + 1..)
                .next()
                .map(|(sp, _)| sp)
                .or(stale.take());
            txn.rollback_to(&saves[at].0)?;
            *working = saves[at].1.clone();
            assert_txn_matches(txn, working, step)?;
        }
        _ => {
            let at = rng.random_range(0..saves.len());
            let mut later = saves.drain(at..).map(|(sp, _)| sp);
            if let Some(sp) = later.next() {
                txn.release(sp)?;
            }
            *stale = later.next().or(stale.take());
        }
    }
    assert_eq!(txn.savepoints(), saves.len(), "step {step}");
    Ok(())
}

/// Runs `ops` random operations. With `txn_memory`, transactions are long (a hundredth
/// as many commits, rollbacks, reopens and table drops) and spill pages past that
/// budget; returns how many pages they spilled, and how many compactions moved pages.
fn run(
    seed: u64,
    ops: usize,
    page_size: usize,
    txn_memory: Option<usize>,
) -> Result<(u64, usize), Error> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("model.cairn");
    let open = |path: &std::path::Path, page_size| open(path, page_size, txn_memory);
    let mut db = open(&path, page_size);
    // A read-only handle on the same file, following the writer's commits as a reader in
    // another process does: every commit it is asked about, it shows.
    let follower = Database::builder().read_only(true).open(&path)?;
    let (mut spilled, mut compactions) = (0, 0);
    let max = db.max_key_len();
    let mut committed: Model = BTreeMap::new();
    let mut txn = db.begin_write()?;
    let mut working = committed.clone();
    let (mut saves, mut stale) = (Vec::new(), None);
    for step in 0..ops {
        let name = TABLES[rng.random_range(0..TABLES.len())];
        if rng.random_ratio(1, 25) {
            savepoint_op(
                &mut rng,
                &mut txn,
                &mut working,
                &mut saves,
                &mut stale,
                step,
            )?;
            continue;
        }
        let mut op = rng.random_range(0..100);
        let ends = op >= 75 || ((70..=74).contains(&op) && working.contains_key(name));
        if txn_memory.is_some() && ends && rng.random_bool(0.99) {
            op = rng.random_range(0..70);
        }
        match op {
            0..=34 => {
                let (mut k, v) = (key(&mut rng, max), value(&mut rng));
                if let Some(m) = working.get_mut(name) {
                    // Often a key after every key (a run of them goes through the table's
                    // last leaf without descending the tree).
                    if let Some(last) = m.last_key_value().map(|(k, _)| k.clone())
                        && last.len() < max
                        && rng.random_bool(0.4)
                    {
                        k = last;
                        k.push(rng.random());
                    }
                    let existed = txn.open_table(name)?.insert(&k, &v)?;
                    assert_eq!(existed, m.insert(k, v).is_some(), "step {step}");
                } else {
                    assert!(matches!(txn.open_table(name), Err(Error::TableNotFound(_))));
                }
            }
            35..=49 => {
                if let Some(m) = working.get_mut(name)
                    && rng.random_bool(0.1)
                {
                    let (lo, hi) = (bound(&mut rng, max), bound(&mut rng, max));
                    let gone = rejected(m, &lo, &hi, |_, _| false);
                    let removed = txn
                        .open_table(name)?
                        .remove_range::<[u8], _>((as_ref(&lo), as_ref(&hi)))?;
                    assert_eq!(removed, gone.len() as u64, "step {step}: {lo:?}..{hi:?}");
                    for k in gone {
                        m.remove(&k);
                    }
                } else if let Some(m) = working.get_mut(name)
                    && rng.random_bool(0.1)
                {
                    // Keep what a rule on key and value keeps, in a range.
                    let (lo, hi) = (bound(&mut rng, max), bound(&mut rng, max));
                    let modulus = rng.random_range(1..4);
                    let keep = |k: &[u8], v: &[u8]| {
                        !(k.len() + usize::from(v.first().copied().unwrap_or(0)))
                            .is_multiple_of(modulus)
                    };
                    let gone = rejected(m, &lo, &hi, keep);
                    let removed = txn
                        .open_table(name)?
                        .retain_in::<[u8], _>((as_ref(&lo), as_ref(&hi)), keep)?;
                    assert_eq!(
                        removed,
                        gone.len() as u64,
                        "step {step}: retain {lo:?}..{hi:?}"
                    );
                    for k in gone {
                        m.remove(&k);
                    }
                } else if let Some(m) = working.get_mut(name)
                    && rng.random_bool(0.1)
                {
                    let mut t = txn.open_table(name)?;
                    if rng.random_bool(0.5) {
                        assert_eq!(t.pop_first()?, m.pop_first(), "step {step}");
                    } else {
                        assert_eq!(t.pop_last()?, m.pop_last(), "step {step}");
                    }
                } else if let Some(m) = working.get_mut(name) {
                    // Remove an existing key most of the time.
                    let k = match m.keys().nth(rng.random_range(0..m.len().max(1))) {
                        Some(k) if rng.random_bool(0.8) => k.clone(),
                        _ => key(&mut rng, max),
                    };
                    let existed = txn.open_table(name)?.remove(&k)?;
                    assert_eq!(existed, m.remove(&k).is_some(), "step {step}");
                }
            }
            50..=59 => {
                if let Some(m) = working.get(name) {
                    let k = key(&mut rng, max);
                    let t = txn.open_table(name)?;
                    assert_eq!(t.get(&k)?, m.get(&k).map(|v| &v[..]), "step {step}");
                    assert_eq!(t.len(), m.len() as u64);
                }
            }
            60..=69 => {
                if let Some(m) = working.get(name) {
                    let (lo, hi) = (bound(&mut rng, max), bound(&mut rng, max));
                    let reverse = rng.random_bool(0.5);
                    let limit = rng.random_range(0..50);
                    let t = txn.open_table(name)?;
                    let got: Vec<(Vec<u8>, Vec<u8>)> = {
                        let r = t.range::<[u8], _>((as_ref(&lo), as_ref(&hi)))?;
                        let items: Box<dyn Iterator<Item = _>> = if reverse {
                            Box::new(r.rev())
                        } else {
                            Box::new(r)
                        };
                        items
                            .take(limit)
                            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
                            .collect::<Result<_, _>>()?
                    };
                    let want: Vec<(Vec<u8>, Vec<u8>)> = if !valid(&lo, &hi) {
                        Vec::new()
                    } else {
                        let r = m.range::<Vec<u8>, _>((lo.clone(), hi.clone()));
                        let items: Box<dyn Iterator<Item = _>> = if reverse {
                            Box::new(r.rev())
                        } else {
                            Box::new(r)
                        };
                        items
                            .take(limit)
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect()
                    };
                    assert!(
                        got == want,
                        "step {step}: range {lo:?}..{hi:?} rev={reverse}"
                    );
                    if let Some((k, _)) = m.first_key_value() {
                        assert_eq!(t.first()?.map(|(k, _)| k.to_vec()), Some(k.clone()));
                    }
                    if let Some((k, _)) = m.last_key_value() {
                        assert_eq!(t.last()?.map(|(k, _)| k.to_vec()), Some(k.clone()));
                    }
                }
            }
            70..=74 => {
                let other = TABLES[rng.random_range(0..TABLES.len())];
                if working.contains_key(name) && rng.random_bool(0.3) {
                    // A rename moves the table, entries and all; onto a name in use, or
                    // its own, it changes nothing.
                    match txn.rename_table(name, other) {
                        Err(Error::TableExists(_)) => assert!(working.contains_key(other)),
                        Err(e) => return Err(e),
                        Ok(()) => {
                            let entries = working.remove(name).unwrap_or_default();
                            assert!(working.insert(other.to_owned(), entries).is_none());
                        }
                    }
                } else if working.contains_key(name) {
                    if rng.random_bool(0.3) {
                        txn.drop_table(name)?;
                        working.remove(name);
                    }
                } else {
                    txn.create_table(name)?;
                    working.insert(name.to_owned(), BTreeMap::new());
                }
            }
            75..=87 => {
                if rng.random_bool(0.5) {
                    txn.set_durability(Durability::Immediate);
                }
                txn.commit()?;
                committed = working.clone();
                if rng.random_bool(0.2) {
                    assert_matches(&follower, &committed)?;
                }
                if rng.random_bool(0.1) {
                    // Online compaction moves and merges nodes, which the next
                    // transactions then change: nothing may read differently.
                    compactions += usize::from(db.compact()?.steps > 0);
                    assert_matches(&db, &committed)?;
                }
                txn = db.begin_write()?;
                saves.clear();
            }
            88..=93 => {
                txn.rollback();
                working = committed.clone();
                txn = db.begin_write()?;
                saves.clear();
            }
            _ => {
                // Reopen: the open transaction is rolled back when dropped.
                drop(txn);
                saves.clear();
                working = committed.clone();
                spilled += db.io_stats().pages_spilled;
                drop(db);
                db = open(&path, page_size);
                assert_matches(&db, &committed)?;
                assert_matches(&follower, &committed)?;
                txn = db.begin_write()?;
            }
        }
    }
    txn.commit()?;
    assert_matches(&db, &working)?;
    spilled += db.io_stats().pages_spilled;
    drop(db);
    let db = open(&path, page_size);
    assert_matches(&db, &working)?;
    Ok((spilled, compactions))
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

#[test]
fn random_operations_match_a_btreemap() -> Result<(), Error> {
    let seed = seed("model");
    let ops = scale("CAIRN_MODEL_OPS", 3000);
    let mut compactions = 0;
    for (i, page_size) in [1024, 4096, 16384].into_iter().enumerate() {
        compactions += run(seed.wrapping_add(i as u64), ops, page_size, None)?.1;
    }
    eprintln!("{compactions} online compactions moved pages");
    assert!(compactions > 0, "no compaction moved a page");
    Ok(())
}

/// Long transactions under the smallest budget (16 pages): they write leaves and branches
/// before their commit, read them back, change them again, remove them, roll them back.
#[test]
fn long_spilling_transactions_match_a_btreemap() -> Result<(), Error> {
    let seed = seed("model_spill");
    // Four times as many operations as the other test: with 4 KiB pages, 3,000 left some
    // seeds' trees too small to pass a 16-page budget.
    // Some seeds' trees still stay under the budget with 4 KiB pages (seed
    // 1795855970936552026, fifty-seventh session): such a run checks nothing about spilling,
    // so the next seeds are drawn until one spills, a few at most.
    let ops = 4 * scale("CAIRN_MODEL_OPS", 3000);
    for (i, page_size) in [1024, 4096].into_iter().enumerate() {
        let mut spilled = 0;
        for draw in 0..4u64 {
            let seed = seed.wrapping_add(i as u64).wrapping_add(draw << 32);
            spilled = run(seed, ops, page_size, Some(16 * page_size))?.0;
            eprintln!("page size {page_size}, draw {draw}: {spilled} pages spilled");
            if spilled > 0 {
                break;
            }
        }
        assert!(
            spilled > 0,
            "page size {page_size}: nothing spilled in four draws"
        );
    }
    Ok(())
}
