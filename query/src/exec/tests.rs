use std::sync::atomic::Ordering;

use cairn_engine::{Database, Durability};

use super::{Outcome, Session};
use crate::ast::Statement;
use crate::error::ExecError;

type Result<T> = std::result::Result<T, ExecError>;
use crate::parser::parse_script;

fn statement(src: &str) -> Statement {
    let mut script = parse_script(src);
    assert!(script.errors.is_empty(), "{src}");
    script.statements.remove(0).statement
}

/// A raised flag stops a scan and a ranged count (inside a transaction too, which
/// stays open and keeps its writes); lowered, they run to the end. Writes and the
/// whole-table count do not look at it.
#[test]
fn a_raised_interrupt_flag_stops_scans_and_counts_but_not_writes() -> Result<()> {
    let mut s = Session::new(cairn_engine::Database::in_memory()?)?;
    let flag = s.interrupt_flag();
    s.run(&statement("BEGIN"), &mut |_, _| {})?;
    for i in 0..1000 {
        s.run(&statement(&format!("PUT {i} {i}")), &mut |_, _| {})?;
    }
    flag.store(true, Ordering::Relaxed);
    let mut rows = 0;
    let scan = s.run(&statement("SCAN"), &mut |_, _| rows += 1);
    assert!(matches!(scan, Err(ExecError::Interrupted)), "{scan:?}");
    assert_eq!(rows, 0);
    let count = s.run(&statement("COUNT 0 500"), &mut |_, _| {});
    assert!(matches!(count, Err(ExecError::Interrupted)), "{count:?}");
    assert_eq!(
        s.run(&statement("COUNT"), &mut |_, _| {})?,
        Outcome::Count(1000)
    );
    s.run(&statement("PUT 1000 1"), &mut |_, _| {})?;
    assert!(s.in_transaction());
    // Raised part-way: the rows before the next look are produced, no more.
    flag.store(false, Ordering::Relaxed);
    let mut rows = 0;
    let scan = s.run(&statement("SCAN"), &mut |_, _| {
        rows += 1;
        if rows == 300 {
            flag.store(true, Ordering::Relaxed);
        }
    });
    assert!(matches!(scan, Err(ExecError::Interrupted)), "{scan:?}");
    assert_eq!(rows, 2 * super::rows::ROWS_PER_LOOK);
    flag.store(false, Ordering::Relaxed);
    s.run(&statement("COMMIT"), &mut |_, _| {})?;
    let mut rows = 0;
    assert_eq!(
        s.run(&statement("SCAN"), &mut |_, _| rows += 1)?,
        Outcome::Rows(1001)
    );
    assert_eq!(rows, 1001);
    Ok(())
}

/// Parameters stand for their bound bytes in every place a literal may; an unbound
/// one fails its statement, which changes nothing (inside a transaction too); binding
/// again replaces the bytes, unbinding removes them.
#[test]
fn parameters_are_bound_by_name_and_an_unbound_one_changes_nothing() -> Result<()> {
    let mut s = Session::new(cairn_engine::Database::in_memory()?)?;
    let rows = |s: &mut Session, src: &str| -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(s.execute(&statement(src))?.rows)
    };
    s.set_param("k", b"\x00key\xff".to_vec());
    s.set_param(":v", "it's");
    s.execute(&statement("PUT :k :v"))?;
    assert_eq!(
        rows(&mut s, "GET x'006b6579ff'")?,
        [(b"\x00key\xff".to_vec(), b"it's".to_vec())]
    );
    for i in 0u64..10 {
        s.set_param("i", i.to_be_bytes().to_vec());
        s.execute(&statement("PUT :i 'n'"))?;
    }
    s.set_param("lo", 3u64.to_be_bytes().to_vec());
    s.set_param("hi", 6u64.to_be_bytes().to_vec());
    assert_eq!(rows(&mut s, "SCAN :lo :hi")?.len(), 3);
    // (The key bound to :k, 0x00 then 'k', sorts after every 8-byte integer here.)
    assert_eq!(
        s.execute(&statement("COUNT :lo"))?.outcome,
        Outcome::Count(8)
    );
    s.set_param("p", vec![0u8]);
    assert_eq!(
        s.execute(&statement("DELETE RANGE :lo PREFIX :p"))?.outcome,
        Outcome::DeletedRange { count: 8 }
    );
    assert_eq!(
        s.params().map(|(k, _)| k).collect::<Vec<_>>(),
        ["hi", "i", "k", "lo", "p", "v"]
    );

    s.execute(&statement("BEGIN"))?;
    assert!(s.unset_param(":v"));
    assert!(!s.unset_param("v"));
    for src in [
        "PUT 'x' :v",
        "GET :v",
        "SCAN :v",
        "DELETE PREFIX :v",
        "COUNT 'a' :v",
    ] {
        let r = s.execute(&statement(src));
        assert!(
            matches!(&r, Err(ExecError::UnboundParameter(name)) if name == "v"),
            "{src}: {r:?}"
        );
    }
    // LIMIT takes a parameter bound to an integer's 8 bytes, and refuses other bytes.
    s.set_param("two", 2u64.to_be_bytes());
    assert_eq!(rows(&mut s, "SCAN LIMIT :two")?.len(), 2);
    let text = s.execute(&statement("SCAN LIMIT :k"));
    assert!(
        matches!(&text, Err(ExecError::LimitNotAnInteger(l, 5)) if l == ":k"),
        "{text:?}"
    );
    let first = s.execute(&statement("SCAN :u :w PREFIX :v"));
    assert!(
        matches!(&first, Err(ExecError::UnboundParameter(name)) if name == "u"),
        "the first unbound one, as written: {first:?}"
    );
    assert!(
        s.in_transaction(),
        "a failed statement leaves the transaction open"
    );
    s.execute(&statement("COMMIT"))?;
    assert_eq!(rows(&mut s, "GET 'x'")?, []);
    s.clear_params();
    assert_eq!(s.params().count(), 0);
    assert!(s.execute(&statement("GET :k")).is_err());
    Ok(())
}

#[test]
fn savepoints_roll_back_and_release_by_name_inside_a_write_transaction() -> Result<()> {
    let mut s = Session::new(cairn_engine::Database::in_memory()?)?;
    let run = |s: &mut Session, src: &str| s.execute(&statement(src));
    let count =
        |s: &mut Session| -> Result<Outcome> { Ok(s.execute(&statement("COUNT"))?.outcome) };
    assert!(matches!(
        run(&mut s, "SAVEPOINT a"),
        Err(ExecError::SavepointOutsideTransaction)
    ));
    run(&mut s, "BEGIN READ")?;
    assert!(matches!(
        run(&mut s, "SAVEPOINT a"),
        Err(ExecError::ReadTransaction)
    ));
    run(&mut s, "COMMIT")?;
    run(&mut s, "BEGIN")?;
    run(&mut s, "PUT 1 1")?;
    assert_eq!(
        run(&mut s, "SAVEPOINT a")?.outcome,
        Outcome::Saved("a".into())
    );
    run(&mut s, "PUT 2 2")?;
    run(&mut s, "SAVEPOINT b")?;
    run(&mut s, "PUT 3 3")?;
    // A second `a`: the newest of a name is the one meant.
    run(&mut s, "SAVEPOINT a")?;
    run(&mut s, "PUT 4 4")?;
    assert_eq!(s.savepoints().collect::<Vec<_>>(), ["a", "b", "a"]);
    assert_eq!(
        run(&mut s, "ROLLBACK TO a")?.outcome,
        Outcome::RolledBackTo("a".into())
    );
    assert_eq!(count(&mut s)?, Outcome::Count(3));
    assert_eq!(s.savepoints().count(), 3, "the savepoint stays");
    run(&mut s, "ROLLBACK TO SAVEPOINT b")?;
    assert_eq!(count(&mut s)?, Outcome::Count(2));
    assert_eq!(s.savepoints().collect::<Vec<_>>(), ["a", "b"]);
    assert!(matches!(
        run(&mut s, "RELEASE c"),
        Err(ExecError::NoSuchSavepoint(name)) if name == "c"
    ));
    run(&mut s, "PUT 5 5")?;
    assert_eq!(
        run(&mut s, "RELEASE b")?.outcome,
        Outcome::Released("b".into())
    );
    assert!(matches!(
        run(&mut s, "ROLLBACK TO b"),
        Err(ExecError::NoSuchSavepoint(_))
    ));
    // The released savepoint's changes belong to `a` now.
    run(&mut s, "ROLLBACK TO a")?;
    assert_eq!(count(&mut s)?, Outcome::Count(1));
    run(&mut s, "PUT 6 6")?;
    run(&mut s, "COMMIT")?;
    assert_eq!(s.savepoints().count(), 0);
    assert_eq!(count(&mut s)?, Outcome::Count(2));
    assert!(matches!(
        run(&mut s, "ROLLBACK TO a"),
        Err(ExecError::SavepointOutsideTransaction)
    ));
    // A ROLLBACK ends them with the transaction.
    run(&mut s, "BEGIN")?;
    run(&mut s, "SAVEPOINT a")?;
    run(&mut s, "ROLLBACK")?;
    run(&mut s, "BEGIN")?;
    assert!(matches!(
        run(&mut s, "RELEASE a"),
        Err(ExecError::NoSuchSavepoint(_))
    ));
    Ok(())
}

/// The keys of the default table in the bytes a power cut now would leave (those
/// synced, and the commit log's durable records), as a database opened on them reads.
fn durable_keys(storage: &cairn_engine::storage::FaultyStorage) -> Result<Vec<Vec<u8>>> {
    let image = std::sync::Arc::new(
        cairn_engine::storage::MemoryStorage::from_bytes(&storage.durable_image())
            .map_err(cairn_engine::Error::from)?,
    );
    let db = Database::builder().with_storage(image, true, None)?;
    let read = db.begin_read()?;
    let keys = read
        .open_table(crate::DEFAULT_TABLE)?
        .iter()?
        .map(|e| e.map(|(k, _)| k.to_vec()))
        .collect::<cairn_engine::Result<_>>()?;
    Ok(keys)
}

/// A session's durability reaches every commit it makes: a statement's own (through
/// the group commit), `BEGIN ... COMMIT`'s, `DELETE RANGE`'s; an Eventual one is
/// durable only once a later Immediate commit (or a sync) makes it so.
#[test]
fn the_sessions_durability_reaches_each_of_its_commits() -> Result<()> {
    let storage =
        cairn_engine::storage::FaultyStorage::new(3).map_err(cairn_engine::Error::from)?;
    let db = Database::builder().with_storage(storage.clone(), true, None)?;
    let mut s = Session::new(db)?;
    let run = |s: &mut Session, src: &str| s.execute(&statement(src));
    assert_eq!(s.durability(), Durability::Immediate, "the database's");
    run(&mut s, "PUT 'a' 1")?;
    assert_eq!(durable_keys(&storage)?, [b"a".to_vec()]);
    s.set_durability(Durability::Eventual);
    run(&mut s, "PUT 'b' 1")?;
    for stmt in ["BEGIN", "PUT 'c' 1", "COMMIT", "DELETE RANGE 'a' 'b'"] {
        run(&mut s, stmt)?;
    }
    assert_eq!(
        durable_keys(&storage)?,
        [b"a".to_vec()],
        "none of them durable"
    );
    // An Immediate commit makes them durable with its own.
    s.set_durability(Durability::Immediate);
    run(&mut s, "PUT 'd' 1")?;
    let keys = ["b", "c", "d"].map(|k| k.as_bytes().to_vec());
    assert_eq!(durable_keys(&storage)?, keys);
    // A transaction keeps the durability it began with.
    run(&mut s, "BEGIN")?;
    s.set_durability(Durability::Eventual);
    run(&mut s, "PUT 'e' 1")?;
    run(&mut s, "COMMIT")?;
    assert_eq!(durable_keys(&storage)?.len(), 4);
    Ok(())
}
