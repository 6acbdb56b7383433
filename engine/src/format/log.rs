//! The commit log: records of what durable transactions changed, appended to a run of pages
//! named by the slot. Layout: docs/design.md#commit-log.

use super::{
    PAGE_HEADER, PageKind, get_u16, get_u32, get_u64, put_u32, put_u64, write_page_header,
};

/// In a record's page header, where the prefix of a leaf would be: how many of its cycle's
/// records (from the first) earlier writes had made durable when it was written (0 in
/// records of builds before the thirty-first session, which claim nothing).
const DURABLE_BEFORE: usize = 4;
const BASE: usize = PAGE_HEADER;
const PAYLOAD_LEN: usize = BASE + 8;
const CRC: usize = PAYLOAD_LEN + 4;
/// Bytes before a record's payload.
pub(crate) const LOG_RECORD_HEADER: usize = CRC + 4;

/// Records start at multiples of this many bytes of the log, a disk sector: appending a
/// record to a page that holds earlier ones rewrites their bytes unchanged, so a write
/// torn at sector boundaries cannot damage them. (A single-put record is ~150 bytes: a
/// page per record filled the log eight times sooner.)
pub(crate) const LOG_UNIT: usize = 512;

const OP_TABLE: u8 = 1;
const OP_PUT: u8 = 2;
const OP_DELETE: u8 = 3;
const OP_CREATE: u8 = 4;
const OP_DROP: u8 = 5;

/// One change a transaction made, in the order it made them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogOp<'a> {
    /// The table the following puts and deletes go to.
    Table(&'a [u8]),
    Put(&'a [u8], &'a [u8]),
    Delete(&'a [u8]),
    Create(&'a [u8]),
    Drop(&'a [u8]),
}

impl LogOp<'_> {
    /// The bytes [`LogOp::encode`] appends.
    pub fn encoded_len(&self) -> usize {
        match *self {
            LogOp::Put(k, v) => 1 + 2 + k.len() + 4 + v.len(),
            LogOp::Table(a) | LogOp::Delete(a) | LogOp::Create(a) | LogOp::Drop(a) => {
                1 + 2 + a.len()
            }
        }
    }

    /// Appends the operation to a payload.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let (op, a, b) = match *self {
            LogOp::Table(n) => (OP_TABLE, n, None),
            LogOp::Put(k, v) => (OP_PUT, k, Some(v)),
            LogOp::Delete(k) => (OP_DELETE, k, None),
            LogOp::Create(n) => (OP_CREATE, n, None),
            LogOp::Drop(n) => (OP_DROP, n, None),
        };
        out.push(op);
        // Keys and names are at most a quarter page (≤ 16 KiB), values at most u32::MAX.
        out.extend_from_slice(&(a.len() as u16).to_le_bytes());
        out.extend_from_slice(a);
        if let Some(v) = b {
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            out.extend_from_slice(v);
        }
    }
}

/// The operations of a payload, in order; `None` for bytes that do not decode.
pub(crate) fn decode_ops(mut b: &[u8]) -> Option<Vec<LogOp<'_>>> {
    let mut ops = Vec::new();
    while let Some((&op, rest)) = b.split_first() {
        let n = usize::from(get_u16(rest, 0)?);
        let a = rest.get(2..2 + n)?;
        b = &rest[2 + n..];
        ops.push(match op {
            OP_TABLE => LogOp::Table(a),
            OP_DELETE => LogOp::Delete(a),
            OP_CREATE => LogOp::Create(a),
            OP_DROP => LogOp::Drop(a),
            OP_PUT => {
                let m = usize::try_from(get_u32(b, 0)?).ok()?;
                let v = b.get(4..4usize.checked_add(m)?)?;
                b = &b[4 + m..];
                LogOp::Put(a, v)
            }
            _ => return None,
        });
    }
    Some(ops)
}

/// The checksum of a record at `place`: the index of its first unit in the file (its
/// first page, in the page-aligned form of earlier builds), so that a record copied
/// elsewhere does not verify.
fn record_crc(place: u64, header: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&place.to_le_bytes());
    h.update(&header[..CRC]);
    h.update(payload);
    h.finalize()
}

/// The record of transaction `txid`, the log's cycle starting after durable commit `base`,
/// to be written at unit `first_unit` of the file (byte `first_unit * LOG_UNIT`), when
/// completed writes have made the records up to commit `durable` durable (`base` or less:
/// none of this cycle's): whole units, padded with zeros.
pub(crate) fn encode_record(
    first_unit: u64,
    txid: u64,
    base: u64,
    durable: u64,
    payload: &[u8],
) -> Vec<u8> {
    let len = (LOG_RECORD_HEADER + payload.len()).next_multiple_of(LOG_UNIT);
    let mut b = vec![0u8; len];
    write_page_header(&mut b, PageKind::Log, 0, txid);
    let before = u32::try_from(durable.saturating_sub(base)).unwrap_or(0);
    put_u32(&mut b, DURABLE_BEFORE, before);
    put_u64(&mut b, BASE, base);
    put_u32(&mut b, PAYLOAD_LEN, payload.len() as u32);
    b[LOG_RECORD_HEADER..LOG_RECORD_HEADER + payload.len()].copy_from_slice(payload);
    let crc = record_crc(first_unit, &b, payload);
    put_u32(&mut b, CRC, crc);
    b
}

/// A record read back from the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogRecord<'a> {
    pub txid: u64,
    pub base: u64,
    /// The newest commit of the cycle whose record was durable before this one was
    /// written (`base` when none was, or the record does not say).
    pub durable: u64,
    pub payload: &'a [u8],
    /// Units ([`LOG_UNIT`] bytes) the record takes.
    pub units: u64,
}

impl<'a> LogRecord<'a> {
    /// The bytes a record starting at `b` says it takes, its header and payload (before
    /// rounding to a unit); `None` when `b` is shorter than a header or is no record.
    pub fn claimed_len(b: &[u8]) -> Option<usize> {
        if b.first() != Some(&(PageKind::Log as u8)) {
            return None;
        }
        let n = usize::try_from(get_u32(b, PAYLOAD_LEN)?).ok()?;
        LOG_RECORD_HEADER.checked_add(n)
    }

    /// What the header at `b` says, not yet verified: the record's commit, its cycle's
    /// base, and the newest commit it says was durable before it.
    pub fn header(b: &[u8]) -> Option<(u64, u64, u64)> {
        if b.first() != Some(&(PageKind::Log as u8)) {
            return None;
        }
        let base = get_u64(b, BASE)?;
        let durable = base.saturating_add(u64::from(get_u32(b, DURABLE_BEFORE)?));
        Some((get_u64(b, 8)?, base, durable))
    }

    /// The record starting at byte `offset` of the file, whose bytes (to the end of the
    /// log) are `b`; `None` when there is none (never written, stale, torn or damaged: the
    /// crc fails). In a `legacy` file (format version 2) a record at a page boundary may
    /// also be in the page-aligned form (checksummed with its page, taking whole pages).
    pub fn decode(
        offset: u64,
        b: &'a [u8],
        page_size: usize,
        legacy: bool,
    ) -> Option<LogRecord<'a>> {
        let payload = b.get(LOG_RECORD_HEADER..Self::claimed_len(b)?)?;
        let n = payload.len();
        let crc = get_u32(b, CRC)?;
        let (unit, page) = (LOG_UNIT as u64, page_size as u64);
        let bytes = if offset.is_multiple_of(unit) && record_crc(offset / unit, b, payload) == crc {
            (LOG_RECORD_HEADER + n).next_multiple_of(LOG_UNIT)
        } else if legacy
            && offset.is_multiple_of(page)
            && record_crc(offset / page, b, payload) == crc
        {
            (LOG_RECORD_HEADER + n).next_multiple_of(page_size)
        } else {
            return None;
        };
        let (txid, base, durable) = Self::header(b)?;
        Some(LogRecord {
            txid,
            base,
            durable,
            payload,
            units: (bytes / LOG_UNIT) as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_flipped_bit_or_another_place_is_rejected() {
        let ops = [
            LogOp::Create(b"t"),
            LogOp::Table(b"t"),
            LogOp::Put(b"k", b"value"),
            LogOp::Put(b"", b""),
            LogOp::Delete(b"k"),
            LogOp::Drop(b"old"),
        ];
        let mut payload = Vec::new();
        for op in &ops {
            let before = payload.len();
            op.encode(&mut payload);
            assert_eq!(payload.len() - before, op.encoded_len());
        }
        assert_eq!(decode_ops(&payload).as_deref(), Some(&ops[..]));
        // At unit 81 of the file: byte 41,472, inside page 40 of a 1 KiB-page file.
        let at = 81 * LOG_UNIT as u64;
        let b = encode_record(81, 9, 7, 8, &payload);
        assert_eq!(b.len(), LOG_UNIT);
        let r = LogRecord::decode(at, &b, 1024, false);
        assert_eq!(
            r,
            Some(LogRecord {
                txid: 9,
                base: 7,
                durable: 8,
                payload: &payload,
                units: 1
            })
        );
        // A durable commit older than the cycle's base claims none of its records.
        let none = encode_record(81, 9, 7, 3, &payload);
        assert_eq!(
            LogRecord::decode(at, &none, 1024, false).map(|r| r.durable),
            Some(7)
        );
        assert_eq!(
            LogRecord::decode(at + LOG_UNIT as u64, &b, 1024, false),
            None,
            "checksummed with its place"
        );
        for bit in 0..(LOG_RECORD_HEADER + payload.len()) * 8 {
            let mut d = b.clone();
            d[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(LogRecord::decode(at, &d, 1024, false), None, "bit {bit}");
        }
        assert_eq!(
            LogRecord::decode(at, &[0; 1024], 1024, false),
            None,
            "zeros"
        );
        assert_eq!(
            LogRecord::decode(at, &b[..50], 1024, false),
            None,
            "cut short"
        );
        let big = encode_record(81, 9, 7, 7, &[OP_TABLE; 3000]);
        assert_eq!(
            LogRecord::decode(at, &big, 1024, false).map(|r| r.units),
            Some(6)
        );
    }

    #[test]
    fn page_aligned_records_of_earlier_builds_still_decode() {
        // The earlier form: checksummed with the record's page, padded to whole pages.
        let payload = [OP_TABLE, 1, 0, b't'];
        let mut b = vec![0u8; 1024];
        write_page_header(&mut b, PageKind::Log, 0, 9);
        put_u64(&mut b, BASE, 7);
        put_u32(&mut b, PAYLOAD_LEN, payload.len() as u32);
        b[LOG_RECORD_HEADER..LOG_RECORD_HEADER + payload.len()].copy_from_slice(&payload);
        let crc = record_crc(40, &b, &payload);
        put_u32(&mut b, CRC, crc);
        let r = LogRecord::decode(40 * 1024, &b, 1024, true);
        assert_eq!(
            r.map(|r| (r.txid, r.base, r.units)),
            Some((9, 7, 2)),
            "a whole page"
        );
        assert_eq!(LogRecord::decode(41 * 1024, &b, 1024, true), None);
        assert_eq!(
            LogRecord::decode(40 * 1024, &b, 1024, false),
            None,
            "only in a version 2 file"
        );
    }

    #[test]
    fn malformed_payloads_do_not_decode() {
        assert_eq!(decode_ops(&[]), Some(vec![]));
        assert_eq!(decode_ops(&[OP_PUT, 1, 0, b'k', 9, 0, 0, 0]), None);
        assert_eq!(decode_ops(&[OP_TABLE, 5, 0]), None);
        assert_eq!(decode_ops(&[9, 0, 0]), None);
        assert_eq!(decode_ops(&[OP_DELETE]), None);
    }
}
