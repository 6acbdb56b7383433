//! Gets answered from a leaf's shape (every key and value of the leaf alike, worked out by
//! the first get that reaches it: engine/src/format/shape.rs) agree with a model while
//! transactions take leaves' shapes away and give them back, and reuse the pages of
//! leaves whose shapes readers knew — also when a write transaction's descents verify the
//! rewritten leaves first, so that the gets read whatever the verified set holds for them
//! (a shape left behind by a page's earlier contents fails the test).

use std::collections::BTreeMap;

use cairn_engine::{Database, Durability, Error};
use cairn_tests::Checked;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const KEYS: u64 = 3_000;

fn key(i: u64) -> Vec<u8> {
    (i * 3).to_be_bytes().to_vec()
}

/// Every key of the model and around it, in a random order and then in key order (the
/// second goes through the read transaction's finger), agrees with the model.
fn agrees(db: &Database, model: &Model, rng: &mut StdRng) -> Result<(), Error> {
    let mut probes: Vec<Vec<u8>> = (0..KEYS * 3 + 3)
        .map(|i| i.to_be_bytes().to_vec())
        .collect();
    probes.extend(model.keys().cloned());
    probes.extend(model.keys().map(|k| [&k[..], &[0]].concat()));
    probes.extend(model.keys().map(|k| k[1..].to_vec()));
    let r = db.begin_read()?;
    let t = r.open_table("t")?;
    let mut order = probes.clone();
    order.shuffle(rng);
    probes.sort();
    for k in order.iter().chain(&probes) {
        assert_eq!(t.get(k)?, model.get(k).map(Vec::as_slice), "key {k:?}");
    }
    Ok(())
}

/// One transaction: values of other lengths, keys of other lengths, and removals, in some
/// leaves; undone in others.
fn change(db: &Database, model: &mut Model, round: u64, rng: &mut StdRng) -> Result<(), Error> {
    let mut w = db.begin_write()?;
    let mut t = w.open_table("t")?;
    for _ in 0..200 {
        let i = rng.random_range(0..KEYS);
        let k = key(i);
        let (k, v) = match rng.random_range(0..6) {
            // Back to the common shape.
            0 | 1 => (k, vec![round as u8; 100]),
            // A value of another length.
            2 => (k, vec![round as u8; 101]),
            // A longer key beside it, or its removal.
            3 => ([&k[..], &[7]].concat(), vec![round as u8; 100]),
            4 => {
                let longer = [&k[..], &[7]].concat();
                t.remove(&longer)?;
                model.remove(&longer);
                continue;
            }
            _ => {
                t.remove(&k)?;
                model.remove(&k);
                continue;
            }
        };
        t.insert(&k, &v)?;
        model.insert(k, v);
    }
    w.commit()
}

/// A write transaction's descents verify the leaves they reach without working out their
/// shapes: here, removals of absent keys reach every leaf before any get does, so the gets
/// after find the leaves verified and use whatever shape the verified set holds for them.
fn verify_by_writing(db: &Database, model: &Model) -> Result<(), Error> {
    let mut w = db.begin_write()?;
    let mut t = w.open_table("t")?;
    for k in model.keys() {
        t.remove(&[&k[..], &[0xff, 0xff]].concat())?;
    }
    w.rollback();
    Ok(())
}

fn churn(db: &Database) -> Result<(), Error> {
    let mut rng = StdRng::seed_from_u64(26);
    let mut model = Model::new();
    let mut w = db.begin_write()?;
    let mut t = w.open_table("t")?;
    for i in 0..KEYS {
        t.insert(&key(i), &[1; 100])?;
        model.insert(key(i), vec![1; 100]);
    }
    w.commit()?;
    for round in 0..40 {
        agrees(db, &model, &mut rng)?;
        change(db, &mut model, round, &mut rng)?;
        // Pages an eventual commit frees are reused once a sync made it durable.
        db.sync()?;
        if round % 2 == 0 {
            verify_by_writing(db, &model)?;
        }
    }
    agrees(db, &model, &mut rng)?;
    // The keys fill about 80 leaves of 4 KiB and each round's 200 changes rewrite most of
    // them: without reusing the pages of the leaves whose shapes the readers had worked
    // out, the 40 rounds would have taken more than 2,000 pages.
    let pages = db.stats()?.page_count;
    assert!(pages < 1_000, "pages not reused: {pages} pages");
    Ok(())
}

#[test]
fn gets_agree_with_a_model_while_leaves_change_shape() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let db = Checked(
        Database::builder()
            .durability(Durability::Eventual)
            .create(dir.path().join("shapes.cairn"))?,
    );
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.commit()?;
    churn(&db)?;
    let memory = Checked(Database::in_memory()?);
    let mut w = memory.begin_write()?;
    w.create_table("t")?;
    w.commit()?;
    churn(&memory)
}
