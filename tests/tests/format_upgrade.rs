//! A file written by a build of format version 3 (`tests/fixtures/version3.cairn`: leaves
//! and branches without heads, a commit log in 512-byte units) is read as it is, and
//! changed by this build, which rewrites the leaves and branches it changes with heads.
//!
//! The fixture was made by the version 3 build (commit 450bc7a) with 1 KiB pages: table
//! `seq` got keys 0..3000 (8-byte big-endian) in one transaction, table `text` 1,000 keys
//! in scattered order (every 97th value 3,000 bytes, in an overflow run); a second
//! transaction removed every tenth key of `seq`; five single-put commits then added
//! `late:0`..`late:4` to `text`. The functions below say what each value is.
//! `tests/fixtures/version3-unapplied.cairn` is the same as a power cut would leave it
//! after those five commits: their log records synced, their slot writes lost (the
//! generator wrote back both slots as the second transaction left them, then exited
//! without closing), so they are only in the log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cairn_engine::{Database, Error, PageEntry};

type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

fn seq_value(i: u64) -> Vec<u8> {
    format!("v{i}").repeat(1 + (i % 5) as usize).into_bytes()
}

fn text_key(i: u64) -> Vec<u8> {
    format!("key:{:05}", i * 7 % 1000).into_bytes()
}

fn text_value(i: u64) -> Vec<u8> {
    if i.is_multiple_of(97) {
        vec![(i % 251) as u8; 3000]
    } else {
        format!("value {i}").into_bytes()
    }
}

/// What the fixture holds.
fn fixture_model() -> Model {
    let seq = (0..3000u64)
        .filter(|i| !i.is_multiple_of(10))
        .map(|i| (i.to_be_bytes().to_vec(), seq_value(i)))
        .collect();
    let mut text: BTreeMap<_, _> = (0..1000u64).map(|i| (text_key(i), text_value(i))).collect();
    for i in 0..5 {
        text.insert(format!("late:{i}").into_bytes(), b"logged".to_vec());
    }
    [("seq".to_owned(), seq), ("text".to_owned(), text)].into()
}

/// A copy of fixture `name` in a fresh folder.
fn fixture_named(name: &str) -> Result<(tempfile::TempDir, PathBuf), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join(name);
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    std::fs::copy(source, &path)?;
    Ok((dir, path))
}

fn fixture() -> Result<(tempfile::TempDir, PathBuf), Error> {
    fixture_named("version3.cairn")
}

fn contents(db: &Database) -> Result<Model, Error> {
    let r = db.begin_read()?;
    let mut out = Model::new();
    for t in r.list_tables()? {
        let table = r.open_table(&t.name)?;
        let mut rows = BTreeMap::new();
        for row in table.iter()? {
            let (k, v) = row?;
            rows.insert(k.to_vec(), v.to_vec());
        }
        assert_eq!(rows.len() as u64, table.len(), "{}", t.name);
        out.insert(t.name, rows);
    }
    Ok(out)
}

/// Every key of `model` found by a point lookup (a search in each leaf), and keys that are
/// not there not found.
fn lookups_agree(db: &Database, model: &Model) -> Result<(), Error> {
    let r = db.begin_read()?;
    for (name, rows) in model {
        let t = r.open_table(name)?;
        for (k, v) in rows {
            assert_eq!(t.get(k)?, Some(&v[..]), "{name} {k:?}");
            let mut absent = k.clone();
            absent.push(0xff);
            assert_eq!(
                t.get(&absent)?.map(<[u8]>::to_vec),
                rows.get(&absent).cloned()
            );
        }
    }
    Ok(())
}

/// The kind of the leaf of `table` that holds `key`.
fn leaf_of(db: &Database, table: &str, key: &[u8]) -> Result<Option<String>, Error> {
    for p in db.pages()? {
        if p.owner == table && p.kind.ends_with("leaf") {
            let holds = db
                .page(p.page)?
                .entries
                .iter()
                .any(|e| matches!(e, PageEntry::Leaf { key: k, .. } if k == key));
            if holds {
                return Ok(Some(p.kind.to_owned()));
            }
        }
    }
    Ok(None)
}

fn leaves(db: &Database, kind: &str) -> Result<usize, Error> {
    Ok(db.pages()?.iter().filter(|p| p.kind == kind).count())
}

#[test]
fn a_version_3_file_is_read_as_it_is() -> Result<(), Error> {
    let (_dir, path) = fixture()?;
    let before = std::fs::read(&path)?;
    let db = Database::builder().read_only(true).open(&path)?;
    assert_eq!(cairn_engine::inspect(&path)?.format_version, 3);
    let model = fixture_model();
    assert_eq!(contents(&db)?, model);
    lookups_agree(&db, &model)?;
    assert!(db.check()?.is_ok());
    assert!(
        leaves(&db, "legacy leaf")? > 100,
        "the fixture's leaves have no heads"
    );
    assert_eq!(leaves(&db, "leaf")?, 0);
    assert!(
        leaves(&db, "legacy branch")? > 1,
        "the fixture's branches have no heads"
    );
    assert_eq!(leaves(&db, "branch")?, 0);
    drop(db);
    assert!(
        std::fs::read(&path)? == before,
        "a read-only open changes nothing"
    );
    Ok(())
}

#[test]
fn a_version_3_log_is_replayed_in_its_512_byte_units() -> Result<(), Error> {
    let (_dir, path) = fixture_named("version3-unapplied.cairn")?;
    let model = fixture_model();
    // Read-only, the records are applied to a private copy; the file stays at version 3.
    let before = std::fs::read(&path)?;
    assert_eq!(cairn_engine::inspect(&path)?.unapplied_commits, Some(5));
    let copy = Database::builder().read_only(true).open(&path)?;
    assert_eq!(
        contents(&copy)?,
        model,
        "the five logged commits, in memory"
    );
    lookups_agree(&copy, &model)?;
    assert!(copy.check()?.is_ok());
    drop(copy);
    assert!(
        std::fs::read(&path)? == before,
        "a read-only open changes nothing"
    );
    let db = Database::open(&path)?;
    let info = cairn_engine::inspect(&path)?;
    assert_eq!((info.format_version, info.unapplied_commits), (5, Some(0)));
    assert_eq!(contents(&db)?, model, "the five logged commits replayed");
    lookups_agree(&db, &model)?;
    assert!(db.check()?.is_ok());
    drop(db);
    assert_eq!(contents(&Database::open(&path)?)?, model);
    Ok(())
}

/// Salvage of the version 3 file a power cut left: its tree and the five commits only its
/// log holds, in 512-byte units; with both copies of its header damaged too, the same
/// (the version is then unknown: a record of either form is taken where it follows).
#[test]
fn a_version_3_file_is_salvaged_with_its_log_even_without_its_header() -> Result<(), Error> {
    let (_dir, path) = fixture_named("version3-unapplied.cairn")?;
    let model = fixture_model();
    let got = cairn_tests::salvaged::salvage(&path)?;
    assert!(got.lost.is_empty(), "{:?}", got.lost);
    assert_eq!(got.report.logged_commits, 5);
    assert!(got.tables == model);
    let mut bytes = std::fs::read(&path)?;
    for page in 0..2 {
        bytes[page * 1024..page * 1024 + 20].fill(0xa5);
    }
    std::fs::write(&path, &bytes)?;
    assert!(Database::open(&path).is_err());
    let got = cairn_tests::salvaged::salvage(&path)?;
    assert!(got.lost.is_empty(), "{:?}", got.lost);
    assert!(got.report.header_damage.is_some());
    assert_eq!(got.report.logged_commits, 5);
    assert!(got.tables == model);
    Ok(())
}

/// A private copy's `page(n)` of a page its commit has free, which a writer in another
/// process cut off the file since (here the file is cut by hand): an error, not a fault
/// through the map (the page is read with `pread`).
#[test]
fn a_private_copys_free_page_cut_off_the_file_is_an_error() -> Result<(), Error> {
    let (_dir, path) = fixture_named("version3-unapplied.cairn")?;
    let copy = Database::builder().read_only(true).open(&path)?;
    assert!(copy.is_private_copy());
    let p = copy.page_size() as u64;
    // The highest free page the two commits have in common (the part the copy maps).
    let shared = cairn_engine::inspect(&path)?
        .slots
        .iter()
        .filter_map(|s| match s {
            cairn_engine::SlotInfo::Valid { page_count, .. } => Some(*page_count),
            cairn_engine::SlotInfo::Invalid => None,
        })
        .min()
        .unwrap_or(0);
    let free = copy
        .pages()?
        .into_iter()
        .filter(|i| i.kind == "free" && i.page < shared)
        .map(|i| i.page)
        .max();
    let Some(free) = free else {
        panic!("the fixture has no free page below page {shared}");
    };
    assert!(copy.page(free).is_ok());
    // Cut at a 4 KiB boundary, so that the whole system page holding it is past the end
    // (read through the map, it would fault).
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)?
        .set_len((free * p) & !4095)?;
    assert!(
        matches!(copy.page(free), Err(Error::NoSuchPage { page, .. }) if page == free),
        "page {free}"
    );
    Ok(())
}

#[test]
fn a_version_3_file_opened_for_writing_is_marked_5_and_changed_pages_get_heads() -> Result<(), Error>
{
    let (_dir, path) = fixture()?;
    let mut model = fixture_model();
    let db = Database::open(&path)?;
    assert_eq!(cairn_engine::inspect(&path)?.format_version, 5);
    assert_eq!(contents(&db)?, model);
    let legacy = leaves(&db, "legacy leaf")?;
    let legacy_branches = leaves(&db, "legacy branch")?;

    // A key removed from a leaf that appends filled so that, even without the key, it has
    // no room for heads: the leaf is written again without them. (A leaf that takes an
    // insert or a new value is written with heads, split in two if it must be.)
    let page_size = db.page_size() as f64;
    let mut chosen = None;
    for p in db.pages()? {
        if p.kind != "legacy leaf" || p.owner != "seq" {
            continue;
        }
        // Bytes over a page with heads (4 more per slot), and the first entry's share of
        // them: its slot with heads, its 7-byte entry header, key and value.
        let over = p.fill * page_size + 4.0 * p.items as f64 - page_size;
        let entries = db.page(p.page)?.entries;
        if let [
            PageEntry::Leaf {
                key,
                value: Some(v),
                ..
            },
            PageEntry::Leaf { key: next, .. },
            ..,
        ] = &entries[..]
            && over > (6 + 7 + key.len() + v.len()) as f64
        {
            chosen = Some(vec![key.clone(), next.clone()]);
            break;
        }
    }
    let keys = chosen.ok_or(Error::Io(std::io::Error::other("no full legacy leaf")))?;
    let mut w = db.begin_write()?;
    {
        let mut t = w.open_table("seq")?;
        assert!(t.remove(&keys[0])?);
        model.entry("seq".to_owned()).or_default().remove(&keys[0]);
    }
    w.commit()?;
    assert_eq!(
        leaf_of(&db, "seq", &keys[1])?.as_deref(),
        Some("legacy leaf")
    );
    assert_eq!(contents(&db)?, model);
    lookups_agree(&db, &model)?;
    assert!(db.check()?.is_ok());
    // A value replaced there: the leaf is split into two with heads.
    let mut w = db.begin_write()?;
    {
        let mut t = w.open_table("seq")?;
        t.insert(&keys[1], b"new")?;
        model
            .entry("seq".to_owned())
            .or_default()
            .insert(keys[1].clone(), b"new".to_vec());
    }
    w.commit()?;
    assert_eq!(leaf_of(&db, "seq", &keys[1])?.as_deref(), Some("leaf"));
    assert_eq!(contents(&db)?, model);
    lookups_agree(&db, &model)?;

    // Changes all over both tables: the sequential table's leaves were filled to the byte
    // by appends, so some of them are too full to take heads until they lose entries.
    let mut w = db.begin_write()?;
    {
        let mut t = w.open_table("seq")?;
        let rows = model.entry("seq".to_owned()).or_default();
        for i in (0..3000u64).step_by(7) {
            let k = i.to_be_bytes().to_vec();
            if i % 2 == 0 {
                t.remove(&k)?;
                rows.remove(&k);
            } else {
                t.insert(&k, b"changed")?;
                rows.insert(k, b"changed".to_vec());
            }
        }
    }
    {
        let mut t = w.open_table("text")?;
        let rows = model.entry("text".to_owned()).or_default();
        for i in (0..1000u64).step_by(3) {
            let k = format!("key:{i:05}:new").into_bytes();
            t.insert(&k, &text_value(i + 1))?;
            rows.insert(k, text_value(i + 1));
        }
        // Keys before and after every other key, sharing nothing with them.
        for k in [&b"\x00"[..], b"zzz"] {
            t.insert(k, k)?;
            rows.insert(k.to_vec(), k.to_vec());
        }
    }
    w.commit()?;
    assert_eq!(contents(&db)?, model);
    lookups_agree(&db, &model)?;
    assert!(db.check()?.is_ok());
    let (now_legacy, with_heads) = (leaves(&db, "legacy leaf")?, leaves(&db, "leaf")?);
    assert!(
        now_legacy < legacy / 4 && with_heads > 100,
        "changed leaves are written with heads: {legacy} legacy leaves before, \
         {now_legacy} after, {with_heads} with heads"
    );
    // Every branch on a changed path is written with heads (none here is too full).
    assert_eq!(leaves(&db, "legacy branch")?, 0, "{legacy_branches} before");
    assert!(leaves(&db, "branch")? >= legacy_branches);
    drop(db);

    let db = Database::open(&path)?;
    assert_eq!(contents(&db)?, model);
    lookups_agree(&db, &model)?;
    assert!(db.check()?.is_ok());
    // Every leaf gets heads once compaction rewrites the trees.
    db.compact()?;
    assert_eq!(leaves(&db, "legacy leaf")?, 0);
    assert_eq!(leaves(&db, "legacy branch")?, 0);
    assert_eq!(contents(&db)?, model);
    assert!(db.check()?.is_ok());
    Ok(())
}
