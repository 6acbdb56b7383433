//! A catalog entry: the value stored under a table's name in the catalog tree.
//! Layout: docs/design.md#catalog.

use super::{ChildRef, get_u64, put_u64};

const ROOT: usize = 0;
const LEN: usize = ROOT + 12;
/// Bytes of an encoded entry.
pub(crate) const TABLE_META_LEN: usize = LEN + 8;

/// Where a table's tree is and how many entries it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct TableMeta {
    /// The root of the table's tree; `None` for an empty table.
    pub root: Option<ChildRef>,
    pub len: u64,
}

impl TableMeta {
    pub fn encode(&self) -> [u8; TABLE_META_LEN] {
        let mut b = [0u8; TABLE_META_LEN];
        self.root.unwrap_or_default().encode(&mut b, ROOT);
        put_u64(&mut b, LEN, self.len);
        b
    }

    pub fn decode(b: &[u8]) -> Option<TableMeta> {
        if b.len() != TABLE_META_LEN {
            return None;
        }
        let root = ChildRef::decode(b, ROOT)?;
        Some(TableMeta {
            root: (root.page != 0).then_some(root),
            len: get_u64(b, LEN)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for m in [
            TableMeta::default(),
            TableMeta {
                root: Some(ChildRef { page: 9, crc: 4 }),
                len: 1 << 40,
            },
        ] {
            assert_eq!(TableMeta::decode(&m.encode()), Some(m));
        }
        assert_eq!(TableMeta::decode(&[0; 3]), None);
    }
}
