//! The properties the fuzz targets check, as plain functions: `fuzz/` runs them under
//! libFuzzer, and `tests/tests/fuzz_corpus.rs` replays the committed corpora in CI.

mod spill;

pub use spill::spill;

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_engine::storage::{FaultyStorage, MemoryStorage};
use cairn_engine::{Database, Durability};
use cairn_query::{Literal, Outcome, Session, Statement, parse_bytes, parse_script};

/// Any bytes through the parser: errors inside the input, and every statement prints back
/// to source that parses to the same statement.
pub fn parse(data: &[u8]) {
    let script = parse_bytes(data);
    for e in &script.errors {
        assert!(e.offset <= data.len());
    }
    for s in &script.statements {
        assert!(s.span.start <= s.span.end && s.span.end <= data.len());
        let printed = s.statement.to_string();
        let again = parse_script(&printed);
        assert!(again.errors.is_empty(), "{printed:?}: {:?}", again.errors);
        assert_eq!(again.statements.len(), 1);
        assert_eq!(again.statements[0].statement, s.statement);
    }
}

/// The literals of `stmt`, which all must resolve for it to run.
fn literals(stmt: &Statement) -> Vec<&Literal> {
    fn range(r: &cairn_query::KeyRange) -> Vec<&Literal> {
        [&r.start, &r.end, &r.prefix]
            .into_iter()
            .flatten()
            .collect()
    }
    match stmt {
        Statement::Put { key, value } => vec![key, value],
        Statement::Get { key } | Statement::Delete { key } => vec![key],
        Statement::Scan {
            range: r, limit, ..
        } => range(r).into_iter().chain(limit).collect(),
        Statement::DeleteRange { range: r } | Statement::Count { range: r } => range(r),
        _ => Vec::new(),
    }
}

/// Any bytes as a script on an in-memory database, with parameters `:a` and `:n` bound:
/// on the default table, PUT, DELETE (of keys and of ranges) and GET with
/// BEGIN/COMMIT/ROLLBACK agree with a model; a statement naming another parameter fails
/// and changes nothing; an error's place is inside its statement; the file stays
/// consistent.
pub fn script(data: &[u8]) {
    let Ok(db) = Database::in_memory() else {
        return;
    };
    let Ok(mut session) = Session::new(db.clone()) else {
        return;
    };
    let params: BTreeMap<String, Vec<u8>> = [
        ("a".to_owned(), b"a".to_vec()),
        ("n".to_owned(), 1u64.to_be_bytes().to_vec()),
    ]
    .into();
    for (name, value) in &params {
        session.set_param(name, value.clone());
    }
    // (Resolved here, not by `Literal::bytes_with`, which the executor uses.)
    let bytes = |l: &Literal| match l {
        Literal::Param(name) => params.get(name).cloned(),
        Literal::Text(t) => Some(t.as_bytes().to_vec()),
        Literal::Blob(b) => Some(b.clone()),
        Literal::Int(n) => Some(n.to_be_bytes().to_vec()),
    };
    let script = parse_bytes(data);
    let modelled = !script.statements.iter().any(|s| {
        matches!(
            s.statement,
            Statement::Use { .. }
                | Statement::CreateTable { .. }
                | Statement::DropTable { .. }
                | Statement::RenameTable { .. }
        )
    });
    type Entries = BTreeMap<Vec<u8>, Vec<u8>>;
    let mut committed = Entries::new();
    let mut working: Option<Entries> = None;
    // The write transaction's savepoints: each name with the table then.
    let mut saves: Vec<(String, Entries)> = Vec::new();
    for s in &script.statements {
        let result = session.execute(&s.statement);
        if let Err(e) = &result {
            // Where the shell puts the caret: inside the statement's source.
            let text = String::from_utf8_lossy(data.get(s.span.start..s.span.end).unwrap_or(&[]));
            let at = e.offset_in(&text);
            assert!(at <= text.len() && text.is_char_boundary(at), "{e}: {at}");
        }
        if literals(&s.statement)
            .into_iter()
            .any(|l| bytes(l).is_none())
        {
            assert!(
                matches!(result, Err(cairn_query::ExecError::UnboundParameter(_))),
                "{}: {result:?}",
                s.statement
            );
            continue;
        }
        if !modelled {
            continue;
        }
        let view = working.as_mut().unwrap_or(&mut committed);
        let resolved = |l: &Literal| bytes(l).unwrap_or_default();
        match (&s.statement, result) {
            (Statement::Put { key, value }, Ok(_)) => {
                view.insert(resolved(key), resolved(value));
            }
            (Statement::Delete { key }, Ok(out)) => {
                let existed = view.remove(&resolved(key)).is_some();
                assert_eq!(out.outcome, Outcome::Delete { existed });
            }
            (Statement::DeleteRange { range }, Ok(out)) => {
                let bound = |l: &Option<Literal>| l.as_ref().map(resolved);
                let (start, end, prefix) =
                    (bound(&range.start), bound(&range.end), bound(&range.prefix));
                let gone: Vec<Vec<u8>> = view
                    .keys()
                    .filter(|k| start.as_ref().is_none_or(|s| *k >= s))
                    .filter(|k| end.as_ref().is_none_or(|e| *k < e))
                    .filter(|k| prefix.as_ref().is_none_or(|p| k.starts_with(p)))
                    .cloned()
                    .collect();
                for k in &gone {
                    view.remove(k);
                }
                let count = gone.len() as u64;
                assert_eq!(out.outcome, Outcome::DeletedRange { count });
            }
            (Statement::Get { key }, Ok(out)) => {
                let key = resolved(key);
                let want: Vec<_> = view
                    .get(&key)
                    .map(|v| (key.clone(), v.clone()))
                    .into_iter()
                    .collect();
                assert_eq!(out.rows, want);
            }
            (Statement::Begin, Ok(_)) => working = Some(committed.clone()),
            // (A read transaction's COMMIT ends it and changes nothing.)
            (Statement::Commit, Ok(_)) => {
                saves.clear();
                if let Some(w) = working.take() {
                    committed = w;
                }
            }
            (Statement::Rollback, Ok(_)) => {
                saves.clear();
                working = None;
            }
            (Statement::Savepoint { name }, Ok(_)) => saves.push((name.clone(), view.clone())),
            (Statement::RollbackTo { name }, Ok(_)) => {
                let at = saves.iter().rposition(|(n, _)| n == name);
                assert!(
                    at.is_some(),
                    "ROLLBACK TO {name}: no such savepoint, yet it ran"
                );
                if let Some(at) = at {
                    saves.truncate(at + 1);
                    *view = saves[at].1.clone();
                }
            }
            (Statement::Release { name }, Ok(_)) => {
                let at = saves.iter().rposition(|(n, _)| n == name);
                assert!(
                    at.is_some(),
                    "RELEASE {name}: no such savepoint, yet it ran"
                );
                saves.truncate(at.unwrap_or(saves.len()));
            }
            _ => {}
        }
    }
    let _ = session.close();
    if let Ok(report) = db.check() {
        assert!(report.is_ok(), "{:?}", report.problems);
    }
}

/// Any bytes as a database file: salvaging, opening (read-only, then for writing:
/// replaying the commit log's records, then committing), listing, scanning both ways,
/// reading and checking return errors or data, never a panic or a hang. An input whose
/// last byte is a multiple of 8 is also opened read-only from a file, which must show
/// what its bytes in memory show.
pub fn open(data: &[u8]) {
    let copied = read(data);
    if data.last().is_some_and(|b| b % 8 == 0) {
        from_a_file(data);
    }
    let Ok(storage) = MemoryStorage::from_bytes(data) else {
        return;
    };
    let mut handed = 0u64;
    let mut names = std::collections::HashSet::new();
    if let Ok(report) = cairn_engine::salvage_storage(&storage, &mut |s| {
        handed += u64::from(matches!(s, cairn_engine::Salvaged::Entry(..)));
        if let cairn_engine::Salvaged::Table(name) = s {
            names.insert(name.to_owned());
        }
        Ok(())
    }) {
        assert_eq!(report.entries, handed);
        // Every table reported unverified was handed over.
        assert!(report.unverified.iter().all(|n| names.contains(n)));
    }
    let Ok(db) = Database::builder().with_storage(Arc::new(storage), false, None) else {
        return;
    };
    if let (Some(copy), Some(written)) = (copied, summary(&db)) {
        assert!(
            copy == written,
            "a private copy shows other tables or rows than a writable opening"
        );
    }
    let Ok(mut w) = db.begin_write() else { return };
    if let Ok(tables) = w.list_tables()
        && let Some(info) = tables.first()
        && let Ok(mut t) = w.open_table(&info.name)
    {
        let _ = t.insert(b"k", b"v");
    }
    let _ = w.commit();
    let _ = db.check();
}

/// Small valid database files for the `open` target to mutate (`fuzz/seeds.rs` writes
/// them to its corpus), named: 1 KiB pages; one to three tables; overflow values; deletes
/// over several commits (a freelist); sealed by a clean close or not; unlogged Eventual
/// commits, which write no freelist (from the first commit, or after a durable commit with
/// a freelist that a writable open works their free set out from); and, with a 16-page
/// commit log, durable commits that only the log holds (their pages lost to a power cut, or
/// still in the file), which a writable open replays.
///
/// # Errors
/// When a database cannot be built in memory.
pub fn open_seeds() -> Result<Vec<(String, Vec<u8>)>, cairn_engine::Error> {
    let mut seeds = Vec::new();
    for (tables, big, churn, seal) in [
        (1, false, false, true),
        (2, true, true, true),
        (1, true, true, false),
        (3, false, true, false),
    ] {
        let storage = Arc::new(MemoryStorage::new()?);
        let db = Database::builder()
            .page_size(1024)
            .durability(Durability::Eventual)
            .with_storage(storage.clone(), true, None)?;
        fill(&db, tables, big, churn)?;
        if seal {
            drop(db);
        }
        let name = format!("seed-{tables}t-{big}-{churn}-{seal}");
        seeds.push((name, used_bytes(storage.to_vec())));
    }
    // Without a log, unsealed: Eventual commits whose free set a writable open finds by
    // walking the trees.
    let storage = Arc::new(MemoryStorage::new()?);
    let db = Database::builder()
        .page_size(1024)
        .log_size(0)
        .durability(Durability::Eventual)
        .with_storage(storage.clone(), true, None)?;
    fill(&db, 2, true, true)?;
    seeds.push((
        "seed-implied-free-set".to_owned(),
        used_bytes(storage.to_vec()),
    ));
    drop(db);
    // Without a log, unsealed, over a durable commit with a freelist: Eventual commits
    // whose older pages and free set a writable open works out from the durable commit's
    // trees and freelist (and a table dropped since, with its large value).
    let storage = Arc::new(MemoryStorage::new()?);
    let db = Database::builder()
        .page_size(1024)
        .log_size(0)
        .with_storage(storage.clone(), true, None)?;
    fill(&db, 3, true, true)?;
    for k in 0u32..8 {
        let mut w = db.begin_write()?;
        w.set_durability(Durability::Eventual);
        w.open_table("t0")?.insert(
            &(k * 7).to_be_bytes(),
            &vec![9; 20 + 300 * (k as usize % 5)],
        )?;
        if k == 4 {
            w.drop_table("t2")?;
        }
        w.commit()?;
    }
    seeds.push((
        "seed-implied-over-durable".to_owned(),
        used_bytes(storage.to_vec()),
    ));
    drop(db);
    for (seed, cut) in [(1, false), (2, true)] {
        let storage = FaultyStorage::new(seed)?;
        let db = Database::builder()
            .page_size(1024)
            .log_size(16 << 10)
            .with_storage(storage.clone(), true, None)?;
        fill(&db, 2, true, false)?;
        // Durable single puts: each logs a record.
        for k in 0u32..6 {
            let mut w = db.begin_write()?;
            w.open_table("t1")?.insert(&k.to_be_bytes(), b"logged")?;
            w.commit()?;
        }
        let image = if cut {
            storage.power_cut()
        } else {
            storage.live_image()
        };
        drop(db);
        seeds.push((format!("seed-logged-cut-{cut}"), used_bytes(image)));
    }
    Ok(seeds)
}

/// Commits to `tables` tables of 30 keys each (one value of 1,500 bytes with `big`), in
/// three rounds that delete a third of the keys with `churn`.
fn fill(db: &Database, tables: usize, big: bool, churn: bool) -> Result<(), cairn_engine::Error> {
    for round in 0..if churn { 3 } else { 1 } {
        let mut w = db.begin_write()?;
        for t in 0..tables {
            let name = format!("t{t}");
            if round == 0 {
                w.create_table(&name)?;
            }
            let mut table = w.open_table(&name)?;
            for k in 0u32..30 {
                if churn && (k + round) % 3 == 0 {
                    table.remove(&k.to_be_bytes())?;
                } else {
                    let len = if big && k == 5 { 1500 } else { 10 };
                    table.insert(&k.to_be_bytes(), &vec![k as u8; len])?;
                }
            }
        }
        w.commit()?;
    }
    Ok(())
}

/// `image` without its tail of zeros (the reserved pages nothing uses), in whole 1 KiB
/// pages.
fn used_bytes(mut image: Vec<u8>) -> Vec<u8> {
    let used = image
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |n| n + 1)
        .next_multiple_of(1024);
    image.truncate(used);
    image
}

/// `data` opened read-only: listed, scanned, read and checked.
/// Every table's name and rows (the first 10,000 of each), when all can be read.
type Summary = Vec<(String, Vec<(Vec<u8>, Vec<u8>)>)>;

fn summary(db: &Database) -> Option<Summary> {
    let r = db.begin_read().ok()?;
    let mut all = Summary::new();
    for info in r.list_tables().ok()? {
        let t = r.open_table(&info.name).ok()?;
        let rows = t
            .iter()
            .ok()?
            .take(10_000)
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<Vec<_>, _>>()
            .ok()?;
        all.push((info.name, rows));
    }
    Some(all)
}

/// Opens `data` read-only and reads it all; for a private copy (its log applied in
/// memory), what it shows, to compare with a writable opening.
fn read(data: &[u8]) -> Option<Summary> {
    let storage = MemoryStorage::from_bytes(data).ok()?;
    let db = Database::builder()
        .read_only(true)
        .with_storage(Arc::new(storage), false, None)
        .ok()?;
    let copied = db.is_private_copy().then(|| summary(&db)).flatten();
    read_all(&db);
    copied
}

/// Opens `data` read-only from a file, as well as from memory: the file's map (a private
/// one, for a private copy) and its pins must show what the memory opening shows.
fn from_a_file(data: &[u8]) {
    let from_memory = crate::open_image(data, true).ok();
    let from_file = crate::open_file_image(data);
    let from_file = from_file.as_ref().ok().map(|(_dir, db)| db);
    match (&from_memory, &from_file) {
        (Some(m), Some(f)) => {
            assert_eq!(m.is_private_copy(), f.is_private_copy());
            assert!(
                summary(m) == summary(f),
                "a file opened read-only shows other tables or rows than its bytes in memory"
            );
            read_all(f);
        }
        (None, None) => {}
        _ => panic!(
            "read-only from memory {}, from a file {}",
            from_memory.is_some(),
            from_file.is_some()
        ),
    }
}

fn read_all(db: &Database) {
    let _ = db.check();
    let _ = db.stats();
    let Ok(r) = db.begin_read() else { return };
    let Ok(tables) = r.list_tables() else { return };
    for info in tables {
        let Ok(t) = r.open_table(&info.name) else {
            continue;
        };
        if let Ok(rows) = t.iter() {
            for row in rows.take(100_000) {
                if row.is_err() {
                    break;
                }
            }
        }
        if let Ok(rows) = t.iter() {
            let _ = rows.rev().take(1000).count();
        }
        let _ = t.get(b"k");
    }
}

/// Random transactions (puts, removals of keys and of ranges, syncs, online compactions) with an I/O failure at the
/// k-th storage call (once, or from then on), then a power cut: the file reopens and passes the integrity check. Half the inputs
/// (by `mode`) get the smallest commit log, 16 pages, which a few commits fill: the log's
/// cycles end and start again within one input; the other half the default one, which
/// a large transaction makes move.
pub fn io_failures(data: &[u8]) {
    let [k, mode, seed, ops @ ..] = data else {
        return;
    };
    let Ok(storage) = FaultyStorage::new(u64::from(*seed)) else {
        return;
    };
    // The default log (64 KiB, moving to larger runs when a cycle or a transaction
    // outgrows it), or the smallest, which stays.
    let mut builder = Database::builder().page_size(1024);
    if mode & 2 != 0 {
        builder = builder.log_size(16 << 10);
    }
    let Ok(db) = builder.with_storage(storage.clone(), true, None) else {
        return;
    };
    let at = storage.operations() + u64::from(*k);
    if mode % 2 == 0 {
        storage.fail_at(at);
    } else {
        storage.die_after(at);
    }
    for chunk in ops.chunks(3) {
        let Ok(mut w) = db.begin_write() else { return };
        w.set_durability(if chunk[0] % 2 == 0 {
            Durability::Immediate
        } else {
            Durability::Eventual
        });
        let _ = w.create_table("t");
        if let Ok(mut t) = w.open_table("t") {
            let key = [chunk[0] % 64];
            let len = usize::from(chunk.get(1).copied().unwrap_or(0)) * 20;
            let _ = match chunk.get(2).map(|b| b % 8) {
                Some(0 | 4) => t.remove(&key).map(|_| ()),
                Some(1) => {
                    let end = [key[0].saturating_add(chunk[1] % 16)];
                    t.remove_range(&key[..]..&end[..]).map(|_| ())
                }
                _ => t.insert(&key, &vec![1; len]).map(|_| ()),
            };
        }
        let _ = w.commit();
        if chunk[0] % 7 == 0 {
            let _ = db.sync();
        }
        if chunk[0] % 11 == 0 {
            // Online compaction: its steps move pages and shrink the file, any of them
            // meeting the failure.
            let _ = db.compact();
        }
    }
    let image = storage.power_cut();
    drop(db);
    let Ok(mem) = MemoryStorage::from_bytes(&image) else {
        return;
    };
    let db = Database::builder()
        .with_storage(Arc::new(mem), false, None)
        .unwrap_or_else(|e| panic!("a power cut left an unopenable file: {e}"));
    let report = db
        .check()
        .unwrap_or_else(|e| panic!("check failed to run: {e}"));
    assert!(report.is_ok(), "{:?}", report.problems);
}
