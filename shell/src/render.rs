//! Printing results in the output modes: `table` (bordered, for terminals), `plain`
//! (tab-separated, for pipes), `csv`, `json` and `line`.
//!
//! Rows are streamed in every mode; `table` lays them out a chunk at a time
//! (`render/table.rs`).

mod table;

use std::borrow::Cow;
use std::io::{self, Write};
use std::sync::atomic::AtomicBool;

use table::StreamedTable;

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Table,
    Plain,
    Csv,
    Json,
    Line,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        Some(match s.to_ascii_lowercase().as_str() {
            "table" | "box" => Mode::Table,
            "plain" | "list" | "tabs" => Mode::Plain,
            "csv" => Mode::Csv,
            "json" => Mode::Json,
            "line" => Mode::Line,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Table => "table",
            Mode::Plain => "plain",
            Mode::Csv => "csv",
            Mode::Json => "json",
            Mode::Line => "line",
        }
    }
}

/// One cell: text, or a number (which JSON prints unquoted).
#[derive(Debug, Clone)]
pub enum Cell<'a> {
    Text(Cow<'a, str>),
    Number(u64),
}

impl Cell<'_> {
    fn text(&self) -> Cow<'_, str> {
        match self {
            Cell::Text(t) => Cow::Borrowed(t),
            Cell::Number(n) => Cow::Owned(n.to_string()),
        }
    }
}

/// Prints one result set: a header of column names, then rows.
pub struct RowWriter<'w> {
    out: &'w mut dyn Write,
    mode: Mode,
    columns: &'static [&'static str],
    rows: u64,
    table: Option<StreamedTable>,
    /// When raised (Ctrl-C), a table stops printing at the next line.
    interrupt: Option<&'w AtomicBool>,
}

pub fn csv_field(s: &str) -> Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", s.replace('"', "\"\"")))
    } else {
        Cow::Borrowed(s)
    }
}

impl<'w> RowWriter<'w> {
    pub fn new(
        out: &'w mut dyn Write,
        mode: Mode,
        headers: bool,
        columns: &'static [&'static str],
    ) -> io::Result<RowWriter<'w>> {
        let mut w = RowWriter {
            out,
            mode,
            columns,
            rows: 0,
            table: None,
            interrupt: None,
        };
        match mode {
            Mode::Table => {
                let header = headers.then(|| columns.iter().map(|c| (*c).to_owned()).collect());
                w.table = Some(StreamedTable::new(header));
            }
            Mode::Plain if headers => writeln!(w.out, "{}", columns.join("\t"))?,
            Mode::Csv if headers => writeln!(w.out, "{}", columns.join(","))?,
            Mode::Json => write!(w.out, "[")?,
            _ => {}
        }
        Ok(w)
    }

    /// Lays tables out at their natural width, not the terminal's (results going to a
    /// file).
    pub fn natural_width(mut self) -> RowWriter<'w> {
        if let Some(t) = &mut self.table {
            t.natural_width();
        }
        self
    }

    /// Lets `flag` stop a table's printing part-way (its rows are laid out a chunk at a
    /// time, and a chunk takes a while to print on a terminal).
    pub fn interruptible(mut self, flag: &'w AtomicBool) -> RowWriter<'w> {
        self.interrupt = Some(flag);
        self
    }

    pub fn row(&mut self, cells: &[Cell<'_>]) -> io::Result<()> {
        let first = self.rows == 0;
        self.rows += 1;
        match self.mode {
            Mode::Table => match &mut self.table {
                Some(t) => t.push(
                    cells.iter().map(|c| c.text().into_owned()).collect(),
                    self.out,
                    self.interrupt,
                ),
                None => Ok(()),
            },
            Mode::Plain => {
                let line: Vec<Cow<'_, str>> = cells.iter().map(Cell::text).collect();
                writeln!(self.out, "{}", line.join("\t"))
            }
            Mode::Csv => {
                let line: Vec<String> = cells
                    .iter()
                    .map(|c| csv_field(&c.text()).into_owned())
                    .collect();
                writeln!(self.out, "{}", line.join(","))
            }
            Mode::Json => {
                let mut object = serde_json::Map::new();
                for (name, cell) in self.columns.iter().zip(cells) {
                    let v = match cell {
                        Cell::Text(t) => serde_json::Value::String(t.to_string()),
                        Cell::Number(n) => serde_json::Value::from(*n),
                    };
                    object.insert((*name).to_owned(), v);
                }
                let sep = if first { "\n" } else { ",\n" };
                write!(self.out, "{sep}{}", serde_json::Value::Object(object))
            }
            Mode::Line => {
                let width = self.columns.iter().map(|c| c.len()).max().unwrap_or(0);
                if !first {
                    writeln!(self.out)?;
                }
                for (name, cell) in self.columns.iter().zip(cells) {
                    writeln!(self.out, "{name:>width$} = {}", cell.text())?;
                }
                Ok(())
            }
        }
    }

    /// How many rows were printed so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    pub fn finish(self) -> io::Result<()> {
        match (self.mode, self.table) {
            (Mode::Table, Some(t)) => t.finish(self.out, self.interrupt),
            (Mode::Json, _) if self.rows > 0 => writeln!(self.out, "\n]"),
            (Mode::Json, _) => writeln!(self.out, "]"),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(mode: Mode, headers: bool) -> String {
        let mut out = Vec::new();
        let mut w = RowWriter::new(&mut out, mode, headers, &["key", "value"])
            .unwrap_or_else(|e| panic!("{e}"));
        for (k, v) in [("a", "1"), ("b,\"c\"", "x'00'")] {
            w.row(&[Cell::Text(k.into()), Cell::Text(v.into())])
                .unwrap_or_else(|e| panic!("{e}"));
        }
        w.finish().unwrap_or_else(|e| panic!("{e}"));
        String::from_utf8(out).unwrap_or_default()
    }

    #[test]
    fn every_mode_prints_the_rows() {
        assert_eq!(render(Mode::Plain, false), "a\t1\nb,\"c\"\tx'00'\n");
        assert_eq!(
            render(Mode::Plain, true),
            "key\tvalue\na\t1\nb,\"c\"\tx'00'\n"
        );
        assert_eq!(
            render(Mode::Csv, true),
            "key,value\na,1\n\"b,\"\"c\"\"\",x'00'\n"
        );
        assert_eq!(
            render(Mode::Json, false),
            "[\n{\"key\":\"a\",\"value\":\"1\"},\n{\"key\":\"b,\\\"c\\\"\",\"value\":\"x'00'\"}\n]\n"
        );
        assert_eq!(
            render(Mode::Line, false),
            "  key = a\nvalue = 1\n\n  key = b,\"c\"\nvalue = x'00'\n"
        );
        let table = render(Mode::Table, true);
        assert!(table.contains("key") && table.contains("b,\"c\"") && table.contains('│'));
    }
}
