//! Reading the commit log's records that follow the opened commit, a window of the log at
//! a time: opening a file whose log holds no newer record reads the log's first window,
//! not the whole log (up to 64 MiB).

use crate::error::Result;
use crate::format::{LOG_UNIT, LogRecord, Slot};
use crate::storage::Storage;

/// The first window's bytes; each later one is at least twice the one before, up to
/// [`MAX_WINDOW`] (or as long as the record that needs it).
const FIRST_WINDOW: u64 = 16 << 10;
const MAX_WINDOW: u64 = 1 << 20;

/// The bytes of the log most recently read: `bytes` are the log's from byte `at`.
struct Window<'s> {
    storage: &'s dyn Storage,
    /// Where the log starts in the file, and its length in bytes.
    log_start: u64,
    log_len: u64,
    at: u64,
    bytes: Vec<u8>,
    /// How much the next read asks for, at least.
    next_len: u64,
}

impl<'s> Window<'s> {
    fn new(storage: &'s dyn Storage, log_start: u64, log_len: u64) -> Self {
        Window {
            storage,
            log_start,
            log_len,
            at: 0,
            bytes: Vec::new(),
            next_len: FIRST_WINDOW,
        }
    }

    /// The log's bytes from byte `from`: at least `want` of them, or all to the log's end.
    /// (Copied out of the file, not borrowed from its map: a writer in another process may
    /// be appending to the log while a read-only process opens it.)
    fn from(&mut self, from: u64, want: u64) -> Result<&[u8]> {
        let have = self.at + self.bytes.len() as u64;
        let end = from.saturating_add(want).min(self.log_len);
        if from < self.at || end > have {
            let end = from
                .saturating_add(want.max(self.next_len))
                .min(self.log_len);
            self.next_len = (self.next_len * 2).min(MAX_WINDOW);
            self.bytes.resize((end - from) as usize, 0);
            self.storage.read(self.log_start + from, &mut self.bytes)?;
            self.at = from;
        }
        Ok(&self.bytes[(from - self.at) as usize..])
    }
}

/// The records of the commit log that follow commit `slot`: `(page, payload)` of each.
///
/// The log holds one cycle of records: each names the durable commit it follows (its
/// base), the first follows the base, and each follows the one before it without a gap.
/// The cycle read is the one after the slot's own commit or after its durable one; records
/// of older cycles (or torn, or never written) end it, whatever comes after them.
/// `legacy`: the file is of format version 2, whose records are page-aligned.
pub(super) fn log_tail(
    storage: &dyn Storage,
    slot: &Slot,
    page_size: usize,
    legacy: bool,
) -> Result<Vec<(u64, Vec<u8>)>> {
    // (The run was checked by `check_log_run`: inside the file, at most 64 MiB.)
    if slot.log_page == 0 {
        return Ok(Vec::new());
    }
    let p = page_size as u64;
    let unit = LOG_UNIT as u64;
    let mut window = Window::new(storage, slot.log_page * p, slot.log_pages * p);
    let mut out = Vec::new();
    let units = slot.log_pages * (p / unit);
    let (mut at, mut base, mut next) = (0u64, None, None);
    while at < units {
        let offset = slot.log_page * p + at * unit;
        let head = window.from(at * unit, unit)?;
        let Some(claimed) = LogRecord::claimed_len(head) else {
            break;
        };
        let bytes = window.from(at * unit, claimed as u64)?;
        let Some(r) = LogRecord::decode(offset, bytes, page_size, legacy) else {
            break;
        };
        // (Errors in a record name the page it starts in.)
        let page = offset / p;
        let follows = match base {
            None => {
                (r.base == slot.txid || r.base == slot.durable_txid)
                    && r.base.checked_add(1) == Some(r.txid)
            }
            Some(b) => r.base == b && Some(r.txid) == next,
        };
        if !follows {
            break;
        }
        base = Some(r.base);
        next = r.txid.checked_add(1);
        if r.txid > slot.txid {
            out.push((page, r.payload.to_vec()));
        }
        at += r.units;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{FIRST_WINDOW, MAX_WINDOW, Window};
    use crate::Result as CairnResult;
    use crate::storage::{Recording, Storage};

    /// A window serves what it holds without reading, reads ahead in growing windows
    /// (a record longer than the window gets a window of its own length), reads again
    /// for bytes before it, and never reads past the log.
    #[test]
    fn a_window_reads_ahead_in_growing_reads_and_never_past_the_log() -> CairnResult<()> {
        let storage = Recording::new()?;
        let (start, len) = (4096, 8 << 20);
        storage.resize(start + len)?;
        let pattern: Vec<u8> = (0..len).map(|i| (i / 512) as u8).collect();
        storage.write(start, &pattern)?;
        let mut w = Window::new(&storage, start, len);
        let byte_at = |w: &mut Window, from: u64, want: u64| -> CairnResult<(u8, usize)> {
            let b = w.from(from, want)?;
            Ok((b[0], b.len()))
        };
        assert_eq!(byte_at(&mut w, 0, 512)?, (0, FIRST_WINDOW as usize));
        assert_eq!(
            byte_at(&mut w, 1024, 512)?,
            (2, FIRST_WINDOW as usize - 1024)
        );
        assert_eq!(storage.reads(), [(start, FIRST_WINDOW)]);
        // Past the window: the next read is twice as long.
        let past = FIRST_WINDOW;
        assert_eq!(byte_at(&mut w, past, 512)?.1, 2 * FIRST_WINDOW as usize);
        // A record longer than the window asks for its own length.
        let long = 3 * MAX_WINDOW;
        assert_eq!(byte_at(&mut w, past, long)?.1, long as usize);
        // Before the window: read again, from there.
        assert_eq!(byte_at(&mut w, 512, 512)?.0, 1);
        // Near the log's end: only to the end.
        assert_eq!(
            byte_at(&mut w, len - 512, 4096)?,
            (((len - 512) / 512) as u8, 512)
        );
        let c = storage.reads();
        assert_eq!(c.len(), 5, "{c:?}");
        assert!(c.iter().all(|&(at, n)| at + n <= start + len));
        assert!(c.iter().all(|&(_, n)| n <= long), "{c:?}");
        Ok(())
    }
}
