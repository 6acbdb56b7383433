//! A copy of a committed branch page that a write transaction edits in place while its
//! edits only replace child references (the common case: a commit that splits no leaf
//! changes one child reference per branch on its path). The copy is then the page the
//! commit writes: nothing is decoded into separate entries or encoded again.
//!
//! Only a page in the layout [`encode_branch`](super::encode_branch) writes with heads is
//! taken: entries packed against the end of the page in slot order, so that every entry's
//! place follows from its slot and no two entries overlap. Replacing a child reference
//! writes inside its entry and keeps that layout. (A branch without heads, written before
//! format version 5, is decoded instead, so that the commit writes it with heads.)

use super::heads::{recorded_prefix, set_prefix, write_header};
use super::page::CHILD_REF_LEN;
use super::{BRANCH_HEADER, BranchPage, ChildRef, Layout, PAGE_HEADER, PageKind};
use super::{compare, get_u16};

/// A branch page's copy whose entries are known to be packed in slot order.
#[derive(Debug, Clone)]
pub(crate) struct BranchImage {
    page: Box<[u8]>,
    count: usize,
}

/// Bytes of a slot.
const SLOT: usize = Layout::Heads.slot();

impl BranchImage {
    /// A copy of `branch`, if its entries lie as `encode_branch` writes them.
    pub fn of(branch: &BranchPage<'_>) -> Option<BranchImage> {
        let bytes = branch.bytes();
        let count = branch.keys();
        if branch.layout() != Layout::Heads {
            return None;
        }
        let slots_end = BRANCH_HEADER + SLOT * count;
        let mut end = bytes.len();
        for j in 0..count {
            let at = usize::from(get_u16(bytes, BRANCH_HEADER + SLOT * j)?);
            let len = usize::from(get_u16(bytes, at)?);
            if at < slots_end || at + 2 + len + CHILD_REF_LEN != end {
                return None;
            }
            end = at;
        }
        Some(BranchImage {
            page: bytes.into(),
            count,
        })
    }

    /// The number of separators.
    pub fn keys(&self) -> usize {
        self.count
    }

    /// Bytes the branch takes in a page, header and slots included.
    pub fn size(&self) -> usize {
        BRANCH_HEADER + SLOT * self.count + (self.page.len() - self.lowest())
    }

    /// Where the entries start: the last one's place (the page's end when there is none).
    fn lowest(&self) -> usize {
        match self.count {
            0 => self.page.len(),
            n => self.start(n - 1),
        }
    }

    fn u16_at(&self, at: usize) -> usize {
        usize::from(u16::from_le_bytes([self.page[at], self.page[at + 1]]))
    }

    /// Where entry `j` starts (its key length).
    fn start(&self, j: usize) -> usize {
        self.u16_at(BRANCH_HEADER + SLOT * j)
    }

    /// Separator `j`.
    pub fn key(&self, j: usize) -> &[u8] {
        let at = self.start(j);
        &self.page[at + 2..at + 2 + self.u16_at(at)]
    }

    /// Where child `i`'s reference is.
    fn child_at(&self, i: usize) -> usize {
        if i == 0 {
            PAGE_HEADER
        } else {
            let at = self.start(i - 1);
            at + 2 + self.u16_at(at)
        }
    }

    pub fn child(&self, i: usize) -> ChildRef {
        // In bounds: `of` checked every entry, and edits keep them where they are.
        ChildRef::decode(&self.page, self.child_at(i)).unwrap_or_default()
    }

    pub fn set_child(&mut self, i: usize, c: ChildRef) {
        let at = self.child_at(i);
        c.encode(&mut self.page, at);
    }

    /// The index of the child whose range holds `key`, found by the page's heads as a
    /// reader finds it: edits only rewrite child references, so the heads and the prefix
    /// the copy came with still describe its separators.
    pub fn find_child(&self, key: &[u8]) -> usize {
        BranchPage::new(&self.page, 0)
            .and_then(|page| page.find_child(key))
            .unwrap_or_else(|_| self.find_by_keys(key))
    }

    /// [`BranchImage::find_child`] comparing the separators themselves.
    fn find_by_keys(&self, key: &[u8]) -> usize {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if compare(self.key(mid), key).is_le() {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The page to write, for transaction `txid`, its free space zeroed.
    pub fn finish(mut self, txid: u64) -> Box<[u8]> {
        let lowest = self.lowest();
        self.page[BRANCH_HEADER + SLOT * self.count..lowest].fill(0);
        let prefix = recorded_prefix(&self.page);
        write_header(
            &mut self.page,
            PageKind::Branch,
            Layout::Heads,
            self.count,
            txid,
        );
        set_prefix(&mut self.page, Layout::Heads, prefix);
        self.page
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{encode_branch, put_u16};

    fn c(page: u64) -> ChildRef {
        ChildRef {
            page,
            crc: page as u32 ^ 0xabcd,
        }
    }

    fn sample(layout: Layout) -> Vec<u8> {
        let seps: Vec<(&[u8], ChildRef)> = vec![(b"g", c(11)), (b"pq", c(12)), (b"x", c(13))];
        let mut page = vec![0u8; 256];
        encode_branch(&mut page, 4, c(10), seps.iter().copied(), layout);
        page
    }

    #[test]
    fn edits_child_references_in_place_and_writes_the_same_layout() -> crate::Result<()> {
        let layout = Layout::Heads;
        let page = sample(layout);
        let image = BranchImage::of(&BranchPage::new(&page, 2)?);
        let Some(mut image) = image else {
            panic!("an encoded branch is in the packed layout");
        };
        assert_eq!(image.keys(), 3);
        assert_eq!(
            image.size(),
            BRANCH_HEADER + 3 * layout.slot() + 3 * (2 + CHILD_REF_LEN) + 4
        );
        assert_eq!((image.key(0), image.key(1)), (&b"g"[..], &b"pq"[..]));
        assert_eq!(image.find_child(b"a"), 0);
        assert_eq!(image.find_child(b"pq"), 2);
        assert_eq!(image.find_child(b"zz"), 3);
        image.set_child(0, c(20));
        image.set_child(2, c(22));
        assert_eq!(
            (image.child(0), image.child(1), image.child(2)),
            (c(20), c(11), c(22))
        );
        let written = image.finish(9);
        let mut expect = vec![0u8; 256];
        let seps: Vec<(&[u8], ChildRef)> = vec![(b"g", c(11)), (b"pq", c(22)), (b"x", c(13))];
        encode_branch(&mut expect, 9, c(20), seps.iter().copied(), layout);
        assert_eq!(&written[..], &expect[..]);
        assert_eq!(BranchPage::new(&written, 2)?.layout(), layout);
        Ok(())
    }

    #[test]
    fn a_page_whose_entries_are_not_packed_in_slot_order_is_not_taken() -> crate::Result<()> {
        // A page without heads.
        let page = sample(Layout::Legacy);
        assert!(BranchImage::of(&BranchPage::new(&page, 2)?).is_none());
        let mut page = sample(Layout::Heads);
        let (s0, s1) = (BRANCH_HEADER, BRANCH_HEADER + Layout::Heads.slot());
        // Swap the first two slots' offsets: every entry is in bounds, but not in order.
        let (a, b) = (page[s0..s0 + 2].to_vec(), page[s1..s1 + 2].to_vec());
        page[s0..s0 + 2].copy_from_slice(&b);
        page[s1..s1 + 2].copy_from_slice(&a);
        assert!(BranchImage::of(&BranchPage::new(&page, 2)?).is_none());
        // An entry reaching into the slots.
        let mut page = sample(Layout::Heads);
        put_u16(&mut page, s1 + Layout::Heads.slot(), BRANCH_HEADER as u16);
        assert!(BranchImage::of(&BranchPage::new(&page, 2)?).is_none());
        Ok(())
    }

    #[test]
    fn the_heads_search_finds_the_child_the_separators_give() -> crate::Result<()> {
        // Separators sharing a prefix (so the heads hold the bytes after it), ties in the
        // first bytes after it, and probes inside, between and outside the separators.
        let seps: Vec<Vec<u8>> = (0..120u32)
            .map(|i| {
                let mut k = b"user:".to_vec();
                k.extend_from_slice(&(i * i * 7).to_be_bytes());
                k.extend(std::iter::repeat_n(b'x', (i % 4) as usize));
                k
            })
            .collect();
        let mut page = vec![0u8; 4096];
        let refs = seps
            .iter()
            .enumerate()
            .map(|(i, k)| (&k[..], c(i as u64 + 1)));
        encode_branch(&mut page, 4, c(0), refs, Layout::Heads);
        let Some(mut image) = BranchImage::of(&BranchPage::new(&page, 2)?) else {
            panic!("an encoded branch is in the packed layout");
        };
        image.set_child(7, c(99));
        let mut probes: Vec<Vec<u8>> = vec![b"".to_vec(), b"a".to_vec(), b"user".to_vec()];
        probes.push(b"user:\xff".to_vec());
        probes.push(b"z".to_vec());
        for k in &seps {
            for cut in [k.len() - 1, k.len()] {
                probes.push(k[..cut].to_vec());
            }
            probes.push([&k[..], b"\0"].concat());
            let mut above = k.clone();
            if let Some(last) = above.last_mut() {
                *last = last.wrapping_add(1);
            }
            probes.push(above);
        }
        for p in &probes {
            let expect = seps.partition_point(|s| s[..] <= p[..]);
            assert_eq!(image.find_child(p), expect, "probe {p:?}");
            assert_eq!(image.find_by_keys(p), expect, "probe {p:?}");
        }
        Ok(())
    }
}
