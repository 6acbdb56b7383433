//! A commit slot: the root of one committed state. Two exist, at `SLOT_OFFSET` in
//! pages 0 and 1. Layout: docs/design.md#commit-slot.

use super::{ChildRef, get_u32, get_u64, put_u32, put_u64};

/// Where in its page (0 or 1) a slot starts: its own 512-byte sector, apart from the header.
pub(crate) const SLOT_OFFSET: usize = 512;

const TXID: usize = 0;
const DURABLE_TXID: usize = TXID + 8;
const PAGE_COUNT: usize = DURABLE_TXID + 8;
const CATALOG_PAGE: usize = PAGE_COUNT + 8;
const CATALOG_CRC: usize = CATALOG_PAGE + 8;
const FREELIST_PAGE: usize = CATALOG_CRC + 4;
const FREELIST_LEN: usize = FREELIST_PAGE + 8;
const FREELIST_CRC: usize = FREELIST_LEN + 8;
const LOG_PAGE: usize = FREELIST_CRC + 4;
const LOG_PAGES: usize = LOG_PAGE + 8;
const CRC: usize = LOG_PAGES + 8;
/// Bytes of a slot's checked part: a slot is valid when they are.
pub(crate) const SLOT_LEN: usize = CRC + 4;
// The log's limit follows, with a checksum of its own, so that builds that write only the
// checked part (before the forty-fourth session) read the slot as before and leave the
// limit there.
const LOG_LIMIT: usize = SLOT_LEN;
const LIMIT_CRC: usize = LOG_LIMIT + 8;
/// Bytes a slot occupies: its checked part and the log's limit.
pub(crate) const SLOT_BYTES: usize = LIMIT_CRC + 4;

/// One committed state: its transaction id, roots and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Slot {
    /// The commit's transaction id.
    pub txid: u64,
    /// The newest commit known to be on stable storage when this one was written; pages
    /// written after it are verified when the file is opened.
    pub durable_txid: u64,
    /// The number of pages the file holds for this commit.
    pub page_count: u64,
    /// The catalog tree's root (page 0: no tables).
    pub catalog: ChildRef,
    /// The freelist's first page (0: none; [`Slot::FREELIST_IN_MEMORY`]: not written),
    /// its length in bytes ([`Slot::NOT_LOGGED`] for an unwritten one: see
    /// [`Slot::free_set_implied`]), and its checksum.
    pub freelist_page: u64,
    pub freelist_len: u64,
    pub freelist_crc: u32,
    /// The commit log's run of pages: its first page (0: none) and length in pages.
    pub log_page: u64,
    pub log_pages: u64,
    /// The most pages the commit log may grow to, when a size was asked for
    /// (`Builder::log_size`); `None`: the default. Outside the checked part: a limit that
    /// does not verify reads as `None`.
    pub log_limit: Option<u64>,
}

impl Slot {
    /// `freelist_page` of a commit whose record in the commit log made it durable or will:
    /// its free set stays in the writer's memory, and recovery goes back to the durable
    /// commit and replays the log instead (docs/design.md#commit-log). A build that does
    /// not know the mark finds the freelist outside the file and does the same.
    pub const FREELIST_IN_MEMORY: u64 = u64::MAX;

    /// `freelist_len` beside [`Slot::FREELIST_IN_MEMORY`] for an Eventual commit that
    /// neither logged nor wrote its free set (0 for a logged one).
    pub const NOT_LOGGED: u64 = u64::MAX;

    /// Commit ids stay below 2^60 (at a million commits a second, 36,000 years): the
    /// locks that pin snapshots for other processes sit at `2^61 + txid`, below the
    /// writer's byte at 2^62, for every id up to twice this (docs/design.md#readers-in-
    /// other-processes). A slot naming one at or past it is damage.
    pub const TXID_LIMIT: u64 = 1 << 60;

    /// Whether the commit's id is one a file may hold ([`Slot::TXID_LIMIT`]).
    pub fn txid_in_range(&self) -> bool {
        self.txid < Self::TXID_LIMIT
    }

    /// Whether the slot names its freelist (or has none to name).
    pub fn records_freelist(&self) -> bool {
        self.freelist_page != Self::FREELIST_IN_MEMORY
    }

    /// Whether the commit log holds the commit: its free set was in the writer's memory,
    /// and recovery goes back to the durable commit and replays the log.
    pub fn logged(&self) -> bool {
        !self.records_freelist() && self.freelist_len != Self::NOT_LOGGED
    }

    /// Whether the commit is an Eventual one that neither logged nor wrote its free set
    /// (rewriting it cost each such commit time in proportion to the free set): every
    /// page its trees and the commit log do not use is free, and recovery that opens it
    /// walks its trees to find them (docs/design.md#freelist). A build that does not know
    /// the mark takes it for a logged commit, and goes back to the durable one.
    pub fn free_set_implied(&self) -> bool {
        !self.records_freelist() && self.freelist_len == Self::NOT_LOGGED
    }

    /// The pages the freelist takes (none when it is not written).
    pub fn freelist_run(&self, page_size: usize) -> std::ops::Range<u64> {
        if self.freelist_page == 0 || !self.records_freelist() {
            return 0..0;
        }
        let pages = self.freelist_len.div_ceil(page_size as u64);
        self.freelist_page..self.freelist_page.saturating_add(pages)
    }

    pub fn encode(&self) -> [u8; SLOT_BYTES] {
        let mut b = [0u8; SLOT_BYTES];
        put_u64(&mut b, TXID, self.txid);
        put_u64(&mut b, DURABLE_TXID, self.durable_txid);
        put_u64(&mut b, PAGE_COUNT, self.page_count);
        put_u64(&mut b, CATALOG_PAGE, self.catalog.page);
        put_u32(&mut b, CATALOG_CRC, self.catalog.crc);
        put_u64(&mut b, FREELIST_PAGE, self.freelist_page);
        put_u64(&mut b, FREELIST_LEN, self.freelist_len);
        put_u32(&mut b, FREELIST_CRC, self.freelist_crc);
        put_u64(&mut b, LOG_PAGE, self.log_page);
        put_u64(&mut b, LOG_PAGES, self.log_pages);
        let crc = crc32fast::hash(&b[..CRC]);
        put_u32(&mut b, CRC, crc);
        // No limit: zeros, whose checksum fails.
        if let Some(limit) = self.log_limit {
            put_u64(&mut b, LOG_LIMIT, limit);
            let crc = crc32fast::hash(&b[LOG_LIMIT..LIMIT_CRC]);
            put_u32(&mut b, LIMIT_CRC, crc);
        }
        b
    }

    /// The slot in `b`, or `None` when its checksum fails (never written, torn or damaged).
    /// The log's limit is read when `b` holds it and it verifies.
    pub fn decode(b: &[u8]) -> Option<Slot> {
        let log_limit = b.get(LOG_LIMIT..SLOT_BYTES).and_then(|l| {
            let limit = get_u64(l, 0)?;
            (crc32fast::hash(&l[..8]) == get_u32(l, 8)?).then_some(limit)
        });
        let b = b.get(..SLOT_LEN)?;
        if crc32fast::hash(&b[..CRC]) != get_u32(b, CRC)? {
            return None;
        }
        Some(Slot {
            txid: get_u64(b, TXID)?,
            durable_txid: get_u64(b, DURABLE_TXID)?,
            page_count: get_u64(b, PAGE_COUNT)?,
            catalog: ChildRef {
                page: get_u64(b, CATALOG_PAGE)?,
                crc: get_u32(b, CATALOG_CRC)?,
            },
            freelist_page: get_u64(b, FREELIST_PAGE)?,
            freelist_len: get_u64(b, FREELIST_LEN)?,
            freelist_crc: get_u32(b, FREELIST_CRC)?,
            log_page: get_u64(b, LOG_PAGE)?,
            log_pages: get_u64(b, LOG_PAGES)?,
            log_limit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_any_flipped_bit_is_rejected() {
        let s = Slot {
            txid: 7,
            durable_txid: 6,
            page_count: 99,
            catalog: ChildRef {
                page: 5,
                crc: 0xdead_beef,
            },
            freelist_page: 9,
            freelist_len: 40,
            freelist_crc: 3,
            log_page: 11,
            log_pages: 256,
            log_limit: None,
        };
        let b = s.encode();
        assert_eq!(Slot::decode(&b), Some(s));
        assert_eq!(b[SLOT_LEN..], [0; SLOT_BYTES - SLOT_LEN], "no limit: zeros");
        for bit in 0..SLOT_LEN * 8 {
            let mut d = b;
            d[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(Slot::decode(&d), None, "bit {bit}");
        }
        assert_eq!(Slot::decode(&[0; SLOT_LEN]), None, "a never-written slot");
        assert_eq!(Slot::decode(&b[..10]), None);
        const { assert!(SLOT_OFFSET + SLOT_LEN <= 1024, "fits the smallest page") };
        assert_eq!(SLOT_LEN, 76, "docs/design.md#commit-slot");
        assert_eq!(SLOT_BYTES, 88, "docs/design.md#commit-slot");
    }

    #[test]
    fn the_log_limit_is_read_when_it_verifies_and_never_decides_the_slot() {
        let s = Slot {
            txid: 9,
            log_page: 2,
            log_pages: 16,
            log_limit: Some(64),
            ..Slot::default()
        };
        let b = s.encode();
        assert_eq!(Slot::decode(&b), Some(s));
        // A recorded 0 (no growth) is a limit too, not the absence of one.
        let zero = Slot {
            log_limit: Some(0),
            ..s
        };
        assert_eq!(Slot::decode(&zero.encode()), Some(zero));
        // The checked part alone, as builds before the limit read and write it.
        let without = Slot {
            log_limit: None,
            ..s
        };
        assert_eq!(Slot::decode(&b[..SLOT_LEN]), Some(without));
        for bit in SLOT_LEN * 8..SLOT_BYTES * 8 {
            let mut d = b;
            d[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(Slot::decode(&d), Some(without), "bit {bit}");
        }
        // An older build's slot written over a newer one's keeps the limit after it.
        let mut d = b;
        d[..SLOT_LEN].copy_from_slice(
            &Slot {
                txid: 10,
                ..without
            }
            .encode()[..SLOT_LEN],
        );
        assert_eq!(
            Slot::decode(&d).map(|s| (s.txid, s.log_limit)),
            Some((10, Some(64)))
        );
    }
}
