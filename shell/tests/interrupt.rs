//! Ctrl-C (`SIGINT`) while a batch runs: the running scan or dump stops after the rows
//! already printed, the rest of the input is not run, and the exit status is 130.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use cairn_engine::Database;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const KEYS: u64 = 200_000;

/// A database whose `main` table holds `KEYS` keys.
fn database(path: &Path) -> Result<(), cairn_engine::Error> {
    let db = Database::create(path)?;
    let mut w = db.begin_write()?;
    w.create_table("main")?;
    let mut t = w.open_table("main")?;
    for i in 0..KEYS {
        t.insert(&i.to_be_bytes(), b"some value")?;
    }
    w.commit()
}

/// Runs `cairn FILE args...`, sends it `SIGINT` once its first output has arrived (it
/// cannot have finished: the pipe holds far less than the whole output, and nothing more
/// is read until the signal is sent), then reads the rest; returns the exit status, the
/// output and the error output.
fn interrupted(file: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg(file)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    let mut stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut out = vec![0u8; 4096];
    let n = stdout
        .read(&mut out)
        .unwrap_or_else(|e| panic!("read: {e}"));
    assert!(n > 0, "no output before the interrupt");
    out.truncate(n);
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or_else(|e| panic!("{e}")));
    kill(pid, Signal::SIGINT).unwrap_or_else(|e| panic!("kill: {e}"));
    stdout
        .read_to_end(&mut out)
        .unwrap_or_else(|e| panic!("read: {e}"));
    let output = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait: {e}"));
    (
        output.status.code(),
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn ctrl_c_stops_a_scan_and_skips_the_rest_of_the_batch() -> Result<(), cairn_engine::Error> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("db.cairn");
    database(&file)?;
    let (status, out, err) = interrupted(&file, &["-c", "SCAN", "-c", "PUT 'after' 1"]);
    assert_eq!(status, Some(130), "{err}");
    assert!(err.contains("-c: interrupted"), "{err}");
    let rows = out.lines().count() as u64;
    assert!(rows > 0 && rows < KEYS, "{rows} rows");
    // The statement after the interrupted one did not run.
    let db = Database::open(&file)?;
    let r = db.begin_read()?;
    assert_eq!(r.open_table("main")?.get(b"after")?, None);
    assert_eq!(r.open_table("main")?.len(), KEYS);
    Ok(())
}

#[test]
fn ctrl_c_leaves_a_dump_without_its_commit() -> Result<(), cairn_engine::Error> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("db.cairn");
    database(&file)?;
    let (status, out, err) = interrupted(&file, &["-c", ".dump"]);
    assert_eq!(status, Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(
        out.starts_with("-- Cairn dump"),
        "{}",
        &out[..out.len().min(200)]
    );
    let puts = out.lines().filter(|l| l.starts_with("PUT ")).count() as u64;
    assert!(puts < KEYS, "{puts} rows");
    // Loading the unfinished dump adds nothing: its transaction never commits.
    assert!(!out.lines().any(|l| l == "COMMIT"));
    Ok(())
}
