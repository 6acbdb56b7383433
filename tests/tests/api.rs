//! The embedded API's promises: limits, tables, rollback, locking, read-only opening,
//! durability modes, concurrent writers, statistics.

use std::time::{Duration, Instant};

use cairn_engine::{Database, Durability, Error};
use cairn_tests::Checked;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;

#[test]
fn key_limit_is_a_quarter_page_and_enforced_without_change() -> Result<(), Error> {
    let db = Checked(Database::builder().page_size(1024).in_memory()?);
    assert_eq!(db.max_key_len(), 256);
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    let mut t = w.open_table("t")?;
    t.insert(&[7; 256], b"fits")?;
    match t.insert(&[7; 257], b"too long") {
        Err(Error::KeyTooLarge { len: 257, max: 256 }) => {}
        other => panic!("expected KeyTooLarge, got {other:?}"),
    }
    assert_eq!(t.len(), 1);
    // Values far larger than a page go to overflow runs.
    let big = vec![3u8; 1 << 20];
    t.insert(b"big", &big)?;
    assert_eq!(t.get(b"big")?, Some(&big[..]));
    w.commit()?;
    assert_eq!(
        db.begin_read()?
            .open_table("t")?
            .get(b"big")?
            .map(<[u8]>::len),
        Some(1 << 20)
    );
    Ok(())
}

#[test]
fn large_values_written_as_they_are_put_read_back_roll_back_and_survive_reopening()
-> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("big.db");
    let (a, b, c) = (vec![1u8; 300_000], vec![2u8; 70_000], vec![3u8; 1 << 20]);
    {
        let db = Checked(Database::create(&path)?);
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        let mut t = w.open_table("t")?;
        t.insert(b"a", &a)?;
        t.insert(b"b", &b)?;
        // Read back inside the transaction, then replaced: the first run is freed unseen.
        assert_eq!(t.get(b"a")?, Some(&a[..]));
        t.insert(b"a", &c)?;
        assert_eq!(t.get(b"a")?, Some(&c[..]));
        assert_eq!(t.get(b"b")?, Some(&b[..]));
        w.commit()?;
        let pages = db.stats()?.page_count;
        // A rolled-back transaction's runs were written into free pages: no trace.
        let mut w = db.begin_write()?;
        let mut t = w.open_table("t")?;
        t.insert(b"x", &a)?;
        t.insert(b"a", &b)?;
        w.rollback();
        assert_eq!(db.stats()?.page_count, pages);
        let r = db.begin_read()?;
        let t = r.open_table("t")?;
        assert_eq!((t.get(b"a")?, t.get(b"x")?), (Some(&c[..]), None));
    }
    let db = Checked(Database::open(&path)?);
    let r = db.begin_read()?;
    let t = r.open_table("t")?;
    assert_eq!(t.get(b"a")?, Some(&c[..]));
    assert_eq!(t.get(b"b")?, Some(&b[..]));
    assert_eq!(t.len(), 2);
    Ok(())
}

#[test]
fn tables_are_created_listed_counted_and_dropped() -> Result<(), Error> {
    let db = Checked(Database::in_memory()?);
    let mut w = db.begin_write()?;
    w.create_table("b")?;
    w.create_table("a")?;
    assert!(matches!(w.create_table("a"), Err(Error::TableExists(_))));
    assert!(matches!(
        w.create_table(""),
        Err(Error::InvalidTableName(..))
    ));
    assert!(matches!(w.open_table("zz"), Err(Error::TableNotFound(_))));
    for i in 0u32..1000 {
        w.open_table("a")?.insert(&i.to_be_bytes(), b"x")?;
    }
    let names: Vec<(String, u64)> = w
        .list_tables()?
        .into_iter()
        .map(|t| (t.name, t.len))
        .collect();
    assert_eq!(names, vec![("a".into(), 1000), ("b".into(), 0)]);
    w.commit()?;

    let mut w = db.begin_write()?;
    w.drop_table("a")?;
    assert!(matches!(w.open_table("a"), Err(Error::TableNotFound(_))));
    w.commit()?;
    let r = db.begin_read()?;
    assert_eq!(r.list_tables()?.len(), 1);
    assert!(matches!(r.open_table("a"), Err(Error::TableNotFound(_))));
    // The dropped table's pages are free again.
    assert!(db.stats()?.free_pages > 3);
    Ok(())
}

#[test]
fn a_renamed_table_keeps_its_entries_and_changes_under_its_new_name() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("rename.cairn");
    let db = Database::create(&path)?;
    let mut w = db.begin_write()?;
    for i in 0u32..2_000 {
        w.open_or_create_table("old")?
            .insert(&i.to_be_bytes(), b"committed")?;
    }
    w.create_table("taken")?;
    w.commit()?;

    let mut w = db.begin_write()?;
    // Changed in the transaction before and after the rename: both go with it.
    w.open_table("old")?.insert(b"before", b"1")?;
    assert!(matches!(
        w.rename_table("old", "taken"),
        Err(Error::TableExists(_))
    ));
    assert!(matches!(
        w.rename_table("old", "old"),
        Err(Error::TableExists(_))
    ));
    assert!(matches!(
        w.rename_table("nope", "x"),
        Err(Error::TableNotFound(_))
    ));
    assert!(matches!(
        w.rename_table("old", ""),
        Err(Error::InvalidTableName(..))
    ));
    w.rename_table("old", "new")?;
    w.open_table("new")?.insert(b"after", b"2")?;
    assert!(matches!(w.open_table("old"), Err(Error::TableNotFound(_))));
    // A reader of the last commit still sees the old name.
    let r = db.begin_read()?;
    assert_eq!(r.open_table("old")?.len(), 2_000);
    assert!(matches!(r.open_table("new"), Err(Error::TableNotFound(_))));
    w.commit()?;
    drop(r);
    db.close()?;

    let db = Database::open(&path)?;
    let r = db.begin_read()?;
    let names: Vec<(String, u64)> = r
        .list_tables()?
        .into_iter()
        .map(|t| (t.name, t.len))
        .collect();
    assert_eq!(names, vec![("new".into(), 2_002), ("taken".into(), 0)]);
    let t = r.open_table("new")?;
    assert_eq!(t.get(&7u32.to_be_bytes())?, Some(&b"committed"[..]));
    assert_eq!(t.get(b"before")?, Some(&b"1"[..]));
    assert_eq!(t.get(b"after")?, Some(&b"2"[..]));
    drop(r);

    // Rolled back, whole or to a savepoint: the old name again, as if never renamed.
    let mut w = db.begin_write()?;
    w.rename_table("new", "gone")?;
    w.rollback();
    let mut w = db.begin_write()?;
    let sp = w.savepoint()?;
    w.rename_table("new", "gone")?;
    w.open_table("gone")?.insert(b"later", b"3")?;
    w.rollback_to(&sp)?;
    assert!(matches!(w.open_table("gone"), Err(Error::TableNotFound(_))));
    assert_eq!(w.open_table("new")?.len(), 2_002);
    // Back and forth in one transaction.
    w.rename_table("new", "gone")?;
    w.rename_table("gone", "new")?;
    w.commit()?;
    assert!(db.check()?.is_ok());
    let r = db.begin_read()?;
    assert_eq!(r.open_table("new")?.len(), 2_002);
    assert_eq!(r.list_tables()?.len(), 2);
    Ok(())
}

#[test]
fn open_or_create_table_creates_a_missing_table_once() -> Result<(), Error> {
    let db = Checked(Database::in_memory()?);
    for round in 0..2u8 {
        let mut w = db.begin_write()?;
        let mut t = w.open_or_create_table("log")?;
        t.insert(&[round], b"entry")?;
        assert_eq!(
            t.len(),
            u64::from(round) + 1,
            "round {round}: the same table"
        );
        w.commit()?;
    }
    let mut w = db.begin_write()?;
    assert!(matches!(
        w.open_or_create_table(""),
        Err(Error::InvalidTableName(..))
    ));
    let names: Vec<String> = w.list_tables()?.into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["log"]);
    Ok(())
}

#[test]
fn rollback_and_drop_leave_no_trace() -> Result<(), Error> {
    let db = Checked(Database::in_memory()?);
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.open_table("t")?.insert(b"k", b"committed")?;
    w.commit()?;
    let txid = db.begin_read()?.txid();
    let pages = db.stats()?.page_count;

    let mut w = db.begin_write()?;
    w.open_table("t")?.insert(b"k", b"rolled back")?;
    w.create_table("u")?;
    w.rollback();
    {
        let mut w = db.begin_write()?;
        w.open_table("t")?.remove(b"k")?;
        // Dropped without commit.
    }
    let r = db.begin_read()?;
    assert_eq!(r.txid(), txid);
    assert_eq!(r.open_table("t")?.get(b"k")?, Some(&b"committed"[..]));
    assert_eq!(r.list_tables()?.len(), 1);
    assert_eq!(db.stats()?.page_count, pages);
    Ok(())
}

fn collect<'a>(
    it: impl Iterator<Item = Result<(&'a [u8], &'a [u8]), Error>>,
) -> Result<Vec<u32>, Error> {
    it.map(|e| e.map(|(k, _)| u32::from_be_bytes(k.try_into().unwrap_or_default())))
        .collect()
}

#[test]
fn ranges_run_both_ways_with_any_bounds() -> Result<(), Error> {
    let db = Checked(Database::builder().page_size(1024).in_memory()?);
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    let mut t = w.open_table("t")?;
    assert_eq!((t.first()?, t.last()?), (None, None));
    for i in (0u32..5000).step_by(2) {
        t.insert(&i.to_be_bytes(), &i.to_le_bytes())?;
    }
    w.commit()?;
    let r = db.begin_read()?;
    let t = r.open_table("t")?;
    let k = |i: u32| i.to_be_bytes();
    assert_eq!(
        collect(t.range(&k(11)[..]..&k(21)[..])?)?,
        vec![12, 14, 16, 18, 20]
    );
    assert_eq!(
        collect(t.range(&k(12)[..]..=&k(16)[..])?.rev())?,
        vec![16, 14, 12]
    );
    assert_eq!(
        collect(t.range(&k(4990)[..]..)?)?,
        vec![4990, 4992, 4994, 4996, 4998]
    );
    assert_eq!(collect(t.range(..&k(3)[..])?.rev())?, vec![2, 0]);
    assert!(collect(t.range(&k(21)[..]..&k(11)[..])?)?.is_empty());
    // Meeting in the middle: each entry once.
    let mut it = t.range(&k(100)[..]..&k(110)[..])?;
    let mut both = Vec::new();
    for step in 0.. {
        let item = if step % 2 == 0 {
            it.next()
        } else {
            it.next_back()
        };
        let Some(item) = item else { break };
        both.push(u32::from_be_bytes(item?.0.try_into().unwrap_or_default()));
    }
    assert!(it.next().is_none() && it.next_back().is_none());
    both.sort_unstable();
    assert_eq!(both, vec![100, 102, 104, 106, 108]);
    assert_eq!(t.first()?.map(|(_, v)| v), Some(&0u32.to_le_bytes()[..]));
    assert_eq!(t.last()?.map(|(k, _)| k), Some(&k(4998)[..]));
    assert_eq!(t.iter()?.count(), 2500);
    Ok(())
}

#[test]
fn remove_range_removes_exactly_the_range_and_frees_its_large_values() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("r.cairn");
    let db = Checked(Database::builder().page_size(1024).create(&path)?);
    let k = |i: u32| i.to_be_bytes();
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    let mut t = w.open_table("t")?;
    for i in (0u32..5000).step_by(2) {
        // Every hundredth value takes an overflow run of its own.
        let value = if i % 100 == 0 {
            vec![7; 5000]
        } else {
            i.to_le_bytes().to_vec()
        };
        t.insert(&k(i), &value)?;
    }
    w.commit()?;

    let mut w = db.begin_write()?;
    let mut t = w.open_table("t")?;
    assert_eq!(t.remove_range(&k(11)[..]..&k(21)[..])?, 5);
    assert_eq!(t.remove_range(&k(21)[..]..&k(11)[..])?, 0);
    assert_eq!(t.remove_range(&k(100)[..]..=&k(4000)[..])?, 1951);
    assert_eq!(t.remove_range(&k(4990)[..]..)?, 5);
    assert_eq!(t.remove_range(..&k(3)[..])?, 2);
    assert_eq!(t.len(), 2500 - 5 - 1951 - 5 - 2);
    let left = collect(t.iter()?)?;
    w.commit()?;
    let want: Vec<u32> = (0u32..5000)
        .step_by(2)
        .filter(|i| !(11..21).contains(i) && !(100..=4000).contains(i))
        .filter(|i| *i < 4990 && *i >= 3)
        .collect();
    assert_eq!(left, want);
    drop(db);

    // After reopening: the same keys, and the pages the removal freed reused rather than
    // new ones taken (the integrity check on drop finds no leaked page).
    let db = Checked(Database::open(&path)?);
    assert_eq!(collect(db.begin_read()?.open_table("t")?.iter()?)?, want);
    let pages = db.stats()?.page_count;
    let mut w = db.begin_write()?;
    let mut t = w.open_table("t")?;
    for i in (100u32..2000).step_by(2) {
        t.insert(&k(i), &i.to_le_bytes())?;
    }
    w.commit()?;
    let s = db.stats()?;
    assert!(s.page_count <= pages, "new pages: {pages} before, {s:?}");
    let mut w = db.begin_write()?;
    assert_eq!(
        w.open_table("t")?.remove_range::<[u8], _>(..)?,
        want.len() as u64 + 950
    );
    w.commit()?;
    assert!(db.begin_read()?.open_table("t")?.is_empty());
    Ok(())
}

#[test]
fn retain_removes_what_its_rule_rejects_over_many_chunks_and_pop_takes_the_ends()
-> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("retain.cairn");
    let db = Checked(Database::builder().page_size(1024).create(&path)?);
    let k = |i: u32| i.to_be_bytes();
    let number = |key: &[u8]| key.try_into().map_or(u32::MAX, u32::from_be_bytes);
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    let mut t = w.open_table("t")?;
    for i in 0u32..5000 {
        // Every hundredth value takes an overflow run of its own; a value's first byte
        // says whether its number is even.
        let mut value = vec![(i % 2) as u8; if i % 100 == 0 { 5000 } else { 4 }];
        value[1..4].copy_from_slice(&i.to_le_bytes()[..3]);
        t.insert(&k(i), &value)?;
    }
    // By key, over a range of three times the 1,024 entries judged at once: the
    // multiples of 3 in [1000, 4000) go, and nothing outside it.
    let removed = t.retain_in(&k(1000)[..]..&k(4000)[..], |key, _| number(key) % 3 != 0)?;
    assert_eq!(removed, 1000);
    // By value, over the whole table: the odd numbers go.
    let removed = t.retain(|_, value| value.first() == Some(&0))?;
    let want: Vec<u32> = (0u32..5000)
        .filter(|i| !((1000..4000).contains(i) && i % 3 == 0))
        .filter(|i| i % 2 == 0)
        .collect();
    assert_eq!(removed, 5000 - 1000 - want.len() as u64);
    assert_eq!(t.len(), want.len() as u64);
    assert_eq!(t.retain(|_, _| true)?, 0);
    assert_eq!(collect(t.iter()?)?, want);
    w.commit()?;
    drop(db);

    // After reopening, the same keys (and no leaked overflow run: the integrity check on
    // drop); the ends come off one at a time, with their values.
    let db = Checked(Database::open(&path)?);
    let mut w = db.begin_write()?;
    let mut t = w.open_table("t")?;
    assert_eq!(collect(t.iter()?)?, want);
    let Some((first, value)) = t.pop_first()? else {
        panic!("no first entry")
    };
    assert_eq!((number(&first), value.len()), (0, 5000));
    let Some((last, _)) = t.pop_last()? else {
        panic!("no last entry")
    };
    assert_eq!(number(&last), 4998);
    assert_eq!(number(&t.pop_first()?.unwrap_or_default().0), 2);
    assert_eq!(t.len(), want.len() as u64 - 3);
    assert_eq!(t.retain(|_, _| false)?, want.len() as u64 - 3);
    assert_eq!((t.pop_first()?, t.pop_last()?), (None, None));
    w.rollback();
    assert_eq!(collect(db.begin_read()?.open_table("t")?.iter()?)?, want);
    Ok(())
}

#[test]
fn prefix_reads_and_removes_exactly_the_keys_that_start_with_it() -> Result<(), Error> {
    let db = Checked(Database::builder().page_size(1024).in_memory()?);
    let keys: Vec<Vec<u8>> = [
        &b"a"[..],
        b"user:",
        b"user:1",
        b"user:2",
        b"user;",
        b"users",
    ]
    .iter()
    .map(|k| k.to_vec())
    .chain((0..300u32).map(|i| format!("user:{i:03}").into_bytes()))
    .chain([vec![0xff], vec![0xff, 0xff, 1], vec![0xff, 0]])
    .collect();
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    let mut t = w.open_table("t")?;
    for k in &keys {
        t.insert(k, b"v")?;
    }
    let starting = |p: &[u8]| -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = keys.iter().filter(|k| k.starts_with(p)).cloned().collect();
        v.sort();
        v.dedup();
        v
    };
    fn listed<'a>(
        r: impl Iterator<Item = Result<(&'a [u8], &'a [u8]), Error>>,
    ) -> Result<Vec<Vec<u8>>, Error> {
        r.map(|e| e.map(|(k, _)| k.to_vec())).collect()
    }
    // In the transaction, and the same in a snapshot after the commit.
    assert_eq!(listed(t.prefix(b"user:")?)?, starting(b"user:"));
    assert_eq!(listed(t.prefix(&[0xff])?)?, starting(&[0xff]));
    w.commit()?;
    let r = db.begin_read()?;
    let rt = r.open_table("t")?;
    assert_eq!(listed(rt.prefix(b"user:")?)?, starting(b"user:"));
    assert_eq!(listed(rt.prefix(b"")?)?.len(), rt.len() as usize);
    let mut reversed = listed(rt.prefix(b"user:1")?.rev())?;
    reversed.reverse();
    assert_eq!(reversed, starting(b"user:1"));

    let mut w = db.begin_write()?;
    let mut t = w.open_table("t")?;
    assert_eq!(t.remove_prefix(b"user:")?, starting(b"user:").len() as u64);
    assert_eq!(t.remove_prefix(&[0xff])?, 3);
    assert!(listed(t.prefix(b"user:")?)?.is_empty());
    assert_eq!(
        listed(t.iter()?)?,
        vec![b"a".to_vec(), b"user;".to_vec(), b"users".to_vec()]
    );
    w.commit()?;
    Ok(())
}

#[test]
fn a_second_writable_open_in_one_process_waits_for_the_first_and_readers_do_not()
-> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("l.cairn");
    let db = Database::create(&path)?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.open_table("t")?.insert(b"k", b"v")?;
    w.commit()?;

    // By its path or another one (a hard link): the process knows it writes the file, and
    // says so after the timeout. (Another process's writer: Locked, with its pid:
    // two_processes.rs.)
    let link = dir.path().join("link.cairn");
    std::fs::hard_link(&path, &link)?;
    for name in [&path, &link] {
        let start = Instant::now();
        match Database::builder()
            .lock_timeout(Duration::from_millis(200))
            .open(name)
        {
            Err(Error::AlreadyOpen { path: p }) => assert_eq!(&p, name),
            other => panic!("expected AlreadyOpen, got {other:?}"),
        }
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(200) && waited < Duration::from_secs(5));
    }
    // A handle waiting for the file gets it once the one that has it closes (here one
    // that would wait for good: a timeout too long to add to the clock).
    let waiting = std::thread::spawn({
        let path = path.clone();
        move || {
            Database::builder()
                .lock_timeout(Duration::MAX)
                .open(&path)
                .map(|db| db.page_size())
        }
    });
    std::thread::sleep(Duration::from_millis(100));

    let ro = Database::builder().read_only(true).open(&path)?;
    assert_eq!(
        ro.begin_read()?.open_table("t")?.get(b"k")?,
        Some(&b"v"[..])
    );
    assert!(matches!(ro.begin_write(), Err(Error::ReadOnly)));
    assert!(!waiting.is_finished(), "the second handle did not wait");
    drop(db);
    // Once the writer is gone, the waiting handle opens.
    let opened = waiting
        .join()
        .unwrap_or_else(|_| panic!("the waiting open panicked"));
    assert_eq!(opened?, 4096);
    Database::open(&path)?;
    Ok(())
}

#[test]
fn close_waits_for_another_threads_write_transaction_and_refuses_its_own() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("close.cairn");
    let db = Database::builder()
        .durability(Durability::Eventual)
        .create(&path)?;
    let w = db.begin_write()?;
    assert!(matches!(db.close(), Err(Error::WriteTxnOnThisThread)));
    w.commit()?;

    let db = Database::open(&path)?;
    let (started, begun) = std::sync::mpsc::channel();
    let writer = std::thread::spawn({
        let db = db.clone();
        move || -> Result<(), Error> {
            let mut w = db.begin_write()?;
            let _ = started.send(());
            std::thread::sleep(Duration::from_millis(200));
            w.create_table("late")?;
            w.commit()
        }
    });
    let _ = begun.recv();
    // The writer's thread holds the other handle: this close waits for its transaction,
    // then syncs, so the table is there when it returns.
    db.close()?;
    let seen = Database::builder().read_only(true).open(&path)?;
    let tables = seen.begin_read()?.list_tables()?;
    assert!(tables.iter().any(|t| t.name == "late"), "{tables:?}");
    writer
        .join()
        .unwrap_or_else(|_| panic!("the writer panicked"))?;
    Ok(())
}

#[test]
fn eventual_commits_are_visible_at_once_and_durable_after_sync() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("e.cairn");
    let db = Database::builder()
        .durability(Durability::Eventual)
        .create(&path)?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.open_table("t")?.insert(b"k", b"v")?;
    w.commit()?;
    assert_eq!(db.begin_read()?.open_table("t")?.len(), 1);
    db.sync()?;
    let ro = Database::builder().read_only(true).open(&path)?;
    assert_eq!(ro.begin_read()?.open_table("t")?.len(), 1);
    Ok(())
}

#[test]
fn writers_on_several_threads_take_turns() -> Result<(), Error> {
    let db = Checked(
        Database::builder()
            .durability(Durability::Eventual)
            .in_memory()?,
    );
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.commit()?;
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let db = db.0.clone();
            std::thread::spawn(move || -> Result<(), Error> {
                for _ in 0..50 {
                    let mut w = db.begin_write()?;
                    let mut t = w.open_table("t")?;
                    let n = t
                        .get(b"n")?
                        .map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap_or_default()));
                    t.insert(b"n", &(n + 1).to_be_bytes())?;
                    w.commit()?;
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().map_err(|_| Error::ReadOnly)??;
    }
    let r = db.begin_read()?;
    assert_eq!(
        r.open_table("t")?.get(b"n")?,
        Some(&200u64.to_be_bytes()[..])
    );
    Ok(())
}

#[test]
fn sequential_loads_fill_leaves_densely() -> Result<(), Error> {
    let dense = Checked(Database::in_memory()?);
    let random = Checked(Database::in_memory()?);
    let mut shuffled: Vec<u64> = (0..20_000).collect();
    shuffled.shuffle(&mut SmallRng::seed_from_u64(7));
    for (db, keys) in [(&dense, (0..20_000).collect()), (&random, shuffled)] {
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        let mut t = w.open_table("t")?;
        for k in keys {
            t.insert(&k.to_be_bytes(), &[1; 32])?;
        }
        w.commit()?;
    }
    let (d, r) = (dense.stats()?, random.stats()?);
    assert_eq!((d.entries, r.entries, d.tables), (20_000, 20_000, 1));
    assert!(d.fill_factor > 0.95, "sequential fill {}", d.fill_factor);
    assert!(r.fill_factor < 0.85, "random fill {}", r.fill_factor);
    eprintln!(
        "fill: sequential {:.3}, random {:.3}",
        d.fill_factor, r.fill_factor
    );
    assert!(d.leaf_pages < r.leaf_pages);
    assert_eq!(d.depth, 3);
    Ok(())
}

#[test]
fn stats_count_pages_by_kind_and_free_pages_exactly() -> Result<(), Error> {
    let db = Checked(Database::builder().page_size(1024).in_memory()?);
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.create_table("empty")?;
    w.create_table("small")?;
    let mut t = w.open_table("t")?;
    for i in 0u32..3000 {
        t.insert(&i.to_be_bytes(), &[0; 20])?;
    }
    t.insert(b"big", &[1; 5000])?;
    let mut small = w.open_table("small")?;
    small.insert(b"k", &[2; 2000])?;
    w.commit()?;
    let s = db.stats()?;
    assert_eq!((s.tables, s.entries, s.page_size), (3, 3002, 1024));
    assert_eq!(
        s.overflow_pages,
        5 + 2,
        "16 + 5000 and 16 + 2000 bytes in 1 KiB pages"
    );
    // Each table's share, by name: its tree and its values' runs. The catalog's own
    // leaf is the rest of the totals.
    let by_name: Vec<(&str, u64, usize, u64, u64)> = s
        .by_table
        .iter()
        .map(|t| (&*t.name, t.entries, t.depth, t.leaf_pages, t.overflow_pages))
        .collect();
    let t = &s.by_table[2];
    assert_eq!(
        by_name,
        [
            ("empty", 0, 0, 0, 0),
            ("small", 1, 1, 1, 2),
            ("t", 3001, t.depth, t.leaf_pages, 5)
        ]
    );
    assert!(
        t.depth >= 2 && t.branch_pages >= 1 && t.leaf_pages > 50,
        "{t:?}"
    );
    assert!(t.fill_factor > 0.5 && t.fill_factor <= 1.0, "{t:?}");
    assert_eq!(s.by_table[0].fill_factor, 0.0);
    let sum = |f: fn(&cairn_engine::TableStats) -> u64| s.by_table.iter().map(f).sum::<u64>();
    assert_eq!(sum(|t| t.branch_pages), s.branch_pages);
    assert_eq!(
        sum(|t| t.leaf_pages) + 1,
        s.leaf_pages,
        "and the catalog's leaf"
    );
    assert_eq!(sum(|t| t.overflow_pages), s.overflow_pages);
    // Every page is in a tree, an overflow run, the freelist run, free, or a header page.
    assert_eq!(
        s.branch_pages + s.leaf_pages + s.overflow_pages + s.freelist_pages + s.free_pages + 2,
        s.page_count
    );
    assert!(s.file_size >= s.page_count * 1024);
    let report = db.check()?;
    assert_eq!(
        (report.entries, report.pages_checked),
        (3002, s.page_count - 2)
    );
    Ok(())
}

#[test]
fn backup_copies_one_snapshot_while_a_writer_goes_on() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let db = Database::builder()
        .durability(Durability::Eventual)
        .create(dir.path().join("src.cairn"))?;
    let mut w = db.begin_write()?;
    for name in ["a", "b"] {
        w.create_table(name)?;
        let mut t = w.open_table(name)?;
        for i in 0u32..25_000 {
            t.insert(&i.to_be_bytes(), name.as_bytes())?;
        }
    }
    w.commit()?;
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || -> Result<(), Error> {
            for i in 0u32..200 {
                let mut w = db.begin_write()?;
                w.open_table("a")?.remove(&i.to_be_bytes())?;
                w.commit()?;
            }
            Ok(())
        })
    };
    let copy_path = dir.path().join("copy.cairn");
    let copied = db.backup(&copy_path)?;
    writer.join().map_err(|_| Error::ReadOnly)??;
    let copy = Checked(Database::open(&copy_path)?);
    let r = copy.begin_read()?;
    let a = r.open_table("a")?.len();
    // One snapshot: table b complete, table a as it was at some single commit.
    assert_eq!(r.open_table("b")?.len(), 25_000);
    assert!((24_800..=25_000).contains(&a));
    let first = r.open_table("a")?.first()?.map(|(k, _)| k.to_vec());
    assert_eq!(
        first,
        Some((25_000 - a as u32).to_be_bytes().to_vec()),
        "a prefix of the removals, not a mix"
    );
    assert_eq!(copied, a + 25_000);
    assert!(
        matches!(db.backup(&copy_path), Err(Error::Io(_))),
        "never overwrites"
    );
    let empty = dir.path().join("empty.cairn");
    std::fs::write(&empty, b"")?;
    match db.backup(&empty) {
        Err(Error::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists),
        other => panic!("an existing empty file is not a backup target: {other:?}"),
    }
    Ok(())
}

#[test]
fn a_durable_commit_costs_one_sync_and_eventual_commits_none() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let db = Database::create(dir.path().join("io.cairn"))?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.commit()?;
    // Warm up so that the file has grown ahead of need.
    for i in 0u32..10 {
        let mut w = db.begin_write()?;
        w.open_table("t")?.insert(&i.to_be_bytes(), b"v")?;
        w.commit()?;
    }
    let before = db.io_stats();
    for i in 10u32..20 {
        let mut w = db.begin_write()?;
        w.open_table("t")?.insert(&i.to_be_bytes(), b"v")?;
        w.commit()?;
    }
    let after = db.io_stats();
    assert_eq!(after.commits - before.commits, 10);
    assert_eq!(
        after.syncs - before.syncs,
        10,
        "one fdatasync per durable commit"
    );
    assert_eq!(
        after.file_syncs, before.file_syncs,
        "each went to the commit log, the file unsynced"
    );
    assert!(after.bytes_written > before.bytes_written);

    let before = db.io_stats();
    for i in 20u32..30 {
        let mut w = db.begin_write()?;
        w.set_durability(Durability::Eventual);
        w.open_table("t")?.insert(&i.to_be_bytes(), b"v")?;
        w.commit()?;
    }
    assert_eq!(
        db.io_stats().syncs,
        before.syncs,
        "eventual commits do not sync"
    );
    db.sync()?;
    assert_eq!(db.io_stats().syncs, before.syncs + 1);
    assert_eq!(
        db.io_stats().file_syncs,
        before.file_syncs + 1,
        "sync() syncs the file"
    );
    Ok(())
}

#[test]
fn a_read_only_handle_follows_commits_and_its_pins_hold_pages() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("f.cairn");
    let db = Database::create(&path)?;
    let put = |v: &[u8]| -> Result<(), Error> {
        let mut w = db.begin_write()?;
        if !w.table_exists("t")? {
            w.create_table("t")?;
        }
        w.open_table("t")?.insert(b"k", v)?;
        w.commit()
    };
    put(b"one")?;
    // A second open file description, as another process would have.
    let ro = Database::builder().read_only(true).open(&path)?;
    let held = ro.begin_read()?;
    put(b"two")?;
    assert_eq!(
        ro.begin_read()?.open_table("t")?.get(b"k")?,
        Some(&b"two"[..]),
        "a new read transaction sees the newest commit"
    );
    for i in 0..50u32 {
        put(&i.to_be_bytes())?;
    }
    // The writer knows of the pin, and has not reused the pages the reader sees.
    let stats = db.stats()?;
    assert_eq!(stats.oldest_reader_txid, Some(held.txid()), "{stats:?}");
    assert_eq!(
        stats.oldest_reader_age, None,
        "unknown for another open file"
    );
    assert!(stats.pages_pinned_by_readers > 0, "{stats:?}");
    assert_eq!(held.open_table("t")?.get(b"k")?, Some(&b"one"[..]));
    drop(held);
    assert_eq!(db.stats()?.oldest_reader_txid, None);
    Ok(())
}

#[test]
fn a_backup_that_fails_leaves_no_file() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let src = dir.path().join("src.cairn");
    let db = Database::builder().page_size(1024).create(&src)?;
    let mut w = db.begin_write()?;
    for (name, n) in [("a", 10u32), ("b", 5_000)] {
        w.create_table(name)?;
        let mut t = w.open_table(name)?;
        for i in 0..n {
            t.insert(&i.to_be_bytes(), &[7u8; 40])?;
        }
    }
    w.commit()?;
    // A leaf of table b damaged: the copy of table a succeeds, then b's fails.
    let leaf = db
        .pages()?
        .into_iter()
        .filter(|p| p.kind == "leaf" && p.owner == "b")
        .map(|p| p.page)
        .nth(10)
        .ok_or("table b has leaves")?;
    drop(db);
    let mut bytes = std::fs::read(&src)?;
    let at = usize::try_from(leaf)? * 1024 + 600;
    bytes[at] ^= 0x5a;
    std::fs::write(&src, &bytes)?;
    let db = Database::open(&src)?;
    let dst = dir.path().join("copy.cairn");
    match db.backup(&dst) {
        Err(Error::Corruption { .. }) => {}
        other => return Err(format!("expected the damage found, got {other:?}").into()),
    }
    let names: Vec<_> = std::fs::read_dir(dir.path())?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()?;
    assert_eq!(names, ["src.cairn"], "no partial backup, no stray file");
    Ok(())
}

#[test]
fn a_new_file_gets_the_commit_log_asked_for_and_keeps_it() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    // 6 MB rounds up to whole pages; the copy a backup makes gets the same log (a size
    // asked for, which the file records).
    let path = dir.path().join("big-log.cairn");
    let db = Database::builder().log_size(6_000_000).create(&path)?;
    assert_eq!(db.stats()?.log_pages, 6_000_000u64.div_ceil(4096));
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.commit()?;
    db.backup(dir.path().join("copy.cairn"))?;
    let copy = Database::open(dir.path().join("copy.cairn"))?;
    assert_eq!(copy.stats()?.log_pages, 6_000_000u64.div_ceil(4096));
    drop((db, copy));
    // Reopening with another size asked for changes nothing.
    let db = Database::builder().log_size(1 << 20).open(&path)?;
    assert_eq!(db.stats()?.log_pages, 6_000_000u64.div_ceil(4096));
    drop(db);

    // Over 64 MiB (after rounding up to pages) is refused, and nothing is created.
    let refused = dir.path().join("refused.cairn");
    for size in [(64 << 20) + 1, u64::MAX] {
        let err = Database::builder().log_size(size).create(&refused);
        assert!(
            matches!(err, Err(Error::InvalidLogSize(n)) if n == size),
            "{err:?}"
        );
        assert!(!refused.exists());
    }
    assert!(
        Database::builder()
            .log_size(64 << 20)
            .create(&refused)
            .is_ok()
    );
    Ok(())
}

#[test]
fn without_a_commit_log_every_durable_commit_syncs_and_survives_reopening() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("no-log.cairn");
    let db = Checked(Database::builder().log_size(0).create(&path)?);
    assert_eq!(db.stats()?.log_pages, 0);
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.commit()?;
    for i in 0u32..200 {
        let mut w = db.begin_write()?;
        w.open_table("t")?
            .insert(&i.to_be_bytes(), &[i as u8; 300])?;
        w.commit()?;
    }
    drop(db);
    let db = Checked(Database::open(&path)?);
    let r = db.begin_read()?;
    let t = r.open_table("t")?;
    assert_eq!(t.len(), 200);
    assert_eq!(t.get(&7u32.to_be_bytes())?, Some(&[7u8; 300][..]));
    assert_eq!(db.stats()?.log_pages, 0);

    // A power cut after any acknowledged commit keeps it: with no log to replay, each
    // commit's pages were synced before it returned.
    for seed in 0..4u64 {
        let storage = cairn_engine::storage::FaultyStorage::new(seed)?;
        let db = Database::builder()
            .page_size(1024)
            .log_size(0)
            .with_storage(storage.clone(), true, None)?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        let acknowledged = 10 + seed as u32 * 7;
        for i in 0..acknowledged {
            let mut w = db.begin_write()?;
            w.open_table("t")?
                .insert(&i.to_be_bytes(), &[i as u8; 300])?;
            w.commit()?;
        }
        let image = storage.power_cut();
        drop(db);
        let reopened = cairn_tests::open_image(&image, false)?;
        assert_eq!(
            reopened.begin_read()?.open_table("t")?.len(),
            u64::from(acknowledged),
            "seed {seed}"
        );
        assert!(reopened.check()?.is_ok(), "seed {seed}");
    }
    Ok(())
}
