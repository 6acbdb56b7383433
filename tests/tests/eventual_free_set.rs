//! An Eventual commit that does not log (its cycle of the commit log is full) writes no
//! freelist either: its free set is every page its trees do not use. A writer killed, or a
//! power cut, after such commits must reopen at one of them (or, after a cut, an older
//! commit) with that free set rebuilt exactly: no page both used and free, none leaked.

use cairn_engine::storage::FaultyStorage;
use cairn_engine::{Database, Durability, Error, SlotInfo, inspect};
use cairn_tests::{Entries, entries, on_faulty_store_with, open_image};

/// The newest valid slot of a file image: its commit, whether it names its freelist, and
/// whether the commit log holds it.
fn newest_slot(image: &[u8]) -> Result<(u64, bool, bool), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("image.cairn");
    std::fs::write(&path, image)?;
    let newest = inspect(&path)?
        .slots
        .iter()
        .filter_map(|s| match s {
            SlotInfo::Valid {
                txid,
                freelist_page,
                logged,
                ..
            } => Some((*txid, freelist_page.is_some(), *logged)),
            SlotInfo::Invalid => None,
        })
        .max();
    Ok(newest.ok_or("no valid slot")?)
}

/// How a run of [`eventual_commits`] ends early.
#[derive(Clone, Copy, Default)]
struct Ending {
    /// A sync before the last this many commits.
    synced_before_end: Option<u32>,
    /// The process dies this many storage operations into this commit.
    dies_in: Option<(u32, u64)>,
}

/// Each acknowledged commit's id and table, and the table of the one under way at a death.
type Run = (Vec<(u64, Entries)>, Option<Entries>);

/// A durable load of 3,000 keys, then 200 Eventual commits that each insert one key and
/// remove another, ended as `ending` says. On 1 KiB pages with a 16 KiB log (a cycle of
/// about 30 single-put records), or none, and no background sync, the commits after the
/// cycle fills log nothing. Each acknowledged commit's id and the table as it left it, in
/// order; and the table the commit under way when the process died would have left.
fn eventual_commits(db: &Database, storage: &FaultyStorage, ending: Ending) -> Result<Run, Error> {
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    for i in 0u32..3000 {
        w.open_table("t")?
            .insert(&(i * 2).to_be_bytes(), &[1; 60])?;
    }
    w.commit()?;
    let mut states = vec![(db.begin_read()?.txid(), entries(db, "t")?)];
    for i in 0u32..200 {
        if ending.synced_before_end == Some(200 - i) {
            db.sync()?;
        }
        if let Some((at, ops)) = ending.dies_in
            && at == i
        {
            storage.die_after(storage.operations() + ops);
        }
        let mut w = db.begin_write()?;
        w.set_durability(Durability::Eventual);
        let mut t = w.open_table("t")?;
        let key = ((i * 7919) % 6000 * 2 + 1).to_be_bytes();
        t.insert(&key, &[2; 60])?;
        t.remove(&((i * 4111) % 3000 * 2).to_be_bytes())?;
        if w.commit().is_err() {
            let mut in_flight = states.last().map(|s| s.1.clone()).unwrap_or_default();
            in_flight.insert(key.to_vec(), vec![2; 60]);
            in_flight.remove(&((i * 4111) % 3000 * 2).to_be_bytes()[..]);
            return Ok((states, Some(in_flight)));
        }
        states.push((db.begin_read()?.txid(), entries(db, "t")?));
    }
    Ok((states, None))
}

/// A durable commit on `db` (it writes the free set the opening rebuilt), then the check,
/// which accounts for every page against it; then 300 more commits, which allocate from
/// it, and the check again.
fn free_set_is_exact(db: &Database, expected: &Entries) -> Result<(), Error> {
    let mut model = expected.clone();
    for i in 0u32..300 {
        let mut w = db.begin_write()?;
        let mut t = w.open_table("t")?;
        let key = (100_000 + i * 13).to_be_bytes();
        t.insert(&key, &[3; 200])?;
        model.insert(key.to_vec(), vec![3; 200]);
        w.commit()?;
        if i == 0 {
            let report = db.check()?;
            assert!(report.is_ok(), "{:?}", report.problems);
            assert!(db.stats()?.freelist_pages > 0, "the free set is written");
        }
    }
    assert!(
        entries(db, "t")? == model,
        "the table after commits on the free set"
    );
    let report = db.check()?;
    assert!(report.is_ok(), "{:?}", report.problems);
    Ok(())
}

#[test]
fn a_killed_writer_reopens_at_its_last_unlogged_eventual_commit()
-> Result<(), Box<dyn std::error::Error>> {
    let (storage, db) = on_faulty_store_with(1, 1024, Some(16 << 10), None, None)?;
    let (states, _) = eventual_commits(&db, &storage, Ending::default())?;
    let (txid, expected) = states.last().ok_or("no commit")?;
    let image = storage.live_image();
    assert_eq!(
        newest_slot(&image)?,
        (*txid, false, false),
        "the newest commit neither logged nor wrote its free set"
    );
    drop(db);
    // Read-only, the commit is read as it is.
    let ro = open_image(&image, true)?;
    assert_eq!(ro.begin_read()?.txid(), *txid);
    assert!(entries(&ro, "t")? == *expected);
    // Writable, the free set is found by walking the trees.
    let reopened = open_image(&image, false)?;
    assert_eq!(reopened.begin_read()?.txid(), *txid);
    assert!(entries(&reopened, "t")? == *expected);
    Ok(free_set_is_exact(&reopened, expected)?)
}

#[test]
fn a_writer_that_dies_inside_an_unlogged_eventual_commit_loses_no_earlier_one()
-> Result<(), Box<dyn std::error::Error>> {
    // Every point in one commit well after the cycle filled (its writes, then its slot;
    // past them, the next commit's).
    let mut died_inside = 0;
    for ops in 0..12 {
        let (storage, db) = on_faulty_store_with(ops, 1024, Some(16 << 10), None, None)?;
        let ending = Ending {
            dies_in: Some((150, ops)),
            ..Ending::default()
        };
        let (states, in_flight) = eventual_commits(&db, &storage, ending)?;
        // (The load's state, then the 150 commits before the one that dies.)
        died_inside += usize::from(states.len() == 151);
        let (txid, acknowledged) = states.last().ok_or("no commit")?;
        let image = storage.live_image();
        drop(db);
        let reopened = open_image(&image, false)?;
        let got = entries(&reopened, "t")?;
        match reopened.begin_read()?.txid() {
            t if t == *txid => assert!(got == *acknowledged, "{ops} operations in"),
            // (Nothing follows an unlogged Eventual commit's slot that could fail it.)
            t if t == txid + 1 => assert!(Some(&got) == in_flight.as_ref(), "{ops} operations in"),
            t => panic!("{ops} operations in: opened commit {t}, acknowledged {txid}"),
        }
        free_set_is_exact(&reopened, &got)?;
    }
    assert!(
        (1..12).contains(&died_inside),
        "commit 150 failed at {died_inside} of 12 points: not every one of its steps was cut"
    );
    Ok(())
}

#[test]
fn a_power_cut_after_unlogged_eventual_commits_reopens_at_a_whole_commit_after_the_sync()
-> Result<(), Box<dyn std::error::Error>> {
    for seed in 0..24 {
        // Without a log every Eventual commit is unlogged; the cut comes one to three of
        // them after a sync.
        let (storage, db) = on_faulty_store_with(seed, 1024, Some(0), None, None)?;
        let synced = 1 + seed as u32 % 3;
        let ending = Ending {
            synced_before_end: Some(synced),
            ..Ending::default()
        };
        let (states, _) = eventual_commits(&db, &storage, ending)?;
        let image = storage.power_cut();
        drop(db);
        let reopened = open_image(&image, false)?;
        let txid = reopened.begin_read()?.txid();
        let got = entries(&reopened, "t")?;
        let durable = states[states.len() - 1 - synced as usize].0;
        assert!(
            txid >= durable,
            "seed {seed}: commit {txid}, synced {durable}"
        );
        let state = states
            .iter()
            .find(|(t, _)| *t == txid)
            .ok_or("no such commit")?;
        assert!(got == state.1, "seed {seed}: commit {txid}");
        free_set_is_exact(&reopened, &got)?;
    }
    Ok(())
}

#[test]
fn damage_to_an_older_branch_keeps_the_unlogged_commits_and_frees_nothing_under_it()
-> Result<(), Box<dyn std::error::Error>> {
    damaged_older_branch(false)
}

/// As above, with the durable commit's freelist damaged too: opening cannot work the free
/// set out from the durable commit, walks the whole tree for it, meets the damage and
/// takes no page as free.
#[test]
fn damage_to_an_older_branch_and_the_durable_freelist_frees_nothing()
-> Result<(), Box<dyn std::error::Error>> {
    damaged_older_branch(true)
}

/// A durable load, Eventual commits after it that log nothing, and a branch of the load
/// that the newest commit still uses damaged (and with `freelist_too`, the durable
/// commit's freelist): the newest commit opens, and writes after it leave the leaves under
/// the branch as they were.
fn damaged_older_branch(freelist_too: bool) -> Result<(), Box<dyn std::error::Error>> {
    let (storage, db) = on_faulty_store_with(2, 1024, Some(16 << 10), None, None)?;
    // A durable load (four levels), a durable commit after it, then Eventual commits that
    // change only the first keys: the branches of the last keys stay the load's, and
    // opening verifies none of them below the second level.
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    for i in 0u32..30_000 {
        w.open_table("t")?.insert(&i.to_be_bytes(), &[1; 60])?;
    }
    w.commit()?;
    let load = db.begin_read()?.txid();
    let mut w = db.begin_write()?;
    w.open_table("t")?.insert(&0u32.to_be_bytes(), &[5; 60])?;
    w.commit()?;
    for i in 0u32..60 {
        let mut w = db.begin_write()?;
        w.set_durability(Durability::Eventual);
        let mut t = w.open_table("t")?;
        t.insert(&(i % 300).to_be_bytes(), &[2; 60])?;
        t.remove(&((i * 7) % 300).to_be_bytes())?;
        w.commit()?;
    }
    let txid = db.begin_read()?.txid();
    let expected = entries(&db, "t")?;
    let mut image = storage.live_image();
    drop(db);
    assert_eq!(newest_slot(&image)?, (txid, false, false));
    // The branch above the leaf of the last key, as the load wrote it, and its leaves.
    let ro = open_image(&image, true)?;
    let last = 29_999u32.to_be_bytes();
    let leaf_of_last = |dump: &cairn_engine::PageDump| {
        dump.entries
            .iter()
            .any(|e| matches!(e, cairn_engine::PageEntry::Leaf { key, .. } if key[..] == last[..]))
    };
    let mut damaged = None;
    for info in ro.pages()?.iter().filter(|i| i.kind == "branch") {
        let dump = ro.page(info.page)?;
        let children: Vec<u64> = dump
            .entries
            .iter()
            .filter_map(|e| match e {
                cairn_engine::PageEntry::Branch { child, .. } => Some(*child),
                _ => None,
            })
            .collect();
        let leaves = children
            .iter()
            .map(|&c| ro.page(c))
            .collect::<Result<Vec<_>, _>>()?;
        if leaves.iter().any(leaf_of_last) {
            assert_eq!(dump.txid, load, "the load's branch");
            damaged = Some((info.page, leaves));
        }
    }
    let (page, leaves) = damaged.ok_or("no branch above the last key")?;
    drop(ro);
    image[page as usize * 1024 + 300] ^= 0x10;
    if freelist_too {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("image.cairn");
        std::fs::write(&path, &image)?;
        let freelist = inspect(&path)?
            .slots
            .iter()
            .find_map(|s| match s {
                SlotInfo::Valid {
                    txid: t,
                    freelist_page: Some(f),
                    ..
                } if *t < txid => Some(*f),
                _ => None,
            })
            .ok_or("no durable freelist")?;
        image[freelist as usize * 1024 + 30] ^= 0x10;
    }
    // The newest commit opens all the same (going back would lose the later commits and
    // not the damage). Its free set comes from the durable commit, whose trees hold the
    // branch unchanged (it is not read); or, with that commit's freelist damaged, from a
    // walk of the whole tree, which meets the damage and takes no page as free. Either way
    // the writes after it leave the leaves under the damaged branch as they were.
    let reopened = open_image(&image, false)?;
    assert_eq!(reopened.begin_read()?.txid(), txid);
    let mut w = reopened.begin_write()?;
    for i in 0u32..3000 {
        let mut key = (i % 300).to_be_bytes().to_vec();
        key.extend((i / 300).to_be_bytes());
        w.open_table("t")?.insert(&key, &[4; 60])?;
    }
    w.commit()?;
    for leaf in &leaves {
        assert_eq!(
            reopened.page(leaf.page)?,
            *leaf,
            "a leaf under the damaged branch"
        );
    }
    // The damage is reported where it is read; the first keys read as committed.
    let read = reopened.begin_read()?;
    let t = read.open_table("t")?;
    assert!(matches!(t.get(&last), Err(Error::Corruption { .. })));
    for (key, value) in expected.range(..100u32.to_be_bytes().to_vec()) {
        assert_eq!(t.get(key)?, Some(&value[..]), "{key:?}");
    }
    let report = reopened.check()?;
    assert!(
        report.problems.iter().any(|p| p.page == page),
        "{:?}",
        report.problems
    );
    Ok(())
}
