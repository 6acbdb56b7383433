//! A leaf page being changed by a write transaction, edited in place in a page-sized
//! buffer that is already in the leaf page format (docs/design.md#leaf-page).
//!
//! Taking ownership of a committed leaf copies its page; a search reads the slot array as
//! it does in a committed page; an insert writes the new entry into the free space below
//! the entries and shifts the slots after it; a value of the same size is overwritten where
//! it is; a removal moves the entries stored below the removed one up over it. The entries
//! therefore stay packed at the end of the page. A page that is not packed (holes between
//! its entries: no commit writes one, but a file may hold one) is rewritten whole when an
//! insert needs the room or when it is written out.

use super::heads::{Layout, common_prefix, head, put_head, set_prefix, write_header};
use super::leaf::{SLOT, encode_leaf, entry_len, overwrite_value, write_entry};
use super::{LEAF_HEADER, LeafPage, OverflowRef, PageKind, ValueRef, leaf_entry_size, put_u16};
use crate::error::{Error, Result};

/// What an entry's value was, once removed or replaced: enough to free its overflow run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value {
    Inline,
    Overflow(OverflowRef),
}

impl Value {
    pub fn of(v: &ValueRef<'_>) -> Value {
        match v {
            ValueRef::Inline(_) => Value::Inline,
            ValueRef::Overflow(o) => Value::Overflow(*o),
        }
    }
}

/// A leaf being changed: a page-sized buffer in the leaf format, with heads — or, for a
/// leaf written before format version 4 that is too full to take them, without (it gets
/// heads once it is small enough).
#[derive(Debug, Clone)]
pub(crate) struct LeafNode {
    page: Box<[u8]>,
    count: usize,
    layout: Layout,
    /// The length of a prefix every key shares (with heads).
    prefix: usize,
    /// That prefix's bytes (zeros after them), when it is at most [`KNOWN_PREFIX`] bytes
    /// long and the first key holds it: a search for a key that is not there need not read
    /// a stored key for them, and the stored key's line is the one a cold leaf's search
    /// would wait for.
    prefix_bytes: Option<[u8; KNOWN_PREFIX]>,
    /// Where the entry area starts: the lowest entry offset (the page size when empty).
    upper: usize,
    /// Bytes the entries take in a page with heads, header and slots included.
    pub size: usize,
}

/// The longest shared prefix whose bytes an owned leaf keeps beside its page.
const KNOWN_PREFIX: usize = 16;

/// The first `prefix` bytes of `key` (zeros after them), if `key` has them and they fit
/// [`KNOWN_PREFIX`]: a damaged page whose recorded prefix is longer than its first key
/// leaves the search to read a stored key, and to report the damage.
fn prefix_bytes(key: &[u8], prefix: usize) -> Option<[u8; KNOWN_PREFIX]> {
    let p = key.get(..prefix).filter(|p| p.len() <= KNOWN_PREFIX)?;
    let mut bytes = [0u8; KNOWN_PREFIX];
    bytes[..p.len()].copy_from_slice(p);
    Some(bytes)
}

fn internal(what: &str) -> Error {
    Error::corrupt(0, format!("internal: owned leaf {what}"))
}

impl LeafNode {
    /// An empty leaf for pages of `page_size` bytes.
    pub fn new(page_size: usize) -> LeafNode {
        let mut page = vec![0u8; page_size].into_boxed_slice();
        write_header(&mut page, PageKind::Leaf, Layout::Heads, 0, 0);
        LeafNode {
            page,
            count: 0,
            layout: Layout::Heads,
            prefix: 0,
            prefix_bytes: Some([0; KNOWN_PREFIX]),
            upper: page_size,
            size: LEAF_HEADER,
        }
    }

    /// A leaf holding `entries` (in key order), which fit in a page of `page_size` bytes.
    pub fn with_entries(page_size: usize, entries: &[(&[u8], ValueRef<'_>)]) -> LeafNode {
        LeafNode::encoded(page_size, entries, Layout::Heads)
    }

    fn encoded(page_size: usize, entries: &[(&[u8], ValueRef<'_>)], layout: Layout) -> LeafNode {
        let mut page = vec![0u8; page_size].into_boxed_slice();
        let prefix = encode_leaf(&mut page, 0, entries.iter().copied(), layout);
        let used: usize = entries.iter().map(|(k, v)| entry_len(k.len(), v)).sum();
        LeafNode {
            count: entries.len(),
            layout,
            prefix,
            prefix_bytes: entries
                .first()
                .map_or(Some([0; KNOWN_PREFIX]), |(k, _)| prefix_bytes(k, prefix)),
            upper: page_size - used,
            size: LEAF_HEADER + SLOT * entries.len() + used,
            page,
        }
    }

    /// A copy of a committed leaf, every entry checked to lie inside the page. A legacy
    /// leaf is rewritten with heads when they fit.
    pub fn from_page(leaf: &LeafPage<'_>) -> Result<LeafNode> {
        let page: Box<[u8]> = leaf.bytes().into();
        let (count, layout) = (leaf.len(), leaf.layout());
        let (mut used, mut upper) = (0, page.len());
        for i in 0..count {
            let (at, len) = leaf.extent(i).ok_or_else(|| {
                Error::corrupt(leaf.id(), format!("leaf entry {i} out of bounds"))
            })?;
            used += len;
            upper = upper.min(at);
        }
        let slots_end = LEAF_HEADER + layout.slot() * count;
        if upper < slots_end || used > page.len() - upper {
            return Err(Error::corrupt(leaf.id(), "leaf entries overlap"));
        }
        let size = LEAF_HEADER + SLOT * count + used;
        if layout == Layout::Legacy && size <= page.len() {
            let entries = (0..count)
                .map(|i| leaf.entry(i))
                .collect::<Result<Vec<_>>>()?;
            return Ok(LeafNode::with_entries(page.len(), &entries));
        }
        let prefix = leaf.prefix_len();
        let first = match count {
            0 => None,
            _ => Some(leaf.key(0)?),
        };
        Ok(LeafNode {
            prefix,
            prefix_bytes: first.map_or(Some([0; KNOWN_PREFIX]), |k| prefix_bytes(k, prefix)),
            page,
            count,
            layout,
            upper,
            size,
        })
    }

    /// The leaf as a page, to read (`id` is the page it will be written to).
    pub fn page(&self, id: u64) -> LeafPage<'_> {
        LeafPage::trusted(&self.page, id, self.count, self.layout, self.prefix)
    }

    pub fn len(&self) -> usize {
        self.count
    }

    /// The size of the leaf's page.
    pub fn page_size(&self) -> usize {
        self.page.len()
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn key(&self, i: usize) -> Result<&[u8]> {
        self.page(0).key(i)
    }

    pub fn entry(&self, i: usize) -> Result<(&[u8], ValueRef<'_>)> {
        self.page(0).entry(i)
    }

    /// Every entry, in key order.
    ///
    /// The entry area is asked for first, line by line: entries inserted one by one lie
    /// in the order they came, not in key order, so reading them in key order jumps
    /// about the page, and in a leaf not read for a while (a split in a large random
    /// load) each jump waited for memory in turn. Measured (100,000 random inserts in one
    /// transaction, 4 KiB pages, docs/benchmark-history.md, sixty-first session): insert
    /// loops about a tenth faster.
    pub fn entries(&self) -> Result<Vec<(&[u8], ValueRef<'_>)>> {
        for at in (self.upper..self.page.len()).step_by(64) {
            super::prefetch::prefetch(&self.page, at);
        }
        (0..self.count).map(|i| self.entry(i)).collect()
    }

    /// Bytes entry `i` takes in a page, its slot included.
    pub fn entry_size(&self, i: usize) -> Result<usize> {
        let (k, v) = self.entry(i)?;
        Ok(leaf_entry_size(k.len(), &v))
    }

    pub fn search(&self, key: &[u8]) -> Result<std::result::Result<usize, usize>> {
        let known = self
            .prefix_bytes
            .as_ref()
            .and_then(|b| b.get(..self.prefix));
        self.page(0).search_knowing(key, known)
    }

    fn slot(&self, i: usize) -> Result<usize> {
        self.page(0)
            .slot(i)
            .ok_or_else(|| internal("slot out of bounds"))
    }

    /// Where slot `i` is.
    fn slot_at(&self, i: usize) -> usize {
        LEAF_HEADER + self.layout.slot() * i
    }

    fn slots_end(&self) -> usize {
        self.slot_at(self.count)
    }

    fn set_count(&mut self, count: usize) {
        self.count = count;
        put_u16(&mut self.page, 2, count as u16);
    }

    /// Bytes the entries take, slots not included.
    fn entry_bytes(&self) -> usize {
        self.size - LEAF_HEADER - SLOT * self.count
    }

    /// Bytes inside the entry area that no entry uses.
    fn holes(&self) -> usize {
        (self.page.len() - self.upper) - self.entry_bytes()
    }

    /// Rewrites the page whole, leaving no holes (with heads, if they fit).
    fn compact(&mut self) -> Result<()> {
        let layout = if self.size <= self.page.len() {
            Layout::Heads
        } else {
            self.layout
        };
        let fresh = LeafNode::encoded(self.page.len(), &self.entries()?, layout);
        *self = fresh;
        Ok(())
    }

    /// Rewrites every head for a prefix of `prefix` bytes (of a node with heads).
    fn set_heads(&mut self, prefix: usize) -> Result<()> {
        self.prefix = prefix;
        self.prefix_bytes = match self.count {
            0 => Some([0; KNOWN_PREFIX]),
            _ => prefix_bytes(self.key(0)?, prefix),
        };
        set_prefix(&mut self.page, self.layout, prefix);
        for i in 0..self.count {
            let h = head(self.key(i)?, prefix);
            put_head(&mut self.page, LEAF_HEADER, i, h);
        }
        Ok(())
    }

    /// Asks for the cache lines an insert of an entry of up to 128 bytes writes into (the
    /// two below the entry area), so that, called before the search that places the key,
    /// their wait overlaps the search's. In a leaf not touched for a while (a large
    /// random load) the new entry's lines were a wait of their own after the search's.
    /// Measured (100,000 random inserts in one transaction, 4 KiB pages,
    /// docs/benchmark-history.md, sixty-first session): insert loops 7–13 % faster.
    pub fn prefetch_insert_room(&self) {
        let start = self.upper.saturating_sub(128);
        super::prefetch::prefetch(&self.page, start);
        super::prefetch::prefetch(&self.page, start + 64);
    }

    /// Inserts an entry at position `i`. The caller has checked that the leaf's size with
    /// it is at most a page.
    pub fn insert(&mut self, i: usize, key: &[u8], value: ValueRef<'_>) -> Result<()> {
        let len = entry_len(key.len(), &value);
        if i > self.count || self.size + SLOT + len > self.page.len() {
            return Err(internal("insert does not fit"));
        }
        if self.layout == Layout::Legacy || self.upper - self.slots_end() < SLOT + len {
            self.compact()?;
        }
        // A key before the first or after the last may share less with the others. Into
        // an empty leaf, the key is the prefix: its bytes are new even when its length is
        // the prefix's (the kept bytes are the last key removed's).
        let was_empty = self.count == 0;
        let prefix = match (self.count, i) {
            (0, _) => key.len().min(usize::from(u16::MAX)),
            (_, 0) => common_prefix(key, self.key(0)?).min(self.prefix),
            (n, i) if i == n => common_prefix(key, self.key(n - 1)?).min(self.prefix),
            _ => self.prefix,
        };
        let at = self.upper - len;
        write_entry(&mut self.page, at, key, value);
        let slot = self.slot_at(i);
        self.page.copy_within(slot..self.slots_end(), slot + SLOT);
        put_u16(&mut self.page, slot, at as u16);
        self.set_count(self.count + 1);
        self.upper = at;
        self.size += SLOT + len;
        if prefix == self.prefix && !was_empty {
            put_head(&mut self.page, LEAF_HEADER, i, head(key, prefix));
            Ok(())
        } else {
            self.set_heads(prefix)
        }
    }

    /// Appends an entry after all others (the caller has checked that it fits).
    pub fn push(&mut self, key: &[u8], value: ValueRef<'_>) -> Result<()> {
        self.insert(self.count, key, value)
    }

    /// Removes entry `i`; returns what its value was. The entries stored below it move up
    /// by its length, so the page stays packed. The keys left still share the prefix.
    pub fn remove(&mut self, i: usize) -> Result<Value> {
        if i >= self.count {
            return Err(internal("removal past the end"));
        }
        let (at, len) = self
            .page(0)
            .extent(i)
            .ok_or_else(|| internal("entry out of bounds"))?;
        let was = Value::of(&self.entry(i)?.1);
        if at < self.upper {
            return Err(internal("entry below the entry area"));
        }
        self.page.copy_within(self.upper..at, self.upper + len);
        for j in 0..self.count {
            let off = self.slot(j)?;
            if off < at {
                let slot = self.slot_at(j);
                put_u16(&mut self.page, slot, (off + len) as u16);
            }
        }
        let (slot, next) = (self.slot_at(i), self.slot_at(i + 1));
        self.page.copy_within(next..self.slots_end(), slot);
        self.set_count(self.count - 1);
        self.size -= SLOT + len;
        self.upper += len;
        Ok(was)
    }

    /// Replaces the value of entry `i`; returns what it was. The caller has checked that
    /// the leaf's size with the new value is at most a page.
    pub fn replace(&mut self, i: usize, value: ValueRef<'_>) -> Result<Value> {
        let at = self.slot(i)?;
        let (key, old) = self.entry(i)?;
        let (key_len, size, was) = (key.len(), leaf_entry_size(key.len(), &old), Value::of(&old));
        if overwrite_value(&mut self.page, at, key_len, size, value) {
            return Ok(was);
        }
        let key = self.key(i)?.to_vec();
        self.remove(i)?;
        self.insert(i, &key, value)?;
        Ok(was)
    }

    /// Points entry `i`, whose value is in an overflow run, at a moved run.
    pub fn set_overflow(&mut self, i: usize, o: OverflowRef) -> Result<()> {
        let at = self.slot(i)?;
        let (key, old) = self.entry(i)?;
        let (key_len, size) = (key.len(), leaf_entry_size(key.len(), &old));
        if !matches!(old, ValueRef::Overflow(_))
            || !overwrite_value(&mut self.page, at, key_len, size, ValueRef::Overflow(o))
        {
            return Err(internal("entry has no overflow run"));
        }
        Ok(())
    }

    /// Appends every entry of `right`, whose keys all follow this leaf's (the caller has
    /// checked that they fit).
    pub fn append(&mut self, right: &LeafNode) -> Result<()> {
        for i in 0..right.len() {
            let (key, value) = right.entry(i)?;
            self.push(key, value)?;
        }
        Ok(())
    }

    /// The page to write, for transaction `txid`: packed, with heads if they fit, the
    /// longest prefix the keys share, its free space zeroed.
    pub fn finish(mut self, txid: u64) -> Result<Box<[u8]>> {
        if self.holes() > 0 || (self.layout == Layout::Legacy && self.size <= self.page.len()) {
            self.compact()?;
        }
        if self.layout == Layout::Heads && self.count > 0 {
            // Removals may have left the keys sharing more.
            let shared = common_prefix(self.key(0)?, self.key(self.count - 1)?);
            if shared > self.prefix {
                self.set_heads(shared.min(usize::from(u16::MAX)))?;
            }
        }
        let end = self.slots_end();
        self.page[end..self.upper].fill(0);
        write_header(
            &mut self.page,
            PageKind::Leaf,
            self.layout,
            self.count,
            txid,
        );
        set_prefix(&mut self.page, self.layout, self.prefix);
        Ok(self.page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::heads::{Layout, common_prefix};
    use crate::format::leaf::encode_leaf;

    fn keys(n: &LeafNode) -> Vec<Vec<u8>> {
        (0..n.len())
            .filter_map(|i| n.key(i).ok())
            .map(<[u8]>::to_vec)
            .collect()
    }

    /// Every entry as owned (key, inline value) pairs (an empty value for overflow).
    fn inline_entries(n: &LeafNode) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(n.entries()?
            .iter()
            .map(|(k, v)| match v {
                ValueRef::Inline(v) => (k.to_vec(), v.to_vec()),
                ValueRef::Overflow(_) => (k.to_vec(), Vec::new()),
            })
            .collect())
    }

    fn size(n: &LeafNode) -> usize {
        LEAF_HEADER
            + (0..n.len())
                .filter_map(|i| n.entry_size(i).ok())
                .sum::<usize>()
    }

    #[test]
    fn edits_keep_order_sizes_and_a_packed_page() -> Result<()> {
        let o = OverflowRef {
            page: 7,
            len: 9000,
            crc: 1,
        };
        let mut n = LeafNode::new(256);
        n.push(b"b", ValueRef::Inline(b"2"))?;
        n.insert(0, b"a", ValueRef::Inline(b"1"))?;
        n.insert(2, b"c", ValueRef::Overflow(o))?;
        assert_eq!(keys(&n), [b"a", b"b", b"c"]);
        assert_eq!(n.search(b"b")?, Ok(1));
        assert_eq!(n.search(b"bb")?, Err(2));
        assert_eq!(n.size, size(&n));
        assert_eq!(
            n.replace(2, ValueRef::Inline(b"three"))?,
            Value::Overflow(o)
        );
        assert_eq!(n.entry(2)?, (&b"c"[..], ValueRef::Inline(b"three")));
        // Values of other sizes leave holes; inserts reclaim them when they need the room.
        for round in 0..1_000u32 {
            let v = round.to_le_bytes();
            n.replace(1, ValueRef::Inline(&v[..(round % 4) as usize]))?;
            assert_eq!((n.size, n.holes()), (size(&n), 0));
        }
        assert_eq!(n.entry(1)?.1, ValueRef::Inline(&999u32.to_le_bytes()[..3]));
        assert_eq!(n.remove(0)?, Value::Inline);
        assert_eq!(keys(&n), [b"b", b"c"]);
        assert_eq!((n.size, n.holes()), (size(&n), 0));
        assert!(n.remove(2).is_err(), "no entry 2");
        assert!(n.set_overflow(1, o).is_err(), "an inline value has no run");
        n.replace(1, ValueRef::Overflow(o))?;
        let moved = OverflowRef { page: 9, ..o };
        n.set_overflow(1, moved)?;
        assert_eq!(n.entry(1)?.1, ValueRef::Overflow(moved));
        // Filled to the byte, then one byte more is refused.
        let mut i = 0u8;
        while 256 - n.size >= 40 {
            n.push(&[b'd', i], ValueRef::Inline(&[]))?;
            i += 1;
        }
        let gap = 256 - n.size; // an entry with a key of 1 byte takes 14 bytes and its value
        assert!(
            n.push(b"z", ValueRef::Inline(&vec![0; gap + 1 - 14]))
                .is_err(),
            "a full leaf refuses an entry"
        );
        n.push(b"z", ValueRef::Inline(&vec![0; gap - 14]))?;
        assert_eq!(n.size, 256);
        let expect: Vec<_> = n
            .entries()?
            .iter()
            .map(|(k, v)| (k.to_vec(), *v == ValueRef::Overflow(moved)))
            .collect();
        let page = n.finish(5)?;
        let leaf = LeafPage::new(&page, 1)?;
        let got: Vec<_> = (0..leaf.len())
            .map(|i| {
                leaf.entry(i)
                    .map(|(k, v)| (k.to_vec(), v == ValueRef::Overflow(moved)))
            })
            .collect::<Result<_>>()?;
        assert_eq!(got, expect);
        Ok(())
    }

    #[test]
    fn finished_pages_have_no_holes_and_zeroed_free_space() -> Result<()> {
        let mut n = LeafNode::new(512);
        for k in 0u8..20 {
            n.push(&[k], ValueRef::Inline(&[k; 10]))?;
        }
        for i in (0..20).step_by(3).rev() {
            n.remove(i)?;
        }
        n.replace(0, ValueRef::Inline(b"longer than ten bytes"))?;
        assert_eq!(
            n.holes(),
            0,
            "removals and resized values leave the page packed"
        );
        let expect = inline_entries(&n)?;
        let used = n.size;
        let page = n.finish(3)?;
        let leaf = LeafPage::new(&page, 1)?;
        let lowest = (0..leaf.len()).filter_map(|i| leaf.slot(i)).min();
        assert_eq!(lowest, Some(512 - (used - LEAF_HEADER - SLOT * leaf.len())));
        assert!(
            page[LEAF_HEADER + SLOT * leaf.len()..512 - (used - LEAF_HEADER - SLOT * leaf.len())]
                .iter()
                .all(|&b| b == 0)
        );
        let again = LeafNode::from_page(&leaf)?;
        assert_eq!((again.size, again.holes()), (used, 0));
        assert_eq!(inline_entries(&again)?, expect);
        Ok(())
    }

    #[test]
    fn overlapping_entries_are_corruption() -> Result<()> {
        let mut n = LeafNode::new(256);
        n.push(b"a", ValueRef::Inline(&[1; 40]))?;
        n.push(b"b", ValueRef::Inline(&[2; 10]))?;
        let page = n.finish(1)?;
        let first = LeafPage::new(&page, 4)?.slot(0).unwrap_or(0);
        // Both slots at the larger entry: they claim more bytes than the entry area holds.
        let mut twice = page.clone();
        put_u16(&mut twice, LEAF_HEADER + SLOT, first as u16);
        assert!(LeafNode::from_page(&LeafPage::new(&twice, 4)?).is_err());
        // An entry over the slot array.
        let mut low = page.clone();
        put_u16(&mut low, LEAF_HEADER, (LEAF_HEADER + SLOT) as u16);
        assert!(LeafNode::from_page(&LeafPage::new(&low, 4)?).is_err());
        Ok(())
    }

    /// Checks `n` against `model`: its keys, sizes, heads and prefix, and searches.
    fn agrees(n: &LeafNode, model: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>) -> Result<()> {
        let expect: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(inline_entries(n)?, expect);
        assert_eq!((n.size, n.holes()), (size(n), 0));
        assert_eq!(n.page(0).heads_mismatch()?, None);
        for (i, k) in model.keys().enumerate() {
            assert_eq!(n.search(k)?, Ok(i));
        }
        if let Some(first) = model.keys().next() {
            let kept = n.prefix_bytes.as_ref().map(|b| &b[..n.prefix]);
            let expect = (n.prefix <= KNOWN_PREFIX).then(|| &first[..n.prefix]);
            assert_eq!(kept, expect, "known prefix");
        }
        // Keys that are not there (or are), placed where the model places them.
        let probes = model.keys().flat_map(|k| {
            let shorter = k[..k.len().saturating_sub(1)].to_vec();
            [
                [&k[..], &[0]].concat(),
                [&k[..], &[9]].concat(),
                shorter,
                vec![9; 3],
            ]
        });
        for probe in probes {
            let at = model.range(..probe.clone()).count();
            let expect = if model.contains_key(&probe) {
                Ok(at)
            } else {
                Err(at)
            };
            assert_eq!(n.search(&probe)?, expect, "probe {probe:?}");
        }
        Ok(())
    }

    /// Regression (found by the crash test's lives with a 16-page log): a leaf emptied of its one
    /// key and given another of the same length kept the old key's bytes as its prefix, so
    /// a search for a third key placed it by them: the leaf came out of order.
    #[test]
    fn a_key_put_into_an_emptied_leaf_becomes_its_prefix() -> Result<()> {
        let mut n = LeafNode::new(1024);
        n.push(&177u32.to_be_bytes(), ValueRef::Inline(b"a"))?;
        n.remove(0)?;
        n.insert(0, &200u32.to_be_bytes(), ValueRef::Inline(b"b"))?;
        let model =
            std::collections::BTreeMap::from([(200u32.to_be_bytes().to_vec(), b"b".to_vec())]);
        agrees(&n, &model)?;
        assert_eq!(n.search(&195u32.to_be_bytes())?, Err(0));
        Ok(())
    }

    #[test]
    fn a_prefix_is_kept_only_when_the_key_holds_it_and_it_fits() {
        let mut abc = [0u8; KNOWN_PREFIX];
        abc[..3].copy_from_slice(b"abc");
        assert_eq!(prefix_bytes(b"abcd", 3), Some(abc));
        // A recorded prefix longer than the key (a damaged page) is not made up.
        assert_eq!(prefix_bytes(b"ab", 3), None);
        assert_eq!(prefix_bytes(&[7; 20], KNOWN_PREFIX + 1), None);
        assert_eq!(
            prefix_bytes(&[7; 20], KNOWN_PREFIX),
            Some([7; KNOWN_PREFIX])
        );
    }

    #[test]
    fn random_edits_keep_heads_and_prefix_right() -> Result<()> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(9);
        for _ in 0..300 {
            let stem: Vec<u8> = (0..rng.random_range(0..7))
                .map(|_| rng.random_range(0..2))
                .collect();
            let mut model = std::collections::BTreeMap::new();
            let mut n = LeafNode::new(1024);
            for _ in 0..60 {
                let mut key = stem.clone();
                key.extend((0..rng.random_range(0..7)).map(|_| rng.random_range(0..3u8)));
                let value = vec![7u8; rng.random_range(0..20)];
                match (n.search(&key)?, rng.random_range(0..4)) {
                    (Ok(i), 0) => {
                        n.remove(i)?;
                        model.remove(&key);
                    }
                    (Ok(i), _) => {
                        let old = n.entry_size(i)?;
                        if n.size - old + leaf_entry_size(key.len(), &ValueRef::Inline(&value))
                            <= 1024
                        {
                            n.replace(i, ValueRef::Inline(&value))?;
                            model.insert(key, value);
                        }
                    }
                    (Err(i), _) => {
                        if n.size + leaf_entry_size(key.len(), &ValueRef::Inline(&value)) <= 1024 {
                            n.insert(i, &key, ValueRef::Inline(&value))?;
                            model.insert(key, value);
                        }
                    }
                }
                agrees(&n, &model)?;
            }
            let page = n.finish(2)?;
            let leaf = LeafPage::new(&page, 3)?;
            assert_eq!(leaf.heads_mismatch()?, None);
            if let (Some(first), Some(last)) = (model.keys().next(), model.keys().last()) {
                assert_eq!(leaf.prefix_len(), common_prefix(first, last), "the longest");
            }
            agrees(&LeafNode::from_page(&leaf)?, &model)?;
        }
        Ok(())
    }

    #[test]
    fn legacy_leaves_get_heads_when_they_fit() -> Result<()> {
        let keys: Vec<[u8; 8]> = (0..40u64).map(|i| i.to_be_bytes()).collect();
        let value = [3u8; 16];
        // 40 entries of 31 bytes and legacy slots fill 16 + 40 * 33 = 1336 bytes; with
        // heads they take 1496.
        let legacy = |n: usize| -> Box<[u8]> {
            let mut page = vec![0u8; 1400].into_boxed_slice();
            encode_leaf(
                &mut page,
                1,
                keys[..n].iter().map(|k| (&k[..], ValueRef::Inline(&value))),
                Layout::Legacy,
            );
            page
        };
        let model = |n: usize| -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
            keys[..n]
                .iter()
                .map(|k| (k.to_vec(), value.to_vec()))
                .collect()
        };
        // A legacy leaf with room for heads is rewritten with them at once.
        let small = legacy(30);
        let n = LeafNode::from_page(&LeafPage::new(&small, 1)?)?;
        assert_eq!(n.layout, Layout::Heads);
        agrees(&n, &model(30))?;
        // One without stays legacy while it is too full, and is read and edited as it is.
        let full = legacy(40);
        let leaf = LeafPage::new(&full, 1)?;
        assert_eq!(leaf.layout(), Layout::Legacy);
        let mut n = LeafNode::from_page(&leaf)?;
        assert_eq!((n.layout, n.size), (Layout::Legacy, 16 + 40 * 37));
        agrees(&n, &model(40))?;
        assert_eq!(n.remove(0)?, Value::Inline);
        n.replace(0, ValueRef::Inline(&[4; 16]))?;
        let written = n.clone().finish(5)?;
        assert_eq!(LeafPage::new(&written, 1)?.layout(), Layout::Legacy);
        // Small enough, it is written with heads.
        for _ in 0..5 {
            n.remove(0)?;
        }
        let written = n.finish(6)?;
        let leaf = LeafPage::new(&written, 1)?;
        assert_eq!(leaf.layout(), Layout::Heads);
        assert_eq!(leaf.len(), 34);
        assert_eq!(leaf.heads_mismatch()?, None);
        assert_eq!(leaf.search(&keys[10])?, Ok(4));
        Ok(())
    }
}
