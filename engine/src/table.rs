//! Tables: handles to one named tree, for reading ([`Table`]) and writing ([`TableMut`]).

use std::ops::{Bound, RangeBounds};

use crate::btree::{Pages, RangeIter};
use crate::error::{Error, Result};
use crate::format::LogOp;
use crate::format::{ChildRef, MAX_VALUE_LEN, TableMeta};
use crate::write_txn::WriteTxn;

/// A table's name and entry count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableInfo {
    pub name: String,
    pub len: u64,
}

/// A table in a read transaction. Values are borrowed from the snapshot for as long as
/// the transaction lives: reading copies nothing.
#[derive(Debug, Clone, Copy)]
pub struct Table<'t> {
    pages: Pages<'t>,
    meta: TableMeta,
}

fn bounds<K: AsRef<[u8]> + ?Sized>(b: Bound<&K>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_ref()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn range<'a, K, R>(pages: Pages<'a>, root: Option<ChildRef>, r: R) -> Result<Range<'a>>
where
    K: AsRef<[u8]> + ?Sized,
    R: RangeBounds<K>,
{
    Ok(Range {
        iter: RangeIter::new(pages, root, bounds(r.start_bound()), bounds(r.end_bound()))?,
    })
}

fn first_or_last<'a>(
    pages: Pages<'a>,
    root: Option<ChildRef>,
    forward: bool,
) -> Result<Option<(&'a [u8], &'a [u8])>> {
    RangeIter::new(pages, root, Bound::Unbounded, Bound::Unbounded)?
        .advance(forward)
        .transpose()
}

impl<'t> Table<'t> {
    pub(crate) fn new(pages: Pages<'t>, meta: TableMeta) -> Table<'t> {
        Table { pages, meta }
    }

    /// The value stored under `key`, borrowed from the snapshot.
    ///
    /// # Errors
    /// Corruption found on the way.
    pub fn get(&self, key: &[u8]) -> Result<Option<&'t [u8]>> {
        self.pages.get(self.meta.root, key)
    }

    /// The entries with keys in `r`, in key order; reversible with `.rev()`.
    ///
    /// # Errors
    /// Corruption found while seeking; later damage is yielded by the iterator.
    pub fn range<K, R>(&self, r: R) -> Result<Range<'t>>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        range(self.pages, self.meta.root, r)
    }

    /// Every entry, in key order.
    ///
    /// # Errors
    /// As [`Table::range`].
    pub fn iter(&self) -> Result<Range<'t>> {
        range::<[u8], _>(self.pages, self.meta.root, ..)
    }

    /// The entry with the smallest key.
    ///
    /// # Errors
    /// Corruption found on the way.
    pub fn first(&self) -> Result<Option<(&'t [u8], &'t [u8])>> {
        first_or_last(self.pages, self.meta.root, true)
    }

    /// The entry with the largest key.
    ///
    /// # Errors
    /// Corruption found on the way.
    pub fn last(&self) -> Result<Option<(&'t [u8], &'t [u8])>> {
        first_or_last(self.pages, self.meta.root, false)
    }

    /// The number of entries.
    pub fn len(&self) -> u64 {
        self.meta.len
    }

    /// Whether the table has no entries.
    pub fn is_empty(&self) -> bool {
        self.meta.len == 0
    }
}

/// Entries of a table in key order, from either end. An `Err` item reports damage found
/// while iterating and ends the iteration.
#[derive(Debug, Clone)]
pub struct Range<'a> {
    iter: RangeIter<'a>,
}

impl<'a> Iterator for Range<'a> {
    type Item = Result<(&'a [u8], &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        self.iter.advance(true)
    }
}

impl DoubleEndedIterator for Range<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.iter.advance(false)
    }
}

impl std::iter::FusedIterator for Range<'_> {}

/// A table in a write transaction. Reads see the transaction's own writes.
#[derive(Debug)]
pub struct TableMut<'t> {
    txn: &'t mut WriteTxn,
    name: String,
}

impl<'t> TableMut<'t> {
    pub(crate) fn new(txn: &'t mut WriteTxn, name: String) -> TableMut<'t> {
        TableMut { txn, name }
    }

    fn meta(&self) -> TableMeta {
        self.txn.table_meta(&self.name)
    }

    /// The value stored under `key`.
    ///
    /// # Errors
    /// Corruption found on the way.
    pub fn get(&self, key: &[u8]) -> Result<Option<&[u8]>> {
        self.txn.pages().get(self.meta().root, key)
    }

    /// Stores `value` under `key`, replacing any value there; returns whether one was.
    ///
    /// # Errors
    /// [`Error::KeyTooLarge`] or [`Error::ValueTooLarge`] (nothing changes), or corruption
    /// found on the way.
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        check_put(self.txn.base.page_size, key, value)?;
        let name = &self.name;
        self.txn.logged(Some(name), LogOp::Put(key, value), |txn| {
            txn.with_tree(name, |w, meta| {
                let existed = w.insert(&mut meta.root, key, value)?;
                meta.len += u64::from(!existed);
                Ok(existed)
            })
        })
    }

    /// Removes `key`; returns whether it was there.
    ///
    /// # Errors
    /// Corruption found on the way.
    pub fn remove(&mut self, key: &[u8]) -> Result<bool> {
        let name = &self.name;
        self.txn.logged(Some(name), LogOp::Delete(key), |txn| {
            txn.with_tree(name, |w, meta| {
                let existed = w.remove(&mut meta.root, key)?;
                meta.len -= u64::from(existed);
                Ok(existed)
            })
        })
    }

    /// The entries with keys in `r`, seeing this transaction's writes.
    ///
    /// # Errors
    /// As [`Table::range`].
    pub fn range<K, R>(&self, r: R) -> Result<Range<'_>>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        range(self.txn.pages(), self.meta().root, r)
    }

    /// Every entry, in key order.
    ///
    /// # Errors
    /// As [`Table::range`].
    pub fn iter(&self) -> Result<Range<'_>> {
        range::<[u8], _>(self.txn.pages(), self.meta().root, ..)
    }

    /// The entry with the smallest key.
    ///
    /// # Errors
    /// Corruption found on the way.
    pub fn first(&self) -> Result<Option<(&[u8], &[u8])>> {
        first_or_last(self.txn.pages(), self.meta().root, true)
    }

    /// The entry with the largest key.
    ///
    /// # Errors
    /// Corruption found on the way.
    pub fn last(&self) -> Result<Option<(&[u8], &[u8])>> {
        first_or_last(self.txn.pages(), self.meta().root, false)
    }

    /// The number of entries.
    pub fn len(&self) -> u64 {
        self.meta().len
    }

    /// Whether the table has no entries.
    pub fn is_empty(&self) -> bool {
        self.meta().len == 0
    }
}

/// Checks the limits a put must meet in a database of `page_size` pages.
///
/// # Errors
/// [`Error::KeyTooLarge`] or [`Error::ValueTooLarge`].
pub(crate) fn check_put(page_size: usize, key: &[u8], value: &[u8]) -> Result<()> {
    let max = crate::format::max_key_len(page_size);
    if key.len() > max {
        return Err(Error::KeyTooLarge {
            len: key.len(),
            max,
        });
    }
    if value.len() > MAX_VALUE_LEN {
        return Err(Error::ValueTooLarge {
            len: value.len(),
            max: MAX_VALUE_LEN,
        });
    }
    Ok(())
}
