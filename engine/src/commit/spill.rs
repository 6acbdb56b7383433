//! Bounding a write transaction's memory: a transaction that holds more changed tree
//! nodes than its budget ([`crate::Builder::txn_memory`]) writes some of them to their
//! pages before it commits, as its commit would (placed in few runs, each encoded with
//! its children's checksums), and its trees then point at them with their checksums,
//! like committed pages. Every snapshot sees those pages as free, so no reader meets them
//! and a crash leaves them free; the commit's sync covers them with its other pages, and
//! recovery verifies them like those (docs/design.md#spilling).
//!
//! Leaves go first, in key order, until the transaction holds three quarters of its
//! budget; never a table's tail (the leaf sequential inserts append to). When the
//! branches left still fill those three quarters, every branch whose children are all
//! written goes too. A spilled node the transaction changes again is read back
//! and its page freed, reusable at once (`btree/writer.rs`); one it only reads is read
//! back once and kept until a later spill drops the copies. A spill that fails part-way
//! leaves trees that point at pages it did not write: the transaction can then only roll
//! back ([`WriteTxn::undamaged`]).

use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::OnceLock;
use std::sync::atomic::Ordering::Relaxed;

use super::encode::{finalize, place_ids};
use super::page_writes::{pages_per_write, write_pages};
use crate::btree::{MAX_DEPTH, Node};
use crate::error::{Error, Result};
use crate::write_txn::WriteTxn;

/// The fewest changed nodes a transaction may hold, whatever its budget.
pub(crate) const MIN_BUDGET_PAGES: usize = 16;

/// The nodes a spill writes: each subtree whose nodes it writes whole, named by its parent
/// (which stays in memory) and the child's index there; and every node of those subtrees,
/// with whether it is a branch.
#[derive(Debug, Default)]
struct Plan {
    tops: Vec<(u64, usize)>,
    ids: Vec<(bool, u64)>,
    /// How many leaves the spill takes, at most.
    quota: usize,
}

impl Plan {
    /// Plans the owned node `id` and the owned nodes under it; returns whether `id`
    /// can be written whole (it is not a root, not kept, and, for a branch, `branches`
    /// are written and every owned child can be).
    fn visit(
        &mut self,
        nodes: &FxHashMap<u64, Node>,
        id: u64,
        root: bool,
        keep: &FxHashSet<u64>,
        branches: bool,
        depth: usize,
    ) -> Result<bool> {
        if depth > MAX_DEPTH {
            return Err(Error::corrupt(id, "tree too deep (a cycle?)"));
        }
        if self.quota == 0 && !branches {
            // Nothing under `id` can be taken: the walk ends here.
            return Ok(false);
        }
        let Some(node) = nodes.get(&id) else {
            return Err(Error::corrupt(
                id,
                "internal: an owned child is not held by the transaction",
            ));
        };
        let b = match node {
            Node::Leaf(_) => {
                let whole = !root && !keep.contains(&id) && self.quota > 0;
                if whole {
                    self.ids.push((false, id));
                    self.quota -= 1;
                }
                return Ok(whole);
            }
            Node::Branch(b) => b,
        };
        let tops = self.tops.len();
        let mut all = true;
        for i in 0..b.children() {
            let child = b.child(i);
            // Only owned children have checksum 0 (see `ChildRef`).
            if child.crc != 0 {
                continue;
            }
            if self.visit(nodes, child.page, false, keep, branches, depth + 1)? {
                self.tops.push((id, i));
            } else {
                all = false;
            }
        }
        if all && branches && !root {
            // The parent names this subtree instead of its children.
            self.tops.truncate(tops);
            self.ids.push((true, id));
            return Ok(true);
        }
        Ok(false)
    }
}

impl WriteTxn {
    /// Spills nodes when the transaction holds more than its budget; marks the
    /// transaction damaged if a spill fails.
    ///
    /// # Errors
    /// An I/O error writing the pages (or growing the file), or an internal inconsistency
    /// of the trees.
    pub(crate) fn bound_memory(&mut self) -> Result<()> {
        let budget = self.inner.txn_budget_pages;
        if self.dirty.nodes.len() <= budget || self.dirty.storage.is_none() {
            return Ok(());
        }
        // Down to three quarters of the budget, not every leaf at once: a transaction of
        // random changes over more leaves than its budget then keeps more of them, and
        // reads back and writes again fewer. (A 6,000,000-row `.import` in random order
        // under the default budget: 15.0–16.4 s, 15.7 s when every leaf went at once,
        // 11.7–12.1 s before spilling, in 589 MiB of memory instead of 717.)
        let target = budget - budget / 4;
        let mut spilled = self.spill(self.dirty.nodes.len() - target, false);
        if spilled.is_ok() && self.dirty.nodes.len() > target {
            spilled = self.spill(usize::MAX, true);
        }
        if let Err(e) = &spilled {
            self.damaged = Some(e.duplicate());
        }
        // Copies of spilled pages the transaction read are dropped once there are as
        // many as the budget (looking at every spilled page, so not at each spill).
        if *self.dirty.read_back.get_mut() > budget {
            for copy in self.dirty.spilled.values_mut() {
                copy.take();
            }
            self.dirty.read_back.store(0, Relaxed);
        }
        spilled
    }

    /// Writes owned nodes that can be written whole: up to `quota` leaves other than
    /// tails, and with `branches`, branches whose owned children all are.
    fn spill(&mut self, quota: usize, branches: bool) -> Result<()> {
        self.dirty.flush_gathered()?;
        let keep: FxHashSet<u64> = self
            .tables
            .iter()
            .filter_map(|(_, t)| t.tail.map(|tail| tail.leaf()))
            .collect();
        let mut plan = Plan {
            quota,
            ..Plan::default()
        };
        for (_, table) in self.tables.iter() {
            if let Some(root) = table.current.root.filter(|r| r.crc == 0) {
                plan.visit(&self.dirty.nodes, root.page, true, &keep, branches, 0)?;
            }
        }
        if plan.ids.is_empty() {
            return Ok(());
        }
        // Under a savepoint, the nodes this spill writes and the parents it points at them
        // from are noted as they are.
        for &(_, id) in &plan.ids {
            self.dirty.note_node(id);
        }
        for &(parent, _) in &plan.tops {
            self.dirty.note_node(parent);
        }
        let (txid, page_size) = (self.txid, self.base.page_size);
        let p = page_size as u64;
        // Compaction puts each node where it wants it and changes its trees without going
        // through `logged`, so it never spills; should it, its pages must stay put.
        let placed = if self.compacting {
            FxHashMap::default()
        } else {
            place_ids(
                std::mem::take(&mut plan.ids),
                &mut self.freelist,
                txid,
                None,
            )
            .0
        };
        let mut out = Vec::new();
        for &(parent, i) in &plan.tops {
            let nodes = &mut self.dirty.nodes;
            let child = match nodes.get(&parent) {
                Some(Node::Branch(b)) => b.child(i),
                _ => return Err(Error::corrupt(parent, "internal: a spill lost a branch")),
            };
            let done = finalize(nodes, &placed, child, txid, page_size, &mut out)?;
            if let Some(Node::Branch(b)) = nodes.get_mut(&parent) {
                b.set_child(i, done);
            }
        }
        out.sort_unstable_by_key(|(id, _)| *id);
        let storage = self
            .dirty
            .storage
            .clone()
            .ok_or_else(|| Error::corrupt(0, "internal: a spill without storage"))?;
        let end = out.last().map_or(0, |(id, _)| id + 1);
        super::grow(storage.as_ref(), end * p, p, self.dirty.log_bytes)?;
        let per_write = pages_per_write(&out, page_size);
        let write_back = self.dirty.write_back.on;
        write_pages(
            storage.as_ref(),
            &out,
            page_size,
            per_write,
            &self.base.verified,
            write_back,
        )?;
        for &(id, _) in &out {
            self.dirty.note_spilled(id);
        }
        self.dirty
            .spilled
            .extend(out.iter().map(|&(id, _)| (id, OnceLock::new())));
        self.inner
            .pages_spilled
            .fetch_add(out.len() as u64, Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    use crate::{Database, Error, WriteTxn};

    /// A budget of 16 pages of 1 KiB.
    fn small() -> Result<Database, Error> {
        Database::builder()
            .page_size(1024)
            .txn_memory(16 << 10)
            .in_memory()
    }

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    /// Checks that `w` holds `model`, commits it, checks the file, and reads it back.
    fn commits_as_modelled(
        db: &Database,
        mut w: WriteTxn,
        model: BTreeMap<Vec<u8>, Vec<u8>>,
    ) -> Result<(), Error> {
        let expected: Vec<_> = model.into_iter().collect();
        assert_eq!(contents(&mut w)?, expected);
        w.commit()?;
        let report = db.check()?;
        assert!(report.is_ok(), "{:?}", report.problems);
        let mut w = db.begin_write()?;
        assert_eq!(contents(&mut w)?, expected);
        Ok(())
    }

    fn contents(w: &mut WriteTxn) -> Result<Entries, Error> {
        w.open_table("t")?
            .iter()?
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect()
    }

    #[test]
    fn random_changes_in_one_transaction_stay_within_the_budget() -> Result<(), Error> {
        let db = small()?;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(34);
        let mut model = BTreeMap::new();
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        let mut most = 0;
        for i in 0..30_000u32 {
            let key = rng.random_range(0..6_000u32).to_be_bytes().to_vec();
            let mut t = w.open_table("t")?;
            if rng.random_ratio(1, 5) {
                assert_eq!(t.remove(&key)?, model.remove(&key).is_some(), "op {i}");
            } else {
                let value = vec![i as u8; rng.random_range(1..200)];
                t.insert(&key, &value)?;
                model.insert(key.clone(), value);
            }
            // Reads see spilled pages as the transaction left them.
            let t = w.open_table("t")?;
            assert_eq!(t.get(&key)?, model.get(&key).map(Vec::as_slice), "op {i}");
            most = most.max(w.dirty.nodes.len());
        }
        // Spills happened, and kept the nodes held near the budget (the budget, plus
        // what one change adds).
        assert!(!w.dirty.spilled.is_empty());
        assert!(most <= 16 + 8, "held {most} nodes");
        commits_as_modelled(&db, w, model)
    }

    #[test]
    fn a_rolled_back_transaction_leaves_its_spilled_pages_free() -> Result<(), Error> {
        let db = small()?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        for i in 0..500u32 {
            w.open_table("t")?.insert(&i.to_be_bytes(), &[1; 50])?;
        }
        w.commit()?;
        let before = db.begin_read()?.open_table("t")?.len();
        let mut w = db.begin_write()?;
        for i in (0..20_000u32).rev() {
            w.open_table("t")?.insert(&i.to_be_bytes(), &[2; 50])?;
        }
        assert!(!w.dirty.spilled.is_empty());
        w.rollback();
        let r = db.begin_read()?;
        let t = r.open_table("t")?;
        assert_eq!(t.len(), before);
        assert!(t.iter()?.all(|e| e.is_ok_and(|(_, v)| v == [1; 50])));
        let report = db.check()?;
        assert!(report.is_ok(), "{:?}", report.problems);
        // The pages are free again: the same load committed leaves a healthy file.
        let mut w = db.begin_write()?;
        for i in 0..20_000u32 {
            w.open_table("t")?.insert(&i.to_be_bytes(), &[3; 50])?;
        }
        w.commit()?;
        let report = db.check()?;
        assert!(report.is_ok(), "{:?}", report.problems);
        assert_eq!(report.entries, 20_000);
        Ok(())
    }

    /// A spill writes the overflow runs still gathered before its pages: a value gathered
    /// and then removed leaves its pages free, a spill takes them for nodes, and the value's
    /// bytes written after the spill (at the commit) would land over those nodes.
    #[test]
    fn a_spill_writes_the_gathered_runs_before_its_pages() -> Result<(), Error> {
        let db = small()?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        let mut model = BTreeMap::new();
        for round in 0..20u32 {
            // Three pages of value, gathered (not written yet), then removed.
            w.open_table("t")?.insert(b"big", &[0xAB; 3000])?;
            w.open_table("t")?.remove(b"big")?;
            for i in 0..200u32 {
                let key = (round * 200 + i).to_be_bytes();
                w.open_table("t")?.insert(&key, &[round as u8; 40])?;
                model.insert(key.to_vec(), vec![round as u8; 40]);
            }
        }
        assert!(!w.dirty.spilled.is_empty());
        commits_as_modelled(&db, w, model)
    }

    #[test]
    fn a_sequential_load_writes_each_leaf_once() -> Result<(), Error> {
        let db = small()?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        for i in 0..20_000u32 {
            w.open_table("t")?.insert(&i.to_be_bytes(), &[5; 50])?;
        }
        let spilled = w.dirty.spilled.len();
        // Every page spilled is still spilled: none was changed again (which would have
        // freed it) nor read back.
        assert_eq!(db.io_stats().pages_spilled, spilled as u64);
        assert_eq!(*w.dirty.read_back.get_mut(), 0);
        w.commit()?;
        let stats = db.stats()?;
        // Every leaf but the last went out in a spill.
        assert!(
            spilled as u64 >= stats.leaf_pages - 1,
            "{spilled} of {stats:?}"
        );
        Ok(())
    }
}
