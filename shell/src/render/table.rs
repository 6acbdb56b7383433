//! The `table` mode, printed a chunk of rows at a time.
//!
//! A bordered table is laid out from its rows, so the rows must be held before it is
//! printed. Holding all of them would make a large `SCAN` take memory in proportion to
//! its result (and print nothing until the end), so at most [`CHUNK_ROWS`] are held: a
//! result that fits is laid out whole, as before; a larger one is printed chunk by chunk,
//! every chunk with the column widths the first one was given, one table to the eye. A
//! later cell wider than its column is wrapped within it.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ColumnConstraint, ContentArrangement, LineStyle, Table, Width};

/// The most rows held before a chunk is printed.
pub const CHUNK_ROWS: usize = 1000;

/// Rows waiting to be printed, and what the chunks printed so far fixed.
pub struct StreamedTable {
    header: Option<Vec<String>>,
    pending: Vec<Vec<String>>,
    /// The columns' widths (padding included) once the first chunk is printed.
    widths: Option<Vec<u16>>,
    /// A terminal width for tests; `None` asks the terminal.
    width: Option<u16>,
    /// Whether to lay tables out at their natural width, whatever the terminal's (for a
    /// file).
    natural: bool,
}

/// Terminals narrower than this many columns get the table at its natural width: fitted
/// to them, each column would be a character or two wide and every cell broken over many
/// lines.
pub const MIN_FITTED_WIDTH: u16 = 20;

impl StreamedTable {
    pub fn new(header: Option<Vec<String>>) -> StreamedTable {
        StreamedTable {
            header,
            pending: Vec::new(),
            widths: None,
            width: None,
            natural: false,
        }
    }

    /// Lays the table out at its natural width, not the terminal's.
    pub fn natural_width(&mut self) {
        self.natural = true;
    }

    #[cfg(test)]
    pub fn with_width(mut self, width: u16) -> StreamedTable {
        self.width = Some(width);
        self
    }

    /// Holds `row`, first printing the held rows when there are [`CHUNK_ROWS`] of them.
    ///
    /// # Errors
    /// Writing to `out`.
    pub fn push(
        &mut self,
        row: Vec<String>,
        out: &mut dyn Write,
        interrupt: Option<&AtomicBool>,
    ) -> io::Result<()> {
        if self.pending.len() >= CHUNK_ROWS {
            self.print(false, out, interrupt)?;
        }
        self.pending.push(row);
        Ok(())
    }

    /// Prints the held rows and the table's bottom border. Prints nothing when no row
    /// came.
    ///
    /// # Errors
    /// Writing to `out`.
    pub fn finish(mut self, out: &mut dyn Write, interrupt: Option<&AtomicBool>) -> io::Result<()> {
        if self.pending.is_empty() && self.widths.is_none() {
            return Ok(());
        }
        self.print(true, out, interrupt)
    }

    /// Prints the held rows as one chunk: the first with the top border and header, the
    /// last with the bottom border.
    fn print(
        &mut self,
        last: bool,
        out: &mut dyn Write,
        interrupt: Option<&AtomicBool>,
    ) -> io::Result<()> {
        let mut style = UTF8_FULL_CONDENSED;
        if self.widths.is_some() {
            style.top_border = LineStyle::none();
        }
        if !last {
            style.bottom_border = LineStyle::none();
        }
        // A first chunk with more to come takes the terminal's whole width, so that later
        // cells a little wider than the first chunk's need not wrap.
        let arrangement = if self.widths.is_none() && !last {
            ContentArrangement::DynamicFullWidth
        } else {
            ContentArrangement::Dynamic
        };
        let mut t = Table::new();
        t.load_style(style).set_content_arrangement(arrangement);
        if let Some(width) = self.width {
            t.set_width(width);
        }
        t.add_rows(self.pending.drain(..));
        // Constraints apply to the columns the rows made: set them after.
        match &self.widths {
            None => {
                if let Some(header) = &self.header {
                    t.set_header(header.clone());
                }
            }
            Some(widths) => {
                t.set_constraints(
                    widths
                        .iter()
                        .map(|&w| ColumnConstraint::Absolute(Width::Fixed(w))),
                );
            }
        }
        fit(&mut t);
        if self.natural {
            t.set_content_arrangement(ContentArrangement::Disabled);
        }
        for (i, line) in t.lines().enumerate() {
            if interrupt.is_some_and(|f| f.load(Ordering::Relaxed)) {
                break;
            }
            if i == 0 && self.widths.is_none() {
                self.widths = Some(column_widths(&line));
            }
            writeln!(out, "{line}")?;
        }
        Ok(())
    }
}

/// Fits `t` to the terminal's width, unless the terminal is narrower than
/// [`MIN_FITTED_WIDTH`] or reports no width at all (0 columns: a pseudo-terminal nobody
/// gave a size, as some remote sessions and editors' shells leave it).
pub fn fit(t: &mut Table) {
    if t.width().is_some_and(|w| w < MIN_FITTED_WIDTH) {
        t.set_content_arrangement(ContentArrangement::Disabled);
    }
}

/// The widths, padding included, of the columns a top border such as `┌────┬──┐` draws.
fn column_widths(top_border: &str) -> Vec<u16> {
    let junction = UTF8_FULL_CONDENSED.top_border.junction.unwrap_or('┬');
    let mut chars = top_border.chars();
    chars.next();
    chars.next_back();
    chars
        .as_str()
        .split(junction)
        .map(|s| u16::try_from(s.chars().count()).unwrap_or(u16::MAX))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn print(rows: usize, cell: impl Fn(usize) -> String, width: u16) -> String {
        let mut out = Vec::new();
        let mut t = StreamedTable::new(Some(vec!["key".into(), "value".into()])).with_width(width);
        for i in 0..rows {
            t.push(vec![format!("{i:05}"), cell(i)], &mut out, None)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        t.finish(&mut out, None).unwrap_or_else(|e| panic!("{e}"));
        String::from_utf8(out).unwrap_or_default()
    }

    #[test]
    fn a_result_of_several_chunks_prints_as_one_table() {
        let rows = 2 * CHUNK_ROWS + 1;
        let text = print(rows, |i| "v".repeat(i % 7 + 1), 80);
        let lines: Vec<&str> = text.lines().collect();
        // Top border, header, separator, the rows, bottom border: no border in between.
        assert_eq!(lines.len(), rows + 4, "{}", &text[..400]);
        assert!(lines[0].starts_with('┌') && lines[1].contains("key"));
        assert!(lines[2].starts_with('╞'));
        assert!(lines[lines.len() - 1].starts_with('└'));
        for (i, line) in lines[3..lines.len() - 1].iter().enumerate() {
            assert!(line.starts_with(&format!("│ {i:05} ")), "{line}");
        }
        // Every line has the first chunk's width: the terminal's, with more to come.
        let width = lines[0].chars().count();
        assert_eq!(width, 80);
        for line in &lines {
            assert_eq!(
                line.chars().count(),
                width,
                "{line:?} against {:?}",
                lines[0]
            );
        }
    }

    #[test]
    fn a_later_cell_wider_than_its_column_wraps_within_it() {
        let rows = CHUNK_ROWS + 1;
        let cell = |i| {
            if i == CHUNK_ROWS {
                "w".repeat(200)
            } else {
                "v".into()
            }
        };
        let text = print(rows, cell, 80);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.iter().all(|l| l.chars().count() == 80), "{text}");
        let wide = &lines[3 + CHUNK_ROWS..lines.len() - 1];
        assert!(wide.len() > 2, "{wide:?}");
        let ws: usize = wide.iter().map(|l| l.matches('w').count()).sum();
        assert_eq!(ws, 200, "the wide cell is printed whole");
    }

    #[test]
    fn a_terminal_without_a_width_gets_the_table_at_its_natural_width() {
        let table_at = |width| print(1, |_| "a long value that needs some room".into(), width);
        let natural = table_at(u16::MAX);
        assert!(
            natural.contains("│ 00000 ┆ a long value that needs some room │"),
            "{natural}"
        );
        assert_eq!(table_at(0), natural);
        assert_eq!(table_at(MIN_FITTED_WIDTH - 1), natural);
        // A terminal wide enough to fit, but narrower than the table, gets it fitted.
        let fitted = table_at(30);
        assert!(fitted.lines().all(|l| l.chars().count() <= 30), "{fitted}");
        assert!(fitted.contains("│ 00000 ┆"), "{fitted}");
    }

    #[test]
    fn a_result_that_fits_one_chunk_is_laid_out_whole() {
        let text = print(3, |_| "a long value that needs some room".into(), u16::MAX);
        assert!(
            text.contains("│ 00000 ┆ a long value that needs some room │"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 3 + 4);
        assert_eq!(print(0, |_| String::new(), 80), "");
    }

    #[test]
    fn chunks_at_natural_width_on_a_terminal_without_one() {
        let wide = CHUNK_ROWS + 1;
        let cell = |i| "x".repeat(if i == wide { 10 } else { i % 3 + 1 });
        let text = print(CHUNK_ROWS + 2, cell, 0);
        let width = text.lines().next().map_or(0, |l| l.chars().count());
        assert!(text.lines().all(|l| l.chars().count() == width), "{width}");
        // The wide cell wraps over two lines as wide as the header's "value".
        assert_eq!(text.lines().count(), CHUNK_ROWS + 2 + 4 + 1);
        let xs = text.chars().filter(|&c| c == 'x').count();
        assert_eq!(
            xs,
            (0..CHUNK_ROWS + 2).map(|i| cell(i).len()).sum::<usize>()
        );
    }

    #[test]
    fn column_widths_are_read_from_the_top_border() {
        assert_eq!(column_widths("┌───────┬──┐"), vec![7, 2]);
        assert_eq!(column_widths("┌─────┐"), vec![5]);
    }
}
