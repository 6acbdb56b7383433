//! Any bytes as a script, run on an in-memory database: no panic; on the default table,
//! PUT/DELETE/GET with BEGIN/COMMIT/ROLLBACK agree with a model; the file stays consistent.
#![no_main]

use std::collections::BTreeMap;

use cairn_engine::Database;
use cairn_query::{Outcome, Session, Statement, parse_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(db) = Database::in_memory() else { return };
    let Ok(mut session) = Session::new(db.clone()) else { return };
    let script = parse_bytes(data);
    // The model holds only while the script stays on the default table.
    let modelled = !script.statements.iter().any(|s| {
        matches!(s.statement, Statement::Use { .. } | Statement::CreateTable { .. } | Statement::DropTable { .. })
    });
    let mut committed: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut working: Option<BTreeMap<Vec<u8>, Vec<u8>>> = None;
    for s in &script.statements {
        let result = session.execute(&s.statement);
        if !modelled {
            continue;
        }
        let view = working.as_mut().unwrap_or(&mut committed);
        match (&s.statement, result) {
            (Statement::Put { key, value }, Ok(_)) => {
                view.insert(key.bytes().to_vec(), value.bytes().to_vec());
            }
            (Statement::Delete { key }, Ok(out)) => {
                let existed = view.remove(&key.bytes()[..]).is_some();
                assert_eq!(out.outcome, Outcome::Delete { existed });
            }
            (Statement::Get { key }, Ok(out)) => {
                let want: Vec<_> = view.get(&key.bytes()[..]).map(|v| (key.bytes().to_vec(), v.clone())).into_iter().collect();
                assert_eq!(out.rows, want);
            }
            (Statement::Begin, Ok(_)) => working = Some(committed.clone()),
            (Statement::Commit, Ok(_)) => committed = working.take().unwrap_or_default(),
            (Statement::Rollback, Ok(_)) => working = None,
            _ => {}
        }
    }
    let _ = session.close();
    if let Ok(report) = db.check() {
        assert!(report.is_ok(), "{:?}", report.problems);
    }
});
