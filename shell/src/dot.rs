//! Dot-commands: `.help`, `.tables`, `.mode`, `.dump`, `.check`, `.backup` and the rest.

use std::io::{self, Write};
use std::path::Path;

use cairn_query::{Outcome, Statement};

use crate::render::{Cell, Mode};
use crate::shell::{Access, Flow, Shell, row_writer};

/// Printed by `.help`.
pub const HELP: &str = "\
Statements (separated by ; or new lines, keywords in any case):
  PUT key value           GET key                 DELETE key
  SCAN [start [end]] [PREFIX p] [REVERSE] [LIMIT n]    (keys in [start, end))
  COUNT [start [end]] [PREFIX p]
  DELETE RANGE [start [end]] [PREFIX p]               DELETE PREFIX p
  BEGIN [READ]   COMMIT   ROLLBACK   USE t   TABLES
  SAVEPOINT s    ROLLBACK TO s    RELEASE s           (inside BEGIN ... COMMIT)
  CREATE TABLE [IF NOT EXISTS] t      DROP TABLE [IF EXISTS] t
  RENAME TABLE t TO u
  Literals: 'text', \"text\", x'00ff', 42 (stored as 8 big-endian bytes),
  :name (a parameter: its value is bound with .param set)

Dot-commands, each on a line of its own (or shortened, .q, .tab, to a start that
no other command shares):
.backup FILE          write a consistent copy of the database to FILE
.bail on|off          stop at the first statement or command that fails, or not
.changes on|off       after each PUT, DELETE and DELETE RANGE, print how many keys
                      it changed, and how many all statements have, or not
.check                check every page of the database; fails if it finds a problem
.compact              move the data to the start of the file and give back the rest
.dump [TABLE]         print a script that rebuilds the database (or one table)
.durability [D]       the durability of the transactions begun from now on, or,
                      with D, set it: immediate (a commit returns once it is on
                      stable storage) or eventual (a commit is durable at the next
                      sync: .sync, the background one within seconds, or the end)
.echo on|off          print each line of input before running it, or not
.exit, .quit          leave the shell
.export FILE [TABLE]  write the rows of TABLE (or the current one) to FILE as CSV
.headers on|off       print column names, or not
.help [TOPIC]         show this list, or its lines on a statement's keyword (SCAN)
                      or a command (.import)
.import [--skip N] FILE [TABLE]
                      load key,value rows from a CSV file (as .mode csv prints
                      them) into TABLE or the current one, in one transaction
.integers on|off      print 8-byte keys and values that are not text as the
                      integers the language stores that way (42, not
                      x'000000000000002a'), or not
.mode MODE            output mode: table, plain, csv, json or line
.once FILE            send the results of the next line to FILE
.open [--readonly] [FILE]
                      close this database and open FILE (created if missing;
                      at the terminal, read-only if another process writes it),
                      or a new database in memory
.output [FILE]        send results to FILE (emptied first), or back to the screen
.page N               page N decoded: its kind, the commit that wrote it, its entries
.param [list]         the parameters statements name as :name, with their values
.param set NAME VALUE bind :NAME to VALUE, a literal ('text', x'00ff', 42, :other)
.param unset NAME     unbind :NAME;  .param clear unbinds them all
.print [TEXT...]      print TEXT (its words split and unquoted as a shell does)
.pages                every page: its kind, the tree it belongs to, items and fill
                      (a run - the log, a large value, the freelist - in one row)
.read FILE            run the statements and commands in FILE
.show                 the settings: modes, output, database, table, transaction
.stats [TABLE]        statistics of the database file, or of one table
.sync                 make every commit so far durable (Eventual ones)
.tables               list the tables with their entry counts
.timer on|off         print real, user and system time after each statement

Ctrl-C stops a running SCAN, COUNT or .dump and skips the rest of the input;
Ctrl-D leaves (an open transaction is rolled back).";

/// The lines of [`HELP`] on `topic`: a dot-command's entry (`.import`, or `import`), with
/// the lines that go on with it; else the statements' lines that hold the keyword
/// (`scan`, `ROLLBACK`), in any case. `None` when there are none.
fn help_on(topic: &str) -> Option<String> {
    let (statements, commands) = HELP.split_once("\n\nDot-commands")?;
    let name = topic.trim_start_matches('.');
    if name.is_empty() {
        return None;
    }
    // A command named with its dot may be shortened as when it is run (`.help .imp`);
    // without the dot, `table` is the keyword, not `.tables`.
    let command = match resolve(topic) {
        Ok(command) if topic.starts_with('.') => command.to_owned(),
        _ => format!(".{name}"),
    };
    let mut lines = Vec::new();
    let mut within = false;
    for line in commands.lines() {
        if line.starts_with('.') {
            // (The names before the description: `.exit, .quit`, `.param set NAME VALUE`.)
            let names = line.split("  ").next().unwrap_or_default();
            within = names
                .split(", ")
                .filter_map(|name| name.split(' ').next())
                .any(|name| name.eq_ignore_ascii_case(&command));
        } else if !line.starts_with("  ") {
            within = false;
        }
        if within {
            lines.push(line);
        }
    }
    if lines.is_empty() {
        let keyword = topic.to_ascii_uppercase();
        lines = statements
            .lines()
            .skip(1)
            .filter(|line| {
                line.split(|c: char| !c.is_ascii_alphabetic())
                    .any(|w| w == keyword)
            })
            .collect();
    }
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// How deep `.read` may nest: a script that reads itself stops here instead of
/// exhausting the stack.
const MAX_READ_DEPTH: usize = 16;

/// The dot-commands, for completion.
pub const COMMANDS: [&str; 29] = [
    ".backup",
    ".bail",
    ".changes",
    ".check",
    ".dump",
    ".durability",
    ".echo",
    ".exit",
    ".export",
    ".headers",
    ".help",
    ".import",
    ".integers",
    ".mode",
    ".once",
    ".open",
    ".output",
    ".print",
    ".quit",
    ".read",
    ".show",
    ".stats",
    ".sync",
    ".tables",
    ".timer",
    ".compact",
    ".pages",
    ".page",
    ".param",
];

/// The dot-commands whose argument names a file, for completion.
pub const FILE_COMMANDS: [&str; 7] = [
    ".backup", ".export", ".import", ".once", ".open", ".output", ".read",
];

/// The command `word` names: itself, or the one command it is the start of (`.q`, `.tab`,
/// `.hea`), as sqlite3 takes them.
///
/// # Errors
/// A word that starts several commands (naming them), or none (with a pointer for
/// sqlite3's commands that have no counterpart here).
pub fn resolve(word: &str) -> Result<&'static str, String> {
    // Each name with the command it runs (`.parameter` is `.param`'s longer name, as in
    // sqlite3).
    let names = COMMANDS
        .iter()
        .map(|c| (*c, *c))
        .chain([(".parameter", ".param")]);
    if let Some((_, command)) = names.clone().find(|(name, _)| *name == word) {
        return Ok(command);
    }
    let mut starting: Vec<&'static str> = names
        .filter(|(name, _)| word.len() > 1 && name.starts_with(word))
        .map(|(_, command)| command)
        .collect();
    starting.sort_unstable();
    starting.dedup();
    match starting[..] {
        [one] => Ok(one),
        [] => Err(unknown(word)),
        _ => Err(format!(
            "{word} could be {}: type more of the command",
            starting.join(", ")
        )),
    }
}

/// What to say of a command no command starts with.
fn unknown(word: &str) -> String {
    let pointer = match word {
        ".schema" | ".fullschema" => {
            ": a table holds keys and values, with no schema; .tables lists the tables"
        }
        ".indexes" | ".indices" => ": a table is ordered by its keys, and has no other index",
        ".databases" => ": .show names the open file",
        _ => ": .help lists the commands",
    };
    format!("unknown command {word}{pointer}")
}

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

/// Runs the dot-command `line`, whose messages begin with `at` (where it stands: a
/// [`crate::shell::prefix`]).
///
/// # Errors
/// Only failures to write the output; a failing command is reported and counted.
pub fn run(shell: &mut Shell, line: &str, at: &str) -> io::Result<Flow> {
    // `.param`'s value is a literal of the language, quotes and all: its line is not split.
    let trimmed = line.trim_start();
    let (first, rest) = trimmed
        .split_once(char::is_whitespace)
        .unwrap_or((trimmed, ""));
    let command = match resolve(first) {
        Ok(command) => command,
        Err(message) => {
            shell.error(&format!("{at}{message}"))?;
            return Ok(Flow::Continue);
        }
    };
    if command == ".param" {
        match crate::param::run(shell, rest) {
            Ok(text) if text.is_empty() => {}
            Ok(text) => writeln!(shell.out, "{text}")?,
            Err(message) => shell.error(&format!("{at}{message}"))?,
        }
        return Ok(Flow::Continue);
    }
    // Arguments split as a POSIX shell would: `.open 'my file.cairn'`, `.read a\ b.cq`.
    let Some(words) = split_words(line) else {
        shell.error(&format!(
            "{at}a quote is not closed in the command's arguments"
        ))?;
        return Ok(Flow::Continue);
    };
    let args: Vec<&str> = words.iter().skip(1).map(String::as_str).collect();
    let fail = |shell: &mut Shell, message: String| shell.error(&format!("{at}{message}"));
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
    if command == ".print" {
        // (An empty line too, which the results below would skip.)
        writeln!(shell.out, "{}", args.join(" "))?;
        return Ok(Flow::Continue);
    }
    let checked = match command {
        ".quit" | ".exit" => return Ok(Flow::Quit),
        ".help" => arity(0..=1, ".help [TOPIC]").and_then(|()| match args.first() {
            None => Ok(HELP.to_owned()),
            Some(topic) => help_on(topic).ok_or_else(|| {
                format!("no help on {topic}: .help alone lists every statement and command")
            }),
        }),
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
        ".integers" => arity(1..=1, ".integers on|off").and_then(|()| {
            shell.settings.integers =
                on_off(args.first().copied()).ok_or("usage: .integers on|off")?;
            Ok(String::new())
        }),
        ".changes" => arity(1..=1, ".changes on|off").and_then(|()| {
            shell.settings.changes =
                on_off(args.first().copied()).ok_or("usage: .changes on|off")?;
            Ok(String::new())
        }),
        ".timer" => arity(1..=1, ".timer on|off").and_then(|()| {
            shell.settings.timer = on_off(args.first().copied()).ok_or("usage: .timer on|off")?;
            Ok(String::new())
        }),
        ".bail" => arity(1..=1, ".bail on|off").and_then(|()| {
            shell.settings.bail = on_off(args.first().copied()).ok_or("usage: .bail on|off")?;
            Ok(String::new())
        }),
        ".echo" => arity(1..=1, ".echo on|off").and_then(|()| {
            shell.settings.echo = on_off(args.first().copied()).ok_or("usage: .echo on|off")?;
            Ok(String::new())
        }),
        ".durability" if args.is_empty() => {
            Ok(durability_name(shell.session.durability()).to_owned())
        }
        ".durability" => arity(1..=1, ".durability [immediate|eventual]").and_then(|()| {
            let d = crate::cli::parse_durability(args[0])
                .ok_or("usage: .durability [immediate|eventual]")?;
            // (A database `.open` opens later gets it too.)
            shell.session.set_durability(d);
            shell.settings.tuning.durability = Some(d);
            Ok(String::new())
        }),
        ".sync" => arity(0..=0, ".sync").and_then(|()| {
            if shell.session.in_transaction() && !shell.session.in_read_transaction() {
                return Err(
                    "cannot sync inside BEGIN ... COMMIT: commit or roll back first".into(),
                );
            }
            shell
                .session
                .database()
                .sync()
                .map(|()| String::new())
                .map_err(|e| format!("sync failed: {e}"))
        }),
        ".show" => arity(0..=0, ".show").and_then(|()| show(shell)),
        ".tables" => {
            arity(0..=0, ".tables").and_then(|()| tables(shell).map_err(|e| e.to_string()))
        }
        ".stats" => arity(0..=1, ".stats [TABLE]")
            .and_then(|()| crate::inspect::stats(shell, args.first().copied())),
        ".check" => arity(0..=0, ".check").and_then(|()| crate::inspect::check(shell)),
        ".pages" => arity(0..=0, ".pages").and_then(|()| crate::inspect::pages(shell)),
        ".page" => arity(1..=1, ".page N").and_then(|()| {
            let n = args[0]
                .parse()
                .map_err(|_| format!("usage: .page N (a page number, not {:?})", args[0]))?;
            crate::inspect::page(shell, n)
        }),
        ".dump" => arity(0..=1, ".dump [TABLE]").and_then(|()| {
            crate::dump::dump(shell, args.first().copied()).map_err(|e| e.to_string())
        }),
        ".backup" => arity(1..=1, ".backup FILE").and_then(|()| {
            let n = shell
                .session
                .database()
                .backup(args[0])
                .map_err(|e| match e {
                    // (The engine's message names the file as well.)
                    cairn_engine::Error::Io(io) if io.kind() == io::ErrorKind::AlreadyExists => {
                        format!("cannot back up to {}: it exists already", args[0])
                    }
                    e => format!("cannot back up to {}: {e}", args[0]),
                })?;
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
                .reopen(file.map(Path::new), access, at)
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
        _ => Err(unknown(command)),
    };
    match checked {
        Ok(text) if text.is_empty() => {}
        Ok(text) => writeln!(shell.out, "{text}")?,
        Err(message) => fail(shell, message)?,
    }
    Ok(Flow::Continue)
}

/// How `.durability` and `.show` name a durability.
fn durability_name(d: cairn_engine::Durability) -> &'static str {
    match d {
        cairn_engine::Durability::Immediate => "immediate",
        cairn_engine::Durability::Eventual => "eventual",
    }
}

/// `.show`: the settings and the state of the session, a `name: value` line each.
fn show(shell: &mut Shell) -> Result<String, String> {
    let on = |b: bool| if b { "on" } else { "off" };
    let s = &shell.settings;
    let session = &shell.session;
    let savepoints: Vec<&str> = session.savepoints().collect();
    let transaction = if session.in_read_transaction() {
        "read (BEGIN READ)".to_owned()
    } else if !savepoints.is_empty() {
        format!("write (BEGIN), savepoints {}", savepoints.join(", "))
    } else if session.in_transaction() {
        "write (BEGIN)".to_owned()
    } else {
        "none: each statement commits".to_owned()
    };
    let db = session.database();
    let access = match (db.is_read_only(), db.is_private_copy()) {
        (true, true) => " (read-only; the commits only its log held applied in memory)",
        (true, false) => " (read-only)",
        _ => "",
    };
    let rows = [
        ("bail", on(s.bail).to_owned()),
        ("changes", on(s.changes).to_owned()),
        ("echo", on(s.echo).to_owned()),
        ("headers", on(s.headers).to_owned()),
        ("integers", on(s.integers).to_owned()),
        ("mode", s.mode.name().to_owned()),
        ("timer", on(s.timer).to_owned()),
        (
            "output",
            shell.out.file().unwrap_or("standard output").to_owned(),
        ),
        ("database", format!("{}{access}", shell.label)),
        ("table", session.table().to_owned()),
        ("transaction", transaction),
        (
            "durability",
            durability_name(session.durability()).to_owned(),
        ),
        ("parameters", session.params().count().to_string()),
    ];
    // One fixed form, as sqlite3's `.show`, whatever the output mode: the settings are not
    // rows of data (in line mode they read as a record per setting).
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    Ok(rows
        .iter()
        .map(|(name, value)| format!("{name:>width$}: {value}"))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// Prints `rows` of a name and a value under `columns`, in the current mode.
pub(crate) fn print_pairs(
    shell: &mut Shell,
    columns: &'static [&'static str],
    rows: &[(&str, String)],
) -> Result<String, String> {
    let rows = rows
        .iter()
        .map(|(name, value)| {
            [
                Cell::Text((*name).into()),
                Cell::Text(value.as_str().into()),
            ]
        })
        .collect();
    print_rows(shell, columns, rows)
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
pub(crate) fn print_rows<const N: usize>(
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

#[cfg(test)]
mod tests {
    use super::{COMMANDS, help_on, resolve, split_words};

    #[test]
    fn a_command_is_named_whole_or_by_a_start_no_other_command_shares() {
        for c in COMMANDS {
            assert_eq!(resolve(c), Ok(c));
        }
        assert_eq!(resolve(".parameter"), Ok(".param"));
        assert_eq!(resolve(".q"), Ok(".quit"));
        assert_eq!(resolve(".tab"), Ok(".tables"));
        assert_eq!(resolve(".hea"), Ok(".headers"));
        assert_eq!(resolve(".hel"), Ok(".help"));
        // `.page` is a command and the start of `.pages`: the command itself wins.
        assert_eq!(resolve(".page"), Ok(".page"));
        assert_eq!(resolve(".para"), Ok(".param"));
        assert_eq!(
            resolve(".h"),
            Err(".h could be .headers, .help: type more of the command".to_owned())
        );
        assert_eq!(
            resolve(".ex"),
            Err(".ex could be .exit, .export: type more of the command".to_owned())
        );
        for word in [".", ".bogus", ".quitt", "tables"] {
            assert_eq!(
                resolve(word),
                Err(format!("unknown command {word}: .help lists the commands"))
            );
        }
        assert!(resolve(".schema").is_err_and(|e| e.contains(".tables lists the tables")));
        assert!(resolve(".indexes").is_err_and(|e| e.contains("no other index")));
    }

    #[test]
    fn help_on_a_topic_gives_its_lines_of_the_list() {
        let help = |t: &str| help_on(t).unwrap_or_default();
        // A command, with or without its dot, in any case, with the lines that go on.
        assert!(help("import").starts_with(".import [--skip N] FILE [TABLE]\n"));
        assert_eq!(help(".IMPORT").lines().count(), 3);
        assert_eq!(help("quit"), help("exit"));
        assert_eq!(help("param").lines().count(), 3);
        // Shortened with its dot as when it is run; a word without one is a keyword first.
        assert_eq!(help(".imp"), help("import"));
        assert!(help("table").contains("CREATE TABLE"));
        assert_eq!(help(".s"), "");
        // A statement's keyword: every line of statements that holds it.
        assert!(help("rollback").contains("ROLLBACK TO s"));
        assert!(help("rollback").contains("BEGIN [READ]"));
        assert!(!help("rollback").contains(".help"));
        assert!(help("limit").contains("SCAN [start [end]]"));
        assert_eq!(help_on("nothing"), None);
        assert_eq!(help_on(""), None);
        assert_eq!(help_on("."), None);
        assert_eq!(help_on("ROLL"), None, "whole words only");
    }

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
}
