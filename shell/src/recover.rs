//! `cairn recover FILE`: what a damaged database still holds (`cairn_engine::salvage`),
//! as a script to load into a new file as a dump is (`cairn NEW_FILE < SCRIPT`), or, with
//! `cairn recover FILE NEW_FILE`, written straight into a new database (values over the
//! language's 16 MiB limit too). The damaged file is only read. Each part that could not be
//! read is a line on standard error (and a comment in the script where its keys stood).
//! Exit status 0 when nothing was lost, 1 when something was, 2 when nothing could be read.

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use cairn_engine::{Database, Lost, LostKeys, SalvageReport, Salvaged, WriteTxn};
use cairn_query::{DEFAULT_TABLE, Limits, Literal};

use crate::dump::literal;

/// Runs `cairn recover` with `args` (after `recover`).
pub fn main(args: &[String]) -> ExitCode {
    match args {
        [file] => to_script(file),
        [file, new] => into_database(file, new),
        _ => {
            eprintln!(
                "cairn recover: usage: cairn recover FILE > SCRIPT, or cairn recover FILE NEW_FILE"
            );
            ExitCode::from(2)
        }
    }
}

/// What to tell someone whose file `file` is damaged: how to save what it still holds.
pub fn hint(file: &str) -> String {
    format!(
        "the file is damaged: `cairn recover {file} > SCRIPT` (or `cairn recover {file} \
         NEW_FILE`) saves what it still holds"
    )
}

/// Whether `e` says a file is damaged in a way `cairn recover` may get the data past (a
/// damaged page, a file cut short, two unreadable commit slots: salvage then looks for
/// the newest tree among the pages).
pub fn damaged(e: &cairn_engine::Error) -> bool {
    use cairn_engine::Error::{Corruption, NoValidCommit, Truncated};
    matches!(
        e,
        Corruption { .. } | Truncated { .. } | NoValidCommit { .. }
    )
}

/// Writes what `file` holds into the new database `new`, in one transaction.
fn into_database(file: &str, new: &str) -> ExitCode {
    if Path::new(new).exists() {
        eprintln!("cairn recover: {new} exists: recover writes a new database");
        return ExitCode::from(2);
    }
    let rebuilt = Database::create(new).and_then(|db| {
        let mut rebuild = Rebuild {
            txn: db.begin_write()?,
            table: String::new(),
            refused: Vec::new(),
        };
        let report = cairn_engine::salvage(file, &mut |s| rebuild.take(s))?;
        rebuild.txn.commit()?;
        db.close()?;
        Ok((report, rebuild.refused))
    });
    match rebuilt {
        Ok((report, refused)) => {
            eprintln!("cairn recover: written to {new}");
            summary(file, &report, &refused)
        }
        Err(e) => {
            // (Nothing half-made is left behind.)
            let _ = std::fs::remove_file(new);
            eprintln!("cairn recover: cannot recover {file} into {new}: {e}");
            ExitCode::from(2)
        }
    }
}

/// Writes what salvage hands over into a write transaction.
struct Rebuild {
    txn: WriteTxn,
    /// The table whose entries come.
    table: String,
    /// The changes the new database refused, each why.
    refused: Vec<String>,
}

impl Rebuild {
    /// Writes `s`. A change the new database refuses before making it (over a limit, a
    /// table missing: only a crafted file hands one over) is left out and noted in
    /// `refused`; any other error ends the recovery.
    fn take(&mut self, s: Salvaged<'_>) -> io::Result<()> {
        use cairn_engine::Error::{InvalidTableName, KeyTooLarge, TableNotFound, ValueTooLarge};
        match self.write(s) {
            Err(
                e @ (KeyTooLarge { .. }
                | ValueTooLarge { .. }
                | InvalidTableName(..)
                | TableNotFound(_)),
            ) => {
                self.refused.push(e.to_string());
                Ok(())
            }
            other => other.map_err(io::Error::other),
        }
    }

    fn write(&mut self, s: Salvaged<'_>) -> cairn_engine::Result<()> {
        let txn = &mut self.txn;
        match s {
            Salvaged::Table(name) => {
                txn.open_or_create_table(name)?;
                name.clone_into(&mut self.table);
            }
            Salvaged::Entry(key, value) => {
                txn.open_table(&self.table)?.insert(key, value)?;
            }
            Salvaged::Put { table, key, value } => {
                txn.open_or_create_table(table)?.insert(key, value)?;
            }
            Salvaged::Delete { table, key } if txn.table_exists(table)? => {
                txn.open_table(table)?.remove(key)?;
            }
            Salvaged::Created(name) => {
                txn.open_or_create_table(name)?;
            }
            Salvaged::Dropped(name) if txn.table_exists(name)? => txn.drop_table(name)?,
            _ => {}
        }
        Ok(())
    }
}

/// Prints the script that rebuilds what `file` holds.
fn to_script(file: &str) -> ExitCode {
    let stdout = io::stdout();
    let mut script = Script {
        out: BufWriter::new(stdout.lock()),
        file,
        started: false,
        table: String::new(),
        created: std::collections::BTreeSet::new(),
        too_large: Vec::new(),
    };
    // (Nothing is printed for a file that cannot be read at all.)
    let recovered = cairn_engine::salvage(file, &mut |s| script.write(s)).and_then(|report| {
        script.end(&report)?;
        Ok(report)
    });
    match recovered {
        Ok(report) => summary(file, &report, &script.too_large),
        Err(cairn_engine::Error::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cairn recover: cannot recover {file}: {e}");
            ExitCode::from(2)
        }
    }
}

/// Writes the recovery script.
struct Script<'f, W: Write> {
    out: W,
    /// The file recovered, and whether the script's first lines are written.
    file: &'f str,
    started: bool,
    /// The table the script's last `USE` chose.
    table: String,
    /// The tables the script has created so far.
    created: std::collections::BTreeSet<String>,
    /// Keys (with their tables) whose values are over the language's limit: the script
    /// cannot hold them.
    too_large: Vec<String>,
}

impl<W: Write> Script<'_, W> {
    fn start(&mut self) -> io::Result<()> {
        if !self.started {
            self.started = true;
            writeln!(self.out, "-- Cairn recovery of {}", self.file)?;
            writeln!(self.out, "-- load with: cairn NEW_FILE < THIS_FILE")?;
            writeln!(self.out, "BEGIN")?;
        }
        Ok(())
    }

    fn table(&mut self, name: &str) -> io::Result<()> {
        if !self.created.contains(name) {
            // A table the log's commits change that no tree gave (its catalog entry lost:
            // its older entries may be in a `lost_and_found` table): created, so that the
            // script loads, with a word on what it holds.
            let quoted = Literal::Text(name.to_owned());
            writeln!(
                self.out,
                "-- table {quoted}: not found in the tree; only the changes the commit log's \
                 commits make to it follow"
            )?;
            writeln!(self.out, "CREATE TABLE IF NOT EXISTS {quoted}")?;
            self.created.insert(name.to_owned());
        }
        if self.table != name {
            writeln!(self.out, "USE {}", Literal::Text(name.to_owned()))?;
            name.clone_into(&mut self.table);
        }
        Ok(())
    }

    /// A `PUT`, or a comment where a value is over the language's limit.
    fn put(&mut self, key: &[u8], value: &[u8]) -> io::Result<()> {
        let max = Limits::default().max_literal;
        if value.len() > max {
            let what = format!(
                "table {}: the value of {} ({} bytes, over the language's limit of {max})",
                Literal::Text(self.table.clone()),
                literal(key),
                value.len()
            );
            writeln!(self.out, "-- NOT RECOVERED: {what}")?;
            self.too_large.push(what);
            return Ok(());
        }
        writeln!(self.out, "PUT {} {}", literal(key), literal(value))
    }

    fn write(&mut self, s: Salvaged<'_>) -> io::Result<()> {
        self.start()?;
        match s {
            Salvaged::Table(name) => {
                let quoted = Literal::Text(name.to_owned());
                writeln!(self.out, "CREATE TABLE IF NOT EXISTS {quoted}")?;
                self.created.insert(name.to_owned());
                self.table(name)
            }
            Salvaged::Entry(key, value) => self.put(key, value),
            Salvaged::Lost(lost) => writeln!(self.out, "-- LOST: {}", describe(lost)),
            Salvaged::LoggedCommit => writeln!(self.out, "-- a commit from the commit log"),
            Salvaged::Put { table, key, value } => {
                self.table(table)?;
                self.put(key, value)
            }
            Salvaged::Delete { table, key } => {
                self.table(table)?;
                writeln!(self.out, "DELETE {}", literal(key))
            }
            Salvaged::Created(name) => {
                let quoted = Literal::Text(name.to_owned());
                self.created.insert(name.to_owned());
                writeln!(self.out, "CREATE TABLE IF NOT EXISTS {quoted}")
            }
            Salvaged::Dropped(name) => {
                if self.table == name {
                    self.table.clear();
                }
                self.created.remove(name);
                let quoted = Literal::Text(name.to_owned());
                writeln!(self.out, "DROP TABLE IF EXISTS {quoted}")
            }
            _ => Ok(()),
        }
    }

    fn end(&mut self, report: &SalvageReport) -> io::Result<()> {
        self.start()?;
        writeln!(
            self.out,
            "-- recovered {} entries of {} tables ({} of them lost_and_found) from commit {}, \
             then {} commits from the log; {} parts lost",
            report.entries,
            report.tables,
            report.lost_and_found,
            report.txid,
            report.logged_commits,
            report.lost.len()
        )?;
        if let Some(damage) = &report.header_damage {
            writeln!(self.out, "-- header: {damage}")?;
        }
        for name in &report.unverified {
            writeln!(self.out, "-- unverified: {}", unverified(name))?;
        }
        writeln!(self.out, "USE {DEFAULT_TABLE}\nCOMMIT")?;
        self.out.flush()
    }
}

/// A loss, in words: where, which keys, why.
fn describe(lost: &Lost) -> String {
    let bound = |b: &Option<Vec<u8>>, open: &str| {
        b.as_deref()
            .map_or_else(|| open.to_owned(), |k| literal(k).to_string())
    };
    let what = match (&lost.table, &lost.keys) {
        (_, LostKeys::Log) => "the commits after those recovered".to_owned(),
        (Some(t), LostKeys::Range { from, to }) => format!(
            "table {}: the keys from {} up to {}",
            Literal::Text(t.clone()),
            bound(from, "the first"),
            bound(to, "the last")
        ),
        (Some(t), LostKeys::Value(key)) => format!(
            "table {}: the value of {}",
            Literal::Text(t.clone()),
            literal(key)
        ),
        (None, LostKeys::Range { from, to }) => format!(
            "the catalog: the tables named from {} up to {}",
            bound(from, "the first"),
            bound(to, "the last")
        ),
        (None, LostKeys::Value(name)) => format!("the catalog: table {}", literal(name)),
    };
    match lost.page {
        0 => format!("{what} ({})", lost.reason),
        page => format!("{what} (page {page}: {})", lost.reason),
    }
}

/// A table salvage read from a page no checksum covers, in words.
fn unverified(name: &str) -> String {
    format!(
        "table {}: read from a page no checksum covers any more (what referred to that page \
         is damaged, or names other bytes there): damage there would show in its name or \
         its entries, and an older version of the page in older values",
        Literal::Text(name.to_owned())
    )
}

/// Prints what was recovered and lost on standard error; the exit status.
fn summary(file: &str, report: &SalvageReport, not_recovered: &[String]) -> ExitCode {
    let mut err = io::stderr().lock();
    let _ = writeln!(
        err,
        "cairn recover: {file}: {} entries of {} tables from commit {} (the newest named: {}), \
         then {} commits from the commit log",
        report.entries, report.tables, report.txid, report.newest_txid, report.logged_commits
    );
    if let Some(damage) = &report.header_damage {
        let _ = writeln!(err, "header: {damage}");
    }
    if report.lost_and_found > 0 {
        let _ = writeln!(
            err,
            "found: {} tables that no page that verifies leads to (under a damaged catalog or \
             branch), recovered under the names a part of the catalog or an older catalog \
             in the file gives them, else as lost_and_found_<page>",
            report.lost_and_found
        );
    }
    if report.rejoined > 0 {
        let _ = writeln!(
            err,
            "found: {} subtrees under damaged pages whose pages verify, handed back to the \
             table whose lost range holds their keys (the lost lines below name the damaged \
             pages)",
            report.rejoined
        );
    }
    for name in &report.unverified {
        let _ = writeln!(err, "unverified: {}", unverified(name));
    }
    for lost in &report.lost {
        let _ = writeln!(err, "lost: {}", describe(lost));
    }
    for what in not_recovered {
        let _ = writeln!(err, "not recovered: {what}");
    }
    if report.lost.is_empty() && not_recovered.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::Rebuild;
    use cairn_engine::{Database, Salvaged};

    /// What the new database refuses is left out and noted; what follows still goes in.
    #[test]
    fn refused_changes_are_noted_and_the_rest_written() -> cairn_engine::Result<()> {
        let db = Database::in_memory()?;
        let mut rebuild = Rebuild {
            txn: db.begin_write()?,
            table: String::new(),
            refused: Vec::new(),
        };
        let long_key = vec![b'k'; 5000];
        for s in [
            Salvaged::Table(""),
            Salvaged::Entry(b"a", b"1"),
            Salvaged::Table("t"),
            Salvaged::Entry(&long_key, b"2"),
            Salvaged::Entry(b"b", b"3"),
            Salvaged::Put {
                table: "u",
                key: b"c",
                value: b"4",
            },
        ] {
            rebuild.take(s)?;
        }
        assert_eq!(rebuild.refused.len(), 3, "{:?}", rebuild.refused);
        rebuild.txn.commit()?;
        let r = db.begin_read()?;
        assert_eq!(r.open_table("t")?.get(b"b")?, Some(&b"3"[..]));
        assert_eq!(r.open_table("u")?.get(b"c")?, Some(&b"4"[..]));
        assert_eq!(r.list_tables()?.len(), 2);
        Ok(())
    }
}
