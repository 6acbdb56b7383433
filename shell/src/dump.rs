//! `.dump [TABLE]`: a script that rebuilds the database, or one table, byte for byte.

use std::io::{self, Write};

use cairn_query::{
    DEFAULT_TABLE, ExecError, KeyRange, Limits, Literal, Outcome, Statement, display_bytes,
};

use crate::shell::Shell;

/// The literal that writes `bytes`: text when it is printable, else hex.
pub fn literal(bytes: &[u8]) -> Literal {
    match std::str::from_utf8(bytes) {
        Ok(s) if cairn_query::is_printable(bytes) => Literal::Text(s.to_owned()),
        _ => Literal::Blob(bytes.to_vec()),
    }
}

/// Prints a script that rebuilds the database (or one table) in a new file, as the
/// session's statements see it: inside a transaction, with its own changes (`BEGIN`) or
/// at its snapshot (`BEGIN READ`); outside one, every table at one snapshot (a read
/// transaction of its own).
pub fn dump(shell: &mut Shell, only: Option<&str>) -> Result<String, String> {
    let mut quiet = |_: &[u8], _: &[u8]| {};
    let own = !shell.session.in_transaction();
    if own {
        shell
            .session
            .run(&Statement::BeginRead, &mut quiet)
            .map_err(|e| e.to_string())?;
    }
    let previous = shell.session.table().to_owned();
    let dumped = write_dump(shell, only);
    // Back to the table the session was in (it exists: a dump drops nothing), and out of
    // the transaction of its own.
    let _ = shell
        .session
        .run(&Statement::Use { table: previous }, &mut quiet);
    if own {
        let _ = shell.session.run(&Statement::Commit, &mut quiet);
    }
    dumped.map(|()| String::new())
}

/// Writes the dump through the session's statements (`TABLES`, `USE`, `SCAN`). Stopped by
/// Ctrl-C or by a value the language cannot hold, it is left without its `COMMIT`, so
/// that loading what was printed adds nothing.
fn write_dump(shell: &mut Shell, only: Option<&str>) -> Result<(), String> {
    let Shell { session, out, .. } = shell;
    let tables = match session.run(&Statement::Tables, &mut |_, _| {}) {
        Ok(Outcome::Tables(tables)) => tables,
        Ok(_) => Vec::new(),
        Err(e) => return Err(e.to_string()),
    };
    if let Some(name) = only
        && !tables.iter().any(|t| t.name == name)
    {
        return Err(format!("no table named {name:?}"));
    }
    let max_literal = Limits::default().max_literal;
    let io = |e: io::Error| e.to_string();
    writeln!(out, "-- Cairn dump; load with: cairn NEW_FILE < THIS_FILE").map_err(io)?;
    writeln!(out, "BEGIN").map_err(io)?;
    // The table the script leaves its loader in: the default one, as it began.
    let mut last = DEFAULT_TABLE;
    for info in tables.iter().filter(|t| only.is_none_or(|n| n == t.name)) {
        last = &info.name;
        let name = Literal::Text(info.name.clone());
        if info.name != DEFAULT_TABLE {
            writeln!(out, "CREATE TABLE {name}").map_err(io)?;
        }
        writeln!(out, "USE {name}").map_err(io)?;
        let table = info.name.clone();
        session
            .run(&Statement::Use { table }, &mut |_, _| {})
            .map_err(|e| e.to_string())?;
        let scan = Statement::Scan {
            range: KeyRange::default(),
            reverse: false,
            limit: None,
        };
        // (The first failure stops the writing; the scan runs out without it.)
        let mut failed = None;
        let scanned = session.run(&scan, &mut |k, v| {
            if failed.is_some() {
                return;
            }
            if v.len() > max_literal {
                failed = Some(format!(
                    "the value of {} in table {name} is {} bytes, over the language's \
                     limit of {max_literal}: a dump cannot hold it (.backup copies it)",
                    display_bytes(k),
                    v.len()
                ));
            } else if let Err(e) = writeln!(out, "PUT {} {}", literal(k), literal(v)) {
                failed = Some(e.to_string());
            }
        });
        match scanned {
            Err(ExecError::Interrupted) => return Ok(()),
            Err(e) => return Err(e.to_string()),
            Ok(_) => {}
        }
        if let Some(e) = failed {
            return Err(e);
        }
    }
    if last != DEFAULT_TABLE {
        writeln!(out, "USE {DEFAULT_TABLE}").map_err(io)?;
    }
    writeln!(out, "COMMIT").map_err(io)
}
