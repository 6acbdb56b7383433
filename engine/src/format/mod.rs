//! The on-disk format: byte layouts and their encoders and decoders.
//!
//! Layout: docs/design.md#file-format. All integers are little-endian. Nothing outside
//! this module knows an offset.

mod branch;
mod branch_edit;
mod catalog;
mod freelist;
pub(crate) mod header;
mod heads;
mod keys;
mod leaf;
mod leaf_edit;
mod log;
mod page;
pub(crate) mod prefetch;
mod shape;
mod slot;

pub(crate) use branch::{BranchPage, encode_branch};
pub(crate) use branch_edit::BranchImage;
pub(crate) use catalog::TableMeta;
pub(crate) use freelist::{FreeRun, decode_freelist, encode_freelist, freelist_len};
pub(crate) use header::{
    FORMAT_VERSION, HEADER_LEN, Header, LOG_UNITS_VERSION, MAGIC, OLDEST_VERSION,
};
pub(crate) use heads::Layout;
pub(crate) use keys::compare;
pub use keys::prefix_end;
#[cfg(test)]
pub(crate) use leaf::SLOT as LEAF_SLOT;
pub(crate) use leaf::{LeafPage, ValueRef, leaf_entry_size};
pub(crate) use leaf_edit::{LeafNode, Value};
pub(crate) use log::{LOG_RECORD_HEADER, LOG_UNIT, LogOp, LogRecord, decode_ops, encode_record};
pub(crate) use page::{
    BRANCH_HEADER, ChildRef, LEAF_HEADER, OVERFLOW_HEADER, OverflowRef, PAGE_HEADER, PageKind,
    ZERO_PAGE, checksum, checksum_parts, looks_like_a_page, page_kind, page_txid,
    write_page_header,
};
pub(crate) use shape::{Known, Shape};
pub(crate) use slot::{SLOT_BYTES, SLOT_LEN, SLOT_OFFSET, Slot};

pub(crate) use branch::{branch_entry_size, legacy_saving};

/// The page sizes a database may have.
pub const MIN_PAGE_SIZE: usize = 1024;
/// The largest page size.
pub const MAX_PAGE_SIZE: usize = 65536;

/// The longest key a database of this page size accepts: a quarter of a page.
pub fn max_key_len(page_size: usize) -> usize {
    page_size / 4
}

/// Values up to this many bytes (together with their key) are stored inside a leaf;
/// longer ones go to an overflow run. Two maximal inline entries always fit in a leaf.
pub(crate) fn max_inline_entry(page_size: usize) -> usize {
    (page_size - LEAF_HEADER) / 2 - 16
}

/// The longest value accepted.
pub const MAX_VALUE_LEN: usize = u32::MAX as usize;

#[inline(always)]
pub(crate) fn get_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
#[inline(always)]
pub(crate) fn get_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
#[inline(always)]
pub(crate) fn get_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}
pub(crate) fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
