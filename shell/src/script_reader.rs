//! Reading a script as it arrives: a statement line (with the lines a quoted string
//! carries it over) or a dot-command line at a time.
//!
//! A script is never held whole: a `.dump` of a large database loads in the memory of
//! one statement, and a program that writes statements into the shell's standard input
//! gets each one's result before it sends the next. A dot-command is a line whose first
//! non-blank character is `.`, outside any quoted string.

use std::io::{self, BufRead, BufReader, Read};

use cairn_query::{LexState, Limits};

/// The UTF-8 byte-order mark.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// A piece of a script, numbered by the line it starts on (from 1).
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    /// Statement text: whole lines, ending outside any quoted string (or at the input's
    /// end).
    Statements { line: usize, text: Vec<u8> },
    /// A dot-command line, without its surrounding blanks.
    Command { line: usize, text: String },
    /// Text longer than the parser takes (a quoted string never closed in a large file,
    /// say), skipped up to the end of a line outside quotes.
    TooLong { line: usize },
}

/// Splits its input into [`Piece`]s as it reads it.
pub struct ScriptReader<R> {
    input: BufReader<R>,
    /// The number of the line the next piece starts on.
    line: usize,
    /// The longest piece kept: the parser's longest statement and a little more, so that
    /// a statement just over the limit still gets the parser's own error.
    max_piece: usize,
}

/// How [`ScriptReader::read_line`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineEnd {
    /// At a new line, which it took.
    NewLine,
    /// Past the longest piece, in the middle of a line.
    TooLong,
    /// At the end of the input.
    End,
}

impl<R: Read> ScriptReader<R> {
    pub fn new(input: R) -> ScriptReader<R> {
        ScriptReader {
            input: BufReader::with_capacity(64 << 10, input),
            line: 1,
            max_piece: Limits::default().max_statement + (64 << 10),
        }
    }

    #[cfg(test)]
    fn with_max_piece(mut self, max_piece: usize) -> ScriptReader<R> {
        self.max_piece = max_piece;
        self
    }

    /// Whether reading the next piece may wait for input (nothing is buffered): the time
    /// to flush the results so far.
    pub fn may_wait(&self) -> bool {
        self.input.buffer().is_empty()
    }

    /// The next piece, or `None` at the end of the input.
    ///
    /// # Errors
    /// Reading the input.
    pub fn next_piece(&mut self) -> io::Result<Option<Piece>> {
        let line = self.line;
        let mut text = Vec::new();
        let mut state = LexState::default();
        let mut skipped = false;
        let mut first = true;
        loop {
            let start = text.len();
            let end = self.read_line(&mut text)?;
            if line == 1 && start == 0 && text.starts_with(BOM) {
                // A byte-order mark, as some editors begin a UTF-8 file with: not text.
                text.drain(..BOM.len());
            }
            if first && end != LineEnd::TooLong {
                let trimmed = text.trim_ascii();
                if trimmed.first() == Some(&b'.') {
                    let text = String::from_utf8_lossy(trimmed).into_owned();
                    return Ok(Some(Piece::Command { line, text }));
                }
            }
            first = false;
            state.feed(&text[start..]);
            if text.len() > self.max_piece {
                // Only the quote state is needed to find where the piece ends.
                skipped = true;
                text.clear();
            }
            match end {
                LineEnd::End => break,
                LineEnd::NewLine if !state.in_quote() => break,
                LineEnd::NewLine | LineEnd::TooLong => {}
            }
        }
        Ok(if skipped {
            Some(Piece::TooLong { line })
        } else if text.is_empty() {
            None
        } else {
            Some(Piece::Statements { line, text })
        })
    }

    /// Appends the rest of the current line of the input to `text`, its new line
    /// included, or stops once `text` is longer than the longest piece.
    fn read_line(&mut self, text: &mut Vec<u8>) -> io::Result<LineEnd> {
        loop {
            let available = match self.input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                return Ok(LineEnd::End);
            }
            if let Some(i) = available.iter().position(|&b| b == b'\n') {
                text.extend_from_slice(&available[..=i]);
                self.input.consume(i + 1);
                self.line += 1;
                return Ok(LineEnd::NewLine);
            }
            let n = available.len();
            text.extend_from_slice(available);
            self.input.consume(n);
            if text.len() > self.max_piece {
                return Ok(LineEnd::TooLong);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(src: &str, max_piece: usize) -> Vec<String> {
        let mut r = ScriptReader::new(src.as_bytes()).with_max_piece(max_piece);
        let mut out = Vec::new();
        while let Some(p) = r.next_piece().unwrap_or_else(|e| panic!("{e}")) {
            out.push(match p {
                Piece::Statements { line, text } => {
                    format!("S{line}:{}", String::from_utf8_lossy(&text))
                }
                Piece::Command { line, text } => format!("C{line}:{text}"),
                Piece::TooLong { line } => format!("L{line}"),
            });
        }
        out
    }

    #[test]
    fn dot_lines_are_split_from_statements_but_not_inside_strings() {
        assert_eq!(
            pieces(
                "PUT 'a' 'b'; GET 'a'\n  .mode csv\nPUT 'c' 'x\n.not a command'\n.tables",
                1 << 20
            ),
            vec![
                "S1:PUT 'a' 'b'; GET 'a'\n",
                "C2:.mode csv",
                "S3:PUT 'c' 'x\n.not a command'\n",
                "C5:.tables",
            ]
        );
        assert!(pieces("", 1 << 20).is_empty());
        assert_eq!(
            pieces("\n\nGET 1", 1 << 20),
            vec!["S1:\n", "S2:\n", "S3:GET 1"]
        );
        // A byte-order mark at the start is dropped; anywhere else it is text.
        assert_eq!(
            pieces("\u{feff}.mode csv\n\u{feff}GET 1", 1 << 20),
            vec!["C1:.mode csv", "S2:\u{feff}GET 1"]
        );
    }

    #[test]
    fn a_piece_longer_than_the_limit_is_skipped_to_the_end_of_its_line_or_quote() {
        let long = "x".repeat(100);
        let src = format!("GET 1\nPUT 'a' '{long}\n{long}\n'\nGET 2\nGET {long};GET 3\nGET 4");
        assert_eq!(
            pieces(&src, 50),
            vec!["S1:GET 1\n", "L2", "S5:GET 2\n", "L6", "S7:GET 4"]
        );
        // A quote never closed: skipped to the end.
        assert_eq!(pieces(&format!("GET '{long}\n\nGET 1\n"), 50), vec!["L1"]);
    }
}
