//! A hostile environment: files that are not databases, or not files at all, or in use.
//! Each gets a clear error and a non-zero exit from the shell, nothing hangs, and no file
//! is modified.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn cairn_on(path: &Path, extra: &[&str]) -> Output {
    let mut args = vec![path.to_str().unwrap_or_default(), "-c", "SCAN"];
    args.extend_from_slice(extra);
    let child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    let started = Instant::now();
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait: {e}"));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{} took too long",
        path.display()
    );
    out
}

fn refused(path: &Path, expect: &str) {
    let before = std::fs::read(path).ok();
    let o = cairn_on(path, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}: {err}", path.display());
    assert!(
        err.contains(expect),
        "{}: {err:?} lacks {expect:?}",
        path.display()
    );
    assert_eq!(
        std::fs::read(path).ok(),
        before,
        "{} was modified",
        path.display()
    );
}

#[test]
fn files_that_are_not_databases_are_refused_untouched() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap_or_else(|e| panic!("{e}"));
        p
    };
    refused(&write("empty", b""), "the file is empty");
    refused(&write("one-byte", b"C"), "truncated");
    refused(
        &write(
            "random",
            &(0..5000u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
                .collect::<Vec<_>>(),
        ),
        "not a Cairn database",
    );
    let mut sqlite = b"SQLite format 3\0".to_vec();
    sqlite.resize(4096, 0);
    refused(&write("sqlite", &sqlite), "not a Cairn database");
    refused(dir.path(), "not a regular file");
    refused(Path::new("/dev/null"), "not a regular file");

    // A newer format version.
    let db = dir.path().join("newer.cairn");
    assert!(cairn_on(&db, &[]).status.success());
    let mut bytes = std::fs::read(&db).unwrap_or_default();
    for copy in [0, 4096] {
        bytes[copy + 8..copy + 12].copy_from_slice(&9u32.to_le_bytes());
        let crc = crc32(&bytes[copy..copy + 16]);
        bytes[copy + 16..copy + 20].copy_from_slice(&crc.to_le_bytes());
    }
    std::fs::write(&db, &bytes).unwrap_or_else(|e| panic!("{e}"));
    refused(&db, "format version 9 is newer");
}

/// crc32 (IEEE), to forge a header without a dependency.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("mkfifo unavailable: skipped");
        return;
    }
    let o = cairn_on(&fifo, &["-readonly"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a regular file"));
}

#[test]
fn a_file_open_for_writing_elsewhere_is_reported_locked() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("busy.cairn");
    assert!(cairn_on(&db, &[]).status.success());
    // Hold the file open for writing in a second process: a shell reading a script that
    // never ends.
    let mut holder = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg(&db)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let o = cairn_on(&db, &[]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "locked by another process (pid {}) (-readonly opens it for reading)",
            holder.id()
        )),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the lock error arrives within the timeout"
    );
    // Read-only opening works meanwhile.
    assert!(cairn_on(&db, &["-readonly"]).status.success());
    // A script's `.open` of it fails the same way (a script never falls back to reading,
    // where the REPL does: tests/repl.rs), and `.open --readonly` reads it.
    let other = dir.path().join("other.cairn");
    let db_str = db.to_str().unwrap_or_default();
    let o = cairn_on(&other, &["-c", &format!(".open {db_str}")]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("(-readonly opens it for reading)"), "{err}");
    let o = cairn_on(
        &other,
        &["-c", &format!(".open --readonly {db_str}"), "-c", "TABLES"],
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "main\t0\n");
    let _ = holder.kill();
    let _ = holder.wait();
}

#[test]
fn reopening_the_file_open_here_closes_it_first() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("twice.cairn");
    let db_str = db.to_str().unwrap_or_default();
    let made = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([db_str, "-c", "PUT 'kept' 'committed'"])
        .status()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(made.success());
    // Under another name for the same file, too: a hard link.
    let other_name = dir.path().join("linked.cairn");
    std::fs::hard_link(&db, &other_name).unwrap_or_else(|e| panic!("{e}"));
    let o = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([
            db_str,
            "-c",
            "BEGIN; PUT 'lost' 'not committed'",
            "-c",
            &format!(".open {db_str}"),
            "-c",
            "PUT 'still' 'after the first'",
            "-c",
            &format!(".open {}", other_name.display()),
            "-c",
            "PUT 'again' 'after the second'",
        ])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(err, "rolled back the open transaction\n");
    let o = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([db_str, "-c", "SCAN"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "again\tafter the second\nkept\tcommitted\nstill\tafter the first\n"
    );
}
