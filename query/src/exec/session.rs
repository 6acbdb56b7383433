//! The session: the database, the current table, the open transaction and its
//! savepoints, the parameters; it runs one statement at a time.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use cairn_engine::{Batch, Database, Durability, ReadTxn, Savepoint, WriteTxn};

use super::outcome::{Outcome, Output};
use super::rows::{Params, RangeKeys, Reader, bytes, for_each_row, rows_limit};
use crate::ast::{KeyRange, Statement};
use crate::error::ExecError;

/// The table a session starts in, created when missing in a writable database.
pub const DEFAULT_TABLE: &str = "main";

type Result<T> = std::result::Result<T, ExecError>;

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
