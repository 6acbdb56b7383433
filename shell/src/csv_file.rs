//! CSV files of `key,value` rows: `.export FILE [TABLE]` writes a table's, and
//! `.import [--skip N] FILE [TABLE]` loads them into a table, in one transaction.
//!
//! Fields are written and read the way `.mode csv` prints keys and values, so that a table
//! exported (or printed with `SCAN`) loads back unchanged: a field `x'..'` (hex digits in
//! pairs) is those bytes, any other field its own bytes (text). Inside `BEGIN` imported
//! rows join the open transaction; otherwise they commit together or, at the first bad
//! row, not at all.

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::rc::Rc;
use std::sync::atomic::Ordering;

use cairn_query::{Literal, Statement, display_bytes};

use crate::render::csv_field;
use crate::shell::Shell;

/// The most bytes one row may take (the longest statement the language reads): a file
/// whose row is longer is refused rather than read into memory whole.
const MAX_ROW: u64 = 64 << 20;

const USAGE: &str = "usage: .import [--skip N] FILE [TABLE]";

/// What `.import`'s arguments ask for.
#[derive(Debug, PartialEq)]
struct Request<'a> {
    file: &'a str,
    table: Option<&'a str>,
    /// Rows to skip first (a header).
    skip: u64,
}

fn request<'a>(args: &[&'a str]) -> Result<Request<'a>, String> {
    let (skip, rest) = match args {
        ["--skip", n, rest @ ..] => {
            let n = n
                .parse()
                .map_err(|_| format!("{USAGE} (--skip takes a number of rows, not {n:?})"))?;
            (n, rest)
        }
        _ => (0, args),
    };
    match rest {
        [file] => Ok(Request {
            file,
            table: None,
            skip,
        }),
        [file, table] => Ok(Request {
            file,
            table: Some(table),
            skip,
        }),
        _ => Err(USAGE.to_owned()),
    }
}

/// The bytes a CSV field stands for, as the shell prints them: `x'..'` is hex.
fn field(bytes: &[u8]) -> Vec<u8> {
    let hex = match bytes {
        [b'x' | b'X', b'\'', inner @ .., b'\''] if inner.len().is_multiple_of(2) => inner,
        _ => return bytes.to_vec(),
    };
    let digit = |c: u8| char::from(c).to_digit(16).map(|d| d as u8);
    hex.chunks_exact(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect::<Option<Vec<u8>>>()
        .unwrap_or_else(|| bytes.to_vec())
}

/// A reader that fails once it has read `limit` bytes (moved on after each row).
struct Capped<R> {
    inner: R,
    read: u64,
    limit: Rc<Cell<u64>>,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let room = self.limit.get().saturating_sub(self.read);
        if room == 0 {
            return Err(io::Error::other(format!(
                "a row longer than {} MiB",
                MAX_ROW >> 20
            )));
        }
        let want = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.read += n as u64;
        Ok(n)
    }
}

/// Runs `.export` with `args`: the table's rows, from a snapshot of the last commit, in
/// key order; the message to print, or the error.
pub fn export(shell: &mut Shell, args: &[&str]) -> Result<String, String> {
    let (file, table) = match args {
        [file] => (*file, None),
        [file, table] => (*file, Some(*table)),
        _ => return Err("usage: .export FILE [TABLE]".to_owned()),
    };
    let table = table.unwrap_or(shell.session.table()).to_owned();
    let snapshot = shell
        .session
        .database()
        .begin_read()
        .map_err(|e| e.to_string())?;
    let rows = snapshot.open_table(&table).map_err(|e| e.to_string())?;
    let out = std::fs::File::create(file).map_err(|e| format!("cannot write {file}: {e}"))?;
    let interrupt = shell.interrupt_flag();
    let written = (|| -> Result<u64, String> {
        let mut out = io::BufWriter::new(out);
        let mut n = 0u64;
        for entry in rows.iter().map_err(|e| e.to_string())? {
            if interrupt.load(Ordering::Relaxed) {
                return Err("interrupted".to_owned());
            }
            let (k, v) = entry.map_err(|e| e.to_string())?;
            let too_long = || {
                format!(
                    "the row of {} is over the {} MiB that .import reads",
                    display_bytes(k),
                    MAX_ROW >> 20
                )
            };
            // (Checked on the bytes first: a value of gigabytes is not formatted.)
            if (k.len() + v.len()) as u64 > MAX_ROW {
                return Err(too_long());
            }
            let [key, value] = [k, v].map(display_bytes);
            let [key, value] = [&key, &value].map(|f| csv_field(f));
            if (key.len() + value.len() + 2) as u64 > MAX_ROW {
                return Err(too_long());
            }
            writeln!(out, "{key},{value}").map_err(|e| format!("cannot write {file}: {e}"))?;
            n += 1;
        }
        out.flush()
            .map_err(|e| format!("cannot write {file}: {e}"))?;
        Ok(n)
    })();
    match written {
        Ok(n) => {
            let rows = if n == 1 { "row" } else { "rows" };
            Ok(format!("exported {n} {rows} of {table} to {file}"))
        }
        // (Not removed: FILE may be a device or a pipe, which is no scratch to delete.)
        Err(e) => Err(format!("{e}; {file} holds only the rows before it")),
    }
}

/// Runs `.import` with `args`; the message to print, or the error.
pub fn import(shell: &mut Shell, args: &[&str]) -> Result<String, String> {
    let req = request(args)?;
    let file =
        std::fs::File::open(req.file).map_err(|e| format!("cannot read {}: {e}", req.file))?;
    load(shell, &req, file)
}

fn load(shell: &mut Shell, req: &Request<'_>, input: impl Read) -> Result<String, String> {
    let began = !shell.session.in_transaction();
    let previous = shell.session.table().to_owned();
    let target = req.table.unwrap_or(&previous).to_owned();
    let mut quiet = |_: &[u8], _: &[u8]| {};
    if began {
        shell
            .session
            .run(&Statement::Begin, &mut quiet)
            .map_err(|e| e.to_string())?;
    }
    let loaded = rows(shell, req, &target, input);
    if target != previous {
        // Back to the table the session was in (it exists: nothing here drops one).
        let _ = shell
            .session
            .run(&Statement::Use { table: previous }, &mut quiet);
    }
    let ended = match (&loaded, began) {
        (Ok(_), true) => shell.session.run(&Statement::Commit, &mut quiet).map(drop),
        (Err(_), true) => shell
            .session
            .run(&Statement::Rollback, &mut quiet)
            .map(drop),
        (_, false) => Ok(()),
    };
    match loaded {
        Ok(n) => {
            ended.map_err(|e| format!("{}: nothing imported: {e}", req.file))?;
            let rows = if n == 1 { "row" } else { "rows" };
            Ok(format!("imported {n} {rows} into {target}"))
        }
        Err(e) if began => Err(format!("{e}; nothing imported")),
        Err(e) => Err(format!(
            "{e}; the rows before it are in the open transaction"
        )),
    }
}

/// Puts every row into `table` (created if missing) in the open transaction; how many.
fn rows(
    shell: &mut Shell,
    req: &Request<'_>,
    table: &str,
    input: impl Read,
) -> Result<u64, String> {
    let mut quiet = |_: &[u8], _: &[u8]| {};
    let session = &mut shell.session;
    let table = table.to_owned();
    session
        .run(
            &Statement::CreateTable {
                table: table.clone(),
                if_not_exists: true,
            },
            &mut quiet,
        )
        .map_err(|e| e.to_string())?;
    session
        .run(&Statement::Use { table }, &mut quiet)
        .map_err(|e| e.to_string())?;
    let limit = Rc::new(Cell::new(MAX_ROW));
    let mut csv = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(Capped {
            inner: input,
            read: 0,
            limit: Rc::clone(&limit),
        });
    let interrupt = shell.interrupt_flag();
    let mut record = csv::ByteRecord::new();
    let (mut seen, mut loaded) = (0u64, 0u64);
    loop {
        let line = csv.position().line();
        let more = csv.read_byte_record(&mut record).map_err(|e| {
            let why = match e.kind() {
                csv::ErrorKind::Io(io) => io.to_string(),
                _ => e.to_string(),
            };
            format!("{}:{line}: {why}", req.file)
        })?;
        if !more {
            return Ok(loaded);
        }
        limit.set(csv.position().byte().saturating_add(MAX_ROW));
        if interrupt.load(Ordering::Relaxed) {
            return Err(format!("{}:{line}: interrupted", req.file));
        }
        let line = record.position().map_or(line, csv::Position::line);
        seen += 1;
        if seen <= req.skip {
            continue;
        }
        let [key, value] = [0, 1].map(|i| record.get(i).map(field));
        let (Some(key), Some(value), 2) = (key, value, record.len()) else {
            return Err(format!(
                "{}:{line}: expected 2 fields (key,value), found {}",
                req.file,
                record.len()
            ));
        };
        let put = Statement::Put {
            key: Literal::Blob(key),
            value: Literal::Blob(value),
        };
        shell
            .session
            .run(&put, &mut quiet)
            .map_err(|e| format!("{}:{line}: {e}", req.file))?;
        loaded += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_as_the_shell_prints_them() {
        assert_eq!(field(b"x'00ff'"), [0, 255]);
        assert_eq!(field(b"X'0A'"), [10]);
        assert_eq!(field(b"x''"), b"");
        assert_eq!(field(b"text"), b"text");
        // Not hex literals: their own bytes.
        assert_eq!(field(b"x'0'"), b"x'0'");
        assert_eq!(field(b"x'zz'"), b"x'zz'");
        assert_eq!(field(b"x'00"), b"x'00");
        assert_eq!(field(b"'x'"), b"'x'");
    }

    #[test]
    fn arguments() {
        let r = request(&["--skip", "1", "a.csv", "t"]);
        assert_eq!(
            r,
            Ok(Request {
                file: "a.csv",
                table: Some("t"),
                skip: 1
            })
        );
        assert!(request(&[]).is_err());
        assert!(request(&["--skip", "x", "a.csv"]).is_err());
        assert!(request(&["a", "b", "c"]).is_err());
    }

    #[test]
    fn a_capped_reader_stops_at_its_limit_until_moved_on() {
        let limit = Rc::new(Cell::new(4));
        let mut r = Capped {
            inner: &b"0123456789"[..],
            read: 0,
            limit: Rc::clone(&limit),
        };
        let mut buf = [0u8; 8];
        assert_eq!(r.read(&mut buf).ok(), Some(4));
        assert!(r.read(&mut buf).is_err(), "at the limit");
        limit.set(6);
        assert_eq!(r.read(&mut buf).ok(), Some(2));
    }
}
