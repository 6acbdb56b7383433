//! The commit log: a durable commit appends a record of its changes with one write that is
//! durable on its own, instead of syncing the whole file; a power cut that loses the
//! commit's pages loses nothing acknowledged, because opening replays the records.

use std::sync::Arc;

use cairn_engine::storage::{FaultyStorage, MemoryStorage};
use cairn_engine::{Database, Durability, Error, TableMut};
use cairn_tests::{on_faulty_store, open_image};

type State = Vec<(Vec<u8>, Vec<u8>)>;

fn contents(db: &Database, table: &str) -> Result<Option<State>, Error> {
    let r = db.begin_read()?;
    let t = match r.open_table(table) {
        Err(Error::TableNotFound(_)) => return Ok(None),
        t => t?,
    };
    let entries = t
        .iter()?
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<State, Error>>()?;
    Ok(Some(entries))
}

/// A database on a fault-injecting store after durable commits of a put or two, with tables
/// created and dropped on the way.
fn logged_history(seed: u64) -> Result<(Arc<FaultyStorage>, Database), Error> {
    // (Immediate, the database's default durability.)
    let (storage, db) = on_faulty_store(seed)?;
    let mut w = db.begin_write()?;
    w.create_table("kept")?;
    w.create_table("dropped")?;
    w.commit()?;
    for i in 0u32..40 {
        let mut w = db.begin_write()?;
        w.open_table("kept")?
            .insert(&i.to_be_bytes(), &[i as u8; 30])?;
        if i % 10 == 3 {
            w.open_table("kept")?.remove(&(i - 2).to_be_bytes())?;
        }
        if i == 20 {
            w.drop_table("dropped")?;
            w.create_table("later")?;
            w.open_table("later")?.insert(b"x", b"y")?;
        }
        w.commit()?;
    }
    Ok((storage, db))
}

/// The database as a power cut now leaves it, reopened (for writing, so that it replays
/// its log), and whether opening replayed commits (opening commits only to apply the log).
fn cut_and_reopen(storage: &FaultyStorage, db: Database) -> Result<(Database, bool), Error> {
    let image = storage.power_cut();
    drop(db);
    let reopened = open_image(&image, false)?;
    let replayed = reopened.io_stats().commits > 0;
    Ok((reopened, replayed))
}

fn expected() -> State {
    (0u32..40)
        // Commits 3, 13, 23 and 33 removed keys 1, 11, 21 and 31.
        .filter(|i| i % 10 != 1)
        .map(|i| (i.to_be_bytes().to_vec(), vec![i as u8; 30]))
        .collect()
}

#[test]
fn power_cuts_after_logged_commits_replay_them() -> Result<(), Error> {
    let mut replayed = 0;
    for seed in 0..60 {
        let (storage, db) = logged_history(seed)?;
        assert_eq!(contents(&db, "kept")?, Some(expected()));
        let (reopened, replays) = cut_and_reopen(&storage, db)?;
        replayed += usize::from(replays);
        assert_history(&reopened, seed)?;
    }
    assert!(
        replayed > 10,
        "cuts lost pages that only the log held: {replayed}"
    );
    Ok(())
}

/// A logged commit's record holds what its transaction kept: changes rolled back to a
/// savepoint (a table created, keys put and removed) are not replayed after a power cut.
#[test]
fn a_replayed_record_leaves_out_what_a_savepoint_rolled_back() -> Result<(), Error> {
    let mut replayed = 0;
    for seed in 0..40 {
        let (storage, db) = on_faulty_store(seed)?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        for i in 0u32..10 {
            let mut w = db.begin_write()?;
            w.open_table("t")?.insert(&i.to_be_bytes(), b"kept")?;
            let sp = w.savepoint()?;
            w.open_table("t")?.insert(b"gone", b"rolled back")?;
            w.open_table("t")?.remove(&i.to_be_bytes())?;
            w.create_table("gone")?;
            w.rollback_to(&sp)?;
            w.open_table("t")?.insert(b"after", &i.to_be_bytes())?;
            w.release(sp)?;
            w.commit()?;
        }
        let (reopened, replays) = cut_and_reopen(&storage, db)?;
        replayed += usize::from(replays);
        assert!(reopened.check()?.is_ok(), "seed {seed}");
        let mut want: State = (0u32..10)
            .map(|i| (i.to_be_bytes().to_vec(), b"kept".to_vec()))
            .collect();
        want.push((b"after".to_vec(), 9u32.to_be_bytes().to_vec()));
        assert_eq!(contents(&reopened, "t")?, Some(want), "seed {seed}");
        assert_eq!(contents(&reopened, "gone")?, None, "seed {seed}");
    }
    assert!(
        replayed > 5,
        "cuts lost pages that only the log held: {replayed}"
    );
    Ok(())
}

/// The commit that applies the log's records when the file opens took the first record's
/// id until the thirty-ninth session, and the records after it then followed its slot: a
/// crash before the next cycle of the log (opened, replayed, killed) applied them a second
/// time at the next opening, which failed when one created a table ("already exists").
#[test]
fn a_crash_right_after_a_replay_does_not_apply_the_records_again() -> Result<(), Error> {
    let mut replays = 0;
    for seed in 0..20 {
        let (storage, db) = on_faulty_store(seed)?;
        let mut w = db.begin_write()?;
        w.create_table("kept")?;
        w.commit()?;
        db.sync()?;
        for i in 0u32..4 {
            let mut w = db.begin_write()?;
            if i == 2 {
                w.create_table("made later")?;
            }
            w.open_table("kept")?.insert(&i.to_be_bytes(), b"v")?;
            w.commit()?;
        }
        let image = storage.power_cut();
        drop(db);
        let reopened = Arc::new(MemoryStorage::from_bytes(&image)?);
        let db = Database::builder().with_storage(reopened.clone(), false, None)?;
        if db.io_stats().commits == 0 {
            continue;
        }
        replays += 1;
        // A second cut before any other commit: the replay synced all it wrote.
        let again = open_image(&reopened.to_vec(), false)?;
        assert_eq!(again.io_stats().commits, 0, "seed {seed}: applied again");
        for table in ["kept", "made later"] {
            assert_eq!(
                contents(&again, table)?,
                contents(&db, table)?,
                "seed {seed}"
            );
        }
        assert_eq!(contents(&again, "kept")?.map(|t| t.len()), Some(4));
    }
    assert!(replays > 5, "{replays} replays");
    Ok(())
}

/// What a read-only opening of a database after a power cut must show.
fn assert_recovered(db: &Database, seed: u64, had_log: bool) -> Result<(), Error> {
    assert!(db.is_read_only());
    // (Where the newest commit's pages survived, it opens at that one, a logged commit
    // whose free set only the log rebuilds: a writable opening replays, this one need not.)
    assert!(had_log || !db.is_private_copy(), "seed {seed}");
    assert_history(db, seed)?;
    assert!(matches!(db.begin_write(), Err(Error::ReadOnly)));
    Ok(())
}

/// What a database after `logged_history` and a power cut must hold, and its check.
fn assert_history(db: &Database, seed: u64) -> Result<(), Error> {
    assert_eq!(contents(db, "kept")?, Some(expected()), "seed {seed}");
    assert_eq!(contents(db, "dropped")?, None, "seed {seed}");
    assert_eq!(
        contents(db, "later")?,
        Some(vec![(b"x".to_vec(), b"y".to_vec())]),
        "seed {seed}"
    );
    let report = db.check()?;
    assert!(report.is_ok(), "seed {seed}: {report:?}");
    Ok(())
}

/// A read-only opening applies the commits only the log holds to a private copy, from any
/// storage and from a file (a private map), and leaves the file as it was.
#[test]
fn a_read_only_open_applies_the_log_to_a_private_copy() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let mut copies = 0;
    for seed in 0..40 {
        let (storage, db) = logged_history(seed)?;
        let image = storage.power_cut();
        drop(db);
        let had_log = open_image(&image, false)?.io_stats().commits > 0;
        let db = open_image(&image, true)?;
        assert_recovered(&db, seed, had_log)?;
        copies += usize::from(db.is_private_copy());
        let path = dir.path().join(format!("{seed}.cairn"));
        std::fs::write(&path, &image)?;
        let file = Database::builder().read_only(true).open(&path)?;
        assert_recovered(&file, seed, had_log)?;
        assert_eq!(file.is_private_copy(), db.is_private_copy(), "seed {seed}");
        drop(file);
        assert!(
            std::fs::read(&path)? == image,
            "seed {seed}: the file changed"
        );
    }
    assert!(
        copies > 5,
        "cuts left few commits only the log held: {copies}"
    );
    Ok(())
}

fn big_value(i: u32, round: u8) -> Vec<u8> {
    let mut v = i.to_be_bytes().to_vec();
    v.resize(200, round);
    v
}

/// A private copy pins the commits it read from the file: a writer that opens the file
/// afterwards (applying the log itself), rewrites every page many times and empties the
/// table, so that the file would shrink, neither changes nor cuts off what the copy shows.
#[test]
fn a_private_copy_keeps_its_pages_while_a_writer_goes_on() -> Result<(), Error> {
    const BIG: u32 = 2_000;
    let dir = tempfile::tempdir()?;
    for seed in 0..40 {
        // A large table in the durable commit, then commits only the log holds.
        let (storage, db) = on_faulty_store(seed)?;
        let mut w = db.begin_write()?;
        w.create_table("big")?;
        let mut t = w.open_table("big")?;
        for i in 0..BIG {
            t.insert(&i.to_be_bytes(), &big_value(i, 0))?;
        }
        w.commit()?;
        db.sync()?;
        for i in 0u32..10 {
            let mut w = db.begin_write()?;
            w.open_table("big")?.insert(b"logged", &i.to_be_bytes())?;
            w.commit()?;
        }
        let image = storage.power_cut();
        drop(db);
        if open_image(&image, false)?.io_stats().commits == 0 {
            continue;
        }
        let path = dir.path().join("pinned.cairn");
        std::fs::write(&path, &image)?;
        let copy = Database::builder().read_only(true).open(&path)?;
        let held = copy.begin_read()?;
        let writer = Database::open(&path)?;
        for round in 1u8..20 {
            let mut w = writer.begin_write()?;
            let mut t = w.open_table("big")?;
            for i in 0..BIG {
                t.insert(&i.to_be_bytes(), &big_value(i, round))?;
            }
            w.commit()?;
            // Durable in the file: the pages its commits freed may be reused.
            writer.sync()?;
        }
        for _ in 0..3 {
            let mut w = writer.begin_write()?;
            w.drop_table("big")?;
            w.create_table("big")?;
            w.commit()?;
            writer.sync()?;
        }
        assert_eq!(contents(&writer, "big")?, Some(Vec::new()));
        let mut want: State = (0..BIG)
            .map(|i| (i.to_be_bytes().to_vec(), big_value(i, 0)))
            .collect();
        want.push((b"logged".to_vec(), 9u32.to_be_bytes().to_vec()));
        assert_eq!(contents(&copy, "big")?, Some(want), "seed {seed}");
        assert!(copy.check()?.is_ok(), "seed {seed}");
        let t = held.open_table("big")?;
        assert_eq!(t.get(b"logged")?, Some(&9u32.to_be_bytes()[..]));
        return Ok(());
    }
    panic!("no power cut left commits that only the log held");
}

#[test]
fn durable_single_put_commits_reuse_their_own_pages_between_syncs() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let db = Database::create(dir.path().join("reuse.cairn"))?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    let mut t = w.open_table("t")?;
    for i in 0u32..20_000 {
        t.insert(&i.to_be_bytes(), &[1; 50])?;
    }
    w.commit()?;
    let before = db.stats()?.page_count;
    let io = db.io_stats();
    for i in 0u32..1_000 {
        let mut w = db.begin_write()?;
        w.open_table("t")?
            .insert(&(i * 7).to_be_bytes(), &[2; 50])?;
        w.commit()?;
    }
    // The pages a logged commit wrote are not in the durable commit, so the next commits
    // reuse them at once instead of waiting for the next sync and growing the file (by
    // about 4,000 pages: four a commit). Only the durable commit's pages that the commits
    // replaced wait (no sync comes: the log holds all 1,000 records), about one for each
    // leaf and branch touched.
    let grown = db.stats()?.page_count - before;
    assert!(
        grown < 200,
        "{grown} pages more after 1,000 single-put commits"
    );
    // One sync or log write per commit (and one more when a commit grows the file).
    let syncs = db.io_stats().syncs - io.syncs;
    assert!((1_000..1_010).contains(&syncs), "{syncs} syncs");
    Ok(())
}

/// A large commit early in the log's cycle logs even when it grows the file: a sync would
/// hand the next commits back only the few pages earlier commits of the cycle freed, and
/// the record spares the commit syncing every page it wrote. A power cut may then lose
/// those pages and the file's growth; opening replays the record.
/// For each of `seeds` faulty stores: `load` in one transaction, a sync, then `change` in
/// one durable transaction, then a power cut; the reopened database must hold `expected`
/// and pass its check. Returns how many reopenings replayed the log (a commit that synced
/// has nothing to replay). `grown` is told whether the change grew the file.
fn cut_after_one_large_commit(
    seeds: u64,
    load: impl Fn(&mut TableMut<'_>) -> Result<(), Error>,
    change: impl Fn(&mut TableMut<'_>) -> Result<(), Error>,
    expected: &State,
    grown: impl Fn(bool),
) -> Result<usize, Error> {
    use cairn_engine::storage::Storage;
    let mut replayed = 0;
    for seed in 0..seeds {
        let (storage, db) = on_faulty_store(seed)?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        load(&mut w.open_table("t")?)?;
        w.commit()?;
        db.sync()?;
        let len = storage.len();
        let mut w = db.begin_write()?;
        change(&mut w.open_table("t")?)?;
        w.commit()?;
        grown(storage.len() > len);
        let (reopened, replays) = cut_and_reopen(&storage, db)?;
        replayed += usize::from(replays);
        assert!(reopened.check()?.is_ok(), "seed {seed}");
        assert_eq!(
            contents(&reopened, "t")?.as_ref(),
            Some(expected),
            "seed {seed}"
        );
    }
    Ok(replayed)
}

#[test]
fn a_large_commit_that_grows_the_file_logs_and_a_cut_after_it_replays_it() -> Result<(), Error> {
    let keys = 0u32..20_000;
    let expected: State = keys
        .clone()
        .filter(|i| i % 3 != 0)
        .map(|i| (i.to_be_bytes().to_vec(), vec![7; 60]))
        .collect();
    let replayed = cut_after_one_large_commit(
        20,
        |t| {
            keys.clone()
                .try_for_each(|i| t.insert(&i.to_be_bytes(), &[7; 60]).map(drop))
        },
        // Every leaf loses a key: each is written again, past the end of a dense file.
        |t| {
            keys.clone()
                .step_by(3)
                .try_for_each(|i| t.remove(&i.to_be_bytes()).map(drop))
        },
        &expected,
        |grown| assert!(grown, "the commit grew the file"),
    )?;
    assert!(
        replayed > 0,
        "no cut lost the commit's pages: was it synced?"
    );
    Ok(())
}

#[test]
fn a_transaction_of_ten_thousand_small_puts_logs_and_a_cut_after_it_replays_it() -> Result<(), Error>
{
    // Every third key of 30,000: every leaf is rewritten (3.8 MB of 1 KiB pages, three
    // times the record's bytes, and fewer than 4,096 pages freed), and the record (about
    // 1.15 MB) fits the 2 MiB log (the load before it outgrew a new file's 64 KiB log,
    // which then moved to a run of 2 MiB): the commit appends it instead of syncing every
    // leaf.
    let keys = 0u32..30_000;
    let updated = |i: &u32| i.is_multiple_of(3);
    let expected: State = keys
        .clone()
        .map(|i| {
            (
                i.to_be_bytes().to_vec(),
                vec![if updated(&i) { 2 } else { 1 }; 100],
            )
        })
        .collect();
    let replayed = cut_after_one_large_commit(
        4,
        |t| {
            keys.clone()
                .try_for_each(|i| t.insert(&i.to_be_bytes(), &[1; 100]).map(drop))
        },
        |t| {
            keys.clone()
                .filter(updated)
                .try_for_each(|i| t.insert(&i.to_be_bytes(), &[2; 100]).map(drop))
        },
        &expected,
        drop,
    )?;
    assert!(
        replayed > 0,
        "no cut lost the commit's pages: was it synced?"
    );
    Ok(())
}

/// What the tests below read of a sealed commit's slot.
struct Sealed {
    txid: u64,
    log_page: u64,
    freelist_page: u64,
    freelist_len: u64,
}

/// The image of a cleanly closed database (1 KiB pages) after `work`, and its first slot
/// as `cairn info` reads it: valid, and (a clean close syncs) naming its freelist.
fn sealed(work: impl FnOnce(&Database) -> Result<(), Error>) -> Result<(Vec<u8>, Sealed), Error> {
    let (storage, db) = on_faulty_store(1)?;
    work(&db)?;
    drop(db);
    let image = storage.live_image();
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("f.cairn");
    std::fs::write(&path, &image)?;
    let [slot, _] = cairn_engine::inspect(&path)?.slots;
    let cairn_engine::SlotInfo::Valid {
        txid,
        log_page,
        freelist_page: Some(freelist_page),
        freelist_len,
        ..
    } = slot
    else {
        panic!("slot 0 holds the sealed commit, which names its freelist: {slot:?}");
    };
    let sealed = Sealed {
        txid,
        log_page,
        freelist_page,
        freelist_len,
    };
    Ok((image, sealed))
}

#[test]
fn a_log_record_that_does_not_apply_is_reported_as_damage() -> Result<(), Error> {
    let (mut image, slot) = sealed(|db| {
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.commit()
    })?;
    let Sealed { txid, log_page, .. } = slot;
    // A well-formed record, checksum and all, of a put into a table that does not exist.
    let mut payload = vec![1, 4, 0];
    payload.extend_from_slice(b"nope");
    payload.extend_from_slice(&[2, 1, 0, b'k', 1, 0, 0, 0, b'v']);
    let at = log_page as usize * 1024;
    let record = &mut image[at..at + 1024];
    record[0] = 5;
    record[8..16].copy_from_slice(&(txid + 1).to_le_bytes());
    record[16..24].copy_from_slice(&txid.to_le_bytes());
    record[24..28].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    record[32..32 + payload.len()].copy_from_slice(&payload);
    // Checksummed with the index of its first 512-byte unit in the file.
    let mut h = crc32fast::Hasher::new();
    h.update(&(at as u64 / 512).to_le_bytes());
    h.update(&record[..28]);
    h.update(&payload);
    record[28..32].copy_from_slice(&h.finalize().to_le_bytes());
    match open_image(&image, false) {
        Err(Error::Corruption { page, reason }) => {
            assert_eq!(page, log_page);
            assert!(reason.contains("nope"), "{reason}");
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    Ok(())
}

#[test]
fn a_freelist_that_lists_pages_of_the_log_is_refused() -> Result<(), Error> {
    let (mut image, slot) = sealed(|db| {
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        for i in 0u32..200 {
            w.open_table("t")?.insert(&i.to_be_bytes(), &[1; 40])?;
        }
        w.commit()?;
        let mut w = db.begin_write()?;
        for i in 0u32..100 {
            w.open_table("t")?.remove(&i.to_be_bytes())?;
        }
        w.commit()
    })?;
    let Sealed {
        freelist_page,
        freelist_len,
        log_page,
        ..
    } = slot;
    assert!(freelist_page != 0, "the removals left free pages");
    // The first free run now starts inside the log; checksums made to match again: the
    // freelist's in both slots, and each slot's own.
    let at = freelist_page as usize * 1024;
    let run = &mut image[at..at + freelist_len as usize];
    assert!(u64::from_le_bytes(run[16..24].try_into().unwrap_or_default()) > 0);
    run[24..32].copy_from_slice(&(log_page + 3).to_le_bytes());
    let mut h = crc32fast::Hasher::new();
    h.update(&freelist_page.to_le_bytes());
    h.update(run);
    let crc = h.finalize();
    for slot in [512, 1024 + 512] {
        image[slot + 52..slot + 56].copy_from_slice(&crc.to_le_bytes());
        let own = crc32fast::hash(&image[slot..slot + 72]);
        image[slot + 72..slot + 76].copy_from_slice(&own.to_le_bytes());
    }
    match open_image(&image, false) {
        Err(Error::NoValidCommit { slot0, slot1 }) => {
            assert!(slot0.contains("of the commit log"), "{slot0}");
            assert!(slot1.contains("of the commit log"), "{slot1}");
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    Ok(())
}

#[test]
fn a_durable_commit_after_eventual_ones_makes_their_records_durable_too() -> Result<(), Error> {
    let mut replayed = 0;
    for seed in 0..40 {
        let (storage, db) = on_faulty_store(seed)?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        for i in 0u32..12 {
            let mut w = db.begin_write()?;
            // Two Eventual commits, then an Immediate one, four times over.
            if i % 3 != 2 {
                w.set_durability(Durability::Eventual);
            }
            w.open_table("t")?
                .insert(&i.to_be_bytes(), &[i as u8; 20])?;
            w.commit()?;
        }
        let (reopened, replays) = cut_and_reopen(&storage, db)?;
        replayed += usize::from(replays);
        let want: State = (0u32..12)
            .map(|i| (i.to_be_bytes().to_vec(), vec![i as u8; 20]))
            .collect();
        assert_eq!(contents(&reopened, "t")?, Some(want), "seed {seed}");
    }
    // The Immediate commits wrote the log, not the whole file: cuts lost their pages.
    assert!(replayed > 5, "{replayed} reopenings replayed the log");
    Ok(())
}

#[test]
fn a_reader_pins_the_pages_commits_between_two_syncs_wrote_and_freed() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let db = Database::create(dir.path().join("pins.cairn"))?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.commit()?;
    let reader = db.begin_read()?;
    // Fifty logged commits rewriting one key: each frees the leaf and the catalog page the
    // commit before it wrote (pages younger than the last sync; the first also frees the
    // synced commit's freelist page, when it had one).
    for i in 0u32..50 {
        let mut w = db.begin_write()?;
        w.open_table("t")?.insert(b"k", &i.to_be_bytes())?;
        w.commit()?;
    }
    let pinned = db.stats()?.pages_pinned_by_readers;
    assert!(pinned >= 100, "{pinned} pages pinned by the reader");
    drop(reader);
    let mut w = db.begin_write()?;
    w.open_table("t")?.insert(b"k", b"last")?;
    w.commit()?;
    assert_eq!(db.stats()?.pages_pinned_by_readers, 0);
    Ok(())
}

#[test]
fn a_slot_naming_an_impossible_log_is_refused() -> Result<(), Error> {
    let (image, slot) = sealed(|db| {
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.open_table("t")?.insert(b"k", b"v")?;
        w.commit()
    })?;
    let Sealed {
        txid,
        freelist_page,
        ..
    } = slot;
    // Each damage to both slots, their checksums made to match again.
    let cases: [(&str, u64, u64, &str); 5] = [
        ("log at page 0", 56, 0, "at page 0"),
        (
            "log over the freelist",
            64,
            freelist_page - 1,
            "overlapping the freelist",
        ),
        ("log past the file", 64, 1 << 40, "outside the file"),
        ("the largest txid", 0, u64::MAX, "out of range"),
        ("a txid past 2^60", 0, 1 << 60, "out of range"),
    ];
    for (what, field, value, reason) in cases {
        let mut b = image.clone();
        for slot in [512, 1024 + 512] {
            b[slot + field as usize..slot + field as usize + 8]
                .copy_from_slice(&value.to_le_bytes());
            let own = crc32fast::hash(&b[slot..slot + 72]);
            b[slot + 72..slot + 76].copy_from_slice(&own.to_le_bytes());
        }
        match open_image(&b, false) {
            Err(Error::NoValidCommit { slot0, slot1 }) => {
                assert!(
                    slot0.contains(reason) && slot1.contains(reason),
                    "{what}: {slot0} / {slot1}"
                );
            }
            other => panic!("{what}: {:?}", other.map(|_| ())),
        }
    }
    assert!(txid < u64::MAX);
    Ok(())
}

/// A writer that died after twenty durable single-put commits (each logged, its record
/// one unit): the file as the dead process left it, with the first unit of the log's
/// records and the commit the first of them follows.
fn died_after_twenty_puts(dir: &std::path::Path) -> Result<(Vec<u8>, usize, u64), Error> {
    died_after_twenty_puts_seen_halfway(dir).map(|(image, _, unit, base)| (image, unit, base))
}

/// As [`died_after_twenty_puts`], with the file as it was after ten of the puts too.
fn died_after_twenty_puts_seen_halfway(
    dir: &std::path::Path,
) -> Result<(Vec<u8>, Vec<u8>, usize, u64), Error> {
    let path = dir.join("died.cairn");
    let db = Database::create(&path)?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.commit()?;
    let mut halfway = Vec::new();
    for i in 0u32..20 {
        if i == 10 {
            halfway = std::fs::read(&path)?;
        }
        let mut w = db.begin_write()?;
        w.open_table("t")?.insert(&i.to_be_bytes(), b"value")?;
        w.commit()?;
    }
    // (Read while the writer holds the file: what its death would leave.)
    let image = std::fs::read(&path)?;
    let info = cairn_engine::inspect(&path)?;
    drop(db);
    let durable = info
        .slots
        .iter()
        .filter_map(|s| match s {
            cairn_engine::SlotInfo::Valid {
                durable_txid,
                log_page,
                freelist_page: None,
                ..
            } => Some((*log_page, *durable_txid)),
            _ => None,
        })
        .next();
    let Some((log_page, base)) = durable else {
        panic!("no logged commit in {:?}", info.slots);
    };
    let page_size = info.page_size as usize;
    Ok((image, halfway, log_page as usize * page_size / 512, base))
}

/// The commit slot of the database at `path` that names a logged commit.
fn logged_slot(path: &std::path::Path) -> Result<usize, Error> {
    let slots = cairn_engine::inspect(path)?.slots;
    let logged = |s: &cairn_engine::SlotInfo| {
        matches!(
            s,
            cairn_engine::SlotInfo::Valid {
                freelist_page: None,
                ..
            }
        )
    };
    Ok(slots
        .iter()
        .position(logged)
        .unwrap_or_else(|| panic!("no slot names a logged commit: {slots:?}")))
}

/// Opening `image`, for writing and read-only, fails with the log reported damaged.
fn refused_as_damaged_log(image: &[u8]) -> Result<(), Error> {
    for read_only in [false, true] {
        match open_image(image, read_only) {
            Err(e) => assert!(e.to_string().contains("commit log damaged"), "{e}"),
            Ok(db) => panic!(
                "read-only {read_only}: opened with {} keys",
                db.begin_read()?.open_table("t")?.len()
            ),
        }
    }
    Ok(())
}

/// A record of the log damaged before it was applied, followed by records that say it was
/// durable, makes opening fail with an error naming the log (instead of opening at the
/// commit before it, without the acknowledged commits after it); the last record damaged
/// could be a write a power cut tore, and opening drops it.
#[test]
fn a_damaged_record_that_later_ones_prove_durable_is_an_error() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let (image, first_unit, base) = died_after_twenty_puts(dir.path())?;
    let intact = open_image(&image, false)?;
    assert_eq!(intact.begin_read()?.open_table("t")?.len(), 20);
    drop(intact);
    let unit_of = |txid: u64| first_unit + (txid - base - 1) as usize;
    // The record of the sixth put (the puts are the twenty commits after the base).
    let mut damaged = image.clone();
    damaged[unit_of(base + 6) * 512 + 40] ^= 0xff;
    match open_image(&damaged, false) {
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains("commit log damaged"), "{text}");
            assert!(
                text.contains(&format!("commit {} is missing", base + 6)),
                "{text}"
            );
        }
        Ok(db) => panic!(
            "opened with {} keys",
            db.begin_read()?.open_table("t")?.len()
        ),
    }
    // The last record: dropped, as a torn write would be.
    let mut damaged = image.clone();
    damaged[unit_of(base + 20) * 512 + 40] ^= 0xff;
    let db = open_image(&damaged, false)?;
    assert_eq!(db.begin_read()?.open_table("t")?.len(), 19);
    Ok(())
}

/// The same damaged record, and the slot that named the newest commit damaged too: the
/// other slot names only the commit the log follows, but the records after the damaged
/// one still prove it durable, so opening fails as before and salvage reports the commits
/// lost. (Until the forty-second session the file opened at the commit before the damaged
/// record, and salvage said nothing was lost: seen while looking into a damaged file of
/// the damage test's dead writer whose last records were lost with their slot.)
#[test]
fn with_the_newest_slot_damaged_too_the_records_still_prove_the_loss() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let (image, first_unit, base) = died_after_twenty_puts(dir.path())?;
    let path = dir.path().join("image.cairn");
    std::fs::write(&path, &image)?;
    let newest_slot = logged_slot(&path)?;
    let mut damaged = image.clone();
    let page_size = 4096;
    damaged[newest_slot * page_size + 512 + 8] ^= 0xff;
    damaged[(first_unit + 5) * 512 + 40] ^= 0xff;
    refused_as_damaged_log(&damaged)?;
    std::fs::write(&path, &damaged)?;
    let got = cairn_tests::salvaged::salvage(&path)?;
    assert_eq!(got.report.txid + got.report.logged_commits, base + 5);
    assert!(
        got.lost
            .iter()
            .any(|l| l.keys == cairn_engine::LostKeys::Log
                && l.reason.contains("commit log damaged")),
        "{:?}",
        got.lost
    );
    assert_eq!(got.tables.get("t").map(|t| t.len()), Some(5));
    Ok(())
}

/// The newest commit's pages damaged, and the log's first record after the durable commit
/// too: a read-only opening, with no writer beside it, looks past the damaged record as a
/// writable one does, and fails where later records prove it durable. (Until the
/// forty-third session it opened the durable commit, without the twenty acknowledged puts,
/// and said nothing: the damage test's dead writer, a bit flipped in a page of its last
/// commit and the log's first page zeroed.)
#[test]
fn a_read_only_opening_looks_for_the_proof_too() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let (image, first_unit, _) = died_after_twenty_puts(dir.path())?;
    let path = dir.path().join("image.cairn");
    std::fs::write(&path, &image)?;
    let newest_catalog = cairn_engine::inspect(&path)?
        .slots
        .iter()
        .filter_map(|s| match s {
            cairn_engine::SlotInfo::Valid {
                txid, catalog_page, ..
            } => Some((*txid, *catalog_page)),
            cairn_engine::SlotInfo::Invalid => None,
        })
        .max()
        .map(|(_, page)| page as usize)
        .unwrap_or_else(|| panic!("no valid slot"));
    let mut damaged = image.clone();
    damaged[newest_catalog * 4096 + 100] ^= 0xff;
    damaged[first_unit * 512 + 40] ^= 0xff;
    refused_as_damaged_log(&damaged)?;
    // From a file too, where the opening asks whether a writer holds it.
    let opened = cairn_tests::open_file_image(&damaged);
    assert!(
        opened
            .as_ref()
            .is_err_and(|e| e.to_string().contains("commit log damaged")),
        "{:?}",
        opened.map(|(_, db)| db.is_private_copy())
    );
    Ok(())
}

/// A damaged record, and the slot that named the newest commit replaced by the one it
/// held ten commits before (a valid slot: an older copy of its sector): no slot shows that
/// the log holds more than the records before the damaged one, but the walk stopped at a
/// record that does not verify, not at the cycle's clean end, so opening looks on, and the
/// records after it prove it durable. (Until the forty-third session the file opened at
/// the commit before the damaged record without a word.)
#[test]
fn a_record_that_does_not_verify_is_looked_past_whatever_the_slots_say() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let (image, halfway, first_unit, base) = died_after_twenty_puts_seen_halfway(dir.path())?;
    let path = dir.path().join("image.cairn");
    std::fs::write(&path, &image)?;
    let newest_slot = logged_slot(&path)?;
    let mut damaged = image.clone();
    let slot = newest_slot * 4096 + 512..newest_slot * 4096 + 1024;
    damaged[slot.clone()].copy_from_slice(&halfway[slot]);
    damaged[(first_unit + 14) * 512 + 40] ^= 0xff;
    std::fs::write(&path, &damaged)?;
    let slots = cairn_engine::inspect(&path)?.slots;
    let newest = slots
        .iter()
        .filter_map(|s| match s {
            cairn_engine::SlotInfo::Valid { txid, .. } => Some(*txid),
            cairn_engine::SlotInfo::Invalid => None,
        })
        .max();
    assert!(
        newest.is_some_and(|t| t < base + 15),
        "the slots name nothing past the damaged record: {slots:?}"
    );
    refused_as_damaged_log(&damaged)?;
    Ok(())
}

/// A writer dies after Eventual commits its log holds, the last one's record torn (its
/// slot and pages whole): a read-only opening must show what a writable one shows, the
/// commit before it (until the forty-fifth session it read the torn commit's slot as it
/// was, and a writable opening then went back to the commit before).
#[test]
fn a_read_only_opening_skips_a_logged_commit_whose_record_tore() -> Result<(), Error> {
    let storage = FaultyStorage::new(5)?;
    let db = Database::builder()
        .page_size(1024)
        .log_size(16 << 10)
        .eventual_sync(None)
        .with_storage(storage.clone(), true, None)?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.commit()?;
    db.sync()?;
    let mut before_last = None;
    for i in 0u32..8 {
        if i == 7 {
            before_last = contents(&db, "t")?;
        }
        let mut w = db.begin_write()?;
        w.set_durability(Durability::Eventual);
        w.open_table("t")?.insert(&i.to_be_bytes(), b"logged")?;
        w.commit()?;
    }
    let mut image = storage.live_image();
    drop(db);
    // The log starts at page 2; its cycle's last record is the last unit that begins with
    // a record's kind (5), a single put's record one unit long.
    let log = 2 * 1024..18 * 1024;
    let last = (log.start..log.end)
        .step_by(512)
        .rfind(|&at| image[at] == 5)
        .ok_or("no record in the log")
        .map_err(|e| Error::Io(std::io::Error::other(e)))?;
    image[last..last + 512].fill(0);
    let writable = contents(&open_image(&image, false)?, "t")?;
    assert_eq!(writable, before_last, "the writable opening goes back");
    let read_only = contents(&open_image(&image, true)?, "t")?;
    assert_eq!(read_only, writable, "the read-only opening shows the same");
    Ok(())
}
