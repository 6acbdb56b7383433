//! What a write transaction's savepoints need to put its changed pages back: for each
//! savepoint, every node, overflow run and spilled page changed since it was taken, as it
//! was then (`None`: not there). Only the newest savepoint's journal records; releasing it
//! folds its entries into the one before (whose older images win), rolling back applies the
//! journals from the newest down.
//!
//! The pages these entries name keep their bytes until the savepoint goes: pages the
//! transaction allocated and freed are held out of the free set meanwhile
//! ([`crate::freelist::FreeList::mark`]).

use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;
use std::sync::OnceLock;

use super::{Dirty, Node, Run};

/// The changes since one savepoint, as they were before.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    nodes: FxHashMap<u64, Option<Node>>,
    overflow: FxHashMap<u64, Option<Run>>,
    /// Whether each page was spilled.
    spilled: FxHashMap<u64, bool>,
    /// What the images take: see [`Held`].
    held: Held,
}

/// The memory a journal's images take: nodes (a page each) and bytes of overflow runs.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Held {
    pub nodes: usize,
    pub bytes: usize,
}

impl Held {
    fn node(image: &Option<Node>) -> Held {
        Held {
            nodes: usize::from(image.is_some()),
            bytes: 0,
        }
    }

    fn run(image: &Option<Run>) -> Held {
        let bytes = match image {
            Some(Run::Held(b)) => b.len(),
            _ => 0,
        };
        Held { nodes: 0, bytes }
    }

    fn add(&mut self, other: Held) {
        self.nodes += other.nodes;
        self.bytes += other.bytes;
    }
}

impl Journal {
    /// Adds `later`'s entries for the pages this journal has none for.
    fn absorb(&mut self, later: Journal) {
        fn fold<V>(
            into: &mut FxHashMap<u64, V>,
            from: FxHashMap<u64, V>,
            held: &mut Held,
            weigh: fn(&V) -> Held,
        ) {
            for (k, v) in from {
                if let Entry::Vacant(e) = into.entry(k) {
                    held.add(weigh(&v));
                    e.insert(v);
                }
            }
        }
        fold(&mut self.nodes, later.nodes, &mut self.held, Held::node);
        fold(
            &mut self.overflow,
            later.overflow,
            &mut self.held,
            Held::run,
        );
        fold(&mut self.spilled, later.spilled, &mut self.held, |_| {
            Held::default()
        });
    }
}

impl Run {
    /// A copy for a journal, without the bytes read back (they can be read again).
    fn copy(&self) -> Run {
        match self {
            Run::Held(bytes) => Run::Held(bytes.clone()),
            Run::Written { len, .. } => Run::Written {
                len: *len,
                read_back: OnceLock::new(),
            },
        }
    }
}

impl Dirty {
    /// Records node `id` as it is, before a change, if a savepoint is open and its
    /// journal has no image of it yet. (Inlined to one test of an empty vector, which is
    /// all it costs without savepoints: the recording itself stays out of line, so that the
    /// hot paths that call this keep their size.)
    #[inline]
    pub fn note_node(&mut self, id: u64) {
        if !self.journals.is_empty() {
            self.note_node_slow(id);
        }
    }

    #[cold]
    #[inline(never)]
    fn note_node_slow(&mut self, id: u64) {
        if let Some(j) = self.journals.last_mut()
            && let Entry::Vacant(e) = j.nodes.entry(id)
        {
            let image = self.nodes.get(&id).cloned();
            j.held.add(Held::node(&image));
            e.insert(image);
        }
    }

    /// As [`Dirty::note_node`], for the overflow run starting at page `first`.
    #[inline]
    pub fn note_overflow(&mut self, first: u64) {
        if !self.journals.is_empty() {
            self.note_overflow_slow(first);
        }
    }

    #[cold]
    #[inline(never)]
    fn note_overflow_slow(&mut self, first: u64) {
        if let Some(j) = self.journals.last_mut()
            && let Entry::Vacant(e) = j.overflow.entry(first)
        {
            let image = self.overflow.get(&first).map(Run::copy);
            j.held.add(Held::run(&image));
            e.insert(image);
        }
    }

    /// As [`Dirty::note_node`], for whether page `id` is spilled.
    #[inline]
    pub fn note_spilled(&mut self, id: u64) {
        if !self.journals.is_empty() {
            self.note_spilled_slow(id);
        }
    }

    #[cold]
    #[inline(never)]
    fn note_spilled_slow(&mut self, id: u64) {
        if let Some(j) = self.journals.last_mut() {
            j.spilled
                .entry(id)
                .or_insert_with(|| self.spilled.contains_key(&id));
        }
    }

    /// What the open savepoints' journals hold.
    pub fn journals_held(&self) -> Held {
        let mut all = Held::default();
        for j in &self.journals {
            all.add(j.held);
        }
        all
    }

    /// Starts the journal of a new savepoint.
    pub fn open_journal(&mut self) {
        self.journals.push(Journal::default());
    }

    /// Puts every page back as it was when savepoint `at` (counted from the oldest) was
    /// taken; its journal stays, empty, and the later ones go.
    pub fn roll_back_journals(&mut self, at: usize) {
        while self.journals.len() > at {
            let Some(j) = self.journals.pop() else { break };
            restore(&mut self.nodes, j.nodes);
            restore(&mut self.overflow, j.overflow);
            for (id, was) in j.spilled {
                if was {
                    self.spilled.entry(id).or_default();
                } else {
                    self.spilled.remove(&id);
                }
            }
        }
        self.journals.push(Journal::default());
    }

    /// Forgets savepoint `at` (counted from the oldest) and the later ones: their changes
    /// now belong to the savepoint before, if there is one.
    pub fn release_journals(&mut self, at: usize) {
        while self.journals.len() > at {
            let Some(j) = self.journals.pop() else { break };
            if let Some(before) = self.journals.last_mut() {
                before.absorb(j);
            }
        }
    }
}

/// Sets each of `images`' keys in `map` to its image: the value it had, or none.
fn restore<V>(map: &mut FxHashMap<u64, V>, images: FxHashMap<u64, Option<V>>) {
    for (id, image) in images {
        match image {
            Some(v) => {
                map.insert(id, v);
            }
            None => {
                map.remove(&id);
            }
        }
    }
}
