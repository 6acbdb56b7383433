//! `.dump [TABLE]`: a script that rebuilds the database, or one table, byte for byte.

use std::io::{self, Write};

use cairn_query::{DEFAULT_TABLE, Limits, Literal, display_bytes};

use crate::dot::read_txn;
use crate::shell::Shell;

/// The literal that writes `bytes`: text when it is printable, else hex.
pub fn literal(bytes: &[u8]) -> Literal {
    match std::str::from_utf8(bytes) {
        Ok(s) if cairn_query::is_printable(bytes) => Literal::Text(s.to_owned()),
        _ => Literal::Blob(bytes.to_vec()),
    }
}

/// Prints a script that rebuilds the database (or one table) in a new file: as the open
/// read transaction sees it (`BEGIN READ`), else as of the last commit.
pub fn dump(shell: &mut Shell, only: Option<&str>) -> Result<String, String> {
    let fresh;
    let txn = match shell.session.read_snapshot() {
        Some(snapshot) => snapshot,
        None => {
            fresh = read_txn(shell)?;
            &fresh
        }
    };
    let tables = txn.list_tables().map_err(|e| e.to_string())?;
    if let Some(name) = only
        && !tables.iter().any(|t| t.name == name)
    {
        return Err(format!("no table named {name:?}"));
    }
    let interrupt = shell.interrupt_flag();
    let max_literal = Limits::default().max_literal;
    let out = &mut shell.out;
    let mut write = || -> Result<(), String> {
        let io = |e: io::Error| e.to_string();
        writeln!(out, "-- Cairn dump; load with: cairn NEW_FILE < THIS_FILE").map_err(io)?;
        writeln!(out, "BEGIN").map_err(io)?;
        for info in tables.iter().filter(|t| only.is_none_or(|n| n == t.name)) {
            let name = Literal::Text(info.name.clone());
            if info.name != DEFAULT_TABLE {
                writeln!(out, "CREATE TABLE {name}").map_err(io)?;
            }
            writeln!(out, "USE {name}").map_err(io)?;
            let table = txn.open_table(&info.name).map_err(|e| e.to_string())?;
            for entry in table.iter().map_err(|e| e.to_string())? {
                if interrupt.load(std::sync::atomic::Ordering::Relaxed) {
                    // Left unfinished: no COMMIT, so loading what was printed adds nothing.
                    return Ok(());
                }
                let (k, v) = entry.map_err(|e| e.to_string())?;
                if v.len() > max_literal {
                    // Left unfinished, as above: a script that loads all but this value
                    // would lose it quietly.
                    return Err(format!(
                        "the value of {} in table {name} is {} bytes, over the language's \
                         limit of {max_literal}: a dump cannot hold it (.backup copies it)",
                        display_bytes(k),
                        v.len()
                    ));
                }
                writeln!(out, "PUT {} {}", literal(k), literal(v)).map_err(io)?;
            }
        }
        writeln!(out, "USE {DEFAULT_TABLE}\nCOMMIT").map_err(io)
    };
    write()?;
    Ok(String::new())
}
