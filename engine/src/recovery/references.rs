//! What a tree page points at, as recovery's walks of the trees follow it.

use crate::error::{Error, Result};
use crate::format::{ChildRef, OverflowRef, TableMeta, ValueRef};
use crate::pager::TreePage;

/// One pointer a tree page holds.
#[derive(Debug, Clone, Copy)]
pub(super) enum Reference {
    /// A branch's child, in the branch's tree.
    Child(ChildRef),
    /// A table's root, from a catalog leaf's entry.
    Table(ChildRef),
    /// The overflow run of a table leaf's value.
    Overflow(OverflowRef),
}

/// Hands `f` each pointer of tree page `page`, stored at page `id`, in order; `catalog`:
/// the page is the catalog's. A catalog entry that does not decode, and a value of the
/// catalog in an overflow run, are corruption.
pub(super) fn references(
    page: TreePage<'_>,
    id: u64,
    catalog: bool,
    f: &mut dyn FnMut(Reference) -> Result<()>,
) -> Result<()> {
    match page {
        TreePage::Branch(b) => {
            for i in 0..=b.keys() {
                f(Reference::Child(b.child(i)?))?;
            }
        }
        TreePage::Leaf(l) => {
            for i in 0..l.len() {
                match l.entry(i)? {
                    (name, ValueRef::Inline(v)) if catalog => {
                        let meta = TableMeta::decode(v).ok_or_else(|| {
                            Error::corrupt(id, format!("bad catalog entry for {name:?}"))
                        })?;
                        if let Some(root) = meta.root {
                            f(Reference::Table(root))?;
                        }
                    }
                    (_, ValueRef::Inline(_)) => {}
                    (_, ValueRef::Overflow(o)) if !catalog => f(Reference::Overflow(o))?,
                    (_, ValueRef::Overflow(_)) => {
                        return Err(Error::corrupt(id, "overflow value in the catalog"));
                    }
                }
            }
        }
    }
    Ok(())
}
