//! The language's errors: parse errors with a position, and execution errors.

use std::fmt;

/// A statement that could not be parsed: where, and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset into the source.
    pub offset: usize,
    /// What was expected there, and what was found.
    pub message: String,
}

/// A 1-based line and column (in characters) of a byte offset in a source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The line, from 1.
    pub line: usize,
    /// The character in the line, from 1.
    pub column: usize,
}

impl Position {
    /// The position of byte `offset` of `src` (clamped to the source, and to a character
    /// boundary).
    pub fn of(src: &str, offset: usize) -> Position {
        let mut offset = offset.min(src.len());
        while !src.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &src[..offset];
        let line_start = before.rfind('\n').map_or(0, |n| n + 1);
        Position {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

/// `name:line:col: message`, then the line and a caret under the column: how a tool
/// reports an error at byte `offset` of `src` (see [`render_from_line`] for no `name`).
pub fn render(name: &str, src: &str, offset: usize, message: &str) -> String {
    render_from_line(name, src, 1, offset, message)
}

/// [`render`] for a piece of a longer source, `src`, that starts at line `first_line` of
/// it: a statement a shell read on its own, say. With no `name` (input typed at a prompt),
/// the place reads `line 1, column 5: message`.
pub fn render_from_line(
    name: &str,
    src: &str,
    first_line: usize,
    offset: usize,
    message: &str,
) -> String {
    let pos = Position::of(src, offset);
    let line = src.lines().nth(pos.line - 1).unwrap_or("");
    // Tabs keep their width in the caret line, so that the caret lines up.
    let pad: String = line
        .chars()
        .take(pos.column - 1)
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    let (line_no, column) = (pos.line + first_line - 1, pos.column);
    if name.is_empty() {
        format!("line {line_no}, column {column}: {message}\n{line}\n{pad}^")
    } else {
        format!("{name}:{line_no}:{column}: {message}\n{line}\n{pad}^")
    }
}

impl ParseError {
    /// The error, reported against `src` under the name `name` (a file name, say).
    pub fn render(&self, name: &str, src: &str) -> String {
        render(name, src, self.offset, &self.message)
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.message, self.offset)
    }
}

impl std::error::Error for ParseError {}

/// A statement that parsed but could not be executed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// The engine refused or failed (a limit, a missing table, corruption, I/O).
    #[error(transparent)]
    Engine(#[from] cairn_engine::Error),
    /// `BEGIN` inside a transaction.
    #[error("a transaction is already open: COMMIT or ROLLBACK it first")]
    AlreadyInTransaction,
    /// `COMMIT` or `ROLLBACK` outside a transaction.
    #[error("no transaction is open")]
    NoTransaction,
    /// A statement that writes, inside `BEGIN READ`.
    #[error("the transaction is a read transaction: COMMIT or ROLLBACK it to write")]
    ReadTransaction,
    /// The session's interrupt flag was raised while the statement produced rows (Ctrl-C
    /// in the shell): the rows before it were produced, the rest were not.
    #[error("interrupted")]
    Interrupted,
    /// `ROLLBACK TO` or `RELEASE` naming no savepoint of the open transaction.
    #[error("no savepoint named {0:?} in this transaction")]
    NoSuchSavepoint(String),
    /// `SAVEPOINT`, `ROLLBACK TO` or `RELEASE` outside a write transaction (outside
    /// `BEGIN … COMMIT`, each statement commits on its own: there is nothing to go back to).
    #[error("savepoints live inside a write transaction: BEGIN one first")]
    SavepointOutsideTransaction,
    /// A `:name` parameter that the session has not bound.
    #[error(
        "parameter :{0} has no value (bind one with .param set :{0} VALUE in the shell, Session::set_param in Rust)"
    )]
    UnboundParameter(String),
    /// `LIMIT` given bytes that are not an integer's 8 (a parameter bound to text, say):
    /// the literal, and how many bytes it holds.
    #[error(
        "LIMIT {0} needs an integer (8 big-endian bytes, as `.param set NAME 10` binds), not {1} bytes"
    )]
    LimitNotAnInteger(String, usize),
}

impl ExecError {
    /// Where in `statement` (the statement's source) this error is best shown: the first
    /// use of an unbound parameter, outside quotes and comments; the table or savepoint
    /// name it is about (the last word or string that spells it: in `DROP TABLE TABLE`,
    /// the name, not the keyword); a key over the limit (the one a `PUT`, `GET` or
    /// `DELETE` names, after its verb); else its start (0).
    pub fn offset_in(&self, statement: &str) -> usize {
        use cairn_engine::Error as E;
        let name = match self {
            ExecError::UnboundParameter(name) => {
                return param_offset(statement, name).unwrap_or(0);
            }
            ExecError::Engine(E::KeyTooLarge { .. }) => {
                return crate::parser::after_verb(statement).unwrap_or(0);
            }
            ExecError::Engine(
                E::TableNotFound(name) | E::TableExists(name) | E::InvalidTableName(name, _),
            )
            | ExecError::NoSuchSavepoint(name) => name,
            _ => return 0,
        };
        crate::parser::names_in(statement)
            .into_iter()
            .rev()
            .find_map(|(at, n)| (n == *name).then_some(at))
            .unwrap_or(0)
    }
}

/// The offset of the first `:name` in `src` outside quoted strings and `--` comments.
fn param_offset(src: &str, name: &str) -> Option<usize> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut quote = None;
    let mut chars = src.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match (quote, c) {
            (Some(_), '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => {
                if chars.peek().is_some_and(|&(_, next)| next == q) {
                    chars.next();
                } else {
                    quote = None;
                }
            }
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '-') if src[at..].starts_with("--") => {
                while chars.next_if(|&(_, c)| c != '\n').is_some() {}
            }
            (None, ':') => {
                let rest = &src[at + 1..];
                if rest.starts_with(name) && !rest[name.len()..].starts_with(word) {
                    return Some(at);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unbound_parameter_is_found_outside_quotes_and_comments() {
        let e = ExecError::UnboundParameter("k".into());
        assert_eq!(e.offset_in("PUT ':k' x'3a6b' -- :k\n :kk :k"), 28);
        assert_eq!(e.offset_in("GET \"a\\\":k\" :k"), 12);
        assert_eq!(e.offset_in("GET 'it''s :k' :k"), 15);
        assert_eq!(e.offset_in("GET :other"), 0);
        assert_eq!(ExecError::NoTransaction.offset_in("COMMIT :k"), 0);
    }

    #[test]
    fn an_error_about_a_name_points_at_the_name() {
        let not_found = |n: &str| ExecError::Engine(cairn_engine::Error::TableNotFound(n.into()));
        assert_eq!(not_found("nope").offset_in("DROP TABLE nope"), 11);
        assert_eq!(not_found("TABLE").offset_in("DROP TABLE TABLE"), 11);
        assert_eq!(not_found("a").offset_in("rename table a to b -- a"), 13);
        let exists = ExecError::Engine(cairn_engine::Error::TableExists("b c".into()));
        assert_eq!(exists.offset_in("RENAME TABLE a TO 'b c'"), 18);
        // (Spelled with an escape, as the string decodes.)
        assert_eq!(exists.offset_in("RENAME TABLE a TO \"b\\x20c\""), 18);
        let savepoint = ExecError::NoSuchSavepoint("s".into());
        assert_eq!(savepoint.offset_in("ROLLBACK TO SAVEPOINT s"), 22);
        // A name the statement does not spell (the session's table, say): its start.
        assert_eq!(not_found("main").offset_in("SCAN"), 0);
        // A key over the limit: the key.
        let long = ExecError::Engine(cairn_engine::Error::KeyTooLarge {
            len: 2000,
            max: 1024,
        });
        assert_eq!(long.offset_in("put  x'00' 'v'"), 5);
        assert_eq!(long.offset_in("GET :k"), 4);
        assert_eq!(long.offset_in("GET"), 0);
        assert_eq!(ExecError::NoTransaction.offset_in("COMMIT"), 0);
    }

    #[test]
    fn an_error_is_placed_by_line_and_character_with_a_caret_under_it() {
        let src = "PUT 1 2\n\tGET é 'x";
        let at = src.find("'x").unwrap_or_default();
        assert_eq!(
            render("s.cq", src, at, "closing quote"),
            "s.cq:2:8: closing quote\n\tGET é 'x\n\t      ^"
        );
        // The same line, read as a piece starting at line 41 of its script.
        let piece = "\tGET é 'x";
        assert_eq!(
            render_from_line("s.cq", piece, 41, at - 8, "closing quote"),
            "s.cq:41:8: closing quote\n\tGET é 'x\n\t      ^"
        );
        // Typed at a prompt: no name, the place in words.
        assert_eq!(
            render("", "PUT a", 4, "expected a key"),
            "line 1, column 5: expected a key\nPUT a\n    ^"
        );
    }
}
