//! What a statement produced, as data: its outcome and the rows it collected.

use cairn_engine::TableInfo;

/// What a statement did. (Marked `#[non_exhaustive]`: a verb added later is not a breaking change.)
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// `PUT`
    Put {
        /// Whether it replaced a value.
        replaced: bool,
    },
    /// `DELETE`
    Delete {
        /// Whether the key was there.
        existed: bool,
    },
    /// `DELETE RANGE`
    DeletedRange {
        /// How many keys it removed.
        count: u64,
    },
    /// `GET` and `SCAN`: how many rows were produced.
    Rows(u64),
    /// `COUNT`
    Count(u64),
    /// `TABLES`
    Tables(Vec<TableInfo>),
    /// `BEGIN`
    Began,
    /// `BEGIN READ`, or `BEGIN` on a database open read-only: a read transaction.
    BeganRead,
    /// `COMMIT`
    Committed,
    /// `ROLLBACK`
    RolledBack,
    /// `SAVEPOINT`: the savepoint's name.
    Saved(String),
    /// `ROLLBACK TO`: the savepoint's name.
    RolledBackTo(String),
    /// `RELEASE`: the savepoint's name.
    Released(String),
    /// `USE`: the table now current.
    Using(String),
    /// `CREATE TABLE`
    Created {
        /// The table.
        table: String,
        /// Whether it existed already (with `IF NOT EXISTS`; without, that is an error).
        existed: bool,
    },
    /// `DROP TABLE`
    Dropped {
        /// The table.
        table: String,
        /// Whether it existed (`IF EXISTS` allows it not to).
        existed: bool,
    },
    /// `RENAME TABLE`
    Renamed {
        /// The table's old name.
        from: String,
        /// Its new name.
        to: String,
    },
}

/// A statement's outcome with its rows collected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// What the statement did.
    pub outcome: Outcome,
    /// Key and value of each row, for `GET` and `SCAN`.
    pub rows: Vec<(Vec<u8>, Vec<u8>)>,
}
