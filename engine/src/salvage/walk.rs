//! The walk of one snapshot's trees for [`super::salvage`]: every page verified against
//! its parent's checksum, a page that fails skipped with the keys its parent gives it.

use std::collections::HashSet;

use super::{Lost, LostKeys, Salvaged, why};
use crate::btree::MAX_DEPTH;
use crate::error::Result;
use crate::format::{ChildRef, TableMeta, ValueRef};
use crate::pager::{Snapshot, TreePage};

/// A walk of one snapshot's trees that skips what does not verify.
pub(super) struct Walk<'s> {
    snap: &'s Snapshot,
    /// Pages walked: a page met twice (only a crafted file has one) is not walked again,
    /// so that the walk takes at most one visit a page.
    pub seen: HashSet<u64>,
    pub tables: u64,
    pub entries: u64,
    pub lost: Vec<Lost>,
    /// Tables of subtrees no walked page leads to ([`Walk::lost_and_found`]).
    pub found: u64,
    /// Subtrees no walked page leads to, handed back to the table that lost their keys
    /// ([`Walk::rejoin`]).
    pub rejoined: u64,
    /// The names of the tables handed over.
    names: HashSet<String>,
    /// The names of the tables the catalog (or a part of it) named, in the order handed.
    named: Vec<String>,
    /// Pages whose bytes are an older version of a page (the free set lists them), which
    /// a subtree no walked page leads to may still point at with checksums that hold: not
    /// walked or read ([`Walk::refuse_older`]).
    older: HashSet<u64>,
}

/// The name of a table of a subtree no walked page leads to, before its root's page number.
pub(super) const LOST_AND_FOUND: &str = "lost_and_found_";

/// Why a page in the free set is not read ([`Walk::refuse_older`]).
const OLDER: &str = "an older version of a page, in the free set: what points at it is older too";

/// The keys a subtree holds: from the first (inclusive) to the second (exclusive).
type Bounds<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

impl<'s> Walk<'s> {
    pub fn new(snap: &'s Snapshot) -> Walk<'s> {
        Walk {
            snap,
            seen: HashSet::new(),
            tables: 0,
            entries: 0,
            lost: Vec::new(),
            found: 0,
            rejoined: 0,
            names: HashSet::new(),
            named: Vec::new(),
            older: HashSet::new(),
        }
    }

    /// From here on, refuses `pages` (the free set's) where a subtree points at them: for
    /// the subtrees no walked page leads to (`orphans.rs`). A root found among the pages
    /// nothing accounts for may be an older version of a branch (a page copied over, or
    /// one a damaged reference no longer leads to), whose children verify against it but
    /// are older versions themselves, kept in free pages, with older values. A live tree
    /// never points into the free set. (Until the forty-sixth session such a table was
    /// handed over as verified: the damage test found one, a page copied over an
    /// overflow run of a file whose catalog was cut off.)
    pub fn refuse_older(&mut self, pages: impl IntoIterator<Item = u64>) {
        self.older.extend(pages);
    }

    fn lose(
        &mut self,
        each: &mut dyn FnMut(Salvaged<'_>) -> std::io::Result<()>,
        table: Option<&str>,
        page: u64,
        keys: LostKeys,
        reason: String,
    ) -> Result<()> {
        let lost = Lost {
            table: table.map(str::to_owned),
            page,
            keys,
            reason,
        };
        each(Salvaged::Lost(&lost))?;
        self.lost.push(lost);
        Ok(())
    }

    pub fn catalog(
        &mut self,
        each: &mut dyn FnMut(Salvaged<'_>) -> std::io::Result<()>,
    ) -> Result<()> {
        let root = self.snap.slot.catalog;
        if root.page == 0 {
            return Ok(());
        }
        self.tree(each, None, root, (None, None), 0)
    }

    /// The names of the tables the catalog named (or a part of it), in the order handed.
    pub fn named(&self) -> &[String] {
        &self.named
    }

    /// A part of the catalog no walked page leads to (`orphans.rs`): the tables it names,
    /// under their names, counted as found. Returns those names.
    pub fn catalog_part(
        &mut self,
        each: &mut dyn FnMut(Salvaged<'_>) -> std::io::Result<()>,
        root: ChildRef,
    ) -> Result<&[String]> {
        let (before, from) = (self.tables, self.named.len());
        self.tree(each, None, root, (None, None), 0)?;
        self.found += self.tables - before;
        Ok(&self.named[from..])
    }

    /// A subtree no walked page leads to whose keys lie in the range `bounds` that `table`
    /// lost: handed over again under that table's name, counted in `rejoined`. What fails
    /// under it is reported within those bounds.
    pub fn rejoin(
        &mut self,
        each: &mut dyn FnMut(Salvaged<'_>) -> std::io::Result<()>,
        root: ChildRef,
        table: &str,
        bounds: Bounds<'_>,
    ) -> Result<()> {
        each(Salvaged::Table(table))?;
        self.rejoined += 1;
        self.tree(each, Some(table), root, bounds, 0)
    }

    /// A subtree no walked page leads to (`orphans.rs`), as a table of its own: under the
    /// name an older catalog gives it, unless a table of that name was handed over.
    /// Returns the name it was handed over under.
    pub fn lost_and_found(
        &mut self,
        each: &mut dyn FnMut(Salvaged<'_>) -> std::io::Result<()>,
        root: ChildRef,
        name: Option<String>,
    ) -> Result<String> {
        let name = match name {
            Some(n) if self.names.insert(n.clone()) => n,
            _ => format!("{LOST_AND_FOUND}{}", root.page),
        };
        each(Salvaged::Table(&name))?;
        self.tables += 1;
        self.found += 1;
        self.tree(each, Some(&name), root, (None, None), 0)?;
        Ok(name)
    }

    /// Walks the subtree at `r`, holding the keys in `bounds`: of table `table`, or of the
    /// catalog (`None`), where each entry names a table whose tree is walked in turn.
    fn tree(
        &mut self,
        each: &mut dyn FnMut(Salvaged<'_>) -> std::io::Result<()>,
        table: Option<&str>,
        r: ChildRef,
        bounds: Bounds<'_>,
        depth: usize,
    ) -> Result<()> {
        let range = || LostKeys::Range {
            from: bounds.0.map(<[u8]>::to_vec),
            to: bounds.1.map(<[u8]>::to_vec),
        };
        if depth > MAX_DEPTH {
            return self.lose(
                each,
                table,
                r.page,
                range(),
                "tree too deep (a cycle?)".into(),
            );
        }
        if !self.seen.insert(r.page) {
            let why = "page referenced twice".into();
            return self.lose(each, table, r.page, range(), why);
        }
        if self.older.contains(&r.page) {
            return self.lose(each, table, r.page, range(), OLDER.into());
        }
        let snap = self.snap;
        let page = match snap.tree_page(r) {
            Ok(page) => page,
            Err(e) => return self.lose(each, table, r.page, range(), why(&e)),
        };
        match page {
            TreePage::Branch(b) => {
                for i in 0..=b.keys() {
                    let sep = |j: usize| b.key(j).ok();
                    let lo = if i == 0 { bounds.0 } else { sep(i - 1) };
                    let hi = if i == b.keys() { bounds.1 } else { sep(i) };
                    match b.child(i) {
                        Ok(child) => self.tree(each, table, child, (lo, hi), depth + 1)?,
                        Err(e) => {
                            let keys = LostKeys::Range {
                                from: lo.map(<[u8]>::to_vec),
                                to: hi.map(<[u8]>::to_vec),
                            };
                            self.lose(each, table, r.page, keys, why(&e))?;
                        }
                    }
                }
                Ok(())
            }
            TreePage::Leaf(l) => {
                for i in 0..l.len() {
                    let (key, value) = match l.entry(i) {
                        Ok(entry) => entry,
                        Err(e) => {
                            // The rest of the leaf, from the last key read.
                            let from = match i {
                                0 => bounds.0.map(<[u8]>::to_vec),
                                _ => l.key(i - 1).ok().map(|k| {
                                    let mut after = k.to_vec();
                                    after.push(0);
                                    after
                                }),
                            };
                            let to = bounds.1.map(<[u8]>::to_vec);
                            let keys = LostKeys::Range { from, to };
                            return self.lose(each, table, r.page, keys, why(&e));
                        }
                    };
                    match table {
                        Some(_) => self.entry(each, table, key, value)?,
                        None => self.table(each, r.page, key, value)?,
                    }
                }
                Ok(())
            }
        }
    }

    /// An entry of table `table`, its value read from its overflow run if need be.
    fn entry(
        &mut self,
        each: &mut dyn FnMut(Salvaged<'_>) -> std::io::Result<()>,
        table: Option<&str>,
        key: &[u8],
        value: ValueRef<'_>,
    ) -> Result<()> {
        let snap = self.snap;
        let value = match value {
            ValueRef::Inline(v) => v,
            ValueRef::Overflow(o) if self.older.contains(&o.page) => {
                let keys = LostKeys::Value(key.to_vec());
                return self.lose(each, table, o.page, keys, OLDER.into());
            }
            ValueRef::Overflow(o) => match snap.overflow_checked(o) {
                Ok(v) => v,
                Err(e) => {
                    let keys = LostKeys::Value(key.to_vec());
                    return self.lose(each, table, o.page, keys, why(&e));
                }
            },
        };
        each(Salvaged::Entry(key, value))?;
        self.entries += 1;
        Ok(())
    }

    /// The catalog entry of table `name` (in leaf `page`): the table and its tree.
    fn table(
        &mut self,
        each: &mut dyn FnMut(Salvaged<'_>) -> std::io::Result<()>,
        page: u64,
        name: &[u8],
        value: ValueRef<'_>,
    ) -> Result<()> {
        let name = String::from_utf8_lossy(name).into_owned();
        let meta = match value {
            ValueRef::Inline(v) => TableMeta::decode(v),
            ValueRef::Overflow(_) => None,
        };
        let Some(meta) = meta else {
            let keys = LostKeys::Range {
                from: None,
                to: None,
            };
            return self.lose(each, Some(&name), page, keys, "bad catalog entry".into());
        };
        each(Salvaged::Table(&name))?;
        self.tables += 1;
        self.names.insert(name.clone());
        self.named.push(name.clone());
        match meta.root {
            Some(root) => self.tree(each, Some(&name), root, (None, None), 0),
            None => Ok(()),
        }
    }
}
