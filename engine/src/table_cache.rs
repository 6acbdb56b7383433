//! The catalog entries of the tables opened in one snapshot, so that the read
//! transactions that each open a table (one per operation, often) skip the catalog's
//! tree. Lock-free: readers on many threads share it. The commit that made the snapshot
//! fills it first with the entries it wrote; a write transaction whose catalog is still
//! its snapshot's takes its tables from it too (`WriteTxn::load`).

use std::sync::OnceLock;

use crate::format::TableMeta;

/// How many tables a snapshot remembers; those opened later are looked up each time.
const SLOTS: usize = 8;

/// The first [`SLOTS`] tables opened in a snapshot, by name. The slots fill in order (a
/// slot is taken only once those before it are), so a lookup ends at the first empty one.
#[derive(Debug, Clone, Default)]
pub(crate) struct TableCache {
    slots: [OnceLock<(Box<str>, TableMeta)>; SLOTS],
}

impl TableCache {
    /// The catalog entry of table `name`, if remembered.
    pub fn get(&self, name: &str) -> Option<TableMeta> {
        for slot in &self.slots {
            match slot.get() {
                Some((n, meta)) if **n == *name => return Some(*meta),
                Some(_) => {}
                None => return None,
            }
        }
        None
    }

    /// Remembers table `name`'s entry, in the first free slot (two threads remembering
    /// one table at once may take two).
    pub fn remember(&self, name: Box<str>, meta: TableMeta) {
        let mut entry = (name, meta);
        for slot in &self.slots {
            match slot.get() {
                Some((n, _)) if *n == entry.0 => return,
                Some(_) => {}
                // (A slot another thread fills meanwhile refuses this one: try the next.)
                None => match slot.set(entry) {
                    Ok(()) => return,
                    Err(back) => entry = back,
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{SLOTS, TableCache};
    use crate::format::TableMeta;

    fn meta(len: u64) -> TableMeta {
        TableMeta {
            len,
            ..TableMeta::default()
        }
    }

    /// The first tables opened are remembered, each once; past the slots, none are.
    #[test]
    fn remembers_the_first_tables_each_once() {
        let cache = TableCache::default();
        assert_eq!(cache.get("t0"), None);
        for i in 0..SLOTS as u64 + 2 {
            cache.remember(format!("t{i}").into(), meta(i));
            cache.remember("t0".into(), meta(99));
        }
        for i in 0..SLOTS as u64 {
            assert_eq!(cache.get(&format!("t{i}")).map(|m| m.len), Some(i));
        }
        assert_eq!(cache.get(&format!("t{SLOTS}")), None);
        assert_eq!(cache.get("other"), None);
    }

    /// A commit's snapshot knows the catalog entries the commit wrote, as the catalog
    /// holds them; a write transaction that changed its catalog does not take them.
    #[test]
    fn a_commit_leaves_the_entries_it_wrote_known_to_its_snapshot() -> crate::Result<()> {
        let db = crate::Database::in_memory()?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.create_table("u")?;
        w.commit()?;
        let mut w = db.begin_write()?;
        for k in 0u32..500 {
            w.open_table("t")?.insert(&k.to_be_bytes(), &[1; 50])?;
        }
        w.commit()?;
        let latest = db.inner.state().latest.clone();
        let pages = crate::btree::Pages {
            snapshot: &latest,
            dirty: None,
        };
        let stored = crate::read_txn::catalog_get(pages, latest.slot.catalog, "t")?;
        assert_eq!(stored.map(|m| m.len), Some(500));
        assert_eq!(latest.tables.get("t"), stored);
        // A table the commit left alone is not known until someone looks it up.
        assert_eq!(latest.tables.get("u"), None);
        // A transaction that dropped the table does not find it through the snapshot.
        let mut w = db.begin_write()?;
        w.drop_table("t")?;
        assert!(!w.table_exists("t")?);
        w.rollback();
        // One that did not writes through the known entry, onto the table's tree.
        let mut w = db.begin_write()?;
        w.open_table("t")?.insert(b"x", b"y")?;
        w.commit()?;
        let r = db.begin_read()?;
        assert_eq!(r.open_table("t")?.len(), 501);
        assert_eq!(
            r.open_table("t")?.get(&7u32.to_be_bytes())?,
            Some(&[1u8; 50][..])
        );
        Ok(())
    }
}
