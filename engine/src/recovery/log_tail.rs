//! Reading the commit log's records that follow the opened commit, a window of the log at
//! a time: opening a file whose log holds no newer record reads the log's first window,
//! not the whole log (up to 64 MiB).

use crate::error::{Error, Result};
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
    /// Bytes of records checksummed while looking past a broken one.
    #[cfg(test)]
    verified: u64,
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
            #[cfg(test)]
            verified: 0,
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
///
/// With `newest` (an open that will replay the records: the newest commit a slot names),
/// a record that fails its checksum or does not follow, in place of a commit up to
/// `newest` or where the cycle does not end cleanly (zeros, or a record of another cycle),
/// is looked past:
/// when a later record of the cycle says that completed writes had made the broken one
/// durable, the log is damaged (a power cut tears only a write under way), and that is an
/// error instead of the end of the cycle. This reads the rest of the log, which is why
/// it is done only when a slot shows the log should hold more or the cycle ends at a
/// break (after a crash, most often: once).
pub(crate) fn log_tail(
    storage: &dyn Storage,
    slot: &Slot,
    page_size: usize,
    legacy: bool,
    newest: Option<u64>,
) -> Result<Records> {
    log_cycle(storage, slot, page_size, legacy, newest).map(|(records, _)| records)
}

/// The records [`log_tail`] returns, `(page, payload)` of each.
pub(crate) type Records = Vec<(u64, Vec<u8>)>;

/// As [`log_tail`], with the id of the cycle's last record (`None`: the cycle has none):
/// for a logged commit's slot, whether its record is there.
pub(crate) fn log_cycle(
    storage: &dyn Storage,
    slot: &Slot,
    page_size: usize,
    legacy: bool,
    newest: Option<u64>,
) -> Result<(Records, Option<u64>)> {
    // (The run was checked by `check_log_run`: inside the file, at most 64 MiB.)
    if slot.log_page == 0 {
        return Ok((Vec::new(), None));
    }
    let p = page_size as u64;
    let unit = LOG_UNIT as u64;
    // (What the file holds of the log: all of it, but for a damaged file salvage reads,
    // cut short; the rest cannot be read, and is looked at as not there.)
    let log_start = slot.log_page * p;
    let log_len = (slot.log_pages * p).min(storage.len().saturating_sub(log_start));
    let mut window = Window::new(storage, log_start, log_len);
    let mut out = Vec::new();
    let units = log_len / unit;
    let (mut at, mut base, mut next, mut last) = (0u64, None, None, None);
    // A commit after its durable one that wrote its free set or left it implied was not
    // logged, and no record
    // follows it in that cycle (an unlogged commit leaves a gap until the next sync), or it
    // applied the log's records on opening: only a new cycle after it can follow. (Builds
    // before the thirty-ninth session gave the latter the first record's id, and a file a
    // crash left then would otherwise have the records after it applied a second time.)
    let cycle_closed = !slot.logged() && slot.durable_txid < slot.txid;
    while at < units {
        let offset = slot.log_page * p + at * unit;
        let head = window.from(at * unit, unit)?;
        let zeros = head.iter().all(|&b| b == 0);
        let decoded = match LogRecord::claimed_len(head) {
            Some(claimed) => {
                let bytes = window.from(at * unit, claimed as u64)?;
                LogRecord::decode(offset, bytes, page_size, legacy)
            }
            None => None,
        };
        // (Errors in a record name the page it starts in.)
        let page = offset / p;
        let of_cycle = |b: u64| match base {
            None => b == slot.txid || (b == slot.durable_txid && !cycle_closed),
            Some(cycle) => b == cycle,
        };
        let follows = decoded.as_ref().is_some_and(|r| {
            of_cycle(r.base)
                && match base {
                    None => r.base.checked_add(1) == Some(r.txid),
                    Some(_) => Some(r.txid) == next,
                }
        });
        // The clean ends of a cycle: units never written, or a whole record of another
        // cycle (an older one, which a sync closed). Anything else (a record that does not
        // verify, one of this cycle out of place) is a torn write or damage.
        let clean_end = match &decoded {
            Some(r) => !of_cycle(r.base),
            None => zeros,
        };
        let (Some(r), true) = (decoded, follows) else {
            // The end of the cycle: nothing more was written, or a power cut tore the
            // last write, or the log is damaged (a record that fails its checksum, or an
            // older page in place of the cycle's).
            // Looked past when a slot names a commit the records stop short of, or (since
            // the forty-third session) wherever they stop at a break: with the slot that
            // named the newest commit replaced by an older one, a damaged record opened
            // the commit before it without a word.
            let expected = next.unwrap_or(slot.txid.saturating_add(1));
            if newest.is_some_and(|newest| newest >= expected || !clean_end) {
                let broken = match (base, next) {
                    (Some(base), Some(txid)) => Broken::Next { base, txid },
                    _ => Broken::First([slot.txid, slot.durable_txid]),
                };
                // (From this unit: a record of the cycle that does not follow may itself
                // say the one it displaced was durable.)
                if let Some((missing, txid)) =
                    broken.proof(&mut window, slot, page_size, legacy, at..units)?
                {
                    return Err(Error::corrupt(
                        page,
                        format!(
                            "commit log damaged: the record of commit {missing} is missing \
                             or does not verify, and the record of commit {txid} after it \
                             says it was durable"
                        ),
                    ));
                }
            }
            break;
        };
        base = Some(r.base);
        next = r.txid.checked_add(1);
        last = Some(r.txid);
        if r.txid > slot.txid {
            out.push((page, r.payload.to_vec()));
        }
        at += r.units;
    }
    Ok((out, last))
}

/// What stands where the cycle's next record should have been: a record that does not
/// verify, or one that does not follow.
#[derive(Debug, Clone, Copy)]
enum Broken {
    /// After the records of the cycle after `base`, the record of commit `txid`.
    Next { base: u64, txid: u64 },
    /// The first record of a cycle after one of these bases.
    First([u64; 2]),
}

impl Broken {
    /// The commit whose record is broken, if a record of commit `txid` in the cycle after
    /// `base` (found later in the log) says completed writes had made that record durable
    /// (`durable` and those before it) before it was written, and the opened commit
    /// `opened` lacks it. (A record of an older cycle that a sync has applied since is not
    /// needed, damaged or not.)
    fn proven_by(self, (txid, base, durable): (u64, u64, u64), opened: u64) -> Option<u64> {
        let missing = match self {
            Broken::Next { base: b, txid: t } if base == b => t,
            Broken::First(bases) if bases.contains(&base) => base.checked_add(1)?,
            _ => return None,
        };
        (missing > opened && txid > missing && durable >= missing).then_some(missing)
    }

    /// The first record in `units` of the log that proves this one durable: the broken
    /// record's commit and the proving record's. Only a header that would prove it has its
    /// record read and verified, and the look goes on past that record, verified or not:
    /// each byte of the log is read about once, whatever the log holds.
    fn proof(
        self,
        window: &mut Window<'_>,
        slot: &Slot,
        page_size: usize,
        legacy: bool,
        units: std::ops::Range<u64>,
    ) -> Result<Option<(u64, u64)>> {
        let (p, unit) = (page_size as u64, LOG_UNIT as u64);
        let mut at = units.start;
        while at < units.end {
            let head = window.from(at * unit, unit)?;
            let (Some(claimed), Some(fields)) =
                (LogRecord::claimed_len(head), LogRecord::header(head))
            else {
                at += 1;
                continue;
            };
            if self.proven_by(fields, slot.txid).is_none() {
                at += 1;
                continue;
            }
            #[cfg(test)]
            {
                window.verified += claimed as u64;
            }
            let bytes = window.from(at * unit, claimed as u64)?;
            let offset = slot.log_page * p + at * unit;
            if let Some(r) = LogRecord::decode(offset, bytes, page_size, legacy)
                && let Some(missing) = self.proven_by((r.txid, r.base, r.durable), slot.txid)
            {
                return Ok(Some((missing, r.txid)));
            }
            at += (claimed as u64).div_ceil(unit).max(1);
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::{Broken, FIRST_WINDOW, MAX_WINDOW, Window, log_tail};
    use crate::Result as CairnResult;
    use crate::format::{LOG_UNIT, Slot, encode_record};
    use crate::storage::{MemoryStorage, Recording, Storage};

    const P: u64 = 1024;
    const LOG_PAGE: u64 = 2;

    /// A file with a 16-page log holding `records` (commit, base, durable before it, and
    /// payload length) one after the other from the log's first unit.
    fn log_of(records: &[(u64, u64, u64, usize)]) -> CairnResult<MemoryStorage> {
        let storage = MemoryStorage::new()?;
        storage.resize((LOG_PAGE + 16) * P)?;
        let mut unit = LOG_PAGE * P / LOG_UNIT as u64;
        for &(txid, base, durable, len) in records {
            let b = encode_record(unit, txid, base, durable, &vec![1u8; len]);
            storage.write(unit * LOG_UNIT as u64, &b)?;
            unit += (b.len() / LOG_UNIT) as u64;
        }
        Ok(storage)
    }

    /// How many records `log_tail` returns for a slot of commit `txid` whose durable
    /// commit is `durable`, opening for writing (`find_damage`) or not; `Err` with the
    /// error's text.
    fn tail_len(
        storage: &MemoryStorage,
        txid: u64,
        durable: u64,
        find_damage: bool,
    ) -> Result<usize, String> {
        let slot = Slot {
            txid,
            durable_txid: durable,
            page_count: LOG_PAGE + 16,
            log_page: LOG_PAGE,
            log_pages: 16,
            ..Slot::default()
        };
        let newest = find_damage.then_some(u64::MAX);
        log_tail(storage, &slot, P as usize, false, newest)
            .map(|t| t.len())
            .map_err(|e| e.to_string())
    }

    /// Flips a byte in the payload of the record starting at unit `unit` of the log.
    fn damage(storage: &MemoryStorage, unit: u64) -> CairnResult<()> {
        let at = LOG_PAGE * P + unit * LOG_UNIT as u64 + 40;
        let mut b = [0u8; 1];
        storage.read(at, &mut b)?;
        storage.write(at, &[b[0] ^ 0xff])?;
        Ok(())
    }

    /// A file cut short inside its log (damage salvage reads): the records it still holds
    /// are read, and the looks past a broken one stop at the file's end, without an error.
    #[test]
    fn a_log_the_file_cuts_short_is_read_as_far_as_it_goes() -> CairnResult<()> {
        let records = [(11, 10, 10, 9), (12, 10, 11, 9), (13, 10, 12, 9)];
        let s = log_of(&records)?;
        let cut = (LOG_PAGE * P) + 2 * LOG_UNIT as u64 + 100;
        s.resize(cut)?;
        assert_eq!(tail_len(&s, 10, 5, true), Ok(2));
        assert_eq!(tail_len(&s, 10, 5, false), Ok(2));
        // Cut before the log: nothing, and no error.
        s.resize(LOG_PAGE * P - 10)?;
        assert_eq!(tail_len(&s, 10, 5, true), Ok(0));
        Ok(())
    }

    /// A broken record is the end of the cycle (a torn write, or Eventual records that
    /// reached the disk out of order) unless a later record of the cycle says completed
    /// writes had made it durable: then the log is damaged, and that is an error.
    #[test]
    fn a_broken_record_a_later_one_proves_durable_is_damage() -> CairnResult<()> {
        // Commits 11 to 14 after durable commit 10, each durable on its own (one unit each).
        let durable = [
            (11, 10, 10, 9),
            (12, 10, 11, 9),
            (13, 10, 12, 9),
            (14, 10, 13, 9),
        ];
        let count = |s: &MemoryStorage| tail_len(s, 10, 5, true);
        let s = log_of(&durable)?;
        assert_eq!(count(&s), Ok(4));
        // The last one broken: a power cut may have torn it.
        damage(&s, 3)?;
        assert_eq!(count(&s), Ok(3));
        // The second one broken: commit 13's record says it was durable.
        let s = log_of(&durable)?;
        damage(&s, 1)?;
        let e = count(&s);
        assert!(
            e.as_ref()
                .is_err_and(|e| e.contains("the record of commit 12 is missing")),
            "{e:?}"
        );
        assert!(e.is_err_and(|e| e.contains("page 2")));
        // Without a look (a read-only opening beside a live writer), nothing is looked for
        // past it. With one, a record that does not verify is looked past whatever the
        // slots name (since the forty-third session; before, only when a slot named a
        // commit as new as the broken record's).
        assert_eq!(tail_len(&s, 10, 5, false), Ok(1));
        let slot = Slot {
            txid: 10,
            durable_txid: 5,
            page_count: LOG_PAGE + 16,
            log_page: LOG_PAGE,
            log_pages: 16,
            ..Slot::default()
        };
        assert!(log_tail(&s, &slot, P as usize, false, Some(11)).is_err());
        assert!(log_tail(&s, &slot, P as usize, false, Some(12)).is_err());
        // A clean end, a whole record of an older cycle where commit 13's should be, is
        // looked past only when a slot names commit 13 or later.
        let s = log_of(&durable)?;
        let stale = encode_record(LOG_PAGE * P / LOG_UNIT as u64 + 2, 7, 5, 6, &[1u8; 9]);
        s.write(LOG_PAGE * P + 2 * LOG_UNIT as u64, &stale)?;
        assert_eq!(log_tail(&s, &slot, P as usize, false, Some(12))?.len(), 2);
        assert!(log_tail(&s, &slot, P as usize, false, Some(13)).is_err());
        // The first one: the same, with no record read before it.
        let s = log_of(&durable)?;
        damage(&s, 0)?;
        assert!(count(&s).is_err_and(|e| e.contains("commit 11 is missing")));
        // Eventual records (the later ones claim only commit 11 durable): a cut.
        let eventual = [
            (11, 10, 10, 9),
            (12, 10, 11, 9),
            (13, 10, 11, 9),
            (14, 10, 11, 9),
        ];
        let s = log_of(&eventual)?;
        damage(&s, 2)?;
        assert_eq!(count(&s), Ok(2));
        // Records written before builds that say what was durable claim nothing.
        let old = [
            (11, 10, 0, 9),
            (12, 10, 0, 9),
            (13, 10, 0, 9),
            (14, 10, 0, 9),
        ];
        let s = log_of(&old)?;
        damage(&s, 1)?;
        assert_eq!(count(&s), Ok(1));
        // Long records: the proof is found past a record of several units.
        let long = [(11, 10, 10, 2000), (12, 10, 11, 9), (13, 10, 12, 3000)];
        let s = log_of(&long)?;
        damage(&s, 0)?;
        assert!(count(&s).is_err_and(|e| e.contains("commit 11 is missing")));
        // A later record of the cycle where commit 12's should be (a page copied over
        // another): it says 12 was durable itself.
        let s = log_of(&durable[..2])?;
        let moved = encode_record(LOG_PAGE * P / LOG_UNIT as u64 + 1, 13, 10, 12, &[1u8; 9]);
        s.write(LOG_PAGE * P + LOG_UNIT as u64, &moved)?;
        assert_eq!(tail_len(&s, 10, 5, false), Ok(1));
        let e = count(&s);
        assert!(e.is_err_and(|e| e.contains("commit 12 is missing")));
        // An older page in place of the log's: a record of an earlier cycle where
        // commit 12's should be, and later ones that say 12 was durable.
        let s = log_of(&durable)?;
        let stale = encode_record(LOG_PAGE * P / LOG_UNIT as u64 + 1, 7, 5, 6, &[1u8; 9]);
        s.write(LOG_PAGE * P + LOG_UNIT as u64, &stale)?;
        assert!(count(&s).is_err_and(|e| e.contains("commit 12 is missing")));
        // A cycle the opened commit (14, synced; durable before it 10) already holds:

        // its damaged record is not needed.
        let s = log_of(&durable)?;
        damage(&s, 1)?;
        assert_eq!(tail_len(&s, 14, 10, true), Ok(0));
        Ok(())
    }

    /// Records of the cycle its durable commit began follow a logged commit's slot, not the
    /// slot of a commit that wrote its free set (an unlogged one, or one that applied them
    /// on opening and took the first one's id, as builds before the thirty-ninth session
    /// did: a crash then had them applied a second time).
    #[test]
    fn a_commit_that_wrote_its_free_set_ends_the_cycle_before_it() -> CairnResult<()> {
        let records = [
            (11, 10, 10, 9),
            (12, 10, 11, 9),
            (13, 10, 12, 9),
            (14, 10, 13, 9),
        ];
        let s = log_of(&records)?;
        let slot = |freelist_page| Slot {
            txid: 11,
            durable_txid: 10,
            page_count: LOG_PAGE + 16,
            log_page: LOG_PAGE,
            log_pages: 16,
            freelist_page,
            ..Slot::default()
        };
        let logged = slot(Slot::FREELIST_IN_MEMORY);
        assert_eq!(log_tail(&s, &logged, P as usize, false, Some(14))?.len(), 3);
        let written = slot(0);
        assert!(written.records_freelist());
        assert_eq!(
            log_tail(&s, &written, P as usize, false, Some(14))?.len(),
            0
        );
        // Synced (its own durable commit): a cycle after it follows.
        assert_eq!(tail_len(&s, 10, 10, true), Ok(4));
        Ok(())
    }

    /// A log whose every unit after a broken record holds a header that would prove it,
    /// each claiming to run to the log's end and none verifying: the look past checksums
    /// about the log's length in all, not that much for each unit.
    #[test]
    fn headers_that_do_not_verify_are_looked_past_once() -> CairnResult<()> {
        let storage = MemoryStorage::new()?;
        let log_bytes = 64 * P;
        storage.resize((LOG_PAGE * P) + log_bytes)?;
        let first = LOG_PAGE * P / LOG_UNIT as u64;
        let units = log_bytes / LOG_UNIT as u64;
        for unit in 1..units {
            // Commit 13 of the cycle after 10, saying 12 was durable: a proof, if it verified.
            let mut b = encode_record(first + unit, 13, 10, 12, &[]);
            let claim = u32::try_from(log_bytes - unit * LOG_UNIT as u64 - 32).unwrap_or(0);
            b[24..28].copy_from_slice(&claim.to_le_bytes());
            storage.write(LOG_PAGE * P + unit * LOG_UNIT as u64, &b[..LOG_UNIT])?;
        }
        let slot = Slot {
            txid: 10,
            durable_txid: 5,
            page_count: LOG_PAGE + 64,
            log_page: LOG_PAGE,
            log_pages: 64,
            ..Slot::default()
        };
        let mut window = Window::new(&storage, LOG_PAGE * P, log_bytes);
        let broken = Broken::Next { base: 10, txid: 12 };
        assert_eq!(
            broken.proof(&mut window, &slot, P as usize, false, 1..units)?,
            None
        );
        assert!(
            window.verified <= log_bytes,
            "{} of {log_bytes}",
            window.verified
        );
        Ok(())
    }

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
