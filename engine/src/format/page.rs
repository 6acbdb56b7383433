//! What every tree, overflow and freelist page shares: a 16-byte header and a checksum
//! recorded by whatever points at the page. Layout: docs/design.md#page-header.

use super::{get_u16, get_u64, put_u16, put_u64};

const KIND: usize = 0;
const COUNT: usize = 2;
const TXID: usize = 8;
/// Bytes of the common page header.
pub(crate) const PAGE_HEADER: usize = TXID + 8;
/// Where a leaf's slot array starts.
pub(crate) const LEAF_HEADER: usize = PAGE_HEADER;
/// Where a branch's slot array starts: after the leftmost child reference.
pub(crate) const BRANCH_HEADER: usize = PAGE_HEADER + CHILD_REF_LEN;
/// Where an overflow run's data starts.
pub(crate) const OVERFLOW_HEADER: usize = PAGE_HEADER;
/// Bytes of an encoded [`ChildRef`].
pub(crate) const CHILD_REF_LEN: usize = 12;

/// The kind byte of a leaf written before format version 4: its slots are offsets only,
/// without key heads. Such pages are still read (and rewritten with heads when changed).
pub(crate) const LEGACY_LEAF: u8 = 2;

/// The kind byte of a branch written before format version 5: its slots are offsets only,
/// without separator heads. Such pages are still read (and given heads when a transaction
/// changes them and they have room).
pub(crate) const LEGACY_BRANCH: u8 = 1;

/// What a page holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageKind {
    /// A branch with separator heads in its slots (format version 5); see
    /// [`LEGACY_BRANCH`].
    Branch = 7,
    /// A leaf with key heads in its slots (format version 4); see [`LEGACY_LEAF`].
    Leaf = 6,
    Overflow = 3,
    Freelist = 4,
    Log = 5,
}

impl PageKind {
    fn from_byte(b: u8) -> Option<PageKind> {
        Some(match b {
            1 | 7 => PageKind::Branch,
            2 | 6 => PageKind::Leaf,
            3 => PageKind::Overflow,
            4 => PageKind::Freelist,
            5 => PageKind::Log,
            _ => return None,
        })
    }
}

/// A pointer to a page together with the checksum its contents must have. A pointer to a
/// node a write transaction owns has checksum 0 until the commit encodes the node: the
/// commit looks for owned nodes only behind such pointers (a committed page whose
/// checksum happens to be 0 costs it a lookup, nothing more).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub(crate) struct ChildRef {
    pub page: u64,
    pub crc: u32,
}

impl ChildRef {
    pub fn decode(b: &[u8], at: usize) -> Option<ChildRef> {
        Some(ChildRef {
            page: get_u64(b, at)?,
            crc: super::get_u32(b, at + 8)?,
        })
    }
    pub fn encode(&self, b: &mut [u8], at: usize) {
        put_u64(b, at, self.page);
        super::put_u32(b, at + 8, self.crc);
    }
}

/// Where a value too large for a leaf lives: a contiguous run of pages starting at `page`,
/// holding `len` bytes after an overflow page header, whose checksum is `crc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OverflowRef {
    pub page: u64,
    pub len: u32,
    pub crc: u32,
}

impl OverflowRef {
    /// How many pages the run takes.
    pub fn pages(&self, page_size: usize) -> u64 {
        (OVERFLOW_HEADER as u64 + u64::from(self.len)).div_ceil(page_size as u64)
    }
}

/// Zeros to pad a write up to the end of a page.
pub(crate) static ZERO_PAGE: [u8; super::MAX_PAGE_SIZE] = [0; super::MAX_PAGE_SIZE];

/// The checksum of a page (or run) `bytes` stored at page `id`. Seeding with the page id
/// makes a page copied to another place fail its check.
pub(crate) fn checksum(id: u64, bytes: &[u8]) -> u32 {
    checksum_parts(id, &[bytes])
}

/// [`checksum`] of the concatenation of `parts`.
pub(crate) fn checksum_parts(id: u64, parts: &[&[u8]]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&id.to_le_bytes());
    for part in parts {
        h.update(part);
    }
    h.finalize()
}

/// Writes the common header into the start of `page`.
pub(crate) fn write_page_header(page: &mut [u8], kind: PageKind, count: u16, txid: u64) {
    page[..PAGE_HEADER].fill(0);
    page[KIND] = kind as u8;
    put_u16(page, COUNT, count);
    put_u64(page, TXID, txid);
}

/// The kind recorded in a page's header.
pub(crate) fn page_kind(page: &[u8]) -> Option<PageKind> {
    PageKind::from_byte(*page.get(KIND)?)
}

/// The number of items recorded in a page's header.
pub(crate) fn page_count(page: &[u8]) -> Option<u16> {
    get_u16(page, COUNT)
}

/// The transaction that wrote the page.
pub(crate) fn page_txid(page: &[u8]) -> Option<u64> {
    get_u64(page, TXID)
}

/// Whether `page` starts with what a page of a database would: a known kind, the header's
/// zero bytes, and a transaction id a file may hold. Random bytes pass about once in four
/// billion pages; text and zeros never. (A sign of a database, not a proof of one.)
pub(crate) fn looks_like_a_page(page: &[u8]) -> bool {
    let zeros = page.get(1) == Some(&0) && page.get(6..8) == Some(&[0, 0][..]);
    page_kind(page).is_some()
        && zeros
        && page_txid(page).is_some_and(|t| (1..super::Slot::TXID_LIMIT).contains(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_checksum_depends_on_place() {
        let mut p = vec![0xffu8; 64];
        write_page_header(&mut p, PageKind::Overflow, 513, 42);
        assert_eq!(page_kind(&p), Some(PageKind::Overflow));
        assert_eq!(page_count(&p), Some(513));
        assert_eq!(page_txid(&p), Some(42));
        assert_ne!(checksum(1, &p), checksum(2, &p));
        assert!(looks_like_a_page(&p));
        p[0] = 9;
        assert_eq!(page_kind(&p), None);
        assert_eq!(page_kind(&[]), None);
        assert!(!looks_like_a_page(&p));
    }

    #[test]
    fn only_a_page_header_looks_like_a_page() {
        let mut p = [0u8; PAGE_HEADER];
        write_page_header(&mut p, PageKind::Leaf, 7, 3);
        assert!(looks_like_a_page(&p));
        for (at, byte) in [(1, 1), (6, 1), (7, 1), (15, 0x10)] {
            let mut q = p;
            q[at] = byte;
            assert!(!looks_like_a_page(&q), "byte {at}");
        }
        write_page_header(&mut p, PageKind::Leaf, 7, 0);
        assert!(!looks_like_a_page(&p), "no commit has id 0");
        assert!(!looks_like_a_page(&[0u8; PAGE_HEADER]));
        assert!(!looks_like_a_page(b"ab"));
        assert!(!looks_like_a_page(&[b'x'; PAGE_HEADER]));
    }

    #[test]
    fn child_ref_round_trip_and_overflow_pages() {
        let mut b = [0u8; CHILD_REF_LEN];
        let c = ChildRef {
            page: 1 << 40,
            crc: 77,
        };
        c.encode(&mut b, 0);
        assert_eq!(ChildRef::decode(&b, 0), Some(c));
        assert_eq!(ChildRef::decode(&b, 1), None);
        let o = |len| OverflowRef {
            page: 3,
            len,
            crc: 0,
        };
        assert_eq!(o(4096 - 16).pages(4096), 1);
        assert_eq!(o(4096 - 15).pages(4096), 2);
    }
}
