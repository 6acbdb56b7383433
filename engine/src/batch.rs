//! A batch: changes to commit together as one transaction ([`Database::commit_batch`],
//! `group.rs`), gathered without a write transaction open.
//!
//! A batch keeps every key and value in one buffer, and each change as where its bytes
//! lie in it: building one costs no allocation per change (100,000 puts of 100-byte values
//! spent a third of their commit allocating and freeing a key and a value each, when the
//! batch held them as vectors of their own: docs/benchmark-history.md, fifty-fifth
//! session).
//!
//! [`Database::commit_batch`]: crate::Database::commit_batch

use crate::db::Durability;
use crate::error::Result;
use crate::format::LogOp;
use crate::oplog::OpLog;
use crate::table::check_put;

/// A change of one key in a [`Batch`]: where its key (and value, for a put) lie in the
/// batch's buffer, the key first and the value after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Op {
    /// The index of the change's table in the batch's table names.
    table: usize,
    /// Where the key starts in the buffer.
    start: usize,
    key_len: usize,
    /// The value's length; `None` for a removal.
    value_len: Option<usize>,
}

/// Changes committed together as one transaction by [`Database::commit_batch`].
///
/// ```
/// use cairn_engine::{Batch, Database};
///
/// # fn main() -> cairn_engine::Result<()> {
/// let db = Database::in_memory()?;
/// let mut txn = db.begin_write()?;
/// txn.create_table("t")?;
/// txn.commit()?;
///
/// let mut batch = Batch::new();
/// batch.put("t", b"k", b"v").delete("t", b"gone");
/// assert_eq!(db.commit_batch(batch)?, vec![false, false]);
/// assert_eq!(db.begin_read()?.open_table("t")?.get(b"k")?, Some(&b"v"[..]));
/// # Ok(())
/// # }
/// ```
///
/// [`Database::commit_batch`]: crate::Database::commit_batch
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    tables: Vec<String>,
    /// Every change's key, then its value, one after the other.
    bytes: Vec<u8>,
    ops: Vec<Op>,
    durability: Option<Durability>,
}

/// One change of a batch, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Change<'a> {
    pub table: &'a str,
    pub key: &'a [u8],
    /// The value to store; `None` to remove the key.
    pub value: Option<&'a [u8]>,
}

impl Batch {
    /// An empty batch, with the database's durability.
    pub fn new() -> Batch {
        Batch::default()
    }

    fn table(&mut self, name: &str) -> usize {
        match self.tables.iter().rposition(|t| t == name) {
            Some(i) => i,
            None => {
                self.tables.push(name.to_owned());
                self.tables.len() - 1
            }
        }
    }

    fn push(&mut self, table: &str, key: &[u8], value: Option<&[u8]>) -> &mut Batch {
        let table = self.table(table);
        let start = self.bytes.len();
        self.bytes.extend_from_slice(key);
        if let Some(value) = value {
            self.bytes.extend_from_slice(value);
        }
        self.ops.push(Op {
            table,
            start,
            key_len: key.len(),
            value_len: value.map(<[u8]>::len),
        });
        self
    }

    /// Stores `value` under `key` in `table`.
    pub fn put(&mut self, table: &str, key: &[u8], value: &[u8]) -> &mut Batch {
        self.push(table, key, Some(value))
    }

    /// Removes `key` from `table`.
    pub fn delete(&mut self, table: &str, key: &[u8]) -> &mut Batch {
        self.push(table, key, None)
    }

    /// Sets the durability of this batch's commit (by default the database's).
    pub fn set_durability(&mut self, d: Durability) -> &mut Batch {
        self.durability = Some(d);
        self
    }

    /// The number of changes.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch holds no change.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The durability set for this batch, if any.
    pub(crate) fn durability(&self) -> Option<Durability> {
        self.durability
    }

    /// The names of the tables the batch changes.
    pub(crate) fn tables(&self) -> impl Iterator<Item = &str> {
        self.tables.iter().map(String::as_str)
    }

    /// The changes, in the order they were added.
    pub(crate) fn changes(&self) -> impl Iterator<Item = Change<'_>> {
        self.ops.iter().map(|op| {
            let key_end = op.start + op.key_len;
            Change {
                table: self.tables.get(op.table).map_or("", String::as_str),
                key: self.bytes.get(op.start..key_end).unwrap_or_default(),
                value: op
                    .value_len
                    .map(|n| self.bytes.get(key_end..key_end + n).unwrap_or_default()),
            }
        })
    }

    /// Adds the batch's changes to `log` as applying them in a transaction records them
    /// (`WriteTxn::logged`); false when they do not fit it.
    pub(crate) fn record(&self, log: &mut OpLog) -> bool {
        self.changes().all(|c| {
            let op = match c.value {
                Some(value) => LogOp::Put(c.key, value),
                None => LogOp::Delete(c.key),
            };
            log.record(Some(c.table), op)
        })
    }

    /// Checks the limits that would make a put fail, before the batch joins a group. (A
    /// key too long to store cannot be there: deleting it finds nothing.)
    pub(crate) fn validate(&self, page_size: usize) -> Result<()> {
        self.changes().try_for_each(|c| match c.value {
            Some(value) => check_put(page_size, c.key, value),
            None => Ok(()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_gives_back_its_changes_in_order_with_their_tables() {
        let mut b = Batch::new();
        b.put("a", b"k1", b"v1")
            .delete("b", b"k2")
            .put("a", b"", b"")
            .put("b", b"k3", b"a longer value");
        let changes: Vec<_> = b.changes().collect();
        let expected = [
            ("a", &b"k1"[..], Some(&b"v1"[..])),
            ("b", b"k2", None),
            ("a", b"", Some(b"")),
            ("b", b"k3", Some(b"a longer value")),
        ];
        assert_eq!(changes.len(), expected.len());
        for (c, (table, key, value)) in changes.iter().zip(expected) {
            assert_eq!((c.table, c.key, c.value), (table, key, value));
        }
        assert_eq!(b.tables().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(b.len(), 4);
    }
}
