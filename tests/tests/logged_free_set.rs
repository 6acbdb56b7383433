//! A commit its log record makes durable writes no freelist: its free set stays in the
//! writer's memory, recovery rebuilds it from the durable commit and the log, and every
//! tool that reads a snapshot (check, stats, the page map, `inspect`, a clean close) copes.

use cairn_engine::{Database, Error, SlotInfo, inspect};
use cairn_tests::{on_faulty_store, open_image};
use std::path::{Path, PathBuf};

/// Whether each slot of the file at `path` names a freelist (`None`: invalid slot), newest
/// commit first.
fn freelists_named(path: &Path) -> Result<Vec<Option<bool>>, Error> {
    let mut slots: Vec<(u64, Option<bool>)> = inspect(path)?
        .slots
        .iter()
        .map(|s| match s {
            SlotInfo::Valid {
                txid,
                freelist_page,
                ..
            } => (*txid, Some(freelist_page.is_some())),
            SlotInfo::Invalid => (0, None),
        })
        .collect();
    slots.sort_by_key(|&(txid, _)| std::cmp::Reverse(txid));
    Ok(slots.into_iter().map(|(_, named)| named).collect())
}

/// A first commit of 2,000 keys (it syncs), then single-put and single-removal commits,
/// which the log makes durable.
fn logged_commits(db: &Database) -> Result<(), Error> {
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    for i in 0u32..2000 {
        w.open_table("t")?.insert(&i.to_be_bytes(), &[1; 60])?;
    }
    w.commit()?;
    for i in 0u32..30 {
        let mut w = db.begin_write()?;
        let mut t = w.open_table("t")?;
        t.insert(&(i * 61).to_be_bytes(), &[2; 60])?;
        t.remove(&(i * 67 + 1).to_be_bytes())?;
        w.commit()?;
    }
    Ok(())
}

/// A database file in a fresh folder (returned, to keep it) after [`logged_commits`].
fn logged_file() -> Result<(tempfile::TempDir, PathBuf, Database), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("logged.cairn");
    let db = Database::create(&path)?;
    logged_commits(&db)?;
    Ok((dir, path, db))
}

#[test]
fn a_logged_commit_names_no_freelist_and_a_power_cut_rebuilds_its_free_set() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let mut replayed = 0;
    for seed in 0..20 {
        let (storage, db) = on_faulty_store(seed)?;
        logged_commits(&db)?;
        let expected = db.begin_read()?.open_table("t")?.len();
        let image = storage.power_cut();
        drop(db);
        let path = dir.path().join(format!("cut{seed}.cairn"));
        std::fs::write(&path, &image)?;
        if freelists_named(&path)?[0] == Some(false) {
            replayed += 1;
        }
        let reopened = open_image(&image, false)?;
        // The free set rebuilt: no page both used and free, none leaked.
        let report = reopened.check()?;
        assert!(report.is_ok(), "seed {seed}: {:?}", report.problems);
        assert_eq!(reopened.begin_read()?.open_table("t")?.len(), expected);
    }
    assert!(
        replayed > 10,
        "the newest slot on disk was a logged commit after {replayed} cuts of 20"
    );
    Ok(())
}

#[test]
fn stats_and_the_page_map_count_a_logged_commits_free_pages() -> Result<(), Error> {
    let (_dir, path, db) = logged_file()?;
    assert_eq!(freelists_named(&path)?[0], Some(false));
    let free_in_map = |db: &Database| -> Result<usize, Error> {
        Ok(db.pages()?.iter().filter(|p| p.kind == "free").count())
    };
    let (stats, map) = (db.stats()?, free_in_map(&db)?);
    assert_eq!((stats.freelist_pages, stats.free_pages), (0, map as u64));
    assert!(map > 0, "the removals and rewrites freed pages");
    assert!(db.pages()?.iter().all(|p| p.kind != "unused"));

    // The check writes the free set (a sync), then accounts for every page with it.
    let report = db.check()?;
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(freelists_named(&path)?[0], Some(true));
    let after = db.stats()?;
    assert!(after.freelist_pages > 0);
    // The freelist's own run came out of the free pages.
    assert_eq!(
        after.free_pages + after.freelist_pages,
        stats.free_pages + (after.page_count - stats.page_count)
    );
    assert_eq!(free_in_map(&db)? as u64, after.free_pages);
    Ok(())
}

#[test]
fn a_check_beside_an_open_write_transaction_does_not_wait_for_it() -> Result<(), Error> {
    let (_, db) = on_faulty_store(7)?;
    logged_commits(&db)?;
    let entries = db.begin_read()?.open_table("t")?.len();
    let mut w = db.begin_write()?;
    w.open_table("t")?.insert(b"pending", b"x")?;
    // The writer state is the transaction's: the check goes on without the free set.
    let report = db.check()?;
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.entries, entries);
    w.commit()?;
    let report = db.check()?;
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.entries, entries + 1);
    Ok(())
}

#[test]
fn a_clean_close_leaves_both_slots_naming_their_freelists() -> Result<(), Error> {
    let (_dir, path, db) = logged_file()?;
    let entries = db.begin_read()?.open_table("t")?.len();
    drop(db);
    assert_eq!(freelists_named(&path)?, vec![Some(true), Some(true)]);
    let reopened = Database::open(&path)?;
    assert_eq!(reopened.io_stats().commits, 0, "nothing to replay");
    assert_eq!(reopened.begin_read()?.open_table("t")?.len(), entries);
    assert!(reopened.check()?.is_ok());
    Ok(())
}

#[test]
fn a_follower_reports_a_slot_naming_an_impossible_freelist_without_walking_it() -> Result<(), Error>
{
    let (_dir, path, db) = logged_file()?;
    drop(db);
    let ro = Database::builder().read_only(true).open(&path)?;
    // A newer slot, as a writer process would write it, but naming a freelist of 2^50
    // pages; its checksum made to match.
    let mut file = std::fs::read(&path)?;
    let (slot0, slot1) = (512, 4096 + 512);
    let mut slot = file[slot0..slot0 + 76].to_vec();
    let txid = u64::from_le_bytes(slot[0..8].try_into().unwrap_or_default());
    slot[0..8].copy_from_slice(&(txid + 5).to_le_bytes());
    slot[44..52].copy_from_slice(&((1u64 << 50) * 4096).to_le_bytes());
    let crc = crc32fast::hash(&slot[..72]);
    slot[72..76].copy_from_slice(&crc.to_le_bytes());
    file[slot1..slot1 + 76].copy_from_slice(&slot);
    std::fs::write(&path, &file)?;
    assert_eq!(
        ro.begin_read()?.txid(),
        txid + 5,
        "the follower took the new slot"
    );
    assert!(matches!(ro.stats(), Err(Error::Corruption { .. })));
    Ok(())
}
