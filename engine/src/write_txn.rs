//! The write transaction: the one writer's private, copy-on-write view of the database.

use std::sync::Arc;

use crate::btree::{Dirty, Pages, TreeWriter};
use crate::db::{Durability, Inner, WriterState};
use crate::error::{Error, Result};
use crate::format::LogOp;
use crate::format::{ChildRef, TableMeta, max_key_len};
use crate::freelist::FreeList;
use crate::oplog::OpLog;
use crate::pager::Snapshot;
use crate::read_txn::{catalog_get, list_catalog};
use crate::table::{TableInfo, TableMut};
use crate::txn_tables::{TableId, TableState, TxnTables};

/// The write transaction. There is one at a time per database; `begin_write` waits for
/// the previous one to end. Dropping it without [`WriteTxn::commit`] rolls it back.
#[derive(Debug)]
pub struct WriteTxn {
    pub(crate) inner: Arc<Inner>,
    /// The writer state as it was at the start: put back unchanged on rollback.
    pub(crate) original: Option<WriterState>,
    pub(crate) base: Arc<Snapshot>,
    pub(crate) dirty: Dirty,
    pub(crate) freelist: FreeList,
    pub(crate) catalog: Option<ChildRef>,
    pub(crate) tables: TxnTables,
    pub(crate) txid: u64,
    pub(crate) durability: Durability,
    /// Set by compaction: commit even without changes (so that freed pages at the end
    /// leave the file), and cut the file to its last page.
    pub(crate) compacting: bool,
    /// The changes so far, for the commit log; `None` once the commit cannot use the log
    /// (too large for it, or a change failed half-way).
    pub(crate) ops: Option<OpLog>,
    /// Whether the changes outgrew the commit log (its record would not fit a whole
    /// cycle): the commit's sync may move the log to a larger run.
    pub(crate) outgrew_log: bool,
    /// Whether the commit moved the commit log to a larger run: if it fails (a full disk,
    /// most likely, which the larger run needs more of), the log stops growing until the
    /// database is opened again, so that the next commits sync as they would have.
    pub(crate) moving_log: bool,
    /// The damage a removal met (perhaps part-way, after it had changed the tree: a
    /// sibling to merge with, the next leaf of a range): the transaction can then only
    /// roll back, and `commit` returns this instead of committing half a change.
    pub(crate) damaged: Option<Error>,
    /// The open savepoints, oldest first (`savepoint.rs`).
    pub(crate) savepoints: Vec<crate::savepoint::Saved>,
    /// While the freed pages that became reusable wait for
    /// [`WriteTxn::release_deferred`]: the durable commit's id.
    pub(crate) unreleased: Option<u64>,
}

impl Inner {
    /// Makes the freed pages that no one can need any more reusable: those freed by a
    /// commit N once no reader is older (`oldest_reader` in this process, else any in
    /// another, where a failed look reuses nothing), and N is durable — except pages
    /// written since the last durable commit, which no recovery path needs.
    pub(crate) fn release_freed(&self, ws: &mut WriterState, oldest_reader: u64) {
        self.release_into(
            &mut ws.freelist,
            ws.durable_txid,
            ws.next_txid,
            oldest_reader,
        );
    }

    /// As [`Inner::release_freed`], for `freelist` with the writer state's durable and
    /// next transaction ids.
    fn release_into(&self, freelist: &mut FreeList, durable: u64, next: u64, oldest: u64) {
        let mut readers = oldest.min(next);
        // (One system call; none when no freed page waits.)
        if let Some(file) = self.lock_file.as_ref()
            && freelist.any_waiting()
        {
            readers = match crate::lock::oldest_pinned(file, readers) {
                Ok(pinned) => pinned.map_or(readers, |p| p.min(readers)),
                Err(_) => 0,
            };
        }
        freelist.release(durable.min(readers));
        freelist.release_young(readers);
    }
}

impl WriteTxn {
    pub(crate) fn new(inner: Arc<Inner>) -> Result<WriteTxn> {
        let ws = inner.take_writer()?;
        Ok(WriteTxn::with_writer(inner, ws, true))
    }

    /// As [`WriteTxn::new`], leaving the freed pages that have become reusable to
    /// [`WriteTxn::release_deferred`]: a group's transaction, whose record can go to the
    /// disk before its changes are made, releases them while the disk takes it (the look for
    /// other processes' readers and the release took about 5 µs of a single put's commit
    /// before its record in the fifty-ninth session's profile; docs/benchmark-history.md).
    pub(crate) fn deferring_release(inner: Arc<Inner>) -> Result<WriteTxn> {
        let ws = inner.take_writer()?;
        Ok(WriteTxn::with_writer(inner, ws, false))
    }

    /// Makes the freed pages that no one needs any more reusable, if the transaction began
    /// without doing so ([`WriteTxn::deferring_release`]); called before it allocates a
    /// page.
    pub(crate) fn release_deferred(&mut self) {
        let Some(durable) = self.unreleased.take() else {
            return;
        };
        let oldest = {
            let state = self.inner.state();
            self.inner.oldest_reader_txid(&state)
        };
        self.inner
            .release_into(&mut self.freelist, durable, self.txid, oldest);
    }

    /// The write transaction once the writer state is free, waiting until `deadline` at
    /// most (`None`: for good); `None` when it passes first.
    pub(crate) fn new_until(
        inner: Arc<Inner>,
        deadline: Option<std::time::Instant>,
    ) -> Result<Option<WriteTxn>> {
        let ws = inner.take_writer_until(deadline)?;
        Ok(ws.map(|ws| WriteTxn::with_writer(inner, ws, true)))
    }

    /// The write transaction on `ws`, the writer state this thread has taken; `release`:
    /// with the freed pages no one needs any more reusable now, else at
    /// [`WriteTxn::release_deferred`].
    fn with_writer(inner: Arc<Inner>, mut ws: WriterState, release: bool) -> WriteTxn {
        let (base, oldest_reader) = {
            let state = inner.state();
            let oldest = release.then(|| inner.oldest_reader_txid(&state));
            (state.latest.clone(), oldest)
        };
        if let Some(oldest) = oldest_reader {
            inner.release_freed(&mut ws, oldest);
        }
        let ops = (ws.log.pages > 0).then(|| OpLog::new(ws.log.capacity(inner.page_size)));
        // The transaction works on the free set in place; a rollback undoes its changes.
        let mut freelist = std::mem::take(&mut ws.freelist);
        freelist.begin();
        let catalog = base.slot.catalog;
        let storage = inner.storage.clone();
        let log_bytes = ws.log.pages * inner.page_size as u64;
        let durable_txid = ws.durable_txid;
        WriteTxn {
            txid: ws.next_txid,
            durability: inner.durability,
            inner,
            original: Some(ws),
            base,
            dirty: Dirty {
                storage: Some(storage),
                log_bytes,
                ..Dirty::default()
            },
            freelist,
            catalog: (catalog.page != 0).then_some(catalog),
            tables: TxnTables::default(),
            compacting: false,
            ops,
            outgrew_log: false,
            moving_log: false,
            damaged: None,
            savepoints: Vec::new(),
            unreleased: (!release).then_some(durable_txid),
        }
    }

    /// Runs `change` and records `op` (on `table`) for the commit log; a change that fails
    /// (half-way, perhaps) or does not fit the log leaves this transaction without it.
    pub(crate) fn logged<T>(
        &mut self,
        table: Option<TableId>,
        op: LogOp<'_>,
        change: impl FnOnce(&mut WriteTxn) -> Result<T>,
    ) -> Result<T> {
        self.undamaged()?;
        // A durable commit whose record will be too large to log syncs its pages: the
        // overflow runs this change writes go to the disk's write-back at once.
        self.dirty.write_back.on = self.durability == Durability::Immediate
            && self.ops.as_ref().is_none_or(|ops| {
                (ops.payload().len() + op.encoded_len()) as u64
                    > crate::commit::ALWAYS_LOGGED_RECORD
            });
        self.bound_memory()?;
        let out = change(self);
        let name = table.and_then(|id| self.tables.name(id));
        let keep = out.is_ok()
            && self.ops.as_mut().is_some_and(|ops| {
                let fits = ops.record(name, op);
                self.outgrew_log |= !fits;
                fits
            });
        if !keep {
            self.ops = None;
        }
        out
    }

    /// Runs `change`, which removes keys from `table` and appends each to `keys` (its end
    /// in `ends`), and records their removals for the commit log, as [`WriteTxn::logged`]
    /// does one operation's.
    pub(crate) fn logged_removals<T>(
        &mut self,
        table: TableId,
        change: impl FnOnce(&mut WriteTxn, &mut Vec<u8>, &mut Vec<usize>) -> Result<T>,
    ) -> Result<T> {
        self.undamaged()?;
        self.bound_memory()?;
        let (mut keys, mut ends) = (Vec::new(), Vec::new());
        let out = change(self, &mut keys, &mut ends);
        let name = self.tables.name(table);
        let keep = out.is_ok()
            && self.ops.as_mut().is_some_and(|ops| {
                let mut start = 0;
                let fits = ends.iter().all(|&end| {
                    let key = &keys[start..end];
                    start = end;
                    ops.record(name, LogOp::Delete(key))
                });
                self.outgrew_log |= !fits;
                fits
            });
        if !keep {
            self.ops = None;
        }
        out
    }

    /// The id this transaction's commit will have.
    pub fn txid(&self) -> u64 {
        self.txid
    }

    /// Sets the durability of this transaction's commit.
    pub fn set_durability(&mut self, d: Durability) {
        self.durability = d;
    }

    /// The damage a removal in this transaction met, if any: the tree may be half
    /// changed since, so every later read or change in the transaction returns it.
    pub(crate) fn undamaged(&self) -> Result<()> {
        match &self.damaged {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }

    /// The transaction's pages, to read, unless a removal met damage ([`Self::undamaged`]).
    pub(crate) fn readable(&self) -> Result<Pages<'_>> {
        self.undamaged()?;
        Ok(self.pages())
    }

    pub(crate) fn pages(&self) -> Pages<'_> {
        Pages {
            snapshot: &self.base,
            dirty: Some(&self.dirty),
        }
    }

    pub(crate) fn max_key_len(&self) -> usize {
        max_key_len(self.base.page_size)
    }

    pub(crate) fn table_meta(&self, table: TableId) -> TableMeta {
        self.tables
            .get(table)
            .map(|t| t.current)
            .unwrap_or_default()
    }

    /// A writer for the tree of table `table`, with the table's state.
    fn table_writer(&mut self, table: TableId) -> Result<(TreeWriter<'_>, &mut TableState)> {
        let WriteTxn {
            base,
            dirty,
            freelist,
            tables,
            txid,
            ..
        } = self;
        let state = tables
            .get_mut(table)
            .ok_or_else(|| Error::corrupt(0, "internal: a table handle outlived its table"))?;
        let w = TreeWriter {
            snapshot: base,
            dirty,
            alloc: freelist,
            txid: *txid,
        };
        Ok((w, state))
    }

    /// Runs `f` on the tree of table `table`.
    pub(crate) fn with_tree<T>(
        &mut self,
        table: TableId,
        f: impl FnOnce(&mut TreeWriter<'_>, &mut TableMeta) -> Result<T>,
    ) -> Result<T> {
        let out = {
            let (mut w, state) = self.table_writer(table)?;
            // A change other than an insert through the tail may move the last leaf.
            state.tail = None;
            f(&mut w, &mut state.current)
        };
        if let Err(e @ Error::Corruption { .. }) = &out
            && self.damaged.is_none()
        {
            self.damaged = Some(e.duplicate());
        }
        out
    }

    /// Inserts or replaces `key` in table `table`; returns whether it existed. A key after
    /// every key goes straight into the table's last leaf when the previous change to the
    /// table was an insert that ended there (a sequential load descends the tree once per
    /// leaf).
    pub(crate) fn insert_into(&mut self, table: TableId, key: &[u8], value: &[u8]) -> Result<bool> {
        let (mut w, state) = self.table_writer(table)?;
        let meta = &mut state.current;
        let existed = w.insert_with_tail(&mut meta.root, key, value, &mut state.tail)?;
        meta.len += u64::from(!existed);
        Ok(existed)
    }

    /// Runs `f` on the catalog tree.
    pub(crate) fn with_catalog<T>(
        &mut self,
        f: impl FnOnce(&mut TreeWriter<'_>, &mut Option<ChildRef>) -> Result<T>,
    ) -> Result<T> {
        let mut w = TreeWriter {
            snapshot: &self.base,
            dirty: &mut self.dirty,
            alloc: &mut self.freelist,
            txid: self.txid,
        };
        f(&mut w, &mut self.catalog)
    }

    /// The number of table `name`, loaded from the catalog the first time, if there is
    /// such a table.
    pub(crate) fn load(&mut self, name: &str) -> Result<Option<TableId>> {
        if let Some(id) = self.tables.id(name) {
            return Ok(Some(id));
        }
        // While the transaction's catalog is its snapshot's, the snapshot's table cache
        // serves it (filled by the commit that made the snapshot, or by earlier look-ups).
        let base_catalog = self.base.slot.catalog;
        let unchanged = self.catalog == (base_catalog.page != 0).then_some(base_catalog);
        let meta = match self.base.tables.get(name).filter(|_| unchanged) {
            Some(meta) => meta,
            None => {
                let catalog = self.catalog.unwrap_or_default();
                let Some(meta) = catalog_get(self.pages(), catalog, name)? else {
                    return Ok(None);
                };
                if unchanged {
                    self.base.tables.remember(name.into(), meta);
                }
                meta
            }
        };
        let state = TableState {
            loaded: Some(meta),
            current: meta,
            tail: None,
        };
        Ok(Some(self.tables.insert(name, state)))
    }

    /// Creates an empty table.
    ///
    /// # Errors
    /// [`Error::TableExists`], [`Error::InvalidTableName`] for an empty name or one longer
    /// than the key limit.
    pub fn create_table(&mut self, name: &str) -> Result<()> {
        self.check_new_name(name)?;
        let meta = TableMeta::default();
        self.logged(None, LogOp::Create(name.as_bytes()), |txn| {
            txn.with_catalog(|w, root| w.insert(root, name.as_bytes(), &meta.encode()))
        })?;
        self.tables.insert(
            name,
            TableState {
                loaded: Some(meta),
                current: meta,
                tail: None,
            },
        );
        Ok(())
    }

    /// That `name` may name a new table: not empty, within the key limit, not taken.
    fn check_new_name(&mut self, name: &str) -> Result<()> {
        if name.is_empty() {
            return Err(Error::InvalidTableName(
                name.to_owned(),
                "names cannot be empty",
            ));
        }
        if name.len() > self.max_key_len() {
            return Err(Error::InvalidTableName(
                name.to_owned(),
                "longer than the key limit",
            ));
        }
        if self.load(name)?.is_some() {
            return Err(Error::TableExists(name.to_owned()));
        }
        Ok(())
    }

    /// The table called `name`, for reading and writing.
    ///
    /// # Errors
    /// [`Error::TableNotFound`], or corruption found in the catalog.
    pub fn open_table(&mut self, name: &str) -> Result<TableMut<'_>> {
        match self.load(name)? {
            Some(id) => Ok(TableMut::new(self, id)),
            None => Err(Error::TableNotFound(name.to_owned())),
        }
    }

    /// The table called `name`, created empty if there is none: `open_table` for a
    /// table the program expects to find after its first run.
    ///
    /// # Errors
    /// As [`WriteTxn::create_table`] and [`WriteTxn::open_table`].
    pub fn open_or_create_table(&mut self, name: &str) -> Result<TableMut<'_>> {
        if self.load(name)?.is_none() {
            self.create_table(name)?;
        }
        self.open_table(name)
    }

    /// Whether a table called `name` exists.
    ///
    /// # Errors
    /// Corruption found in the catalog.
    pub fn table_exists(&mut self, name: &str) -> Result<bool> {
        Ok(self.load(name)?.is_some())
    }

    /// Deletes table `name` and all its entries.
    ///
    /// # Errors
    /// [`Error::TableNotFound`], or corruption found while freeing its pages.
    pub fn drop_table(&mut self, name: &str) -> Result<()> {
        let meta = self
            .load(name)?
            .and_then(|id| self.tables.get(id))
            .map(|t| t.current)
            .ok_or_else(|| Error::TableNotFound(name.to_owned()))?;
        self.logged(None, LogOp::Drop(name.as_bytes()), |txn| {
            txn.with_catalog(|w, root| {
                if let Some(r) = meta.root {
                    w.free_tree(r)?;
                }
                w.remove(root, name.as_bytes())
            })
        })?;
        self.tables.remove(name);
        Ok(())
    }

    /// Gives table `from`, with its entries, the name `to`. Nothing is copied: the
    /// catalog's record moves. (The commit log has no record of a rename: the commit of a
    /// transaction that renames syncs the file instead of logging, as a large one does.)
    ///
    /// # Errors
    /// [`Error::TableNotFound`] when there is no table `from`; as
    /// [`WriteTxn::create_table`] for `to` ([`Error::TableExists`] when a table has that
    /// name: renaming a table to its own name is one). Nothing changes then. A damaged
    /// page of the catalog met while moving the record: the transaction can then only
    /// roll back (its `commit` returns the damage), as after a removal that met damage.
    pub fn rename_table(&mut self, from: &str, to: &str) -> Result<()> {
        self.undamaged()?;
        let state = self
            .load(from)?
            .and_then(|id| self.tables.get(id))
            .copied()
            .ok_or_else(|| Error::TableNotFound(from.to_owned()))?;
        self.check_new_name(to)?;
        self.bound_memory()?;
        // The record as the catalog holds it; the commit writes the table's new state
        // under its new name when the transaction changed it.
        let record = state.loaded.unwrap_or(state.current).encode();
        let moved = self.with_catalog(|w, root| {
            w.remove(root, from.as_bytes())?;
            w.insert(root, to.as_bytes(), &record)
        });
        if let Err(e) = &moved {
            // The record may be gone from its old place and not in its new one: the
            // transaction can only roll back, as after a removal that met damage.
            if self.damaged.is_none() {
                self.damaged = Some(e.duplicate());
            }
        }
        moved?;
        self.ops = None;
        self.tables.remove(from);
        self.tables.insert(to, state);
        Ok(())
    }

    /// Every table with its entry count, as this transaction sees them.
    ///
    /// # Errors
    /// Corruption found in the catalog.
    pub fn list_tables(&self) -> Result<Vec<TableInfo>> {
        let mut list = list_catalog(self.readable()?, self.catalog.unwrap_or_default())?;
        for t in &mut list {
            if let Some(state) = self.tables.by_name(&t.name) {
                t.len = state.current.len;
            }
        }
        Ok(list)
    }

    /// Makes the transaction's changes visible to new readers and, with `Immediate`
    /// durability, durable before returning.
    ///
    /// # Errors
    /// An I/O error: the commit did not happen, and the database stays at its last commit.
    /// [`Error::Corruption`] when a removal in this transaction met a damaged page (the
    /// error it returned then; it may have changed the tree before): the transaction is
    /// rolled back instead of committing half a change. Also when a commit that syncs
    /// finds that a page written since the last durable commit was lost after an earlier
    /// sync failed (as [`crate::Database::sync`]), and when the commit's id would be past
    /// the range a file may hold (2^60: only a crafted file gets there).
    pub fn commit(self) -> Result<()> {
        self.finish_with(|txn, original| txn.write_commit(original).map(|ws| (ws, ())))
            .map(|_| ())
    }

    /// Commits after `apply` makes the transaction's changes (applying nothing before),
    /// whose record the caller knows beforehand: `record` adds them to an empty record
    /// (false: they do not fit it). A durable commit that will log then writes its record
    /// while they are applied (`commit/record_first.rs`). An error from `apply` fails the
    /// commit.
    pub(crate) fn commit_applying<T>(
        mut self,
        record: impl FnOnce(&mut OpLog) -> bool,
        apply: impl FnOnce(&mut WriteTxn) -> Result<T>,
    ) -> Result<T> {
        let expected = match &self.ops {
            Some(ops) if self.durability == Durability::Immediate => {
                let mut expected = ops.fresh();
                record(&mut expected).then_some(expected)
            }
            _ => None,
        };
        let Some(expected) = expected else {
            self.release_deferred();
            let applied = apply(&mut self)?;
            self.commit()?;
            return Ok(applied);
        };
        let applied = self
            .finish_with(|txn, original| txn.write_applying(original, expected.payload(), apply))?;
        applied.ok_or_else(|| Error::corrupt(0, "internal: a transaction committed twice"))
    }

    /// Writes the commit with `write`, handing the writer state it returns on (or, when it
    /// fails, the state the transaction began with: the database stays at its last
    /// commit). `None` when the transaction had ended.
    fn finish_with<T>(
        mut self,
        write: impl FnOnce(&mut WriteTxn, &WriterState) -> Result<(WriterState, T)>,
    ) -> Result<Option<T>> {
        let Some(original) = self.original.take() else {
            return Ok(None);
        };
        self.release_all_savepoints();
        // A panic part-way leaves the writer state in an unknown condition: later writes
        // then fail instead of waiting for a state that never comes back.
        let inner = self.inner.clone();
        let unwinding = inner.lose_on_unwind();
        let written = match self.damaged.take() {
            Some(damage) => Err(damage),
            None => write(&mut self, &original),
        };
        unwinding.disarm();
        match written {
            Ok((ws, applied)) => {
                self.inner.put_writer(ws);
                Ok(Some(applied))
            }
            Err(e) => {
                let mut ws = original;
                if self.moving_log {
                    ws.log.target = ws.log.pages;
                    ws.log.for_large_records = false;
                }
                self.freelist.rollback();
                ws.freelist = std::mem::take(&mut self.freelist);
                ws.next_txid = self.txid + 1;
                // The failed commit may have written its slot beside the durable one: put
                // the last good commit's slot back, if the disk lets us, so that reopening
                // without a crash finds the last acknowledged commit.
                let _ = self.inner.rewrite_latest_slot(&ws);
                self.inner.put_writer(ws);
                Err(e)
            }
        }
    }

    /// Discards the transaction's changes.
    pub fn rollback(mut self) {
        self.rollback_in_place();
    }

    fn rollback_in_place(&mut self) {
        if let Some(mut ws) = self.original.take() {
            self.freelist.rollback();
            ws.freelist = std::mem::take(&mut self.freelist);
            self.inner.put_writer(ws);
        }
    }
}

impl Drop for WriteTxn {
    fn drop(&mut self) {
        self.rollback_in_place();
    }
}
