//! The statements of the language, as parsed. Each node's documentation shows its syntax;
//! the grammar in full is in `docs/language.md`.

use std::ops::Deref;

/// A key or value written in a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Literal {
    /// `'text'` or `"text"`, with `''` (or `""`) and backslash escapes.
    Text(String),
    /// `x'00ff'`: bytes in hexadecimal.
    Blob(Vec<u8>),
    /// `42`: an unsigned integer, stored as 8 big-endian bytes so that order is numeric.
    Int(u64),
    /// `:name`: a parameter, whose bytes the session running the statement binds
    /// ([`crate::Session::set_param`]); the name is kept without its colon.
    Param(String),
}

/// The bytes of a literal, borrowed where possible (an integer's 8 bytes live inline).
#[derive(Debug, Clone, Copy)]
pub enum LiteralBytes<'a> {
    /// Text's, a blob's or a bound parameter's bytes.
    Slice(&'a [u8]),
    /// An integer's 8 big-endian bytes.
    Int([u8; 8]),
}

impl Deref for LiteralBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            LiteralBytes::Slice(s) => s,
            LiteralBytes::Int(b) => b,
        }
    }
}

impl Literal {
    /// The bytes this literal stands for, without allocating; `None` for a parameter,
    /// whose bytes are bound where the statement runs.
    pub fn bytes(&self) -> Option<LiteralBytes<'_>> {
        Some(match self {
            Literal::Text(s) => LiteralBytes::Slice(s.as_bytes()),
            Literal::Blob(b) => LiteralBytes::Slice(b),
            Literal::Int(n) => LiteralBytes::Int(n.to_be_bytes()),
            Literal::Param(_) => return None,
        })
    }

    /// The bytes this literal stands for, a parameter's from `params` (by name, without
    /// the colon); `Err` with the name of a parameter `params` lacks.
    pub fn bytes_with<'a>(
        &'a self,
        params: &'a std::collections::BTreeMap<String, Vec<u8>>,
    ) -> Result<LiteralBytes<'a>, &'a str> {
        match self {
            Literal::Param(name) => params.get(name).map(|v| LiteralBytes::Slice(v)).ok_or(name),
            // (Never `None`: only a parameter has no bytes of its own.)
            other => other.bytes().ok_or(""),
        }
    }
}

/// The keys a `SCAN`, `COUNT` or `DELETE RANGE` covers: `[start [end]] [PREFIX p]`, the half-open range
/// `[start, end)` intersected with the keys that start with `p`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyRange {
    /// The first key that may be in it.
    pub start: Option<Literal>,
    /// The first key after it.
    pub end: Option<Literal>,
    /// What every key in it starts with.
    pub prefix: Option<Literal>,
}

/// One statement. (Marked `#[non_exhaustive]`: a verb added later is not a breaking change.)
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Statement {
    /// `PUT key value`: insert or replace.
    Put {
        /// The key.
        key: Literal,
        /// Its new value.
        value: Literal,
    },
    /// `GET key`
    Get {
        /// The key.
        key: Literal,
    },
    /// `DELETE key`
    Delete {
        /// The key.
        key: Literal,
    },
    /// `DELETE RANGE [start [end]] [PREFIX p]`, or `DELETE PREFIX p`: every key that
    /// `COUNT` with the same range counts.
    DeleteRange {
        /// The keys removed.
        range: KeyRange,
    },
    /// `SCAN [start [end]] [PREFIX p] [REVERSE] [LIMIT n]`, options in any order.
    Scan {
        /// The keys read.
        range: KeyRange,
        /// From the last key back.
        reverse: bool,
        /// At most this many rows: an integer, or a parameter bound to one (8 big-endian
        /// bytes).
        limit: Option<Literal>,
    },
    /// `COUNT [start [end]] [PREFIX p]`
    Count {
        /// The keys counted.
        range: KeyRange,
    },
    /// `BEGIN`
    Begin,
    /// `BEGIN READ [ONLY]`: the statements until `COMMIT` or `ROLLBACK` read one
    /// snapshot, and statements that write fail.
    BeginRead,
    /// `COMMIT`
    Commit,
    /// `ROLLBACK`
    Rollback,
    /// `SAVEPOINT name`: a point inside the open write transaction to roll back to.
    Savepoint {
        /// Its name (names may repeat: the newest of a name is the one meant).
        name: String,
    },
    /// `ROLLBACK TO [SAVEPOINT] name`: undoes what came after the savepoint, which stays;
    /// the savepoints taken after it go.
    RollbackTo {
        /// The savepoint's name.
        name: String,
    },
    /// `RELEASE [SAVEPOINT] name`: keeps what came after the savepoint and forgets it, with
    /// the savepoints taken after it.
    Release {
        /// The savepoint's name.
        name: String,
    },
    /// `USE table`
    Use {
        /// The table to make current.
        table: String,
    },
    /// `CREATE TABLE [IF NOT EXISTS] table`: without `IF NOT EXISTS`, a table of that name
    /// is an error.
    CreateTable {
        /// The new table's name.
        table: String,
        /// Whether `IF NOT EXISTS` was written.
        if_not_exists: bool,
    },
    /// `DROP TABLE [IF EXISTS] table`: without `IF EXISTS`, a missing table is an error.
    DropTable {
        /// The table's name.
        table: String,
        /// Whether `IF EXISTS` was written.
        if_exists: bool,
    },
    /// `RENAME TABLE from TO to`: the table and its entries take the new name (a table of
    /// that name already is an error). A session using the table follows it; a rollback
    /// that undoes the rename takes the session back to the old name.
    RenameTable {
        /// The table's name.
        from: String,
        /// Its new name.
        to: String,
    },
    /// `TABLES`
    Tables,
}

impl Statement {
    /// The statement's verb, upper case (`"PUT"`, `"CREATE TABLE"`…): a name for its kind.
    pub fn verb(&self) -> &'static str {
        match self {
            Statement::Put { .. } => "PUT",
            Statement::Get { .. } => "GET",
            Statement::Delete { .. } => "DELETE",
            Statement::DeleteRange { .. } => "DELETE RANGE",
            Statement::Scan { .. } => "SCAN",
            Statement::Count { .. } => "COUNT",
            Statement::Begin => "BEGIN",
            Statement::BeginRead => "BEGIN READ",
            Statement::Commit => "COMMIT",
            Statement::Rollback => "ROLLBACK",
            Statement::Savepoint { .. } => "SAVEPOINT",
            Statement::RollbackTo { .. } => "ROLLBACK TO",
            Statement::Release { .. } => "RELEASE",
            Statement::Use { .. } => "USE",
            Statement::CreateTable { .. } => "CREATE TABLE",
            Statement::DropTable { .. } => "DROP TABLE",
            Statement::RenameTable { .. } => "RENAME TABLE",
            Statement::Tables => "TABLES",
        }
    }
}

/// A byte range of the source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// The offset of its first byte.
    pub start: usize,
    /// The offset just past its last byte.
    pub end: usize,
}

/// A parsed statement and where it stands in its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The statement.
    pub statement: Statement,
    /// Where its source text stands (without the separator after it).
    pub span: Span,
}
