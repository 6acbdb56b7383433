//! The `spill` fuzz target's property: long write transactions under the smallest memory
//! budget, checked against a model.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_engine::storage::MemoryStorage;
use cairn_engine::{Database, Durability, Error};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Any bytes as operations on one table, in write transactions that hold at most 16 pages
/// of 1 KiB (`Builder::txn_memory`), so that a few dozen changes make one write pages
/// before its commit (`engine/src/commit/spill.rs`). Each three bytes `[a, b, c]` are one
/// operation on key `[a % 32, b]`: by `c % 16`, a commit (durable when `a` is odd), a
/// rollback, a removal, a removal of up to 64 keys from the key on, a get, a scan of 20
/// entries from the key, a `retain_in` over up to 64 keys from the key on (keeping the
/// values of even length), a `pop_first` (`a` even) or `pop_last`, by `b % 3` a savepoint
/// taken, rolled back to or released (the `a`-th open one, counted round), or else an
/// insert of `3 × c` bytes (some over the inline limit: overflow runs). Every read and
/// every removal's count agrees with a model, and so does the table after each rollback to
/// a savepoint; at the end the table agrees with it, the integrity check passes, and so
/// they do after reopening the file.
///
/// # Panics
/// When the database disagrees with the model or fails its check: the fuzzer's finding.
pub fn spill(data: &[u8]) {
    if let Err(e) = run(data) {
        panic!("an operation failed: {e}");
    }
}

fn run(data: &[u8]) -> Result<(), Error> {
    let storage = Arc::new(MemoryStorage::new()?);
    let open = |storage: Arc<MemoryStorage>, create| {
        Database::builder()
            .page_size(1024)
            .txn_memory(16 << 10)
            .durability(Durability::Eventual)
            .with_storage(storage, create, None)
    };
    let db = open(storage.clone(), true)?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.commit()?;
    let mut committed = Model::new();
    let mut working = Model::new();
    let mut saves: Vec<(cairn_engine::Savepoint, Model)> = Vec::new();
    let mut w = db.begin_write()?;
    for chunk in data.chunks_exact(3) {
        let [a, b, c] = [chunk[0], chunk[1], chunk[2]];
        let key = vec![a % 32, b];
        match c % 16 {
            0 => {
                if a % 2 == 1 {
                    w.set_durability(Durability::Immediate);
                }
                w.commit()?;
                committed = working.clone();
                saves.clear();
                w = db.begin_write()?;
            }
            1 => {
                w.rollback();
                working = committed.clone();
                saves.clear();
                w = db.begin_write()?;
            }
            2 => {
                let existed = w.open_table("t")?.remove(&key)?;
                assert_eq!(existed, working.remove(&key).is_some(), "remove {key:?}");
            }
            3 => {
                let end = vec![a % 32, b.saturating_add(a % 64)];
                let removed = w.open_table("t")?.remove_range(&key[..]..&end[..])?;
                let gone: Vec<Vec<u8>> = working.range(key..end).map(|(k, _)| k.clone()).collect();
                assert_eq!(removed, gone.len() as u64, "remove_range");
                for k in gone {
                    working.remove(&k);
                }
            }
            4 => {
                let t = w.open_table("t")?;
                assert_eq!(
                    t.get(&key)?,
                    working.get(&key).map(Vec::as_slice),
                    "get {key:?}"
                );
            }
            5 => {
                let t = w.open_table("t")?;
                let found = t
                    .range(&key[..]..)?
                    .take(20)
                    .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
                    .collect::<Result<Vec<_>, _>>()?;
                let expected: Vec<(Vec<u8>, Vec<u8>)> = working
                    .range(key..)
                    .take(20)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert!(found == expected, "scan");
            }
            6 => {
                // Keep, from the key on, the entries whose value has an even length.
                let end = vec![a % 32, b.saturating_add(a % 64)];
                let keep = |_: &[u8], v: &[u8]| v.len().is_multiple_of(2);
                let removed = w.open_table("t")?.retain_in(&key[..]..&end[..], keep)?;
                let gone: Vec<Vec<u8>> = working
                    .range(key..end)
                    .filter(|(k, v)| !keep(k, v))
                    .map(|(k, _)| k.clone())
                    .collect();
                assert_eq!(removed, gone.len() as u64, "retain_in");
                for k in gone {
                    working.remove(&k);
                }
            }
            7 => {
                let mut t = w.open_table("t")?;
                if a % 2 == 0 {
                    assert_eq!(t.pop_first()?, working.pop_first(), "pop_first");
                } else {
                    assert_eq!(t.pop_last()?, working.pop_last(), "pop_last");
                }
            }
            8 => savepoint(&mut w, &mut saves, &mut working, a, b)?,
            _ => {
                let value: Vec<u8> = (0..usize::from(c) * 3)
                    .map(|i| a ^ b.wrapping_add(i as u8))
                    .collect();
                w.open_table("t")?.insert(&key, &value)?;
                working.insert(key, value);
            }
        }
    }
    w.commit()?;
    agrees(&db, &working)?;
    drop(db);
    let image = MemoryStorage::from_bytes(&storage.to_vec())?;
    agrees(&open(Arc::new(image), false)?, &working)
}

/// By `b % 3`: takes a savepoint (unless the open ones hold more than the budget), or
/// rolls back to or releases the `a`-th open one (counted round).
fn savepoint(
    w: &mut cairn_engine::WriteTxn,
    saves: &mut Vec<(cairn_engine::Savepoint, Model)>,
    working: &mut Model,
    a: u8,
    b: u8,
) -> Result<(), Error> {
    let at = usize::from(a) % saves.len().max(1);
    match b % 3 {
        0 => match w.savepoint() {
            Ok(sp) => saves.push((sp, working.clone())),
            Err(Error::SavepointsTooLarge { .. }) => {}
            Err(e) => return Err(e),
        },
        1 if !saves.is_empty() => {
            saves.truncate(at + 1);
            w.rollback_to(&saves[at].0)?;
            *working = saves[at].1.clone();
            let t = w.open_table("t")?;
            let found = t
                .iter()?
                .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
                .collect::<Result<Model, _>>()?;
            assert!(
                found == *working,
                "the table after a rollback to a savepoint"
            );
        }
        2 if !saves.is_empty() => {
            if let Some((sp, _)) = saves.drain(at..).next() {
                w.release(sp)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Whether the table holds exactly `model`'s entries and the file passes its check.
fn agrees(db: &Database, model: &Model) -> Result<(), Error> {
    assert!(
        crate::entries(db, "t")? == *model,
        "the table differs from the model"
    );
    let report = db.check()?;
    assert!(report.is_ok(), "{:?}", report.problems);
    Ok(())
}
