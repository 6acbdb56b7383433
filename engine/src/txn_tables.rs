//! The tables a write transaction has opened, created or changed, each with its state
//! under a number that stays its own for the transaction's life: a [`crate::TableMut`]
//! holds the number, so that opening a table costs one lookup by name and its reads and
//! changes none.

use rustc_hash::FxHashMap;

use crate::btree::Tail;
use crate::format::TableMeta;

/// A table's state as loaded from the catalog and as this transaction has changed it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TableState {
    pub loaded: Option<TableMeta>,
    pub current: TableMeta,
    /// The tree's last leaf, while inserts alone change the tree.
    pub tail: Option<Tail>,
}

/// A table's number in its transaction's [`TxnTables`].
pub(crate) type TableId = usize;

/// The transaction's tables by number, with the numbers by name. A dropped table's number
/// is not given again: a table created under its name gets a new one.
#[derive(Debug, Default, Clone)]
pub(crate) struct TxnTables {
    slots: Vec<Option<(Box<str>, TableState)>>,
    ids: FxHashMap<Box<str>, TableId>,
}

impl TxnTables {
    /// The number of table `name`, if the transaction has it.
    pub fn id(&self, name: &str) -> Option<TableId> {
        self.ids.get(name).copied()
    }

    /// Adds table `name` (replacing one of that name) and returns its number.
    pub fn insert(&mut self, name: &str, state: TableState) -> TableId {
        self.remove(name);
        let id = self.slots.len();
        self.slots.push(Some((name.into(), state)));
        self.ids.insert(name.into(), id);
        id
    }

    /// Forgets table `name` (dropped).
    pub fn remove(&mut self, name: &str) {
        if let Some(id) = self.ids.remove(name) {
            self.slots[id] = None;
        }
    }

    pub fn get(&self, id: TableId) -> Option<&TableState> {
        self.slots.get(id)?.as_ref().map(|(_, state)| state)
    }

    pub fn get_mut(&mut self, id: TableId) -> Option<&mut TableState> {
        self.slots.get_mut(id)?.as_mut().map(|(_, state)| state)
    }

    /// The name of table `id`.
    pub fn name(&self, id: TableId) -> Option<&str> {
        self.slots.get(id)?.as_ref().map(|(name, _)| &**name)
    }

    pub fn by_name(&self, name: &str) -> Option<&TableState> {
        self.get(self.id(name)?)
    }

    /// Every table the transaction has, with its name, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &TableState)> {
        self.slots.iter().flatten().map(|(name, s)| (&**name, s))
    }
}

#[cfg(test)]
mod tests {
    use super::{TableState, TxnTables};
    use crate::format::TableMeta;

    fn state(len: u64) -> TableState {
        TableState {
            loaded: None,
            current: TableMeta {
                len,
                ..TableMeta::default()
            },
            tail: None,
        }
    }

    /// A number names one table for good: dropping it and creating one of the same name
    /// gives the new table a new number, and the old number finds nothing.
    #[test]
    fn a_dropped_tables_number_is_not_given_again() {
        let mut t = TxnTables::default();
        let a = t.insert("a", state(1));
        let b = t.insert("b", state(2));
        assert_eq!((t.id("a"), t.id("b")), (Some(a), Some(b)));
        assert_eq!(t.name(b), Some("b"));
        t.remove("a");
        assert!(t.get(a).is_none() && t.id("a").is_none());
        let a2 = t.insert("a", state(3));
        assert_ne!(a, a2);
        assert_eq!(t.by_name("a").map(|s| s.current.len), Some(3));
        let replaced = t.insert("a", state(4));
        assert!(t.get(a2).is_none());
        assert_eq!(t.get(replaced).map(|s| s.current.len), Some(4));
        let mut names: Vec<&str> = t.iter().map(|(name, _)| name).collect();
        names.sort_unstable();
        assert_eq!(names, ["a", "b"]);
    }
}
