//! The catalog entries of the tables that read transactions opened in one snapshot, so
//! that the read transactions that each open a table (one per operation, often) skip the
//! catalog's tree. Lock-free: readers on many threads share it.

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
    pub fn remember(&self, name: &str, meta: TableMeta) {
        for slot in &self.slots {
            match slot.get() {
                Some((n, _)) if **n == *name => return,
                Some(_) => {}
                // (A slot another thread fills meanwhile refuses this one: try the next.)
                None if slot.set((name.into(), meta)).is_ok() => return,
                None => {}
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
            cache.remember(&format!("t{i}"), meta(i));
            cache.remember("t0", meta(99));
        }
        for i in 0..SLOTS as u64 {
            assert_eq!(cache.get(&format!("t{i}")).map(|m| m.len), Some(i));
        }
        assert_eq!(cache.get(&format!("t{SLOTS}")), None);
        assert_eq!(cache.get("other"), None);
    }
}
