//! Damaged and foreign files give clear errors, never panics or wrong data.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::Path;

use cairn_engine::{Database, Error, SlotInfo};

type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

/// A small database with several tables, overflow values and a non-empty freelist,
/// closed cleanly; returns its bytes and contents.
fn build(path: &Path, page_size: usize) -> Result<(Vec<u8>, Model), Error> {
    let mut model = Model::new();
    {
        let db = Database::builder().page_size(page_size).create(path)?;
        for round in 0u32..6 {
            let mut w = db.begin_write()?;
            for name in ["a", "b"] {
                if round == 0 {
                    w.create_table(name)?;
                }
                let m = model.entry(name.to_owned()).or_default();
                let mut t = w.open_table(name)?;
                for i in 0u32..120 {
                    let key = format!("key{:05}", i * 7 % 120).into_bytes();
                    if (i + round) % 5 == 0 {
                        t.remove(&key)?;
                        m.remove(&key);
                    } else {
                        let len = if i % 40 == 0 {
                            3000
                        } else {
                            10 + (i as usize % 50)
                        };
                        let value = vec![(i + round) as u8; len];
                        t.insert(&key, &value)?;
                        m.insert(key, value);
                    }
                }
            }
            w.commit()?;
        }
    }
    Ok((std::fs::read(path)?, model))
}

/// Opens, scans every table, reads keys back and checks. `Ok(true)` when the contents
/// equal the model and the check is clean, `Ok(false)` when they equal it but the check
/// found damage (in a page the reads did not need), `Err` for a clean error.
fn examine(path: &Path, model: &Model) -> Result<bool, Error> {
    let db = Database::open(path)?;
    let r = db.begin_read()?;
    let mut seen = Model::new();
    for info in r.list_tables()? {
        let t = r.open_table(&info.name)?;
        let m = seen.entry(info.name.clone()).or_default();
        for e in t.iter()? {
            let (k, v) = e?;
            m.insert(k.to_vec(), v.to_vec());
        }
        for (k, v) in model.get(&info.name).into_iter().flatten() {
            if t.get(k)? != Some(&v[..]) {
                panic!("wrong answer for a get in table {}", info.name);
            }
        }
    }
    assert!(&seen == model, "a damaged file returned wrong data");
    Ok(db.check()?.is_ok())
}

#[test]
fn a_flipped_byte_anywhere_is_an_error_or_harmless() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    for page_size in [1024usize, 4096] {
        let clean = dir.path().join(format!("clean-{page_size}.cairn"));
        let (bytes, model) = build(&clean, page_size)?;
        assert!(examine(&clean, &model)?);
        let damaged = dir.path().join("damaged.cairn");
        let (mut errors, mut harmless) = (0, 0);
        for page in 0..bytes.len() / page_size {
            let base = page * page_size;
            for offset in [0, 2, 9, 16, 17, 30, page_size / 2, page_size - 1] {
                let mut b = bytes.clone();
                b[base + offset] ^= 0x40;
                std::fs::write(&damaged, &b)?;
                let outcome =
                    std::panic::catch_unwind(AssertUnwindSafe(|| examine(&damaged, &model)));
                match outcome {
                    Err(_) => panic!(
                        "panic or wrong data: page {page}, offset {offset}, page size {page_size}"
                    ),
                    Ok(Ok(_)) => harmless += 1,
                    Ok(Err(Error::Corruption { page: named, .. })) => {
                        // The page itself, or the first page of the run it belongs to.
                        assert!(
                            named <= page as u64,
                            "page {page} damaged, page {named} named"
                        );
                        errors += 1;
                    }
                    Ok(Err(_)) => errors += 1,
                }
            }
        }
        assert!(
            errors > 0 && harmless > 0,
            "{errors} errors, {harmless} harmless"
        );
    }
    Ok(())
}

/// The header's magic number damaged in page 0 (a flipped bit, a zeroed first sector): the
/// copy in page 1 says the file is a database, and it opens whole, for writing too, while
/// `check` reports the damaged copy (and `inspect`, `cairn info`, reads the copy too). (Until the forty-first session such a file was "not
/// a Cairn database": the copy was read only when page 0's magic was intact, and `check`
/// looked at neither.) With both copies' magic gone, the file is not one.
#[test]
fn a_damaged_magic_number_in_page_0_is_read_from_page_1s_copy() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    for page_size in [1024usize, 4096] {
        let clean = dir.path().join(format!("magic-{page_size}.cairn"));
        let (bytes, model) = build(&clean, page_size)?;
        let damaged = dir.path().join(format!("damaged-{page_size}.cairn"));
        for damage in 0..3 {
            let mut b = bytes.clone();
            match damage {
                0 => b[0] ^= 0x01,
                1 => b[5] ^= 0x80,
                _ => b[..512].fill(0),
            }
            std::fs::write(&damaged, &b)?;
            // `cairn info` reads the header as opening does.
            let info = cairn_engine::inspect(&damaged)?;
            assert_eq!(info.page_size as usize, page_size, "damage {damage}");
            let read_only = Database::builder().read_only(true).open(&damaged)?;
            let r = read_only.begin_read()?;
            assert_eq!(r.list_tables()?.len(), 2, "damage {damage}");
            drop(r);
            drop(read_only);
            // Every entry read back; `check` names the damaged copy, and only it.
            assert!(!examine(&damaged, &model)?, "damage {damage}, {page_size}");
            let problems = Database::open(&damaged)?.check()?.problems;
            assert!(
                matches!(&problems[..], [p] if p.page == 0 && p.what.contains("header")),
                "{problems:?}"
            );
            let db = Database::open(&damaged)?;
            let mut w = db.begin_write()?;
            w.open_table("a")?.insert(b"after", b"damage")?;
            w.commit()?;
            db.close()?;
            let db = Database::open(&damaged)?;
            let r = db.begin_read()?;
            assert_eq!(r.open_table("a")?.get(b"after")?, Some(&b"damage"[..]));
        }
        let mut b = bytes.clone();
        b[0] ^= 0x01;
        b[page_size] ^= 0x01;
        std::fs::write(&damaged, &b)?;
        assert!(matches!(Database::open(&damaged), Err(Error::NotADatabase)));
    }
    Ok(())
}

/// Makes a database at `path` with `n` tables, `table_0000` on, each holding key `k` (its
/// number), and closes it.
fn many_tables(path: &Path, n: u32) -> Result<(), Error> {
    let db = Database::create(path)?;
    let mut w = db.begin_write()?;
    for n in 0..n {
        w.open_or_create_table(&format!("table_{n:04}"))?
            .insert(b"k", &n.to_be_bytes())?;
    }
    w.commit()?;
    db.close()
}

/// A leaf's page and its keys.
type Leaf = (u64, Vec<Vec<u8>>);

/// The catalog's leaves, in key order.
fn catalog_leaves(db: &Database, path: &Path) -> Result<Vec<Leaf>, Error> {
    let catalog = match cairn_engine::inspect(path)?.slots {
        [SlotInfo::Valid { catalog_page, .. }, _] => catalog_page,
        other => panic!("{other:?}"),
    };
    let mut leaves = Vec::new();
    for entry in db.page(catalog)?.entries {
        let cairn_engine::PageEntry::Branch { child, .. } = entry else {
            panic!("the catalog's root is not a branch");
        };
        let keys = db
            .page(child)?
            .entries
            .into_iter()
            .map(|e| match e {
                cairn_engine::PageEntry::Leaf { key, .. } => key,
                cairn_engine::PageEntry::Branch { .. } => panic!("the catalog is deeper"),
            })
            .collect();
        leaves.push((child, keys));
    }
    Ok(leaves)
}

/// A rename whose new name goes to a damaged page of the catalog: the damage is met while
/// looking the name up, before the record moves, and nothing changes; the table keeps its
/// old name through a commit. (Should it be met after the record left its old place, the
/// transaction could not commit: the table would vanish.)
#[test]
fn a_rename_that_meets_damage_changes_nothing() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("rename.cairn");
    many_tables(&path, 600)?;
    // The catalog's last leaf, where a name after every other goes.
    let db = Database::builder().read_only(true).open(&path)?;
    let Some(&(last, _)) = catalog_leaves(&db, &path)?.last() else {
        panic!("the catalog has no leaves");
    };
    drop(db);
    let mut bytes = std::fs::read(&path)?;
    bytes[usize::try_from(last * 4096 + 100).unwrap_or(usize::MAX)] ^= 0x20;
    std::fs::write(&path, bytes)?;
    let db = Database::open(&path)?;
    let mut w = db.begin_write()?;
    let renamed = w.rename_table("table_0000", "zz_renamed");
    assert!(
        matches!(renamed, Err(Error::Corruption { .. })),
        "{renamed:?}"
    );
    w.open_table("table_0001")?.insert(b"later", b"change")?;
    w.commit()?;
    let r = db.begin_read()?;
    assert_eq!(
        r.open_table("table_0000")?.get(b"k")?,
        Some(&0u32.to_be_bytes()[..])
    );
    assert_eq!(
        r.open_table("table_0001")?.get(b"later")?,
        Some(&b"change"[..])
    );
    Ok(())
}

/// A rename whose record leaves its old place and then meets damage (the old place's leaf,
/// left nearly empty, is merged with a damaged neighbour): the record is in neither place,
/// so the transaction cannot commit (its commit returns the damage) and the file keeps the
/// table under its old name. Without that guard the commit would write a catalog without
/// the table: its entries gone, its pages leaked.
#[test]
fn a_rename_that_meets_damage_after_moving_its_record_cannot_commit() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("half.cairn");
    many_tables(&path, 400)?;
    // Every table of the first leaf but its first goes; the full leaf after it does not
    // fit beside it, so it stays whole.
    let db = Database::open(&path)?;
    let leaves = catalog_leaves(&db, &path)?;
    let [(_, first), (second, _), ..] = &leaves[..] else {
        panic!("the catalog has {} leaves", leaves.len());
    };
    let kept = String::from_utf8(first[0].clone()).unwrap_or_default();
    let mut w = db.begin_write()?;
    for key in &first[1..] {
        w.drop_table(std::str::from_utf8(key).unwrap_or_default())?;
    }
    w.commit()?;
    db.close()?;
    let db = Database::open(&path)?;
    let leaves = catalog_leaves(&db, &path)?;
    assert_eq!(
        leaves[0].1,
        [kept.as_bytes()],
        "the first leaf holds one table"
    );
    assert_eq!(leaves[1].0, *second, "the second leaf was not rewritten");
    drop(db);
    let mut bytes = std::fs::read(&path)?;
    bytes[usize::try_from(second * 4096 + 100).unwrap_or(usize::MAX)] ^= 0x20;
    std::fs::write(&path, bytes)?;

    let db = Database::open(&path)?;
    let mut w = db.begin_write()?;
    // The catalog's root is this transaction's own page from here on, so that what the
    // failed move did to it stays in the transaction.
    w.create_table("zz_new")?;
    let renamed = w.rename_table(&kept, &format!("{kept}_renamed"));
    assert!(
        matches!(renamed, Err(Error::Corruption { .. })),
        "{renamed:?}"
    );
    let committed = w.commit();
    assert!(
        matches!(committed, Err(Error::Corruption { .. })),
        "{committed:?}"
    );
    let r = db.begin_read()?;
    assert_eq!(
        r.open_table(&kept)?.get(b"k")?,
        Some(&0u32.to_be_bytes()[..])
    );
    assert!(r.open_table("zz_new").is_err(), "nothing of it committed");
    drop(r);
    drop(db);
    let db = Database::open(&path)?;
    let r = db.begin_read()?;
    assert_eq!(
        r.open_table(&kept)?.get(b"k")?,
        Some(&0u32.to_be_bytes()[..])
    );
    Ok(())
}

#[test]
fn truncated_files_are_reported_as_truncated() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("t.cairn");
    let (bytes, _) = build(&path, 1024)?;
    let page_count = Database::open(&path)?.stats()?.page_count as usize;
    for len in [
        1,
        7,
        19,
        1000,
        2047,
        page_count * 1024 - 1,
        page_count * 1024 - 1024,
    ] {
        std::fs::write(&path, &bytes[..len])?;
        match Database::open(&path) {
            Err(Error::Truncated { len: l, .. }) => assert_eq!(l, len as u64),
            other => panic!("length {len}: expected Truncated, got {other:?}"),
        }
        assert_eq!(
            std::fs::read(&path)?,
            &bytes[..len],
            "the file is left untouched"
        );
    }
    Ok(())
}

#[test]
fn empty_foreign_and_newer_files_get_their_own_errors() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("x.cairn");

    std::fs::write(&path, b"")?;
    assert!(matches!(Database::open(&path), Err(Error::EmptyFile)));
    assert!(
        matches!(Database::create(&path), Err(Error::EmptyFile)),
        "only a file create makes itself is initialised"
    );
    assert_eq!(
        std::fs::read(&path)?,
        b"",
        "the empty file is left untouched"
    );

    for foreign in [
        &b"SQLite format 3\0 and some more bytes to pass the header length"[..],
        &[0u8; 8192][..],
        &b"hello"[..],
    ] {
        std::fs::write(&path, foreign)?;
        assert!(matches!(Database::open(&path), Err(Error::NotADatabase)));
        assert!(matches!(Database::create(&path), Err(Error::NotADatabase)));
        assert_eq!(std::fs::read(&path)?, foreign, "the file is left untouched");
    }

    std::fs::remove_file(&path)?;
    build(&path, 4096)?;
    let original = std::fs::read(&path)?;
    let with_version = |v: u32| {
        let mut b = original.clone();
        for copy in [0, 4096] {
            b[copy + 8..copy + 12].copy_from_slice(&v.to_le_bytes());
            let crc = crc32fast::hash(&b[copy..copy + 16]);
            b[copy + 16..copy + 20].copy_from_slice(&crc.to_le_bytes());
        }
        b
    };
    std::fs::write(&path, with_version(6))?;
    assert!(matches!(
        Database::open(&path),
        Err(Error::VersionTooNew {
            found: 6,
            supported: 5
        })
    ));
    // Version 2 (page-aligned log records, a freelist in every slot) is read as it is, and
    // marked version 5 when opened for writing: a version 2 build would not read the log
    // records or pages this one writes. (This file's pages have heads, which a real
    // version 2 file's do not: tests/tests/format_upgrade.rs opens one of version 3.)
    let entries = |db: &Database| -> Result<u64, Error> {
        let r = db.begin_read()?;
        let n = r.list_tables()?.iter().map(|t| t.len).sum();
        Ok(n)
    };
    std::fs::write(&path, &original)?;
    let expected = entries(&Database::builder().read_only(true).open(&path)?)?;
    std::fs::write(&path, with_version(2))?;
    let ro = Database::builder().read_only(true).open(&path)?;
    assert_eq!(entries(&ro)?, expected);
    drop(ro);
    assert_eq!(cairn_engine::inspect(&path)?.format_version, 2, "read-only");
    let rw = Database::open(&path)?;
    assert_eq!(
        cairn_engine::inspect(&path)?.format_version,
        5,
        "opened writable"
    );
    assert_eq!(entries(&rw)?, expected);
    assert!(rw.check()?.is_ok());
    drop(rw);
    std::fs::write(&path, with_version(1))?;
    assert!(matches!(
        Database::open(&path),
        Err(Error::VersionTooOld {
            found: 1,
            oldest: 2
        })
    ));
    assert_eq!(
        std::fs::read(&path)?,
        with_version(1),
        "the file is left untouched"
    );
    Ok(())
}

/// A committed table of 2,000 keys, every leaf damaged but the one holding the first key.
fn every_leaf_but_the_first_damaged() -> Result<Database, Error> {
    let (storage, db) = cairn_tests::on_faulty_store_with(11, 1024, None, None, None)?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    let mut t = w.open_table("t")?;
    for i in 0u32..2000 {
        t.insert(&i.to_be_bytes(), &[7; 40])?;
    }
    w.commit()?;
    db.sync()?;
    // Damage every leaf but the one holding the first key.
    let leaves: Vec<u64> = db
        .pages()?
        .iter()
        .filter(|p| p.kind == "leaf" && p.owner == "t")
        .map(|p| p.page)
        .collect();
    let first = leaves
        .iter()
        .copied()
        .find(|&p| {
            db.page(p).is_ok_and(|d| {
                matches!(d.entries.first(), Some(cairn_engine::PageEntry::Leaf { key, .. })
                    if key.as_slice() == 0u32.to_be_bytes())
            })
        })
        .unwrap_or_else(|| panic!("no leaf holds the first key"));
    drop(db);
    let mut image = storage.live_image();
    for &p in leaves.iter().filter(|&&p| p != first) {
        let at = usize::try_from(p).unwrap_or(usize::MAX) * 1024 + 600;
        image[at] ^= 0xff;
    }
    cairn_tests::open_image(&image, false)
}

/// A removal that meets a damaged page part-way — a range whose next leaf is damaged —
/// has changed the tree by then. Its transaction cannot commit: `commit` returns the
/// damage instead of committing half a removal, and the file keeps every key.
#[test]
fn a_removal_that_meets_damage_part_way_cannot_commit() -> Result<(), Error> {
    let db = every_leaf_but_the_first_damaged()?;
    let mut w = db.begin_write()?;
    let removed = w.open_table("t")?.remove_range::<[u8], _>(..);
    let Err(Error::Corruption { page, .. }) = removed else {
        panic!("the removal found no damage: {removed:?}");
    };
    // Every later read or change in the transaction reports it too: the tree may be half
    // changed (before, reads saw the half-done removal).
    {
        let same = |r: &Result<_, Error>| matches!(r, Err(Error::Corruption { page: p, .. }) if *p == page);
        let mut t = w.open_table("t")?;
        assert!(same(&t.get(&1u32.to_be_bytes()).map(|_| ())), "get");
        assert!(same(&t.iter().map(|_| ())), "iter");
        assert!(same(&t.first().map(|_| ())), "first");
        assert!(same(&t.insert(b"new", b"v").map(|_| ())), "insert");
        assert!(same(&t.remove(&5u32.to_be_bytes()).map(|_| ())), "remove");
        assert!(same(&w.list_tables().map(|_| ())), "list_tables");
    }
    // The commit reports that damage (before, it failed on an owned node its tree no
    // longer reached, or, had the damage come between two leaves' runs, committed half
    // the range).
    let committed = w.commit();
    assert!(
        matches!(committed, Err(Error::Corruption { page: p, .. }) if p == page),
        "{committed:?}"
    );
    // Nothing was committed: the first leaf's keys are all there.
    let r = db.begin_read()?;
    let t = r.open_table("t")?;
    assert_eq!(t.len(), 2000);
    let firsts: Vec<Vec<u8>> = t
        .range(..&10u32.to_be_bytes()[..])?
        .map(|e| e.map(|(k, _)| k.to_vec()))
        .collect::<Result<_, _>>()?;
    assert_eq!(firsts.len(), 10);
    Ok(())
}

/// A rollback to a savepoint taken before a removal that met damage part-way undoes the
/// half-done removal: the transaction is whole again, goes on and commits.
#[test]
fn a_rollback_to_a_savepoint_undoes_a_removal_that_met_damage() -> Result<(), Error> {
    let db = every_leaf_but_the_first_damaged()?;
    let mut w = db.begin_write()?;
    // (Keys between the first two, in the healthy leaf.)
    let (before, after) = ([0u8, 0, 0, 0, 1], [0u8, 0, 0, 0, 2]);
    w.open_table("t")?.insert(&before, b"kept")?;
    let sp = w.savepoint()?;
    let removed = w.open_table("t")?.remove_range::<[u8], _>(..);
    assert!(
        matches!(removed, Err(Error::Corruption { .. })),
        "{removed:?}"
    );
    // A savepoint of a damaged transaction is refused with the damage.
    assert!(matches!(w.savepoint(), Err(Error::Corruption { .. })));
    w.rollback_to(&sp)?;
    {
        let mut t = w.open_table("t")?;
        assert_eq!(t.len(), 2001);
        assert_eq!(t.get(&0u32.to_be_bytes())?, Some(&[7u8; 40][..]));
        t.insert(&after, b"kept too")?;
    }
    w.commit()?;
    let r = db.begin_read()?;
    let t = r.open_table("t")?;
    assert_eq!(t.len(), 2002);
    assert_eq!(t.get(&before)?, Some(&b"kept"[..]));
    assert_eq!(t.get(&after)?, Some(&b"kept too"[..]));
    Ok(())
}

/// Rewrites the newer commit slot of the file at `path` to name commit `txid`, its
/// checksum made to match; returns the other slot's commit.
fn set_newest_txid(path: &Path, txid: u64) -> Result<u64, Error> {
    let mut file = std::fs::read(path)?;
    let slots = [512, 4096 + 512];
    let id = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
    let (newer, older) = if id(&file, slots[0]) > id(&file, slots[1]) {
        (slots[0], slots[1])
    } else {
        (slots[1], slots[0])
    };
    file[newer..newer + 8].copy_from_slice(&txid.to_le_bytes());
    let crc = crc32fast::hash(&file[newer..newer + 72]);
    file[newer + 72..newer + 76].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(path, &file)?;
    Ok(id(&file, older))
}

#[test]
fn a_slot_naming_a_commit_id_past_the_range_is_damage_the_older_slot_serves() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("far.cairn");
    let (_, model) = build(&path, 4096)?;
    // Past 2^60 the id's pin would land on (or past) the writer's lock byte: before the
    // limit, the read-only opening at 2^61 pinned that byte, and the next writer could
    // not take it; at 2^63 the pin failed with an I/O error.
    for far in [1 << 60, 1 << 61, 1 << 63, u64::MAX] {
        std::fs::copy(dir.path().join("far.cairn"), dir.path().join("copy.cairn"))?;
        let copy = dir.path().join("copy.cairn");
        let older = set_newest_txid(&copy, far)?;
        let ro = Database::builder().read_only(true).open(&copy)?;
        assert_eq!(
            ro.begin_read()?.txid(),
            older,
            "{far}: the older slot serves"
        );
        let report = ro.check()?;
        assert!(report.is_ok(), "{far}: {:?}", report.problems);
        assert!(ro.begin_read()?.list_tables()?.len() >= model.len());
        let db = Database::open(&copy)?;
        let mut w = db.begin_write()?;
        w.create_table("after")?;
        w.commit()?;
        assert!(db.check()?.is_ok());
        assert_eq!(
            ro.begin_read()?.txid(),
            older + 1,
            "{far}: the reader follows"
        );
    }
    Ok(())
}

#[test]
fn a_commit_past_the_id_range_is_refused_not_lost() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("last.cairn");
    build(&path, 4096)?;
    let last = (1u64 << 60) - 1;
    set_newest_txid(&path, last)?;
    let db = Database::open(&path)?;
    assert_eq!(db.begin_read()?.txid(), last, "the last id in range opens");
    let mut w = db.begin_write()?;
    w.create_table("next")?;
    match w.commit() {
        Err(Error::Corruption { reason, .. }) => assert!(reason.contains("out of range")),
        other => panic!("a commit past the range: {other:?}"),
    }
    drop(db);
    let db = Database::open(&path)?;
    assert_eq!(
        db.begin_read()?.txid(),
        last,
        "the file is at its last commit"
    );
    assert!(db.check()?.is_ok());
    Ok(())
}

/// A file cut short after its newest commit grew it: opening falls back to the commit
/// before (the newest "needs" more bytes), and a read-only process's readers read that
/// one. They used to retry for the newer commit until they gave up ("commits in another
/// process kept racing past this reader"): a writer grows the file before a slot names the
/// new pages, so a slot the file is too short for is damage, not a commit in flight.
#[test]
fn readers_of_a_file_cut_short_after_its_newest_commit_read_the_one_before() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("short.cairn");
    let db = Database::builder().page_size(1024).create(&path)?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.open_table("t")?.insert(b"small", b"value")?;
    w.commit()?;
    db.sync()?;
    let before = db.begin_read()?.txid();
    let mut w = db.begin_write()?;
    w.open_table("t")?.insert(b"large", &vec![7u8; 3 << 20])?;
    w.commit()?;
    // (Read while the writer holds the file: what its death would leave.)
    let image = std::fs::read(&path)?;
    let info = cairn_engine::inspect(&path)?;
    drop(db);
    let older = info
        .slots
        .iter()
        .filter_map(|s| match s {
            cairn_engine::SlotInfo::Valid {
                txid, page_count, ..
            } if *txid == before => Some(*page_count),
            _ => None,
        })
        .next();
    let Some(older) = older else {
        panic!("no slot of commit {before}: {info:?}");
    };
    let cut = usize::try_from(older * 1024).unwrap_or(usize::MAX);
    assert!(cut < image.len(), "the newest commit grew the file");
    std::fs::write(&path, &image[..cut])?;
    let ro = Database::builder().read_only(true).open(&path)?;
    let read = ro.begin_read()?;
    assert_eq!(read.txid(), before);
    let t = read.open_table("t")?;
    assert_eq!(t.get(b"small")?, Some(&b"value"[..]));
    assert_eq!(t.get(b"large")?, None);
    Ok(())
}

/// A file whose newest commit does not verify (a page it wrote is damaged): opening falls
/// back to the commit before, and a read-only process's readers stay there rather than
/// move to the refused one; when a writer then opens the file (refusing it too) and
/// commits under lower ids, they follow it. They used to move to the refused commit and
/// read damage, and then ignore the writer's commits until its ids passed that one's.
#[test]
fn readers_never_move_to_a_commit_recovery_refused() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("refused.cairn");
    let db = Database::builder()
        .page_size(1024)
        .log_size(0)
        .create(&path)?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.open_table("t")?.insert(b"k", b"durable")?;
    w.commit()?;
    let durable = db.begin_read()?.txid();
    let mut w = db.begin_write()?;
    w.set_durability(cairn_engine::Durability::Eventual);
    w.open_table("t")?.insert(b"k", b"newer")?;
    w.commit()?;
    let leaf = db
        .pages()?
        .into_iter()
        .find(|p| p.kind == "leaf" && p.owner == "t")
        .map(|p| p.page);
    let Some(leaf) = leaf else {
        panic!("no leaf of t");
    };
    // (Read while the writer holds the file: what its death would leave.)
    let mut image = std::fs::read(&path)?;
    drop(db);
    let at = usize::try_from(leaf * 1024 + 100).unwrap_or(usize::MAX);
    image[at] ^= 0xff;
    std::fs::write(&path, &image)?;

    let ro = Database::builder().read_only(true).open(&path)?;
    let read = ro.begin_read()?;
    assert_eq!(
        read.txid(),
        durable,
        "the reader stays at the commit recovery chose"
    );
    assert_eq!(read.open_table("t")?.get(b"k")?, Some(&b"durable"[..]));
    drop(read);
    let writer = Database::open(&path)?;
    let mut w = writer.begin_write()?;
    w.open_table("t")?.insert(b"k", b"after")?;
    w.commit()?;
    let read = ro.begin_read()?;
    assert!(read.txid() > durable, "the reader follows the writer");
    assert_eq!(read.open_table("t")?.get(b"k")?, Some(&b"after"[..]));
    Ok(())
}
