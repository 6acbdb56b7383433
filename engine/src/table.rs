//! Tables: handles to one named tree, for reading ([`Table`]) and writing ([`TableMut`]).

use std::ops::{Bound, RangeBounds};

use crate::btree::{Pages, RangeIter};
use crate::error::{Error, Result};
use crate::finger::Finger;
use crate::format::LogOp;
use crate::format::{ChildRef, MAX_VALUE_LEN, TableMeta, compare, prefix_end};
use crate::txn_tables::TableId;
use crate::write_txn::WriteTxn;

/// A table's name and entry count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableInfo {
    /// The table's name.
    pub name: String,
    /// How many entries it holds.
    pub len: u64,
}

/// A table in a read transaction. Values are borrowed from the snapshot for as long as
/// the transaction lives: reading copies nothing.
#[derive(Debug, Clone, Copy)]
pub struct Table<'t> {
    pages: Pages<'t>,
    meta: TableMeta,
    /// The transaction's finger: the leaf its last get ended in (see [`Finger`]).
    finger: &'t Finger,
}

fn bounds<K: AsRef<[u8]> + ?Sized>(b: Bound<&K>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_ref()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// The entries of the tree under `root` whose keys start with `prefix`.
fn prefixed<'a>(pages: Pages<'a>, root: Option<ChildRef>, prefix: &[u8]) -> Result<Range<'a>> {
    let end = prefix_end(prefix);
    let hi = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    range::<[u8], _>(pages, root, (Bound::Included(prefix), hi))
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
    pub(crate) fn new(pages: Pages<'t>, meta: TableMeta, finger: &'t Finger) -> Table<'t> {
        Table {
            pages,
            meta,
            finger,
        }
    }

    /// The value stored under `key`, borrowed from the snapshot.
    ///
    /// # Errors
    /// Corruption found on the way.
    pub fn get(&self, key: &[u8]) -> Result<Option<&'t [u8]>> {
        match self.meta.root {
            Some(root) => self.finger.get(self.pages, root, key),
            None => Ok(None),
        }
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

    /// The entries whose keys start with `prefix`, in key order (reversible, as a range).
    ///
    /// # Errors
    /// As [`Table::range`].
    pub fn prefix(&self, prefix: &[u8]) -> Result<Range<'t>> {
        prefixed(self.pages, self.meta.root, prefix)
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

/// How many entries [`TableMut::retain`] judges before it removes those it does not
/// keep: its memory is this many keys at most.
const RETAIN_CHUNK: usize = 1024;

/// A table in a write transaction. Reads see the transaction's own writes.
#[derive(Debug)]
pub struct TableMut<'t> {
    txn: &'t mut WriteTxn,
    id: TableId,
}

impl<'t> TableMut<'t> {
    pub(crate) fn new(txn: &'t mut WriteTxn, id: TableId) -> TableMut<'t> {
        TableMut { txn, id }
    }

    fn meta(&self) -> TableMeta {
        self.txn.table_meta(self.id)
    }

    /// The value stored under `key`.
    ///
    /// # Errors
    /// Corruption found on the way.
    pub fn get(&self, key: &[u8]) -> Result<Option<&[u8]>> {
        self.txn.readable()?.get(self.meta().root, key)
    }

    /// Stores `value` under `key`, replacing any value there; returns whether one was.
    ///
    /// # Errors
    /// [`Error::KeyTooLarge`] or [`Error::ValueTooLarge`] (nothing changes), or corruption
    /// found on the way.
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        check_put(self.txn.base.page_size, key, value)?;
        let id = self.id;
        self.txn.logged(Some(id), LogOp::Put(key, value), |txn| {
            txn.insert_into(id, key, value)
        })
    }

    /// Removes `key`; returns whether it was there.
    ///
    /// # Errors
    /// Corruption found on the way.
    pub fn remove(&mut self, key: &[u8]) -> Result<bool> {
        let id = self.id;
        self.txn.logged(Some(id), LogOp::Delete(key), |txn| {
            txn.with_tree(id, |w, meta| {
                let existed = w.remove(&mut meta.root, key)?;
                meta.len -= u64::from(existed);
                Ok(existed)
            })
        })
    }

    /// Removes every entry with a key in `r`; returns how many there were. The entries
    /// go a leaf at a time.
    ///
    /// The commit's log record names every removed key: a durable commit that removes
    /// many (over about 128 KiB of keys) syncs the file instead of logging.
    ///
    /// # Errors
    /// Corruption found on the way, after which the transaction can only roll back: every
    /// later read or change in it, and its `commit`, returns the damage.
    pub fn remove_range<K, R>(&mut self, r: R) -> Result<u64>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        let end = bounds(r.end_bound());
        let within = |k: &[u8]| match end {
            Bound::Included(e) => compare(k, e).is_le(),
            Bound::Excluded(e) => compare(k, e).is_lt(),
            Bound::Unbounded => true,
        };
        let mut start = bounds(r.start_bound()).map(<[u8]>::to_vec);
        let mut first = Vec::new();
        let mut removed = 0;
        loop {
            {
                let lo = start.as_ref().map(Vec::as_slice);
                let mut entries = self.range::<[u8], _>((lo, end))?;
                let Some(entry) = entries.next() else { break };
                first.clear();
                first.extend_from_slice(entry?.0);
            }
            let id = self.id;
            let (n, last) = self.txn.logged_removals(id, |txn, keys, ends| {
                let n = txn.with_tree(id, |w, meta| {
                    let n = w.remove_run(&mut meta.root, &first, &within, &mut |k| {
                        keys.extend_from_slice(k);
                        ends.push(keys.len());
                    })?;
                    meta.len -= n as u64;
                    Ok(n as u64)
                })?;
                let from = ends.len().checked_sub(2).map_or(0, |i| ends[i]);
                Ok((n, keys[from..].to_vec()))
            })?;
            if n == 0 {
                // The range found `first`, so its leaf holds it: the tree is not sound.
                return Err(Error::corrupt(
                    0,
                    "internal: a key found in a range was not removed",
                ));
            }
            removed += n;
            // The next run starts after the last key removed.
            start = Bound::Excluded(last);
        }
        Ok(removed)
    }

    /// Keeps the entries for which `keep(key, value)` is true and removes the others;
    /// returns how many it removed. As `BTreeMap::retain`, in the memory of 1,024 keys
    /// whatever the table's size: it judges that many entries, then removes those it
    /// does not keep (each removal in the commit log's record, as [`TableMut::remove`]'s).
    ///
    /// # Errors
    /// As [`TableMut::remove_range`]; the entries removed before the error stay removed
    /// in the transaction.
    pub fn retain(&mut self, keep: impl FnMut(&[u8], &[u8]) -> bool) -> Result<u64> {
        self.retain_in::<[u8], _>(.., keep)
    }

    /// [`TableMut::retain`] over the keys in `r`: entries outside it stay.
    ///
    /// # Errors
    /// As [`TableMut::retain`].
    pub fn retain_in<K, R>(
        &mut self,
        r: R,
        mut keep: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<u64>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        let end = bounds(r.end_bound()).map(<[u8]>::to_vec);
        let mut start = bounds(r.start_bound()).map(<[u8]>::to_vec);
        // The keys to remove, end to end, and where each ends.
        let (mut doomed, mut ends) = (Vec::new(), Vec::new());
        let mut removed = 0;
        loop {
            // A chunk of entries is judged, then its doomed keys go, then the next chunk
            // starts after its last key.
            let mut next = None;
            {
                let lo = start.as_ref().map(Vec::as_slice);
                let hi = end.as_ref().map(Vec::as_slice);
                for (seen, entry) in (1..).zip(self.range::<[u8], _>((lo, hi))?) {
                    let (k, v) = entry?;
                    if !keep(k, v) {
                        doomed.extend_from_slice(k);
                        ends.push(doomed.len());
                    }
                    if seen == RETAIN_CHUNK {
                        next = Some(k.to_vec());
                        break;
                    }
                }
            }
            let mut from = 0;
            for &to in &ends {
                if !self.remove(&doomed[from..to])? {
                    return Err(Error::corrupt(
                        0,
                        "internal: a key found in a range was not removed",
                    ));
                }
                removed += 1;
                from = to;
            }
            doomed.clear();
            ends.clear();
            match next {
                Some(last) => start = Bound::Excluded(last),
                None => return Ok(removed),
            }
        }
    }

    /// Removes the entry with the smallest key and returns it.
    ///
    /// # Errors
    /// Corruption found on the way.
    pub fn pop_first(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.pop(true)
    }

    /// Removes the entry with the largest key and returns it.
    ///
    /// # Errors
    /// Corruption found on the way.
    pub fn pop_last(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.pop(false)
    }

    fn pop(&mut self, first: bool) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let entry = if first { self.first()? } else { self.last()? };
        let Some((key, value)) = entry.map(|(k, v)| (k.to_vec(), v.to_vec())) else {
            return Ok(None);
        };
        self.remove(&key)?;
        Ok(Some((key, value)))
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
        range(self.txn.readable()?, self.meta().root, r)
    }

    /// The entries whose keys start with `prefix`, seeing this transaction's writes.
    ///
    /// # Errors
    /// As [`Table::range`].
    pub fn prefix(&self, prefix: &[u8]) -> Result<Range<'_>> {
        prefixed(self.txn.readable()?, self.meta().root, prefix)
    }

    /// Removes every entry whose key starts with `prefix`; returns how many there were.
    ///
    /// # Errors
    /// As [`TableMut::remove_range`].
    pub fn remove_prefix(&mut self, prefix: &[u8]) -> Result<u64> {
        let end = prefix_end(prefix);
        let hi = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        self.remove_range::<[u8], _>((Bound::Included(prefix), hi))
    }

    /// Every entry, in key order.
    ///
    /// # Errors
    /// As [`Table::range`].
    pub fn iter(&self) -> Result<Range<'_>> {
        range::<[u8], _>(self.txn.readable()?, self.meta().root, ..)
    }

    /// The entry with the smallest key.
    ///
    /// # Errors
    /// Corruption found on the way.
    pub fn first(&self) -> Result<Option<(&[u8], &[u8])>> {
        first_or_last(self.txn.readable()?, self.meta().root, true)
    }

    /// The entry with the largest key.
    ///
    /// # Errors
    /// Corruption found on the way.
    pub fn last(&self) -> Result<Option<(&[u8], &[u8])>> {
        first_or_last(self.txn.readable()?, self.meta().root, false)
    }

    /// The number of entries (after a removal that met damage, possibly off by the entry
    /// it was removing: the transaction can only roll back then).
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
