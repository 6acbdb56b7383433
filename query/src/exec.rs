//! The executor: runs parsed statements against a database and returns what they
//! produced, as data. It never prints.
//!
//! Outside `BEGIN … COMMIT` each statement is its own transaction (reads take a read
//! snapshot, not the write lock). Inside, every statement works on the one write
//! transaction and sees its writes; a statement that fails leaves it open and unchanged.
//! Inside `BEGIN READ … COMMIT` every statement reads one snapshot, and statements that
//! write fail.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cairn_engine::{
    Batch, Database, Durability, Range, ReadTxn, Savepoint, Table, TableInfo, TableMut, WriteTxn,
    prefix_end,
};

use crate::ast::{KeyRange, Literal, LiteralBytes, Statement};
use crate::error::ExecError;

/// The table a session starts in, created when missing in a writable database.
pub const DEFAULT_TABLE: &str = "main";

type Result<T> = std::result::Result<T, ExecError>;

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

/// The reads a statement needs, from a read snapshot or from the write transaction.
trait Reader {
    fn get(&self, key: &[u8]) -> cairn_engine::Result<Option<&[u8]>>;
    fn range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> cairn_engine::Result<Range<'_>>;
    fn len(&self) -> u64;
}

impl Reader for Table<'_> {
    fn get(&self, key: &[u8]) -> cairn_engine::Result<Option<&[u8]>> {
        Table::get(self, key)
    }
    fn range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> cairn_engine::Result<Range<'_>> {
        Table::range::<[u8], _>(self, (lo, hi))
    }
    fn len(&self) -> u64 {
        Table::len(self)
    }
}

impl Reader for TableMut<'_> {
    fn get(&self, key: &[u8]) -> cairn_engine::Result<Option<&[u8]>> {
        TableMut::get(self, key)
    }
    fn range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> cairn_engine::Result<Range<'_>> {
        TableMut::range::<[u8], _>(self, (lo, hi))
    }
    fn len(&self) -> u64 {
        TableMut::len(self)
    }
}

/// How many rows a statement produces between looks at its session's interrupt flag.
const ROWS_PER_LOOK: u64 = 256;

/// A range's lower and upper bounds.
type KeyBounds<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

/// The bytes of a [`KeyRange`]'s literals, from which its bounds are borrowed.
struct RangeKeys<'a> {
    start: Option<LiteralBytes<'a>>,
    end: Option<LiteralBytes<'a>>,
    prefix: Option<LiteralBytes<'a>>,
    prefix_end: Option<Vec<u8>>,
}

/// A session's parameters: name (without the colon) to bytes.
type Params = BTreeMap<String, Vec<u8>>;

/// The bytes of `literal`, a parameter's from `params`.
fn bytes<'a>(literal: &'a Literal, params: &'a Params) -> Result<LiteralBytes<'a>> {
    literal
        .bytes_with(params)
        .map_err(|name| ExecError::UnboundParameter(name.to_owned()))
}

/// The number of rows `LIMIT` stands for: an integer, or bytes bound to a parameter that
/// are one (8, big-endian, as an integer literal stores them).
fn rows_limit(literal: &Literal, params: &Params) -> Result<u64> {
    if let Literal::Int(n) = literal {
        return Ok(*n);
    }
    let bytes = bytes(literal, params)?;
    let eight: [u8; 8] = (*bytes)
        .try_into()
        .map_err(|_| ExecError::LimitNotAnInteger(literal.to_string(), bytes.len()))?;
    Ok(u64::from_be_bytes(eight))
}

impl<'a> RangeKeys<'a> {
    fn of(range: &'a KeyRange, params: &'a Params) -> Result<RangeKeys<'a>> {
        let one = |l: &'a Option<Literal>| l.as_ref().map(|l| bytes(l, params)).transpose();
        // (In the order they are written: an error names the first unbound parameter.)
        let (start, end, prefix) = (one(&range.start)?, one(&range.end)?, one(&range.prefix)?);
        Ok(RangeKeys {
            start,
            end,
            prefix_end: prefix.as_deref().and_then(prefix_end),
            prefix,
        })
    }

    /// `[start, end)` intersected with `[prefix, prefix_end)`; `None` when that is empty.
    fn bounds(&self) -> Option<KeyBounds<'_>> {
        let lo = match (self.start.as_deref(), self.prefix.as_deref()) {
            (Some(s), Some(p)) => Bound::Included(s.max(p)),
            (Some(b), None) | (None, Some(b)) => Bound::Included(b),
            (None, None) => Bound::Unbounded,
        };
        let hi = match (self.end.as_deref(), self.prefix_end.as_deref()) {
            (Some(e), Some(p)) => Bound::Excluded(e.min(p)),
            (Some(b), None) | (None, Some(b)) => Bound::Excluded(b),
            (None, None) => Bound::Unbounded,
        };
        match (lo, hi) {
            (Bound::Included(l), Bound::Excluded(h)) if l >= h => None,
            bounds => Some(bounds),
        }
    }
}

/// Runs `f` over the rows of `range` in `t`, forward or reverse, at most `limit` of them;
/// stops with [`ExecError::Interrupted`] when `interrupt` is raised (looked at before the
/// first row and every [`ROWS_PER_LOOK`] rows).
fn for_each_row(
    t: &dyn Reader,
    keys: &RangeKeys<'_>,
    reverse: bool,
    limit: Option<u64>,
    interrupt: &AtomicBool,
    f: &mut dyn FnMut(&[u8], &[u8]),
) -> Result<u64> {
    let Some((lo, hi)) = keys.bounds() else {
        return Ok(0);
    };
    let rows = t.range(lo, hi)?;
    let rows: Box<dyn Iterator<Item = _>> = if reverse {
        Box::new(rows.rev())
    } else {
        Box::new(rows)
    };
    let mut n = 0;
    for row in rows.take(usize::try_from(limit.unwrap_or(u64::MAX)).unwrap_or(usize::MAX)) {
        if n % ROWS_PER_LOOK == 0 && interrupt.load(Ordering::Relaxed) {
            return Err(ExecError::Interrupted);
        }
        let (k, v) = row?;
        f(k, v);
        n += 1;
    }
    Ok(n)
}

/// The transaction a `BEGIN` opened. (A session holds one at most: the write variant's
/// size costs nothing, where boxing it would cost a look-up in every statement.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum Txn {
    Write(WriteTxn),
    /// `BEGIN READ`: a snapshot that every statement reads, until `COMMIT` or `ROLLBACK`.
    Read(ReadTxn),
}

/// Why a statement cannot write in a read transaction on `db`: the database is open
/// read-only, or the transaction began with `BEGIN READ`.
fn cannot_write(db: &Database) -> ExecError {
    if db.is_read_only() {
        cairn_engine::Error::ReadOnly.into()
    } else {
        ExecError::ReadTransaction
    }
}

/// Runs `f` in `txn`, or, when none is open, in a transaction of its own that commits.
fn in_write_txn<T>(
    db: &Database,
    txn: &mut Option<Txn>,
    durability: Durability,
    f: impl FnOnce(&mut WriteTxn) -> cairn_engine::Result<T>,
) -> Result<T> {
    match txn {
        Some(Txn::Write(txn)) => Ok(f(txn)?),
        Some(Txn::Read(_)) => Err(cannot_write(db)),
        None => {
            let mut txn = db.begin_write()?;
            txn.set_durability(durability);
            let out = f(&mut txn)?;
            txn.commit()?;
            Ok(out)
        }
    }
}

/// A connection to a database: the current table and, between `BEGIN` and `COMMIT`, the
/// open transaction. Dropping a session with a transaction open rolls it back.
#[derive(Debug)]
pub struct Session {
    db: Database,
    table: String,
    txn: Option<Txn>,
    /// Raised from elsewhere (a signal handler) to stop a statement that produces rows.
    interrupt: Arc<AtomicBool>,
    /// The parameters' bound bytes.
    params: Params,
    /// The open write transaction's savepoints, oldest first, by name, each with how many
    /// of `renames` preceded it.
    savepoints: Vec<(String, Savepoint, usize)>,
    /// The open write transaction's renames, `(from, to)`, oldest first: undoing one takes
    /// the session's table back to its old name when it followed it.
    renames: Vec<(String, String)>,
    /// The durability of the transactions the session begins and of its statements'
    /// own commits.
    durability: Durability,
}

impl Session {
    /// A session on `db`, in [`DEFAULT_TABLE`], which is created if the database is
    /// writable and lacks it.
    ///
    /// # Errors
    /// When the default table cannot be created.
    pub fn new(db: Database) -> Result<Session> {
        if !db.is_read_only() {
            let mut txn = db.begin_write()?;
            if !txn.table_exists(DEFAULT_TABLE)? {
                txn.create_table(DEFAULT_TABLE)?;
                txn.commit()?;
            }
        }
        Ok(Session {
            table: DEFAULT_TABLE.to_owned(),
            txn: None,
            interrupt: Arc::default(),
            params: Params::new(),
            savepoints: Vec::new(),
            renames: Vec::new(),
            durability: db.durability(),
            db,
        })
    }

    /// The durability of the transactions the session begins from now on (`BEGIN`, and
    /// each statement outside one, which commits on its own): `Eventual` commits are
    /// atomic and visible at once, and durable at the next sync ([`Database::sync`], the
    /// background one, or close). A transaction already open keeps the durability it began
    /// with. By default, the database's ([`Database::durability`]).
    pub fn set_durability(&mut self, durability: Durability) {
        self.durability = durability;
    }

    /// The durability of the transactions the session begins.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Binds parameter `name` (written `:name` in statements; given here with or without
    /// its colon) to `value`, replacing what it held.
    ///
    /// ```
    /// use cairn_engine::Database;
    /// use cairn_query::{Session, parse_script};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut session = Session::new(Database::in_memory()?)?;
    /// let put = parse_script("PUT :user :name").statements.remove(0).statement;
    /// for (user, name) in [("ada", "Ada Lovelace"), ("o'hara", "Scarlett O'Hara")] {
    ///     session.set_param("user", user);
    ///     session.set_param(":name", name);
    ///     session.execute(&put)?;
    /// }
    /// let get = parse_script("GET 'o''hara'").statements.remove(0).statement;
    /// assert_eq!(session.execute(&get)?.rows[0].1, b"Scarlett O'Hara");
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_param(&mut self, name: &str, value: impl Into<Vec<u8>>) {
        let name = name.strip_prefix(':').unwrap_or(name);
        self.params.insert(name.to_owned(), value.into());
    }

    /// Unbinds parameter `name` (with or without its colon); returns whether it was bound.
    pub fn unset_param(&mut self, name: &str) -> bool {
        let name = name.strip_prefix(':').unwrap_or(name);
        self.params.remove(name).is_some()
    }

    /// Unbinds every parameter.
    pub fn clear_params(&mut self) {
        self.params.clear();
    }

    /// The bound parameters, by name (without the colon), in name order.
    pub fn params(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.params.iter().map(|(k, v)| (k.as_str(), v.as_slice()))
    }

    /// The flag that interrupts this session's statements: while it is raised, a `SCAN`
    /// or `COUNT` over a range stops within a few hundred rows with
    /// [`ExecError::Interrupted`] (statements that write are never cut short). Whoever
    /// raises it lowers it again.
    pub fn interrupt_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.interrupt)
    }

    /// Makes `flag` the one that interrupts this session's statements.
    pub fn set_interrupt_flag(&mut self, flag: Arc<AtomicBool>) {
        self.interrupt = flag;
    }

    /// The database.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// The current table.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Whether a `BEGIN` (or `BEGIN READ`) is waiting for its `COMMIT` or `ROLLBACK`.
    pub fn in_transaction(&self) -> bool {
        self.txn.is_some()
    }

    /// Whether the open transaction is a read transaction (`BEGIN READ`, or `BEGIN` on a
    /// database open read-only).
    pub fn in_read_transaction(&self) -> bool {
        self.read_snapshot().is_some()
    }

    /// The snapshot of the open read transaction, if one is open: what the session's
    /// statements read until its `COMMIT` or `ROLLBACK`.
    pub fn read_snapshot(&self) -> Option<&ReadTxn> {
        match &self.txn {
            Some(Txn::Read(snapshot)) => Some(snapshot),
            _ => None,
        }
    }

    /// The names of the open write transaction's savepoints, oldest first (a name may
    /// repeat: `ROLLBACK TO` and `RELEASE` mean the newest of a name).
    pub fn savepoints(&self) -> impl Iterator<Item = &str> {
        self.savepoints.iter().map(|(name, ..)| name.as_str())
    }

    /// Ends the session, rolling back an open transaction (see
    /// [`Session::in_transaction`]), and closes its database handle
    /// ([`cairn_engine::Database::close`]: the last handle makes every commit durable and
    /// seals the file).
    ///
    /// # Errors
    /// What closing the database met (an I/O error from its final sync).
    pub fn close(mut self) -> Result<()> {
        drop(self.txn.take());
        Ok(self.db.close()?)
    }

    /// Runs `stmt` and collects its rows.
    ///
    /// # Errors
    /// As [`Session::run`].
    pub fn execute(&mut self, stmt: &Statement) -> Result<Output> {
        let mut rows = Vec::new();
        let outcome = self.run(stmt, &mut |k, v| rows.push((k.to_vec(), v.to_vec())))?;
        Ok(Output { outcome, rows })
    }

    /// Runs `stmt`, handing each row it produces to `sink` (borrowed, not copied).
    ///
    /// # Errors
    /// Engine errors (limits, missing tables, corruption, I/O) and transaction misuse.
    /// Inside a transaction a failed statement changes nothing and the transaction stays
    /// open (but a `DELETE` that met a damaged page may have: the transaction's `COMMIT`
    /// then returns the damage, and rolls back).
    pub fn run(&mut self, stmt: &Statement, sink: &mut dyn FnMut(&[u8], &[u8])) -> Result<Outcome> {
        // The statement reads the parameters while it changes the session: they are
        // moved out for its length (a move of three words; an `Arc` cloned per statement
        // cost GETs about 12 ns each).
        let params = std::mem::take(&mut self.params);
        let outcome = self.run_with(stmt, sink, &params);
        self.params = params;
        outcome
    }

    fn run_with(
        &mut self,
        stmt: &Statement,
        sink: &mut dyn FnMut(&[u8], &[u8]),
        params: &Params,
    ) -> Result<Outcome> {
        match stmt {
            Statement::Put { key, value } => {
                let (key, value) = (bytes(key, params)?, bytes(value, params)?);
                let replaced = self.write(&key, Some(&value))?;
                Ok(Outcome::Put { replaced })
            }
            Statement::Delete { key } => {
                let key = bytes(key, params)?;
                let existed = self.write(&key, None)?;
                Ok(Outcome::Delete { existed })
            }
            Statement::DeleteRange { range } => {
                let keys = RangeKeys::of(range, params)?;
                let bounds = keys.bounds();
                let table = &self.table;
                let count = in_write_txn(&self.db, &mut self.txn, self.durability, |txn| {
                    let mut t = txn.open_table(table)?;
                    match bounds {
                        Some(b) => t.remove_range::<[u8], _>(b),
                        None => Ok(0),
                    }
                })?;
                Ok(Outcome::DeletedRange { count })
            }
            Statement::Get { key } => {
                let key = bytes(key, params)?;
                self.read(|t| {
                    Ok(match t.get(&key)? {
                        Some(v) => {
                            sink(&key, v);
                            Outcome::Rows(1)
                        }
                        None => Outcome::Rows(0),
                    })
                })
            }
            Statement::Scan {
                range,
                reverse,
                limit,
            } => {
                let interrupt = Arc::clone(&self.interrupt);
                let keys = RangeKeys::of(range, params)?;
                let limit = limit.as_ref().map(|l| rows_limit(l, params)).transpose()?;
                self.read(|t| {
                    let n = for_each_row(t, &keys, *reverse, limit, &interrupt, sink)?;
                    Ok(Outcome::Rows(n))
                })
            }
            Statement::Count { range } => {
                let interrupt = Arc::clone(&self.interrupt);
                let keys = RangeKeys::of(range, params)?;
                self.read(|t| {
                    if *range == KeyRange::default() {
                        return Ok(Outcome::Count(t.len()));
                    }
                    let n = for_each_row(t, &keys, false, None, &interrupt, &mut |_, _| {})?;
                    Ok(Outcome::Count(n))
                })
            }
            Statement::Begin | Statement::BeginRead => {
                if self.txn.is_some() {
                    return Err(ExecError::AlreadyInTransaction);
                }
                // (No write could succeed in a database open read-only: its BEGIN reads.)
                if *stmt == Statement::BeginRead || self.db.is_read_only() {
                    self.txn = Some(Txn::Read(self.db.begin_read()?));
                    return Ok(Outcome::BeganRead);
                }
                let mut txn = self.db.begin_write()?;
                txn.set_durability(self.durability);
                self.txn = Some(Txn::Write(txn));
                Ok(Outcome::Began)
            }
            Statement::Commit => {
                self.savepoints.clear();
                match self.txn.take().ok_or(ExecError::NoTransaction)? {
                    // (A failed commit rolled back: so are its renames.)
                    Txn::Write(txn) => txn.commit().inspect_err(|_| self.undo_renames(0))?,
                    Txn::Read(_) => {}
                }
                self.renames.clear();
                Ok(Outcome::Committed)
            }
            Statement::Rollback => {
                self.savepoints.clear();
                self.undo_renames(0);
                match self.txn.take().ok_or(ExecError::NoTransaction)? {
                    Txn::Write(txn) => txn.rollback(),
                    Txn::Read(_) => {}
                }
                Ok(Outcome::RolledBack)
            }
            Statement::Savepoint { name } => {
                let savepoint = self.write_txn()?.savepoint()?;
                self.savepoints
                    .push((name.clone(), savepoint, self.renames.len()));
                Ok(Outcome::Saved(name.clone()))
            }
            Statement::RollbackTo { name } => {
                let at = self.savepoint_named(name)?;
                let Session {
                    txn: Some(Txn::Write(txn)),
                    savepoints,
                    ..
                } = self
                else {
                    return Err(ExecError::SavepointOutsideTransaction);
                };
                txn.rollback_to(&savepoints[at].1)?;
                savepoints.truncate(at + 1);
                let renames = savepoints[at].2;
                self.undo_renames(renames);
                Ok(Outcome::RolledBackTo(name.clone()))
            }
            Statement::Release { name } => {
                let at = self.savepoint_named(name)?;
                if let Some((_, sp, _)) = self.savepoints.split_off(at).into_iter().next() {
                    self.write_txn()?.release(sp)?;
                }
                Ok(Outcome::Released(name.clone()))
            }
            Statement::Tables => Ok(Outcome::Tables(match &self.txn {
                Some(Txn::Write(txn)) => txn.list_tables()?,
                Some(Txn::Read(snapshot)) => snapshot.list_tables()?,
                None => self.db.begin_read()?.list_tables()?,
            })),
            Statement::Use { table } => {
                let exists = match &mut self.txn {
                    Some(Txn::Write(txn)) => txn.table_exists(table)?,
                    Some(Txn::Read(snapshot)) => snapshot.open_table(table).is_ok(),
                    None => self.db.begin_read()?.open_table(table).is_ok(),
                };
                if !exists {
                    return Err(cairn_engine::Error::TableNotFound(table.clone()).into());
                }
                self.table.clone_from(table);
                Ok(Outcome::Using(table.clone()))
            }
            Statement::CreateTable {
                table,
                if_not_exists,
            } => {
                let existed = self.in_write_txn(|txn| {
                    let existed = *if_not_exists && txn.table_exists(table)?;
                    if !existed {
                        txn.create_table(table)?;
                    }
                    Ok(existed)
                })?;
                Ok(Outcome::Created {
                    table: table.clone(),
                    existed,
                })
            }
            Statement::DropTable { table, if_exists } => {
                let existed = self.in_write_txn(|txn| {
                    let exists = !*if_exists || txn.table_exists(table)?;
                    if exists {
                        txn.drop_table(table)?;
                    }
                    Ok(exists)
                })?;
                Ok(Outcome::Dropped {
                    table: table.clone(),
                    existed,
                })
            }
            Statement::RenameTable { from, to } => {
                self.in_write_txn(|txn| txn.rename_table(from, to))?;
                if matches!(self.txn, Some(Txn::Write(_))) {
                    self.renames.push((from.clone(), to.clone()));
                }
                // The session's table goes with its new name.
                if self.table == *from {
                    self.table.clone_from(to);
                }
                Ok(Outcome::Renamed {
                    from: from.clone(),
                    to: to.clone(),
                })
            }
        }
    }

    /// Forgets the open write transaction's renames after the first `keep`, newest first,
    /// taking the session's table back to the old name of each it followed.
    fn undo_renames(&mut self, keep: usize) {
        for (from, to) in self.renames.drain(keep.min(self.renames.len())..).rev() {
            if self.table == to {
                self.table = from;
            }
        }
    }

    /// The open write transaction, for a savepoint statement.
    fn write_txn(&mut self) -> Result<&mut WriteTxn> {
        match &mut self.txn {
            Some(Txn::Write(txn)) => Ok(txn),
            Some(Txn::Read(_)) => Err(cannot_write(&self.db)),
            None => Err(ExecError::SavepointOutsideTransaction),
        }
    }

    /// The index of the newest savepoint called `name`.
    fn savepoint_named(&mut self, name: &str) -> Result<usize> {
        self.write_txn()?;
        self.savepoints
            .iter()
            .rposition(|(n, ..)| n == name)
            .ok_or_else(|| ExecError::NoSuchSavepoint(name.to_owned()))
    }

    /// Runs `f` in the open transaction, or in a transaction of its own that commits.
    fn in_write_txn<T>(
        &mut self,
        f: impl FnOnce(&mut WriteTxn) -> cairn_engine::Result<T>,
    ) -> Result<T> {
        in_write_txn(&self.db, &mut self.txn, self.durability, f)
    }

    /// Stores `value` under `key` in the current table, or (`None`) removes `key`; returns
    /// whether the key held a value. In the open transaction, or else as a commit of its
    /// own through the engine's group commit (so that sessions on several threads share
    /// syncs).
    fn write(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<bool> {
        let Session {
            db,
            table,
            txn,
            durability,
            ..
        } = self;
        match txn {
            Some(Txn::Write(txn)) => {
                let mut t = txn.open_table(table)?;
                return Ok(match value {
                    Some(v) => t.insert(key, v)?,
                    None => t.remove(key)?,
                });
            }
            Some(Txn::Read(_)) => return Err(cannot_write(db)),
            None => {}
        }
        let mut b = Batch::new();
        b.set_durability(*durability);
        match value {
            Some(v) => b.put(table, key, v),
            None => b.delete(table, key),
        };
        let found = db.commit_batch(b)?;
        Ok(found.first().copied().unwrap_or(false))
    }

    /// Runs `f` on the current table for reading: in the open transaction, or on a
    /// fresh read snapshot.
    fn read<T>(&mut self, f: impl FnOnce(&dyn Reader) -> Result<T>) -> Result<T> {
        match &mut self.txn {
            Some(Txn::Write(txn)) => f(&txn.open_table(&self.table)?),
            Some(Txn::Read(snapshot)) => f(&snapshot.open_table(&self.table)?),
            None => {
                let snapshot: ReadTxn = self.db.begin_read()?;
                f(&snapshot.open_table(&self.table)?)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::parse_script;

    fn statement(src: &str) -> Statement {
        let mut script = parse_script(src);
        assert!(script.errors.is_empty(), "{src}");
        script.statements.remove(0).statement
    }

    /// A raised flag stops a scan and a ranged count (inside a transaction too, which
    /// stays open and keeps its writes); lowered, they run to the end. Writes and the
    /// whole-table count do not look at it.
    #[test]
    fn a_raised_interrupt_flag_stops_scans_and_counts_but_not_writes() -> Result<()> {
        let mut s = Session::new(cairn_engine::Database::in_memory()?)?;
        let flag = s.interrupt_flag();
        s.run(&statement("BEGIN"), &mut |_, _| {})?;
        for i in 0..1000 {
            s.run(&statement(&format!("PUT {i} {i}")), &mut |_, _| {})?;
        }
        flag.store(true, Ordering::Relaxed);
        let mut rows = 0;
        let scan = s.run(&statement("SCAN"), &mut |_, _| rows += 1);
        assert!(matches!(scan, Err(ExecError::Interrupted)), "{scan:?}");
        assert_eq!(rows, 0);
        let count = s.run(&statement("COUNT 0 500"), &mut |_, _| {});
        assert!(matches!(count, Err(ExecError::Interrupted)), "{count:?}");
        assert_eq!(
            s.run(&statement("COUNT"), &mut |_, _| {})?,
            Outcome::Count(1000)
        );
        s.run(&statement("PUT 1000 1"), &mut |_, _| {})?;
        assert!(s.in_transaction());
        // Raised part-way: the rows before the next look are produced, no more.
        flag.store(false, Ordering::Relaxed);
        let mut rows = 0;
        let scan = s.run(&statement("SCAN"), &mut |_, _| {
            rows += 1;
            if rows == 300 {
                flag.store(true, Ordering::Relaxed);
            }
        });
        assert!(matches!(scan, Err(ExecError::Interrupted)), "{scan:?}");
        assert_eq!(rows, 2 * super::ROWS_PER_LOOK);
        flag.store(false, Ordering::Relaxed);
        s.run(&statement("COMMIT"), &mut |_, _| {})?;
        let mut rows = 0;
        assert_eq!(
            s.run(&statement("SCAN"), &mut |_, _| rows += 1)?,
            Outcome::Rows(1001)
        );
        assert_eq!(rows, 1001);
        Ok(())
    }

    /// Parameters stand for their bound bytes in every place a literal may; an unbound
    /// one fails its statement, which changes nothing (inside a transaction too); binding
    /// again replaces the bytes, unbinding removes them.
    #[test]
    fn parameters_are_bound_by_name_and_an_unbound_one_changes_nothing() -> Result<()> {
        let mut s = Session::new(cairn_engine::Database::in_memory()?)?;
        let rows = |s: &mut Session, src: &str| -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
            Ok(s.execute(&statement(src))?.rows)
        };
        s.set_param("k", b"\x00key\xff".to_vec());
        s.set_param(":v", "it's");
        s.execute(&statement("PUT :k :v"))?;
        assert_eq!(
            rows(&mut s, "GET x'006b6579ff'")?,
            [(b"\x00key\xff".to_vec(), b"it's".to_vec())]
        );
        for i in 0u64..10 {
            s.set_param("i", i.to_be_bytes().to_vec());
            s.execute(&statement("PUT :i 'n'"))?;
        }
        s.set_param("lo", 3u64.to_be_bytes().to_vec());
        s.set_param("hi", 6u64.to_be_bytes().to_vec());
        assert_eq!(rows(&mut s, "SCAN :lo :hi")?.len(), 3);
        // (The key bound to :k, 0x00 then 'k', sorts after every 8-byte integer here.)
        assert_eq!(
            s.execute(&statement("COUNT :lo"))?.outcome,
            Outcome::Count(8)
        );
        s.set_param("p", vec![0u8]);
        assert_eq!(
            s.execute(&statement("DELETE RANGE :lo PREFIX :p"))?.outcome,
            Outcome::DeletedRange { count: 8 }
        );
        assert_eq!(
            s.params().map(|(k, _)| k).collect::<Vec<_>>(),
            ["hi", "i", "k", "lo", "p", "v"]
        );

        s.execute(&statement("BEGIN"))?;
        assert!(s.unset_param(":v"));
        assert!(!s.unset_param("v"));
        for src in [
            "PUT 'x' :v",
            "GET :v",
            "SCAN :v",
            "DELETE PREFIX :v",
            "COUNT 'a' :v",
        ] {
            let r = s.execute(&statement(src));
            assert!(
                matches!(&r, Err(ExecError::UnboundParameter(name)) if name == "v"),
                "{src}: {r:?}"
            );
        }
        // LIMIT takes a parameter bound to an integer's 8 bytes, and refuses other bytes.
        s.set_param("two", 2u64.to_be_bytes());
        assert_eq!(rows(&mut s, "SCAN LIMIT :two")?.len(), 2);
        let text = s.execute(&statement("SCAN LIMIT :k"));
        assert!(
            matches!(&text, Err(ExecError::LimitNotAnInteger(l, 5)) if l == ":k"),
            "{text:?}"
        );
        let first = s.execute(&statement("SCAN :u :w PREFIX :v"));
        assert!(
            matches!(&first, Err(ExecError::UnboundParameter(name)) if name == "u"),
            "the first unbound one, as written: {first:?}"
        );
        assert!(
            s.in_transaction(),
            "a failed statement leaves the transaction open"
        );
        s.execute(&statement("COMMIT"))?;
        assert_eq!(rows(&mut s, "GET 'x'")?, []);
        s.clear_params();
        assert_eq!(s.params().count(), 0);
        assert!(s.execute(&statement("GET :k")).is_err());
        Ok(())
    }

    #[test]
    fn savepoints_roll_back_and_release_by_name_inside_a_write_transaction() -> Result<()> {
        let mut s = Session::new(cairn_engine::Database::in_memory()?)?;
        let run = |s: &mut Session, src: &str| s.execute(&statement(src));
        let count =
            |s: &mut Session| -> Result<Outcome> { Ok(s.execute(&statement("COUNT"))?.outcome) };
        assert!(matches!(
            run(&mut s, "SAVEPOINT a"),
            Err(ExecError::SavepointOutsideTransaction)
        ));
        run(&mut s, "BEGIN READ")?;
        assert!(matches!(
            run(&mut s, "SAVEPOINT a"),
            Err(ExecError::ReadTransaction)
        ));
        run(&mut s, "COMMIT")?;
        run(&mut s, "BEGIN")?;
        run(&mut s, "PUT 1 1")?;
        assert_eq!(
            run(&mut s, "SAVEPOINT a")?.outcome,
            Outcome::Saved("a".into())
        );
        run(&mut s, "PUT 2 2")?;
        run(&mut s, "SAVEPOINT b")?;
        run(&mut s, "PUT 3 3")?;
        // A second `a`: the newest of a name is the one meant.
        run(&mut s, "SAVEPOINT a")?;
        run(&mut s, "PUT 4 4")?;
        assert_eq!(s.savepoints().collect::<Vec<_>>(), ["a", "b", "a"]);
        assert_eq!(
            run(&mut s, "ROLLBACK TO a")?.outcome,
            Outcome::RolledBackTo("a".into())
        );
        assert_eq!(count(&mut s)?, Outcome::Count(3));
        assert_eq!(s.savepoints().count(), 3, "the savepoint stays");
        run(&mut s, "ROLLBACK TO SAVEPOINT b")?;
        assert_eq!(count(&mut s)?, Outcome::Count(2));
        assert_eq!(s.savepoints().collect::<Vec<_>>(), ["a", "b"]);
        assert!(matches!(
            run(&mut s, "RELEASE c"),
            Err(ExecError::NoSuchSavepoint(name)) if name == "c"
        ));
        run(&mut s, "PUT 5 5")?;
        assert_eq!(
            run(&mut s, "RELEASE b")?.outcome,
            Outcome::Released("b".into())
        );
        assert!(matches!(
            run(&mut s, "ROLLBACK TO b"),
            Err(ExecError::NoSuchSavepoint(_))
        ));
        // The released savepoint's changes belong to `a` now.
        run(&mut s, "ROLLBACK TO a")?;
        assert_eq!(count(&mut s)?, Outcome::Count(1));
        run(&mut s, "PUT 6 6")?;
        run(&mut s, "COMMIT")?;
        assert_eq!(s.savepoints().count(), 0);
        assert_eq!(count(&mut s)?, Outcome::Count(2));
        assert!(matches!(
            run(&mut s, "ROLLBACK TO a"),
            Err(ExecError::SavepointOutsideTransaction)
        ));
        // A ROLLBACK ends them with the transaction.
        run(&mut s, "BEGIN")?;
        run(&mut s, "SAVEPOINT a")?;
        run(&mut s, "ROLLBACK")?;
        run(&mut s, "BEGIN")?;
        assert!(matches!(
            run(&mut s, "RELEASE a"),
            Err(ExecError::NoSuchSavepoint(_))
        ));
        Ok(())
    }

    /// The keys of the default table in the bytes a power cut now would leave (those
    /// synced, and the commit log's durable records), as a database opened on them reads.
    fn durable_keys(storage: &cairn_engine::storage::FaultyStorage) -> Result<Vec<Vec<u8>>> {
        let image = std::sync::Arc::new(
            cairn_engine::storage::MemoryStorage::from_bytes(&storage.durable_image())
                .map_err(cairn_engine::Error::from)?,
        );
        let db = Database::builder().with_storage(image, true, None)?;
        let read = db.begin_read()?;
        let keys = read
            .open_table(crate::DEFAULT_TABLE)?
            .iter()?
            .map(|e| e.map(|(k, _)| k.to_vec()))
            .collect::<cairn_engine::Result<_>>()?;
        Ok(keys)
    }

    /// A session's durability reaches every commit it makes: a statement's own (through
    /// the group commit), `BEGIN ... COMMIT`'s, `DELETE RANGE`'s; an Eventual one is
    /// durable only once a later Immediate commit (or a sync) makes it so.
    #[test]
    fn the_sessions_durability_reaches_each_of_its_commits() -> Result<()> {
        let storage =
            cairn_engine::storage::FaultyStorage::new(3).map_err(cairn_engine::Error::from)?;
        let db = Database::builder().with_storage(storage.clone(), true, None)?;
        let mut s = Session::new(db)?;
        let run = |s: &mut Session, src: &str| s.execute(&statement(src));
        assert_eq!(s.durability(), Durability::Immediate, "the database's");
        run(&mut s, "PUT 'a' 1")?;
        assert_eq!(durable_keys(&storage)?, [b"a".to_vec()]);
        s.set_durability(Durability::Eventual);
        run(&mut s, "PUT 'b' 1")?;
        for stmt in ["BEGIN", "PUT 'c' 1", "COMMIT", "DELETE RANGE 'a' 'b'"] {
            run(&mut s, stmt)?;
        }
        assert_eq!(
            durable_keys(&storage)?,
            [b"a".to_vec()],
            "none of them durable"
        );
        // An Immediate commit makes them durable with its own.
        s.set_durability(Durability::Immediate);
        run(&mut s, "PUT 'd' 1")?;
        let keys = ["b", "c", "d"].map(|k| k.as_bytes().to_vec());
        assert_eq!(durable_keys(&storage)?, keys);
        // A transaction keeps the durability it began with.
        run(&mut s, "BEGIN")?;
        s.set_durability(Durability::Eventual);
        run(&mut s, "PUT 'e' 1")?;
        run(&mut s, "COMMIT")?;
        assert_eq!(durable_keys(&storage)?.len(), 4);
        Ok(())
    }
}
