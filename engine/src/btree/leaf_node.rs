//! A leaf being changed by a write transaction.
//!
//! Its keys and inline values live together in one byte buffer, and a vector of small
//! fixed-size entries says where each is, in key order: copying a page into a node costs
//! two allocations, not two per entry, and a search reads one buffer instead of chasing a
//! pointer per probe. Changes append to the buffer; what they leave behind is dropped when
//! it outgrows the live bytes.

use crate::error::Result;
use crate::format::{LEAF_HEADER, LeafPage, OverflowRef, ValueRef, leaf_entry_size};

/// What an entry's value was, once removed or replaced: enough to free its overflow run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value {
    Inline,
    Overflow(OverflowRef),
}

#[derive(Debug, Clone, Copy)]
enum Stored {
    Inline { at: u32, len: u32 },
    Overflow(OverflowRef),
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    key_at: u32,
    key_len: u32,
    value: Stored,
}

/// A leaf being changed: entries in key order, and the bytes they would take in a page.
#[derive(Debug, Clone)]
pub(crate) struct LeafNode {
    entries: Vec<Entry>,
    bytes: Vec<u8>,
    /// Bytes the entries would take in a page, header included.
    pub size: usize,
}

impl Default for LeafNode {
    fn default() -> LeafNode {
        LeafNode::new()
    }
}

impl LeafNode {
    pub fn new() -> LeafNode {
        LeafNode {
            entries: Vec::new(),
            bytes: Vec::new(),
            size: LEAF_HEADER,
        }
    }

    pub fn from_page(page: &LeafPage<'_>) -> Result<LeafNode> {
        let mut node = LeafNode {
            entries: Vec::with_capacity(page.len() + 1),
            bytes: Vec::with_capacity(page.bytes_len()),
            size: LEAF_HEADER,
        };
        for i in 0..page.len() {
            let (k, v) = page.entry(i)?;
            node.push(k, v);
        }
        Ok(node)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn key_of(&self, e: &Entry) -> &[u8] {
        &self.bytes[e.key_at as usize..(e.key_at + e.key_len) as usize]
    }

    fn value_of(&self, e: &Entry) -> ValueRef<'_> {
        match e.value {
            Stored::Inline { at, len } => {
                ValueRef::Inline(&self.bytes[at as usize..(at + len) as usize])
            }
            Stored::Overflow(o) => ValueRef::Overflow(o),
        }
    }

    pub fn key(&self, i: usize) -> &[u8] {
        self.key_of(&self.entries[i])
    }

    pub fn entry(&self, i: usize) -> (&[u8], ValueRef<'_>) {
        let e = &self.entries[i];
        (self.key_of(e), self.value_of(e))
    }

    /// Bytes entry `i` takes in a page, its slot included.
    pub fn entry_size(&self, i: usize) -> usize {
        let (k, v) = self.entry(i);
        leaf_entry_size(k.len(), &v)
    }

    pub fn search(&self, key: &[u8]) -> std::result::Result<usize, usize> {
        self.entries
            .binary_search_by(|e| crate::format::compare(self.key_of(e), key))
    }

    fn store(&mut self, value: ValueRef<'_>) -> Stored {
        match value {
            ValueRef::Inline(v) => {
                let at = self.bytes.len() as u32;
                self.bytes.extend_from_slice(v);
                Stored::Inline {
                    at,
                    len: v.len() as u32,
                }
            }
            ValueRef::Overflow(o) => Stored::Overflow(o),
        }
    }

    fn make(&mut self, key: &[u8], value: ValueRef<'_>) -> Entry {
        self.size += leaf_entry_size(key.len(), &value);
        let key_at = self.bytes.len() as u32;
        self.bytes.extend_from_slice(key);
        Entry {
            key_at,
            key_len: key.len() as u32,
            value: self.store(value),
        }
    }

    /// Appends an entry after all others.
    pub fn push(&mut self, key: &[u8], value: ValueRef<'_>) {
        let e = self.make(key, value);
        self.entries.push(e);
    }

    /// Inserts an entry at position `i`.
    pub fn insert(&mut self, i: usize, key: &[u8], value: ValueRef<'_>) {
        let e = self.make(key, value);
        self.entries.insert(i, e);
        self.tidy();
    }

    fn was(&mut self, e: &Entry) -> Value {
        let (k, v) = (self.key_of(e), self.value_of(e));
        self.size -= leaf_entry_size(k.len(), &v);
        match e.value {
            Stored::Inline { .. } => Value::Inline,
            Stored::Overflow(o) => Value::Overflow(o),
        }
    }

    /// Replaces the value of entry `i`; returns what it was.
    pub fn replace(&mut self, i: usize, value: ValueRef<'_>) -> Value {
        let e = self.entries[i];
        let old = self.was(&e);
        self.size += leaf_entry_size(e.key_len as usize, &value);
        self.entries[i].value = self.store(value);
        self.tidy();
        old
    }

    /// Points entry `i` at a moved overflow run.
    pub fn set_overflow(&mut self, i: usize, o: OverflowRef) {
        self.entries[i].value = Stored::Overflow(o);
    }

    /// Removes entry `i`; returns what its value was.
    pub fn remove(&mut self, i: usize) -> Value {
        let e = self.entries.remove(i);
        self.was(&e)
    }

    /// Moves entries `k..` into a new leaf, which is returned.
    pub fn split_off(&mut self, k: usize) -> LeafNode {
        let mut right = LeafNode {
            entries: Vec::with_capacity(self.entries.len() - k + 1),
            bytes: Vec::with_capacity(self.bytes.len()),
            size: LEAF_HEADER,
        };
        for i in k..self.entries.len() {
            let (key, value) = self.entry(i);
            right.push(key, value);
        }
        self.entries.truncate(k);
        self.size -= right.size - LEAF_HEADER;
        self.tidy();
        right
    }

    /// Appends every entry of `right`, whose keys all follow this leaf's.
    pub fn append(&mut self, right: &LeafNode) {
        for i in 0..right.len() {
            let (key, value) = right.entry(i);
            self.push(key, value);
        }
    }

    /// Rewrites the buffer with only the live bytes once it holds more than twice those
    /// (so that repeated changes to one leaf in one transaction use bounded memory).
    fn tidy(&mut self) {
        if self.bytes.len() <= 2 * self.size + 256 {
            return;
        }
        let old = std::mem::take(self);
        self.entries.reserve(old.entries.len());
        self.bytes.reserve(old.size);
        self.append(&old);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: &LeafNode) -> Vec<Vec<u8>> {
        (0..n.len()).map(|i| n.key(i).to_vec()).collect()
    }

    #[test]
    fn changes_keep_order_sizes_and_bounded_bytes() {
        let o = OverflowRef {
            page: 7,
            len: 9000,
            crc: 1,
        };
        let mut n = LeafNode::new();
        n.push(b"b", ValueRef::Inline(b"2"));
        n.insert(0, b"a", ValueRef::Inline(b"1"));
        n.insert(2, b"c", ValueRef::Overflow(o));
        assert_eq!(keys(&n), [b"a", b"b", b"c"]);
        assert_eq!(n.search(b"b"), Ok(1));
        assert_eq!(n.search(b"bb"), Err(2));
        let size =
            |n: &LeafNode| LEAF_HEADER + (0..n.len()).map(|i| n.entry_size(i)).sum::<usize>();
        assert_eq!(n.size, size(&n));
        assert_eq!(n.replace(2, ValueRef::Inline(b"three")), Value::Overflow(o));
        assert_eq!(n.entry(2), (&b"c"[..], ValueRef::Inline(b"three")));
        for round in 0..10_000u32 {
            n.replace(1, ValueRef::Inline(&round.to_le_bytes()));
        }
        assert!(n.bytes.len() < 4 * n.size, "{} bytes", n.bytes.len());
        assert_eq!(n.entry(1).1, ValueRef::Inline(&9_999u32.to_le_bytes()));
        assert_eq!(n.size, size(&n));
        let right = n.split_off(1);
        assert_eq!(
            (keys(&n), keys(&right)),
            (vec![b"a".to_vec()], vec![b"b".to_vec(), b"c".to_vec()])
        );
        assert_eq!((n.size, right.size), (size(&n), size(&right)));
        n.append(&right);
        assert_eq!(n.remove(0), Value::Inline);
        assert_eq!(keys(&n), [b"b", b"c"]);
        assert_eq!(n.size, size(&n));
    }
}
