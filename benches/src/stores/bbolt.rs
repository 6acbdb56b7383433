//! bbolt (Go), linked as a C archive built from `bbolt/` (see build.rs). Every call does a
//! whole operation on the Go side — a transaction, a read of many keys, a range, or a
//! whole replayed script — so crossing between the runtimes costs once per operation, as
//! a call into a library would.

use std::ffi::{CStr, CString, c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::script::Op;
use crate::store::{Change, R, Shared, Store};

/// One change of a write, as `cairn_change` in bbolt/bbolt.go.
#[repr(C)]
struct CChange {
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    remove: c_int,
}

/// One operation of a replayed script, as `cairn_op` in bbolt/bbolt.go.
#[repr(C)]
struct COp {
    kind: c_int,
    key: *const u8,
    key_len: usize,
    changes: *const CChange,
    count: usize,
}

// Each function returns null, or an error message that `cairn_bbolt_free` releases.
unsafe extern "C" {
    fn cairn_bbolt_free(message: *mut c_char);
    fn cairn_bbolt_open(path: *const c_char, handle: *mut u64) -> *mut c_char;
    fn cairn_bbolt_close(handle: u64) -> *mut c_char;
    fn cairn_bbolt_write(
        handle: u64,
        changes: *const CChange,
        n: usize,
        durable: c_int,
    ) -> *mut c_char;
    fn cairn_bbolt_read(handle: u64, keys: *const u8, n: usize, out: *mut usize) -> *mut c_char;
    fn cairn_bbolt_get(handle: u64, key: *const u8, n: usize, out: *mut usize) -> *mut c_char;
    fn cairn_bbolt_range(
        handle: u64,
        start: *const u8,
        n: usize,
        limit: usize,
        out: *mut usize,
    ) -> *mut c_char;
    fn cairn_bbolt_replay(
        handle: u64,
        ops: *const COp,
        n: usize,
        durable: c_int,
        secs: *mut f64,
    ) -> *mut c_char;
}

/// Turns a returned message into an error.
fn check(message: *mut c_char) -> R<()> {
    if message.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null result is a NUL-terminated string from C.CString, which nothing
    // else holds; it is read once and then freed by the allocator that made it.
    let text = unsafe { CStr::from_ptr(message) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: as above; `message` is not used after this.
    unsafe { cairn_bbolt_free(message) };
    Err(format!("bbolt: {text}").into())
}

fn change((key, value): Change<'_>) -> CChange {
    CChange {
        key: key.as_ptr(),
        key_len: key.len(),
        value: value.map_or(std::ptr::null(), <[u8]>::as_ptr),
        value_len: value.map_or(0, <[u8]>::len),
        remove: c_int::from(value.is_none()),
    }
}

pub struct Bbolt(u64);

pub fn open(dir: &Path) -> R<Box<dyn Store>> {
    let path = CString::new(dir.join("bbolt.db").as_os_str().as_bytes())?;
    let mut handle = 0;
    // SAFETY: `path` is a NUL-terminated string alive for the call, `handle` a place to
    // write a u64.
    check(unsafe { cairn_bbolt_open(path.as_ptr(), &mut handle) })?;
    Ok(Box::new(Bbolt(handle)))
}

impl Drop for Bbolt {
    fn drop(&mut self) {
        // SAFETY: a handle from cairn_bbolt_open; a closed or unknown handle is no error.
        let _ = check(unsafe { cairn_bbolt_close(self.0) });
    }
}

impl Bbolt {
    fn write_all(&self, changes: &[CChange], durable: bool) -> R<()> {
        // SAFETY: every pointer in `changes` borrows from the caller's keys and values,
        // which outlive this call; the Go side keeps none of them after it returns.
        check(unsafe {
            cairn_bbolt_write(
                self.0,
                changes.as_ptr(),
                changes.len(),
                c_int::from(durable),
            )
        })
    }
}

impl Store for Bbolt {
    fn shared(&self) -> Option<&dyn Shared> {
        Some(self)
    }

    fn write(&mut self, changes: &mut dyn Iterator<Item = Change<'_>>, durable: bool) -> R<()> {
        let changes: Vec<CChange> = changes.map(change).collect();
        self.write_all(&changes, durable)
    }

    fn read(&self, keys: &[[u8; 8]]) -> R<usize> {
        let mut n = 0;
        // SAFETY: `keys` is `keys.len()` arrays of 8 bytes laid end to end, alive for the
        // call; `n` is a place to write a usize.
        check(unsafe { cairn_bbolt_read(self.0, keys.as_ptr().cast(), keys.len(), &mut n) })?;
        Ok(n)
    }

    fn get(&self, key: &[u8]) -> R<usize> {
        let mut n = 0;
        // SAFETY: `key` is alive for the call; `n` is a place to write a usize.
        check(unsafe { cairn_bbolt_get(self.0, key.as_ptr(), key.len(), &mut n) })?;
        Ok(n)
    }

    fn range(&self, start: &[u8], limit: usize) -> R<usize> {
        let mut n = 0;
        // SAFETY: `start` is alive for the call; `n` is a place to write a usize.
        check(unsafe { cairn_bbolt_range(self.0, start.as_ptr(), start.len(), limit, &mut n) })?;
        Ok(n)
    }

    fn replay(&mut self, ops: &[Op], durable: bool) -> R<f64> {
        // The script's changes as C structures, made before the clock starts (as the other
        // stores' scripts are converted before theirs).
        let changes: Vec<Vec<CChange>> = ops
            .iter()
            .map(|op| match op {
                Op::Write(cs) => cs.iter().map(|(k, v)| change((k, v.as_deref()))).collect(),
                _ => Vec::new(),
            })
            .collect();
        let c_ops: Vec<COp> = ops
            .iter()
            .zip(&changes)
            .map(|(op, cs)| {
                let (kind, key, count): (c_int, &[u8], usize) = match op {
                    Op::Write(_) => (0, &[], cs.len()),
                    Op::Get(k) => (1, k, 0),
                    Op::Range(k, limit) => (2, k, *limit),
                };
                COp {
                    kind,
                    key: key.as_ptr(),
                    key_len: key.len(),
                    changes: cs.as_ptr(),
                    count,
                }
            })
            .collect();
        let mut secs = 0.0;
        // SAFETY: `c_ops` and the `changes` and `ops` it points into are alive for the
        // call; `secs` is a place to write an f64.
        check(unsafe {
            cairn_bbolt_replay(
                self.0,
                c_ops.as_ptr(),
                c_ops.len(),
                c_int::from(durable),
                &mut secs,
            )
        })?;
        Ok(secs)
    }
}

impl Shared for Bbolt {
    fn put_durable(&self, key: &[u8], value: &[u8]) -> R<()> {
        self.write_all(&[change((key, Some(value)))], true)
    }

    fn read_shared(&self, keys: &[[u8; 8]]) -> R<usize> {
        Store::read(self, keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_reaches_bbolt_and_reports_what_it_found() -> R<()> {
        let dir = tempfile::tempdir()?;
        let mut s = open(dir.path())?;
        let keys: Vec<[u8; 8]> = (0..1000u64).map(u64::to_be_bytes).collect();
        s.write(
            &mut keys.iter().map(|k| (&k[..], Some(&b"value"[..]))),
            true,
        )?;
        assert_eq!(s.read(&keys)?, 5 * 1000);
        assert_eq!(s.get(&keys[7])?, 5);
        assert_eq!(s.range(&keys[990], usize::MAX)?, 10);
        assert_eq!(s.range(&[], 20)?, 20);
        s.write(&mut keys[..500].iter().map(|k| (&k[..], None)), false)?;
        assert_eq!(s.get(&keys[7])?, 0);
        assert_eq!(s.range(&[], usize::MAX)?, 500);

        let shared = s.shared().ok_or("bbolt is shared")?;
        shared.put_durable(&keys[7], b"seven")?;
        assert_eq!(shared.read_shared(&keys[..10])?, 5);

        let ops = vec![
            Op::Write(vec![
                (b"a".to_vec(), Some(b"1".to_vec())),
                (keys[999].to_vec(), None),
            ]),
            Op::Get(b"a".to_vec()),
            Op::Range(keys[990].to_vec(), 100),
        ];
        assert!(s.replay(&ops, true)? > 0.0);
        assert_eq!(s.get(b"a")?, 1);
        // 990..=998, then "a" (after every 8-byte key, which all start with 0).
        assert_eq!(s.range(&keys[990], usize::MAX)?, 10);
        Ok(())
    }

    #[test]
    fn a_failure_in_go_comes_back_as_an_error() -> R<()> {
        let dir = tempfile::tempdir()?;
        let mut s = open(dir.path())?;
        // bbolt refuses an empty key.
        let err = s.write(&mut std::iter::once((&b""[..], Some(&b"v"[..]))), true);
        assert!(err.is_err_and(|e| e.to_string().starts_with("bbolt: ")));
        assert!(open(&dir.path().join("no/such/folder")).is_err());
        Ok(())
    }
}
