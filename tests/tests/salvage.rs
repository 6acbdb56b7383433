//! Salvage reads what a damaged file still holds: every entry whose pages verify, what
//! it lost (in key ranges that cover exactly the entries missing), and the commits only
//! the commit log holds.

use std::collections::BTreeMap;
use std::path::Path;

use cairn_engine::{Database, Error, Lost, LostKeys, SalvageReport, SlotInfo, salvage};

type Model = cairn_tests::salvaged::Tables;

/// Two tables of 2,000 entries (every hundredth value in an overflow run), closed.
fn build(path: &Path) -> Result<Model, Error> {
    let db = Database::create(path)?;
    let mut model = Model::new();
    let mut w = db.begin_write()?;
    for name in ["alpha", "beta"] {
        let mut t = w.open_or_create_table(name)?;
        let m = model.entry(name.to_owned()).or_default();
        for i in 0u32..2_000 {
            let key = format!("key{i:05}").into_bytes();
            let len = if i % 100 == 0 { 9_000 } else { 40 };
            let value = vec![(i % 251) as u8; len];
            t.insert(&key, &value)?;
            m.insert(key, value);
        }
    }
    model.insert("main".to_owned(), BTreeMap::new());
    w.open_or_create_table("main")?;
    w.commit()?;
    db.close()?;
    Ok(model)
}

/// The tables salvage handed an entry the model does not hold: under a table's name, that
/// table's value; in a `lost_and_found` table, some table's.
fn wrong_tables<'a>(got: &'a Model, model: &Model) -> Vec<&'a str> {
    got.iter()
        .filter(|(table, entries)| {
            entries.iter().any(|(k, v)| {
                let right = model.get(*table).and_then(|m| m.get(k)) == Some(v)
                    || (table.starts_with("lost_and_found_")
                        && model.values().any(|m| m.get(k) == Some(v)));
                !right
            })
        })
        .map(|(table, _)| table.as_str())
        .collect()
}

/// Rewrites every value of `build`'s table beta (each cut to 30 bytes) in one commit, in
/// `model` too, and closes the file: the old leaves and catalog stay in free pages.
fn rewrite_beta(path: &Path, model: &mut Model) -> Result<(), Error> {
    let db = Database::open(path)?;
    let mut w = db.begin_write()?;
    let mut t = w.open_table("beta")?;
    for (key, value) in model.get_mut("beta").into_iter().flatten() {
        value.truncate(30);
        t.insert(key, value)?;
    }
    w.commit()?;
    db.close()
}

/// Salvages `path`: the tables and entries handed over (log changes applied), the
/// losses handed over in line, and the report.
fn salvaged(path: &Path) -> Result<(Model, Vec<Lost>, SalvageReport), Error> {
    let c = cairn_tests::salvaged::salvage(path)?;
    Ok((c.tables, c.lost, c.report))
}

/// The pages of `kind` that hold table `owner`'s entries, from the file's page map.
fn pages_of(path: &Path, kind: &str, owner: &str) -> Result<Vec<u64>, Error> {
    let db = Database::open(path)?;
    let pages = db
        .pages()?
        .into_iter()
        .filter(|p| p.kind == kind && p.owner == owner)
        .map(|p| p.page)
        .collect();
    db.close()?;
    Ok(pages)
}

fn damage(path: &Path, page: u64, page_size: u64) -> std::io::Result<()> {
    let mut bytes = std::fs::read(path)?;
    let at = usize::try_from(page * page_size + 100).unwrap_or(usize::MAX);
    bytes[at] ^= 0xff;
    std::fs::write(path, bytes)
}

/// Flips a byte in the middle of one of the values of `leaf` (4 KiB pages) in the file's
/// `bytes`: in a run of 40 equal bytes, which `build`'s values are. The page still parses.
fn flip_a_value_byte(bytes: &mut [u8], leaf: u64) {
    let start = usize::try_from(leaf * 4096).unwrap_or(usize::MAX);
    let page = &bytes[start..start + 4096];
    let Some(run) =
        (0..4096 - 40).find(|&j| page[j] != 0 && page[j..j + 40].iter().all(|&b| b == page[j]))
    else {
        panic!("no value in leaf {leaf}");
    };
    bytes[start + run + 20] ^= 0x01;
}

#[test]
fn a_healthy_file_gives_every_entry_and_loses_nothing() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("healthy.cairn");
    let model = build(&path)?;
    let (got, lost, report) = salvaged(&path)?;
    assert_eq!(got, model);
    assert!(lost.is_empty() && report.lost.is_empty(), "{lost:?}");
    assert_eq!((report.tables, report.entries), (3, 4_000));
    assert_eq!(report.txid, report.newest_txid);
    Ok(())
}

#[test]
fn a_damaged_leaf_loses_exactly_the_keys_its_range_names() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("leaf.cairn");
    let model = build(&path)?;
    let leaves = pages_of(&path, "leaf", "beta")?;
    assert!(leaves.len() > 4, "{leaves:?}");
    let victim = leaves[leaves.len() / 2];
    damage(&path, victim, 4096)?;
    // The check finds it; salvage goes past it.
    let db = Database::open(&path)?;
    assert!(!db.check()?.is_ok());
    db.close()?;
    let (got, lost, report) = salvaged(&path)?;
    assert_eq!(lost, report.lost);
    let [
        Lost {
            table: Some(table),
            page,
            keys:
                LostKeys::Range {
                    from: Some(from),
                    to: Some(to),
                },
            ..
        },
    ] = &lost[..]
    else {
        panic!("{lost:?}");
    };
    assert_eq!((table.as_str(), *page), ("beta", victim));
    // Every entry outside the lost range is there, none inside it, and the range is
    // not empty: the leaf's entries are what is missing.
    let mut expected = model.clone();
    let beta = expected
        .get_mut("beta")
        .map(std::mem::take)
        .unwrap_or_default();
    let (inside, outside): (BTreeMap<_, _>, BTreeMap<_, _>) =
        beta.into_iter().partition(|(k, _)| k >= from && k < to);
    assert!(!inside.is_empty() && inside.len() < 200, "{}", inside.len());
    expected.insert("beta".to_owned(), outside);
    assert_eq!(got, expected);
    assert_eq!(report.entries, 4_000 - inside.len() as u64);
    Ok(())
}

#[test]
fn a_damaged_overflow_run_loses_one_value() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("overflow.cairn");
    let mut model = build(&path)?;
    let runs = pages_of(&path, "overflow", "alpha")?;
    let victim = runs[3];
    damage(&path, victim, 4096)?;
    let (got, lost, _) = salvaged(&path)?;
    let [
        Lost {
            table: Some(table),
            keys: LostKeys::Value(key),
            ..
        },
    ] = &lost[..]
    else {
        panic!("{lost:?}");
    };
    assert_eq!(table, "alpha");
    let alpha = model.get_mut("alpha").map_or(0, |t| {
        t.remove(key);
        t.len()
    });
    assert_eq!(alpha, 1_999);
    assert_eq!(got, model);
    Ok(())
}

#[test]
fn commits_only_the_log_holds_are_handed_over() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("log.cairn");
    let mut model = build(&path)?;
    let db = Database::open(&path)?;
    // Durable single-put commits go to the log; the process then dies without syncing
    // the file (the handle is leaked, as a killed process leaves it).
    for i in 0u32..50 {
        let mut w = db.begin_write()?;
        if i == 5 {
            w.create_table("gamma")?;
            w.open_table("gamma")?.insert(b"g", b"1")?;
            model.insert(
                "gamma".to_owned(),
                BTreeMap::from([(b"g".to_vec(), b"1".to_vec())]),
            );
        }
        let key = format!("late{i:03}").into_bytes();
        w.open_table("alpha")?.insert(&key, b"logged")?;
        if i % 10 == 0 {
            w.open_table("beta")?.remove(b"key00007")?;
            model.get_mut("beta").map(|t| t.remove(&b"key00007"[..]));
        }
        w.commit()?;
        model
            .get_mut("alpha")
            .map(|t| t.insert(key, b"logged".to_vec()));
    }
    // The file as a process killed here leaves it (the tree pages of the logged commits
    // written, not synced; the file not sealed).
    let crashed = dir.path().join("crashed.cairn");
    std::fs::copy(&path, &crashed)?;
    db.close()?;
    let path = crashed;
    // The newest commit's slot is torn too (as if its tree pages never reached the disk
    // either): the durable commit in the other slot is read, and the log's records after
    // it are replayed.
    let info = cairn_engine::inspect(&path)?;
    let txid = |s: &SlotInfo| match s {
        SlotInfo::Valid { txid, .. } => *txid,
        SlotInfo::Invalid => 0,
    };
    let newest = usize::from(txid(&info.slots[1]) > txid(&info.slots[0]));
    let newest_txid = txid(&info.slots[newest]);
    let mut bytes = std::fs::read(&path)?;
    bytes[newest * 4096 + 520] ^= 0xff;
    std::fs::write(&path, bytes)?;
    let (got, lost, report) = salvaged(&path)?;
    assert!(lost.is_empty(), "{lost:?}");
    // (The first commit after opening synced the file: the other 49 are in the log.)
    assert!(report.logged_commits >= 40, "{report:?}");
    assert_eq!(
        report.txid + report.logged_commits,
        newest_txid,
        "{report:?}"
    );
    assert_eq!(got, model);
    Ok(())
}

#[test]
fn a_file_that_is_not_a_database_is_refused() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("text.txt");
    std::fs::write(&path, vec![b'x'; 20_000])?;
    let result = salvage(&path, &mut |_| Ok(()));
    assert!(matches!(result, Err(Error::NotADatabase)), "{result:?}");
    Ok(())
}

#[test]
fn a_damaged_catalog_falls_back_to_the_older_commit_and_says_what_is_missing() -> Result<(), Error>
{
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("catalog.cairn");
    let model = build(&path)?;
    let db = Database::open(&path)?;
    let mut w = db.begin_write()?;
    w.open_table("alpha")?
        .insert(b"newest", b"lost with its catalog")?;
    w.commit()?;
    // (Copied before the clean close, which writes the newest commit into both slots.)
    let copy = dir.path().join("copy.cairn");
    std::fs::copy(&path, &copy)?;
    db.close()?;
    let path = copy;
    let info = cairn_engine::inspect(&path)?;
    let newest = info
        .slots
        .iter()
        .filter_map(|s| match s {
            SlotInfo::Valid {
                txid, catalog_page, ..
            } => Some((*txid, *catalog_page)),
            SlotInfo::Invalid => None,
        })
        .max();
    let Some((newest_txid, catalog)) = newest else {
        panic!("{info:?}")
    };
    damage(&path, catalog, 4096)?;
    let (got, lost, report) = salvaged(&path)?;
    let sizes = |m: &Model| {
        m.iter()
            .map(|(t, e)| (t.clone(), e.len()))
            .collect::<Vec<_>>()
    };
    assert!(
        got == model,
        "{:?} {:?} {info:?}",
        sizes(&got),
        sizes(&model)
    );
    assert!(
        report.txid + report.logged_commits < newest_txid,
        "{report:?}"
    );
    assert_eq!(report.newest_txid, newest_txid);
    assert!(
        matches!(
            &lost[..],
            [Lost {
                keys: LostKeys::Log,
                ..
            }]
        ),
        "{lost:?}"
    );
    Ok(())
}

/// The tables salvage found no name for (`lost_and_found_<page>`), merged; and how many.
fn lost_and_found(got: &Model) -> (BTreeMap<Vec<u8>, Vec<u8>>, usize) {
    let found: Vec<_> = got
        .iter()
        .filter(|(name, _)| name.starts_with("lost_and_found_"))
        .collect();
    let merged = found.iter().flat_map(|(_, t)| (*t).clone()).collect();
    (merged, found.len())
}

/// A clean close writes the newest commit into both slots: with its catalog damaged there
/// is no older commit to fall back to, and the tables come back whole, named where an
/// older catalog in a free page names their very root.
#[test]
fn a_damaged_catalog_in_a_closed_file_gives_its_tables_back() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("closed.cairn");
    // Every leaf of beta rewritten: the free pages hold their old versions, which must
    // not come back.
    let mut model = build(&path)?;
    rewrite_beta(&path, &mut model)?;
    let info = cairn_engine::inspect(&path)?;
    let catalogs: Vec<u64> = info
        .slots
        .iter()
        .filter_map(|s| match s {
            SlotInfo::Valid { catalog_page, .. } => Some(*catalog_page),
            SlotInfo::Invalid => None,
        })
        .collect();
    assert!(
        catalogs.len() == 2 && catalogs[0] == catalogs[1],
        "{info:?}"
    );
    damage(&path, catalogs[0], 4096)?;
    let (got, lost, report) = salvaged(&path)?;
    assert!(
        matches!(
            &lost[..],
            [Lost {
                table: None,
                keys: LostKeys::Range { .. },
                ..
            }]
        ),
        "{lost:?}"
    );
    // Each table's entries, under a name of its own: alpha's and beta's (main had none).
    let mut found: Vec<&BTreeMap<Vec<u8>, Vec<u8>>> = got.values().collect();
    let mut want: Vec<&BTreeMap<Vec<u8>, Vec<u8>>> =
        model.values().filter(|t| !t.is_empty()).collect();
    found.sort();
    want.sort();
    assert!(found == want, "{:?}", got.keys().collect::<Vec<_>>());
    // The catalog before beta was rewritten is still in a free page, and names alpha's
    // root, which no commit changed since; beta's root it names is gone.
    assert_eq!(got.get("alpha"), model.get("alpha"));
    let unnamed: Vec<&String> = got.keys().filter(|n| *n != "alpha").collect();
    assert!(
        matches!(&unnamed[..], [n] if n.starts_with("lost_and_found_")),
        "{unnamed:?}"
    );
    assert_eq!(
        (report.lost_and_found, report.tables, report.entries),
        (2, 2, 4_000)
    );
    Ok(())
}

/// Under a damaged branch, the pages that verify come back to their table: their keys lie
/// in the range it lost, and with the rest of the table, every entry is there. (Until the
/// fortieth session they came back as `lost_and_found` tables.)
#[test]
fn the_subtrees_under_a_damaged_branch_go_back_to_their_table() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("branch.cairn");
    let model = build(&path)?;
    let branches = pages_of(&path, "branch", "alpha")?;
    let Some(&victim) = branches.first() else {
        panic!("alpha has no branch");
    };
    damage(&path, victim, 4096)?;
    let (got, lost, report) = salvaged(&path)?;
    assert!(
        !lost.is_empty()
            && lost
                .iter()
                .all(|l| l.table.as_deref() == Some("alpha") && l.page == victim),
        "{lost:?}"
    );
    // Each subtree the damaged branch still names with a checksum its bytes match goes
    // back to alpha; the one whose reference the damage hit cannot be vouched for and
    // comes back unnamed. With it, alpha is whole.
    let (found, tables) = lost_and_found(&got);
    let mut alpha = got.get("alpha").cloned().unwrap_or_default();
    alpha.extend(found);
    assert!(
        model.get("alpha") == Some(&alpha),
        "{} entries",
        alpha.len()
    );
    assert_eq!(got.get("beta"), model.get("beta"));
    assert!(report.rejoined > 1, "{}", report.rejoined);
    assert!(tables <= 1, "{tables} unnamed");
    // The unnamed one is a leaf that nothing vouches for: reported unverified.
    let unnamed: Vec<&String> = got
        .keys()
        .filter(|n| n.starts_with("lost_and_found_"))
        .collect();
    assert!(
        report.unverified.iter().eq(unnamed.iter().copied()),
        "{:?}",
        report.unverified
    );
    assert_eq!(
        (report.lost_and_found, report.tables, report.entries),
        (tables as u64, 3 + tables as u64, 4_000)
    );
    Ok(())
}

/// A subtree root whose own bytes are damaged too (its parent, a failed branch, names it
/// with a checksum they no longer match) is not handed over: its entries stay in the
/// range reported lost, never read from damaged bytes.
#[test]
fn a_damaged_root_under_a_damaged_branch_is_not_handed_over() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("twice.cairn");
    let model = build(&path)?;
    let branches = pages_of(&path, "branch", "alpha")?;
    let leaves = pages_of(&path, "leaf", "alpha")?;
    let (Some(&branch), Some(&leaf)) = (branches.first(), leaves.get(leaves.len() / 2)) else {
        panic!("alpha has no branch or leaf");
    };
    damage(&path, branch, 4096)?;
    // A byte of one of the leaf's values: the page still parses.
    let mut bytes = std::fs::read(&path)?;
    flip_a_value_byte(&mut bytes, leaf);
    std::fs::write(&path, bytes)?;
    let (got, _, _) = salvaged(&path)?;
    let wrong = wrong_tables(&got, &model);
    assert!(wrong.is_empty(), "wrong entries in {wrong:?}");
    Ok(())
}

/// A branch damaged so that it no longer parses vouches for none of its children: each
/// leaf under it comes back as a table of its own, read as its bytes are, and is reported
/// unverified — where a leaf was damaged too (and still parses), the damage shows only in
/// a table so reported.
#[test]
fn leaves_nothing_vouches_for_are_reported_unverified() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("unparsed.cairn");
    let model = build(&path)?;
    let branches = pages_of(&path, "branch", "alpha")?;
    let leaves = pages_of(&path, "leaf", "alpha")?;
    let (Some(&branch), Some(&leaf)) = (branches.first(), leaves.get(leaves.len() / 2)) else {
        panic!("alpha has no branch or leaf");
    };
    let mut bytes = std::fs::read(&path)?;
    let at = |page: u64| usize::try_from(page * 4096).unwrap_or(usize::MAX);
    // An unknown page kind: the branch fails to parse.
    bytes[at(branch)] = 0x7f;
    flip_a_value_byte(&mut bytes, leaf);
    std::fs::write(&path, bytes)?;
    let (got, _, report) = salvaged(&path)?;
    let unnamed: Vec<&String> = got
        .keys()
        .filter(|n| n.starts_with("lost_and_found_"))
        .collect();
    assert!(unnamed.len() > 1, "{unnamed:?}");
    // (The same names, in any order: the map orders them as text.)
    let reported: std::collections::BTreeSet<&String> = report.unverified.iter().collect();
    assert!(
        report.unverified.len() == unnamed.len()
            && reported.iter().copied().eq(unnamed.iter().copied()),
        "{:?} {unnamed:?}",
        report.unverified
    );
    let damaged = format!("lost_and_found_{leaf}");
    let wrong = wrong_tables(&got, &model);
    assert!(wrong == [damaged.as_str()], "{wrong:?}, {damaged}");
    assert_eq!(got.get("beta"), model.get("beta"));
    Ok(())
}

/// A branch under a damaged branch, whose bytes no longer match the checksum the damaged
/// one gives it, is damaged too (or the reference is): it is read all the same, as a table
/// of its own, since every page under it is checked against the checksums it gives. What
/// comes back is right, and only what a damaged reference loses is missing.
#[test]
fn a_damaged_branch_under_a_damaged_branch_still_gives_the_pages_under_it() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("deep.cairn");
    let db = Database::create(&path)?;
    let mut model = Model::new();
    let mut w = db.begin_write()?;
    let mut t = w.open_or_create_table("deep")?;
    let m = model.entry("deep".to_owned()).or_default();
    for i in 0u32..60_000 {
        let (key, value) = (format!("key{i:06}").into_bytes(), vec![(i % 251) as u8; 40]);
        t.insert(&key, &value)?;
        m.insert(key, value);
    }
    w.commit()?;
    db.close()?;
    // The root and one branch under it.
    let db = Database::builder().read_only(true).open(&path)?;
    let branches = pages_of(&path, "branch", "deep")?;
    let mut children = std::collections::HashSet::new();
    for &b in &branches {
        for e in db.page(b)?.entries {
            if let cairn_engine::PageEntry::Branch { child, .. } = e {
                children.insert(child);
            }
        }
    }
    drop(db);
    let inner: Vec<u64> = branches
        .iter()
        .copied()
        .filter(|b| children.contains(b))
        .collect();
    let roots: Vec<u64> = branches
        .iter()
        .copied()
        .filter(|b| !children.contains(b))
        .collect();
    let (&[root], Some(&inner)) = (&roots[..], inner.get(inner.len() / 2)) else {
        panic!("not three levels deep: {branches:?}");
    };
    damage(&path, root, 4096)?;
    damage(&path, inner, 4096)?;
    let (got, lost, _) = salvaged(&path)?;
    let mut back = BTreeMap::new();
    for entries in got.values() {
        for (k, v) in entries {
            assert_eq!(model["deep"].get(k), Some(v), "a wrong entry");
            back.insert(k.clone(), v.clone());
        }
    }
    // At most a leaf's worth is missing: what the damage in the inner branch hit.
    let missing = model["deep"].len() - back.len();
    assert!(missing < 100, "{missing} missing; {lost:?}");
    Ok(())
}

/// Both commit slots damaged: nothing names a tree any more, and the file does not open.
/// Salvage finds the newest catalog's root among the pages and reads that commit's tables
/// whole — not an older version, whose pages are still in the file — and says that what
/// came after it could not be looked for.
#[test]
fn with_both_commit_slots_damaged_the_newest_tree_is_found_among_the_pages() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("slotless.cairn");
    // Every value of beta rewritten: the older leaves and catalog are in free pages.
    let mut model = build(&path)?;
    rewrite_beta(&path, &mut model)?;
    let txid = match cairn_engine::inspect(&path)?.slots {
        [SlotInfo::Valid { txid, .. }, _] => txid,
        other => panic!("{other:?}"),
    };
    let mut bytes = std::fs::read(&path)?;
    for page in 0..2 {
        bytes[page * 4096 + 512..page * 4096 + 600].fill(0);
    }
    std::fs::write(&path, bytes)?;
    assert!(matches!(
        Database::open(&path),
        Err(Error::NoValidCommit { .. })
    ));
    let (got, lost, report) = salvaged(&path)?;
    assert!(got == model, "{:?}", got.keys().collect::<Vec<_>>());
    assert!(
        matches!(&lost[..], [Lost { keys: LostKeys::Log, reason, .. }]
            if reason.contains("neither commit slot could be read")),
        "{lost:?}"
    );
    assert_eq!(
        (report.txid, report.tables, report.entries),
        (txid, 3, 4_000)
    );
    // The catalog's root is a leaf here: the names it gives are checked by nothing.
    let mut unverified = report.unverified.clone();
    unverified.sort();
    assert!(unverified.iter().eq(model.keys()), "{unverified:?}");
    Ok(())
}

/// Both copies of the file header damaged: the file does not open (its page size is
/// unknown), but salvage finds the page size from the pages — from slot 1, or, with the
/// slots gone too, from the catalog's root — and reads everything, saying so.
#[test]
fn with_both_header_copies_damaged_the_page_size_is_found_from_the_pages() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("headless.cairn");
    let model = build(&path)?;
    let mut bytes = std::fs::read(&path)?;
    for page in 0..2 {
        bytes[page * 4096..page * 4096 + 20].fill(0x55);
    }
    std::fs::write(&path, &bytes)?;
    assert!(Database::open(&path).is_err());
    let (got, lost, report) = salvaged(&path)?;
    assert!(got == model && lost.is_empty(), "{lost:?}");
    assert!(
        report
            .header_damage
            .as_deref()
            .is_some_and(|d| d.contains("4096 bytes, was found from the pages")),
        "{:?}",
        report.header_damage
    );
    // The slots gone too: the newest tree, found among the pages at the size they show.
    for page in 0..2 {
        bytes[page * 4096 + 512..page * 4096 + 600].fill(0);
    }
    std::fs::write(&path, &bytes)?;
    let (got, lost, report) = salvaged(&path)?;
    assert!(got == model, "{:?}", got.keys().collect::<Vec<_>>());
    assert!(
        matches!(
            &lost[..],
            [Lost {
                keys: LostKeys::Log,
                ..
            }]
        ),
        "{lost:?}"
    );
    assert!(report.header_damage.is_some());
    Ok(())
}

/// A leaf damaged (still parsing) under a table whose catalog is damaged too: the table's
/// root comes back as a table of its own, and the leaf, which that root names with a
/// checksum it no longer matches, is not handed over as a table of its own besides (it
/// was, with its damaged value, until the damage test's two-damage files found it): its
/// keys are reported lost under the root's table, and nothing wrong comes back.
#[test]
fn a_damaged_leaf_under_a_found_root_is_not_a_root_of_its_own() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("twice.cairn");
    let model = build(&path)?;
    let leaves = pages_of(&path, "leaf", "alpha")?;
    let Some(&leaf) = leaves.get(leaves.len() / 2) else {
        panic!("alpha has no leaves");
    };
    let catalog = match cairn_engine::inspect(&path)?.slots {
        [SlotInfo::Valid { catalog_page, .. }, _] => catalog_page,
        other => panic!("{other:?}"),
    };
    damage(&path, catalog, 4096)?;
    let mut bytes = std::fs::read(&path)?;
    flip_a_value_byte(&mut bytes, leaf);
    std::fs::write(&path, bytes)?;
    let (got, lost, report) = salvaged(&path)?;
    let wrong = wrong_tables(&got, &model);
    assert!(wrong.is_empty(), "wrong entries in {wrong:?}");
    assert!(!got.contains_key(&format!("lost_and_found_{leaf}")));
    assert!(
        lost.iter()
            .any(|l| l.page == leaf && l.reason.contains("checksum mismatch")),
        "{lost:?}"
    );
    assert!(report.unverified.is_empty(), "{:?}", report.unverified);
    Ok(())
}

/// Two tables with a damaged branch each: a subtree goes back to the table whose lost
/// range holds its keys, and to no other.
#[test]
fn subtrees_go_back_only_to_the_table_whose_lost_range_holds_them() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("two.cairn");
    let model = build(&path)?;
    let mut victims = Vec::new();
    for table in ["alpha", "beta"] {
        let Some(&victim) = pages_of(&path, "branch", table)?.first() else {
            panic!("{table} has no branch");
        };
        victims.push(victim);
    }
    for victim in victims {
        damage(&path, victim, 4096)?;
    }
    let (got, lost, report) = salvaged(&path)?;
    assert!(lost.iter().all(|l| l.table.is_some()), "{lost:?}");
    // Both tables hold the same keys, so a subtree of one lies in the range the other
    // lost too whenever that range holds it: it then comes back unnamed, never under the
    // wrong name.
    for table in ["alpha", "beta"] {
        let (want, have) = (model.get(table), got.get(table));
        for (k, v) in have.into_iter().flatten() {
            assert_eq!(want.and_then(|m| m.get(k)), Some(v), "{table}");
        }
    }
    let (found, tables) = lost_and_found(&got);
    assert_eq!(report.lost_and_found, tables as u64);
    for (k, v) in &found {
        assert!(
            ["alpha", "beta"]
                .iter()
                .any(|t| model.get(*t).and_then(|m| m.get(k)) == Some(v)),
            "an unnamed entry is some table's"
        );
    }
    assert_eq!(report.entries, 4_000);
    Ok(())
}

#[test]
fn a_file_this_process_writes_is_refused_under_any_of_its_names() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("open.cairn");
    let link = dir.path().join("link.cairn");
    build(&path)?;
    std::fs::hard_link(&path, &link)?;
    let db = Database::open(&path)?;
    for name in [&path, &link] {
        let result = salvage(name, &mut |_| Ok(()));
        assert!(
            matches!(&result, Err(Error::AlreadyOpen { path: p }) if p == name),
            "{result:?}"
        );
    }
    // A read-only handle does not write: its file is salvaged.
    drop(db);
    let reader = Database::builder().read_only(true).open(&path)?;
    let (_, lost, _) = salvaged(&link)?;
    assert!(lost.is_empty(), "{lost:?}");
    drop(reader);
    Ok(())
}

/// Under a damaged catalog branch, the catalog's leaves still verify: the tables they name
/// come back under their names (they came back as a table of catalog records beside
/// unnamed tables).
#[test]
fn the_tables_under_a_damaged_catalog_branch_come_back_named() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("many.cairn");
    let db = Database::create(&path)?;
    let mut model = Model::new();
    let mut w = db.begin_write()?;
    for n in 0u32..600 {
        let name = format!("table_{n:04}");
        let mut t = w.open_or_create_table(&name)?;
        let m = model.entry(name).or_default();
        for i in 0..(n % 7) {
            let (key, value) = (i.to_be_bytes().to_vec(), vec![n as u8; 30]);
            t.insert(&key, &value)?;
            m.insert(key, value);
        }
    }
    w.commit()?;
    db.close()?;
    let catalog = match cairn_engine::inspect(&path)?.slots {
        [SlotInfo::Valid { catalog_page, .. }, _] => catalog_page,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        Database::builder()
            .read_only(true)
            .open(&path)?
            .page(catalog)?
            .kind,
        "branch",
        "the catalog's root is a branch"
    );
    damage(&path, catalog, 4096)?;
    let (got, lost, report) = salvaged(&path)?;
    assert!(
        matches!(&lost[..], [Lost { table: None, page, .. }] if *page == catalog),
        "{lost:?}"
    );
    assert!(got == model, "{:?}", got.keys().take(5).collect::<Vec<_>>());
    assert_eq!((report.lost_and_found, report.tables), (600, 600));
    // The damaged branch still parses and vouches for every leaf under it.
    assert!(report.unverified.is_empty(), "{:?}", report.unverified);
    // Once it no longer parses, nothing vouches for the leaves: the tables still come
    // back under the names they give, each reported unverified (a name could be wrong).
    let mut bytes = std::fs::read(&path)?;
    bytes[usize::try_from(catalog * 4096).unwrap_or(usize::MAX)] = 0x7f;
    std::fs::write(&path, bytes)?;
    let (got, _, report) = salvaged(&path)?;
    assert!(got == model, "{:?}", got.keys().take(5).collect::<Vec<_>>());
    let mut unverified = report.unverified.clone();
    unverified.sort();
    assert!(
        unverified.iter().eq(model.keys()),
        "{} unverified",
        unverified.len()
    );
    Ok(())
}

/// The catalog's root page of the (closed) database at `path`.
fn catalog_page(path: &Path) -> Result<u64, Error> {
    match cairn_engine::inspect(path)?.slots.first() {
        Some(cairn_engine::SlotInfo::Valid { catalog_page, .. }) => Ok(*catalog_page),
        other => panic!("{other:?}"),
    }
}

/// Copies the catalog's root page `catalog` over `page` in the (4 KiB-page) file at
/// `path`, and overwrites both commit slots.
fn catalog_copied_over(path: &Path, catalog: u64, page: u64) -> std::io::Result<()> {
    let mut bytes = std::fs::read(path)?;
    let at = |page: u64| usize::try_from(page * 4096).unwrap_or(usize::MAX);
    let root = bytes[at(catalog)..at(catalog + 1)].to_vec();
    bytes[at(page)..at(page + 1)].copy_from_slice(&root);
    for slot in [512, 4096 + 512] {
        bytes[slot..slot + 80].fill(0x5a);
    }
    std::fs::write(path, bytes)
}

/// Both commit slots unreadable, and the catalog's root copied over the first page of a
/// large value's overflow run: salvage finds two catalog roots among the pages (the copy
/// reads as one), and the walk from the copy had verified its page as a tree page, so
/// that reading the value there skipped the run's checksum and handed over the catalog's
/// bytes as the value. A page verified as another kind is not an overflow run: the value
/// is reported lost. (Until the forty-third session it came back wrong: found by the
/// damage test's dead writer.)
#[test]
fn a_page_verified_as_a_tree_page_is_no_value() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("copied.cairn");
    let model = build(&path)?;
    let catalog = catalog_page(&path)?;
    let runs = pages_of(&path, "overflow", "alpha")?;
    let Some(&run) = runs.first() else {
        panic!("alpha has no overflow run");
    };
    catalog_copied_over(&path, catalog, run)?;
    let (got, _, _) = salvaged(&path)?;
    let wrong = wrong_tables(&got, &model);
    assert!(wrong.is_empty(), "wrong entries in {wrong:?}");
    Ok(())
}

/// The catalog damaged (it still parses, and names each table's root with the checksum
/// it had), and a table's root branch changed too: found among the pages, the branch is
/// read as a table of its own (the pages under it match the checksums it gives), but the
/// catalog names other bytes there (an older version of the page would look the same, its
/// children an older commit's), and it is reported unverified. (Until the forty-third
/// session it was not: the damage test's files with a branch replaced by its older
/// version and the catalog damaged handed over older values without a word.)
#[test]
fn a_branch_root_the_catalog_names_with_other_bytes_is_reported_unverified() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("contradicted.cairn");
    build(&path)?;
    let catalog = catalog_page(&path)?;
    // (Two levels: alpha's one branch is its root.)
    let &[alpha_root] = &pages_of(&path, "branch", "alpha")?[..] else {
        panic!("alpha has more than one branch");
    };
    let mut bytes = std::fs::read(&path)?;
    // (Bytes of their free space: both pages still parse.)
    for page in [catalog, alpha_root] {
        let at = usize::try_from(page * 4096 + 2048).unwrap_or(usize::MAX);
        assert_eq!(bytes[at], 0, "page {page} is free space at 2048");
        bytes[at] = 0x77;
    }
    std::fs::write(&path, bytes)?;
    let (got, _, report) = salvaged(&path)?;
    let found = format!("lost_and_found_{alpha_root}");
    assert_eq!(
        got.get(&found).map(BTreeMap::len),
        Some(2_000),
        "{:?}",
        got.keys()
    );
    assert!(
        report.unverified.contains(&found),
        "{:?}",
        report.unverified
    );
    Ok(())
}

/// Both commit slots unreadable, and the catalog's root copied over a leaf of a table:
/// salvage finds two catalog roots among the pages, and the walk from the copy reaches the
/// copy again as the table's leaf, a page already verified (as the root), whose check is
/// skipped; the walk refuses a page it reaches twice, so the copy's records of tables do
/// not come back as the table's entries. (The tree-page counterpart of
/// `a_page_verified_as_a_tree_page_is_no_value`, which did fail: an overflow run is not
/// a page the walk counts as reached.)
#[test]
fn a_page_verified_as_a_root_is_checked_again_as_a_leaf() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("copied.cairn");
    let model = build(&path)?;
    let catalog = catalog_page(&path)?;
    let leaves = pages_of(&path, "leaf", "alpha")?;
    let Some(&leaf) = leaves.get(leaves.len() / 2) else {
        panic!("alpha has no leaf");
    };
    catalog_copied_over(&path, catalog, leaf)?;
    let (got, _, _) = salvaged(&path)?;
    let wrong = wrong_tables(&got, &model);
    assert!(wrong.is_empty(), "wrong entries in {wrong:?}");
    Ok(())
}

/// Beta's values all rewritten (its old leaves and root branch left in free pages), then
/// its old root branch copied over the first page of one of alpha's overflow runs (a page
/// the walk does not count as a tree page), and beta's new root damaged: among the pages
/// nothing accounts for, the copy reads as a branch root, and every old leaf it points at
/// still matches the checksum it gives (beta's old values are alpha's values: only the
/// table they come back in tells them apart). A live tree never points into the free set: those
/// leaves are reported lost, and the old values do not come back. (Until the forty-sixth
/// session they came back in a `lost_and_found` table reported verified: found by the
/// damage test, a page copied over an overflow run of a file whose catalog was cut off.)
#[test]
fn an_older_branch_copied_over_a_page_does_not_bring_back_the_free_pages_under_it()
-> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("older.cairn");
    let mut model = build(&path)?;
    let &[old_root] = &pages_of(&path, "branch", "beta")?[..] else {
        panic!("beta has more than one branch");
    };
    rewrite_beta(&path, &mut model)?;
    let &[new_root] = &pages_of(&path, "branch", "beta")?[..] else {
        panic!("beta has more than one branch");
    };
    assert!(pages_of(&path, "free", "")?.contains(&old_root));
    let Some(&run) = pages_of(&path, "overflow", "alpha")?.first() else {
        panic!("alpha has no overflow run");
    };
    let mut bytes = std::fs::read(&path)?;
    let at = |page: u64| usize::try_from(page * 4096).unwrap_or(usize::MAX);
    let old = bytes[at(old_root)..at(old_root + 1)].to_vec();
    bytes[at(run)..at(run + 1)].copy_from_slice(&old);
    bytes[at(new_root) + 100] ^= 0xff;
    std::fs::write(&path, bytes)?;
    let (got, lost, _) = salvaged(&path)?;
    let wrong = wrong_tables(&got, &model);
    assert!(wrong.is_empty(), "wrong entries in {wrong:?}");
    // (Beta's old values are alpha's, which `wrong_tables` would take them for.)
    let copy = got.get(&format!("lost_and_found_{run}"));
    assert_eq!(copy.map_or(0, BTreeMap::len), 0, "{:?}", got.keys());
    // The old leaves were found under the copy, and refused.
    assert!(
        lost.iter().any(|l| l.reason.contains("older version")),
        "{lost:?}"
    );
    Ok(())
}
