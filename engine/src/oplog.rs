//! What a write transaction changed, as the commit log records it, and replaying it.
//!
//! A durable commit appends its record to the commit log with one `O_DSYNC` write instead
//! of syncing the whole file (docs/design.md#commit-log); recovery replays the records
//! written after the newest intact commit.

use crate::error::{Error, Result};
use crate::format::{LogOp, decode_ops};
use crate::write_txn::WriteTxn;

/// The changes of the transaction under way, encoded as a record's payload.
#[derive(Debug)]
pub(crate) struct OpLog {
    payload: Vec<u8>,
    /// The table the last put or delete went to.
    table: Option<String>,
    /// Past this many bytes the record could not fit the log: the commit syncs instead.
    limit: usize,
}

impl OpLog {
    pub fn new(limit: usize) -> OpLog {
        OpLog {
            payload: Vec::new(),
            table: None,
            limit,
        }
    }

    /// An empty record with the same limit.
    pub fn fresh(&self) -> OpLog {
        OpLog::new(self.limit)
    }

    /// Where the record stands, to come back to with [`OpLog::truncate`].
    pub fn mark(&self) -> (usize, Option<String>) {
        (self.payload.len(), self.table.clone())
    }

    /// Forgets the operations recorded since `mark` was taken.
    pub fn truncate(&mut self, mark: (usize, Option<String>)) {
        self.payload.truncate(mark.0);
        self.table = mark.1;
    }

    /// The payload so far.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    fn in_table(&mut self, table: &str) {
        if self.table.as_deref() != Some(table) {
            LogOp::Table(table.as_bytes()).encode(&mut self.payload);
            self.table = Some(table.to_owned());
        }
    }

    /// Records `op` (on `table`, for puts and deletes); false once the record is too large
    /// for the log, after which the log is no use to this transaction.
    pub fn record(&mut self, table: Option<&str>, op: LogOp<'_>) -> bool {
        if let Some(t) = table {
            self.in_table(t);
        }
        // Checked before copying: a large value is not copied only to be dropped.
        if self.payload.len() + op.encoded_len() > self.limit {
            return false;
        }
        op.encode(&mut self.payload);
        true
    }
}

/// Applies the operations of one record's `payload` to `txn`; `page` names the record in
/// errors.
pub(crate) fn replay(txn: &mut WriteTxn, payload: &[u8], page: u64) -> Result<()> {
    let bad = |what: &str| Error::corrupt(page, format!("commit log record: {what}"));
    let ops = decode_ops(payload).ok_or_else(|| bad("operations do not decode"))?;
    let name = |b: &[u8]| {
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| bad("table name is not UTF-8"))
    };
    let mut table = None;
    for op in ops {
        match op {
            LogOp::Table(n) => table = Some(name(n)?),
            LogOp::Create(n) => txn.create_table(&name(n)?)?,
            LogOp::Drop(n) => txn.drop_table(&name(n)?)?,
            LogOp::Put(k, v) => {
                let t = table
                    .as_deref()
                    .ok_or_else(|| bad("a put before its table"))?;
                txn.open_table(t)?.insert(k, v)?;
            }
            LogOp::Delete(k) => {
                let t = table
                    .as_deref()
                    .ok_or_else(|| bad("a delete before its table"))?;
                txn.open_table(t)?.remove(k)?;
            }
        }
    }
    Ok(())
}
