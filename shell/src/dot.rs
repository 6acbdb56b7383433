//! Dot-commands: `.help`, `.tables`, `.mode`, `.dump`, `.check`, `.backup` and the rest.

use std::io::{self, Write};
use std::path::Path;

use cairn_engine::{PageInfo, ReadTxn};
use cairn_query::{DEFAULT_TABLE, Limits, Literal, Outcome, Statement, display_bytes};

use crate::render::{Cell, Mode};
use crate::shell::{Access, Flow, Shell, row_writer};

/// Printed by `.help`.
pub const HELP: &str = "\
Statements (separated by ; or new lines, keywords in any case):
  PUT key value           GET key                 DELETE key
  SCAN [start [end]] [PREFIX p] [REVERSE] [LIMIT n]    (keys in [start, end))
  COUNT [start [end]] [PREFIX p]
  DELETE RANGE [start [end]] [PREFIX p]               DELETE PREFIX p
  BEGIN   COMMIT   ROLLBACK   USE t   TABLES
  CREATE TABLE [IF NOT EXISTS] t      DROP TABLE [IF EXISTS] t
  Literals: 'text', \"text\", x'00ff', 42 (stored as 8 big-endian bytes)

Dot-commands, each on a line of its own:
.backup FILE          write a consistent copy of the database to FILE
.check                check every page of the database; fails if it finds a problem
.compact              move the data to the start of the file and give back the rest
.dump [TABLE]         print a script that rebuilds the database (or one table)
.exit, .quit          leave the shell
.export FILE [TABLE]  write the rows of TABLE (or the current one) to FILE as CSV
.headers on|off       print column names, or not
.help                 show this list
.import [--skip N] FILE [TABLE]
                      load key,value rows from a CSV file (as .mode csv prints
                      them) into TABLE or the current one, in one transaction
.mode MODE            output mode: table, plain, csv, json or line
.once FILE            send the results of the next line to FILE
.open [--readonly] [FILE]
                      close this database and open FILE (created if missing;
                      at the terminal, read-only if another process writes it),
                      or a new database in memory
.output [FILE]        send results to FILE (emptied first), or back to the screen
.page N               page N decoded: its kind, the commit that wrote it, its entries
.pages                every page: its kind, the tree it belongs to, items and fill
                      (a run - the log, a large value, the freelist - in one row)
.read FILE            run the statements and commands in FILE
.stats [TABLE]        statistics of the database file, or of one table
.tables               list the tables with their entry counts
.timer on|off         print real, user and system time after each statement

Ctrl-C stops a running SCAN, COUNT or .dump and skips the rest of the input;
Ctrl-D leaves (an open transaction is rolled back).";

/// How deep `.read` may nest: a script that reads itself stops here instead of
/// exhausting the stack.
const MAX_READ_DEPTH: usize = 16;

/// The dot-commands, for completion.
pub const COMMANDS: [&str; 20] = [
    ".backup", ".check", ".dump", ".exit", ".export", ".headers", ".help", ".import", ".mode",
    ".once", ".open", ".output", ".quit", ".read", ".stats", ".tables", ".timer", ".compact",
    ".pages", ".page",
];

/// The dot-commands whose argument names a file, for completion.
pub const FILE_COMMANDS: [&str; 7] = [
    ".backup", ".export", ".import", ".once", ".open", ".output", ".read",
];

fn on_off(arg: Option<&str>) -> Option<bool> {
    match arg?.to_ascii_lowercase().as_str() {
        "on" | "yes" | "true" | "1" => Some(true),
        "off" | "no" | "false" | "0" => Some(false),
        _ => None,
    }
}

/// Splits a dot-command's line into words as a POSIX shell does (quotes, backslashes),
/// except that `#` is an ordinary character: a shell would read a word starting with it
/// as a comment running to the end of the line (`.import #1.csv` would lose its file
/// name), and dot-commands have no comments. `None` when a quote is not closed.
fn split_words(line: &str) -> Option<Vec<String>> {
    let mut escaped = String::with_capacity(line.len() + 4);
    let (mut quote, mut backslash, mut word_start) = (None, false, true);
    for c in line.chars() {
        let was_escaped = std::mem::take(&mut backslash);
        match quote {
            _ if was_escaped => {}
            Some('"') if c == '\\' => backslash = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '\\' => backslash = true,
                '\'' | '"' => quote = Some(c),
                '#' if word_start => escaped.push('\\'),
                _ => {}
            },
        }
        // A word starts after whitespace outside quotes that no backslash escaped.
        word_start = !was_escaped && quote.is_none() && matches!(c, ' ' | '\t' | '\n');
        escaped.push(c);
    }
    shlex::split(&escaped)
}

/// Runs the dot-command `line`, which stands at `at` (`script:line:column`).
///
/// # Errors
/// Only failures to write the output; a failing command is reported and counted.
pub fn run(shell: &mut Shell, line: &str, at: &str) -> io::Result<Flow> {
    // Arguments split as a POSIX shell would: `.open 'my file.cairn'`, `.read a\ b.cq`.
    let Some(words) = split_words(line) else {
        shell.error(&format!(
            "{at}: a quote is not closed in the command's arguments"
        ))?;
        return Ok(Flow::Continue);
    };
    let command = words.first().map_or(".", String::as_str);
    let args: Vec<&str> = words.iter().skip(1).map(String::as_str).collect();
    let fail = |shell: &mut Shell, message: String| shell.error(&format!("{at}: {message}"));
    let arity = |n: std::ops::RangeInclusive<usize>, usage: &str| -> Result<(), String> {
        if n.contains(&args.len()) {
            Ok(())
        } else {
            Err(format!("usage: {usage}"))
        }
    };
    if command == ".read" {
        let [file] = args[..] else {
            fail(shell, "usage: .read FILE".into())?;
            return Ok(Flow::Continue);
        };
        if shell.reading >= MAX_READ_DEPTH {
            fail(
                shell,
                format!(".read nested more than {MAX_READ_DEPTH} deep (a script reading itself?)"),
            )?;
            return Ok(Flow::Quit);
        }
        return match crate::shell::open_script(std::path::Path::new(file)) {
            Ok(src) => {
                shell.reading += 1;
                let flow = shell.run_script(file, src);
                shell.reading -= 1;
                flow
            }
            Err(e) => fail(shell, format!("cannot read {file}: {e}")).map(|()| Flow::Continue),
        };
    }
    let checked = match command {
        ".quit" | ".exit" => return Ok(Flow::Quit),
        ".help" => arity(0..=0, ".help").map(|()| HELP.to_owned()),
        ".mode" if args.is_empty() => Ok(format!(
            "current output mode: {}",
            shell.settings.mode.name()
        )),
        ".mode" => arity(1..=1, ".mode table|plain|csv|json|line").and_then(|()| {
            let mode = Mode::parse(args[0]).ok_or_else(|| {
                format!(
                    "unknown mode {:?}: use table, plain, csv, json or line",
                    args[0]
                )
            })?;
            shell.settings.mode = mode;
            Ok(String::new())
        }),
        ".headers" | ".header" => arity(1..=1, ".headers on|off").and_then(|()| {
            shell.settings.headers =
                on_off(args.first().copied()).ok_or("usage: .headers on|off")?;
            Ok(String::new())
        }),
        ".timer" => arity(1..=1, ".timer on|off").and_then(|()| {
            shell.settings.timer = on_off(args.first().copied()).ok_or("usage: .timer on|off")?;
            Ok(String::new())
        }),
        ".tables" => {
            arity(0..=0, ".tables").and_then(|()| tables(shell).map_err(|e| e.to_string()))
        }
        ".stats" => {
            arity(0..=1, ".stats [TABLE]").and_then(|()| stats(shell, args.first().copied()))
        }
        ".check" => arity(0..=0, ".check").and_then(|()| check(shell)),
        ".pages" => arity(0..=0, ".pages").and_then(|()| pages(shell)),
        ".page" => arity(1..=1, ".page N").and_then(|()| {
            let n = args[0]
                .parse()
                .map_err(|_| format!("usage: .page N (a page number, not {:?})", args[0]))?;
            page(shell, n)
        }),
        ".dump" => arity(0..=1, ".dump [TABLE]")
            .and_then(|()| dump(shell, args.first().copied()).map_err(|e| e.to_string())),
        ".backup" => arity(1..=1, ".backup FILE").and_then(|()| {
            let n = shell
                .session
                .database()
                .backup(args[0])
                .map_err(|e| format!("backup failed: {e}"))?;
            let entries = if n == 1 { "entry" } else { "entries" };
            Ok(format!("backed up {n} {entries} to {}", args[0]))
        }),
        ".open" => match args[..] {
            // (No file: a new database in memory, as at the start without one.)
            [] => Ok((Access::Write, None)),
            ["--readonly", file] => Ok((Access::ReadOnly, Some(file))),
            [file] if shell.settings.interactive => Ok((Access::WriteOrRead, Some(file))),
            [file] => Ok((Access::Write, Some(file))),
            _ => Err("usage: .open [--readonly] [FILE]".to_owned()),
        }
        .map(|(access, file)| {
            shell
                .reopen(file.map(Path::new), access)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        }),
        ".compact" => arity(0..=0, ".compact").and_then(|()| compact(shell)),
        ".import" => crate::csv_file::import(shell, &args),
        ".export" => crate::csv_file::export(shell, &args),
        ".output" if args.is_empty() => {
            let file = shell.out.file().unwrap_or_default().to_owned();
            shell
                .out
                .send_to_stdout()
                .map(|()| String::new())
                .map_err(|e| {
                    shell.out.drop_file();
                    format!("cannot write {file}: {e}")
                })
        }
        ".output" | ".once" => arity(1..=1, &format!("{command} FILE")).and_then(|()| {
            shell
                .out
                .send_to_file(args[0], command == ".once")
                .map(|()| String::new())
                .map_err(|e| format!("cannot write {}: {e}", args[0]))
        }),
        _ => Err(format!(
            "unknown command {command}: .help lists the commands"
        )),
    };
    match checked {
        Ok(text) if text.is_empty() => {}
        Ok(text) => writeln!(shell.out, "{text}")?,
        Err(message) => fail(shell, message)?,
    }
    Ok(Flow::Continue)
}

fn read_txn(shell: &Shell) -> Result<ReadTxn, String> {
    shell
        .session
        .database()
        .begin_read()
        .map_err(|e| e.to_string())
}

fn tables(shell: &mut Shell) -> Result<String, String> {
    let list = match shell.session.run(&Statement::Tables, &mut |_, _| {}) {
        Ok(Outcome::Tables(list)) => list,
        Ok(_) => Vec::new(),
        Err(e) => return Err(e.to_string()),
    };
    let rows = list
        .iter()
        .map(|t| [Cell::Text(t.name.as_str().into()), Cell::Number(t.len)])
        .collect();
    print_rows(shell, &["table", "entries"], rows)
}

/// Prints rows in the current mode.
fn print_rows<const N: usize>(
    shell: &mut Shell,
    columns: &'static [&'static str],
    rows: Vec<[Cell<'_>; N]>,
) -> Result<String, String> {
    let print = |shell: &mut Shell| -> io::Result<()> {
        let mut w = row_writer(&mut shell.out, shell.settings, columns)?;
        for row in &rows {
            w.row(row)?;
        }
        w.finish()
    };
    print(shell).map_err(|e| e.to_string())?;
    Ok(String::new())
}

fn stats(shell: &mut Shell, table: Option<&str>) -> Result<String, String> {
    let s = shell
        .session
        .database()
        .stats()
        .map_err(|e| e.to_string())?;
    if let Some(name) = table {
        let t = s
            .by_table
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| format!("no table named {name:?}"))?;
        let rows = vec![
            ("entries", t.entries.to_string()),
            ("depth", t.depth.to_string()),
            ("branch pages", t.branch_pages.to_string()),
            ("leaf pages", t.leaf_pages.to_string()),
            ("overflow pages", t.overflow_pages.to_string()),
            ("fill factor", format!("{:.3}", t.fill_factor)),
        ];
        return print_statistics(shell, &rows);
    }
    let rows: Vec<(&str, String)> = vec![
        ("commit", s.txid.to_string()),
        ("page size", s.page_size.to_string()),
        ("file size", s.file_size.to_string()),
        ("pages", s.page_count.to_string()),
        ("tables", s.tables.to_string()),
        ("entries", s.entries.to_string()),
        ("depth", s.depth.to_string()),
        ("branch pages", s.branch_pages.to_string()),
        ("leaf pages", s.leaf_pages.to_string()),
        ("overflow pages", s.overflow_pages.to_string()),
        ("freelist pages", s.freelist_pages.to_string()),
        ("commit log pages", s.log_pages.to_string()),
        ("free pages", s.free_pages.to_string()),
        ("fill factor", format!("{:.3}", s.fill_factor)),
        (
            "oldest reader",
            match (s.oldest_reader_txid, s.oldest_reader_age) {
                (Some(txid), Some(age)) => format!("commit {txid}, for {:.1} s", age.as_secs_f64()),
                (Some(txid), None) => format!("commit {txid}, in another process"),
                (None, _) => "none".into(),
            },
        ),
        (
            "pages pinned by readers",
            s.pages_pinned_by_readers.to_string(),
        ),
        // Since the shell opened the database (`Builder::txn_memory`, `-txnmemory`).
        (
            "pages spilled",
            shell
                .session
                .database()
                .io_stats()
                .pages_spilled
                .to_string(),
        ),
    ];
    print_statistics(shell, &rows)
}

/// Prints `(statistic, value)` rows.
fn print_statistics(shell: &mut Shell, rows: &[(&str, String)]) -> Result<String, String> {
    let rows = rows
        .iter()
        .map(|(name, value)| {
            [
                Cell::Text((*name).into()),
                Cell::Text(value.as_str().into()),
            ]
        })
        .collect();
    print_rows(shell, &["statistic", "value"], rows)
}

fn pages(shell: &mut Shell) -> Result<String, String> {
    let pages = shell
        .session
        .database()
        .pages()
        .map_err(|e| e.to_string())?;
    let rows = runs(&pages)
        .map(|p| {
            [
                Cell::Number(p.page),
                Cell::Text(p.kind.into()),
                Cell::Text(p.owner.as_str().into()),
                Cell::Number(p.items),
                Cell::Text(format!("{:.0}%", p.fill * 100.0).into()),
            ]
        })
        .collect();
    print_rows(shell, &["page", "kind", "tree", "items", "fill"], rows)
}

/// `pages` with each run of pages (the commit log, a large value's overflow run, the
/// freelist: each of their pages counts the run's pages as its items) given by its first
/// page alone: a 2 MiB log is one row, not 512.
fn runs(pages: &[PageInfo]) -> impl Iterator<Item = &PageInfo> {
    let mut run_end = None;
    pages.iter().filter(move |p| {
        let is_run = matches!(p.kind, "log" | "overflow" | "freelist");
        if let Some((kind, end)) = run_end
            && is_run
            && p.kind == kind
            && p.page < end
        {
            return false;
        }
        run_end = is_run.then(|| (p.kind, p.page.saturating_add(p.items.max(1))));
        true
    })
}

fn page(shell: &mut Shell, n: u64) -> Result<String, String> {
    let dump = shell
        .session
        .database()
        .page(n)
        .map_err(|e| e.to_string())?;
    writeln!(
        shell.out,
        "page {}: {}, written by commit {}",
        dump.page, dump.kind, dump.txid
    )
    .map_err(|e| e.to_string())?;
    let rows = dump
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| match e {
            cairn_engine::PageEntry::Leaf {
                key,
                value,
                overflow,
            } => [
                Cell::Number(i as u64),
                Cell::Text(display_bytes(key).into_owned().into()),
                Cell::Text(match (value, overflow) {
                    (Some(v), _) => display_bytes(v).into_owned().into(),
                    (None, Some(p)) => format!("(overflow run at page {p})").into(),
                    (None, None) => "".into(),
                }),
            ],
            cairn_engine::PageEntry::Branch { key, child } => [
                Cell::Number(i as u64),
                Cell::Text(key.as_deref().map_or_else(
                    || "(leftmost)".into(),
                    |k| display_bytes(k).into_owned().into(),
                )),
                Cell::Text(format!("child page {child}").into()),
            ],
        })
        .collect();
    print_rows(shell, &["entry", "key", "value"], rows)
}

fn compact(shell: &mut Shell) -> Result<String, String> {
    if shell.session.in_transaction() {
        return Err("cannot compact inside a transaction: COMMIT or ROLLBACK first".into());
    }
    let r = shell
        .session
        .database()
        .compact()
        .map_err(|e| format!("compaction failed: {e}"))?;
    Ok(format!(
        "compacted: {} -> {} bytes ({} pages moved, {} nodes merged, {} commits)",
        r.bytes_before, r.bytes_after, r.pages_moved, r.nodes_merged, r.steps
    ))
}

fn check(shell: &mut Shell) -> Result<String, String> {
    let report = shell
        .session
        .database()
        .check()
        .map_err(|e| e.to_string())?;
    if report.is_ok() {
        return Ok(format!(
            "ok: {} pages, {} entries",
            report.pages_checked, report.entries
        ));
    }
    let problems: Vec<String> = report.problems.iter().map(ToString::to_string).collect();
    Err(format!(
        "{} problems found:\n{}",
        problems.len(),
        problems.join("\n")
    ))
}

/// The literal that writes `bytes`: text when it is printable, else hex.
fn literal(bytes: &[u8]) -> Literal {
    match std::str::from_utf8(bytes) {
        Ok(s) if cairn_query::is_printable(bytes) => Literal::Text(s.to_owned()),
        _ => Literal::Blob(bytes.to_vec()),
    }
}

/// Prints a script that rebuilds the database (or one table) in a new file.
fn dump(shell: &mut Shell, only: Option<&str>) -> Result<String, String> {
    let txn = read_txn(shell)?;
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

#[cfg(test)]
mod tests {
    use super::{runs, split_words};
    use cairn_engine::PageInfo;

    /// `#` is an ordinary character wherever it stands; quotes and backslashes work as in
    /// a shell (a shell would have dropped every word from a `#` at a word's start on).
    #[test]
    fn a_hash_is_part_of_a_word_and_quotes_still_group() {
        let words = |line: &str| split_words(line).map(|w| w.join("|"));
        for (line, expected) in [
            (".import #1.csv t", ".import|#1.csv|t"),
            (".open a#b", ".open|a#b"),
            (".open '#a b'", ".open|#a b"),
            (".open \"x # y\" #z", ".open|x # y|#z"),
            (".open \"a\\\" #b\" c", ".open|a\" #b|c"),
            (".open a\\ #b", ".open|a #b"),
            (".read \\#x", ".read|#x"),
            (".mode\t#csv", ".mode|#csv"),
            (".tables #", ".tables|#"),
        ] {
            assert_eq!(words(line).as_deref(), Some(expected), "{line:?}");
        }
        assert_eq!(words(".open 'a #b"), None);
    }

    fn page(page: u64, kind: &'static str, owner: &str, items: u64) -> PageInfo {
        PageInfo {
            page,
            kind,
            owner: owner.into(),
            items,
            fill: 0.0,
        }
    }

    /// A run is one row at its first page, two adjacent runs of one length and tree two
    /// rows; pages that are not runs (free ones, leaves) each keep their row.
    #[test]
    fn each_run_of_pages_is_one_row_at_its_first_page() {
        let mut pages = vec![page(0, "header", "", 0), page(1, "header", "", 0)];
        pages.extend((2..6).map(|p| page(p, "log", "", 4)));
        pages.extend((6..10).map(|p| page(p, "overflow", "t", 2)));
        pages.extend([
            page(10, "free", "", 0),
            page(11, "free", "", 0),
            page(12, "leaf", "t", 3),
            page(13, "freelist", "", 1),
            page(14, "overflow", "t", 1),
            page(15, "overflow", "u", 1),
        ]);
        let rows: Vec<(u64, &str)> = runs(&pages).map(|p| (p.page, p.kind)).collect();
        assert_eq!(
            rows,
            [
                (0, "header"),
                (1, "header"),
                (2, "log"),
                (6, "overflow"),
                (8, "overflow"),
                (10, "free"),
                (11, "free"),
                (12, "leaf"),
                (13, "freelist"),
                (14, "overflow"),
                (15, "overflow"),
            ]
        );
    }
}
