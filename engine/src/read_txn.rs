//! Read transactions: a registered, stable snapshot.

use std::sync::Arc;

use crate::btree::{Pages, RangeIter};
use crate::db::Inner;
use crate::error::{Error, Result};
use crate::finger::Finger;
use crate::format::TableMeta;
use crate::pager::Snapshot;
use crate::table::{Table, TableInfo};

/// A read-only view of one committed state. It never blocks the writer nor is blocked by
/// it; pages it can see are not reused until it is dropped. `Send`, so it can move to
/// another thread.
#[derive(Debug)]
pub struct ReadTxn {
    inner: Arc<Inner>,
    pub(crate) snapshot: Arc<Snapshot>,
    finger: Finger,
    /// The reader slot it is registered in (`reader_slots.rs`), or `None` when it is
    /// registered under the state lock.
    pub(crate) slot: Option<usize>,
}

impl ReadTxn {
    pub(crate) fn new(inner: Arc<Inner>) -> Result<ReadTxn> {
        if let (true, Some(file)) = (inner.read_only, inner.lock_file.as_ref()) {
            let snapshot = inner.follow(file)?;
            return Ok(ReadTxn::registered(inner, snapshot, None));
        }
        let newest = || {
            let state = inner.state();
            (inner.reader_slots.count(), state.latest.clone())
        };
        if let Some((slot, snapshot)) = inner.reader_slots.enter(newest) {
            return Ok(ReadTxn::registered(inner, snapshot, Some(slot)));
        }
        // Every slot is taken.
        let snapshot = {
            let mut state = inner.state();
            let snapshot = state.latest.clone();
            state.readers.enter(snapshot.txid());
            snapshot
        };
        Ok(ReadTxn::registered(inner, snapshot, None))
    }

    fn registered(inner: Arc<Inner>, snapshot: Arc<Snapshot>, slot: Option<usize>) -> ReadTxn {
        ReadTxn {
            inner,
            snapshot,
            finger: Finger::default(),
            slot,
        }
    }

    /// The id of the commit this transaction sees.
    pub fn txid(&self) -> u64 {
        self.snapshot.txid()
    }

    fn pages(&self) -> Pages<'_> {
        Pages {
            snapshot: &self.snapshot,
            dirty: None,
        }
    }

    /// The table called `name`.
    ///
    /// # Errors
    /// [`Error::TableNotFound`], or corruption found on the way.
    pub fn open_table(&self, name: &str) -> Result<Table<'_>> {
        let cache = &self.snapshot.tables;
        let meta = match cache.get(name) {
            Some(meta) => meta,
            None => {
                let meta = catalog_get(self.pages(), self.snapshot.slot.catalog, name)?
                    .ok_or_else(|| Error::TableNotFound(name.to_owned()))?;
                cache.remember(name.into(), meta);
                meta
            }
        };
        Ok(Table::new(self.pages(), meta, &self.finger))
    }

    /// Every table with its entry count, by name.
    ///
    /// # Errors
    /// Corruption found in the catalog.
    pub fn list_tables(&self) -> Result<Vec<TableInfo>> {
        list_catalog(self.pages(), self.snapshot.slot.catalog)
    }
}

impl Drop for ReadTxn {
    fn drop(&mut self) {
        match self.slot {
            Some(slot) => self.inner.reader_slots.leave(slot),
            None => self.inner.end_read(self.snapshot.txid()),
        }
    }
}

fn catalog_root(r: crate::format::ChildRef) -> Option<crate::format::ChildRef> {
    (r.page != 0).then_some(r)
}

/// The catalog entry of table `name`.
pub(crate) fn catalog_get(
    pages: Pages<'_>,
    catalog: crate::format::ChildRef,
    name: &str,
) -> Result<Option<TableMeta>> {
    let Some(v) = pages.get(catalog_root(catalog), name.as_bytes())? else {
        return Ok(None);
    };
    TableMeta::decode(v)
        .map(Some)
        .ok_or_else(|| Error::corrupt(catalog.page, format!("bad catalog entry for {name:?}")))
}

/// Every table in the catalog.
pub(crate) fn list_catalog(
    pages: Pages<'_>,
    catalog: crate::format::ChildRef,
) -> Result<Vec<TableInfo>> {
    let mut out = Vec::new();
    let iter = RangeIter::new(
        pages,
        catalog_root(catalog),
        std::ops::Bound::Unbounded,
        std::ops::Bound::Unbounded,
    )?;
    let mut iter = iter;
    while let Some(entry) = iter.advance(true) {
        let (name, v) = entry?;
        let meta = TableMeta::decode(v)
            .ok_or_else(|| Error::corrupt(catalog.page, "bad catalog entry"))?;
        out.push(TableInfo {
            name: String::from_utf8_lossy(name).into_owned(),
            len: meta.len,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::{Database, Error};

    #[test]
    fn each_snapshot_remembers_the_tables_opened_in_it() -> Result<(), Error> {
        let db = Database::in_memory()?;
        let mut w = db.begin_write()?;
        for (name, n) in [("a", 1u8), ("b", 2)] {
            w.create_table(name)?;
            for k in 0..n {
                w.open_table(name)?.insert(&[k], name.as_bytes())?;
            }
        }
        w.commit()?;
        let r = db.begin_read()?;
        assert_eq!(r.open_table("a")?.len(), 1);
        assert_eq!(r.open_table("b")?.len(), 2, "not the remembered table");
        assert_eq!(
            db.begin_read()?.open_table("a")?.get(&[0])?,
            Some(&b"a"[..])
        );
        assert!(matches!(r.open_table("c"), Err(Error::TableNotFound(_))));
        // A commit makes a new snapshot: its readers see the table as it is now.
        let mut w = db.begin_write()?;
        w.open_table("a")?.insert(b"new", b"x")?;
        w.commit()?;
        assert_eq!(db.begin_read()?.open_table("a")?.len(), 2);
        assert_eq!(r.open_table("a")?.len(), 1, "the old snapshot is unchanged");
        Ok(())
    }
}
