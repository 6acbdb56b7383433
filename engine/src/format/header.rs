//! The file header: magic, format version and page size.
//! Layout: docs/design.md#header. Written once at creation, in pages 0 and 1.

use super::{get_u32, put_u32};

/// The first eight bytes of every Cairn file.
pub(crate) const MAGIC: [u8; 8] = *b"CAIRNDB\0";
/// The format version this build writes and the newest it reads (4: leaves with key
/// heads; 5: branches with separator heads).
pub(crate) const FORMAT_VERSION: u32 = 5;
/// The first format version whose commit log records are in 512-byte units (version 2's
/// are page-aligned).
pub(crate) const LOG_UNITS_VERSION: u32 = 3;
/// The oldest format version this build reads (version 1 had no commit log). An older
/// file opened for writing is marked with this build's version first, so that an older
/// build (which would not read this build's pages or log records) refuses it.
pub(crate) const OLDEST_VERSION: u32 = 2;

const VERSION_OFFSET: usize = MAGIC.len();
const PAGE_SIZE_OFFSET: usize = VERSION_OFFSET + size_of::<u32>();
const CRC_OFFSET: usize = PAGE_SIZE_OFFSET + size_of::<u32>();
/// Bytes the header occupies.
pub(crate) const HEADER_LEN: usize = CRC_OFFSET + size_of::<u32>();

/// The immutable description of a database file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub version: u32,
    pub page_size: u32,
}

/// Why a header could not be read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HeaderError {
    /// The magic bytes are not Cairn's.
    NotCairn,
    /// The magic is right but the checksum is not.
    Damaged,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..VERSION_OFFSET].copy_from_slice(&MAGIC);
        put_u32(&mut b, VERSION_OFFSET, self.version);
        put_u32(&mut b, PAGE_SIZE_OFFSET, self.page_size);
        let crc = crc32fast::hash(&b[..CRC_OFFSET]);
        put_u32(&mut b, CRC_OFFSET, crc);
        b
    }

    pub fn decode(b: &[u8]) -> Result<Header, HeaderError> {
        if b.get(..MAGIC.len()) != Some(&MAGIC[..]) {
            return Err(HeaderError::NotCairn);
        }
        let (Some(version), Some(page_size), Some(crc)) = (
            get_u32(b, VERSION_OFFSET),
            get_u32(b, PAGE_SIZE_OFFSET),
            get_u32(b, CRC_OFFSET),
        ) else {
            return Err(HeaderError::Damaged);
        };
        if crc32fast::hash(&b[..CRC_OFFSET]) != crc {
            return Err(HeaderError::Damaged);
        }
        Ok(Header { version, page_size })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let h = Header {
            version: FORMAT_VERSION,
            page_size: 4096,
        };
        let mut b = h.encode();
        assert_eq!(Header::decode(&b), Ok(h));
        b[PAGE_SIZE_OFFSET] ^= 1;
        assert_eq!(Header::decode(&b), Err(HeaderError::Damaged));
        b[0] = b'X';
        assert_eq!(Header::decode(&b), Err(HeaderError::NotCairn));
        assert_eq!(
            Header::decode(&MAGIC),
            Err(HeaderError::Damaged),
            "cut short"
        );
    }
}
