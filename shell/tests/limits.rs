//! The environment says no: a real full disk (a file-size limit, with SIGXFSZ ignored so
//! that writes fail with EFBIG instead of killing the process), and files an unprivileged
//! user may not write. The shell reports clear errors, nothing is corrupted, and writes
//! succeed again once the cause is gone.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

mod common;

use common::run;

fn cairn(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
    c.args(args);
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_full_disk_fails_commits_cleanly_and_writes_resume_afterwards() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("full.cairn");
    let db_str = db.to_str().unwrap_or_default();
    let mut script = String::new();
    let value = "v".repeat(1000);
    for i in 0..5000 {
        script.push_str(&format!("PUT {i} '{value}'\nCOUNT\n"));
    }
    // 3 or 6 MiB of file at most (ulimit counts 512- or 1024-byte blocks, by shell), of
    // which the commit log, grown, takes 2 MiB; the script would need about 7 MiB.
    let limited = run(
        Command::new("sh")
            .arg("-c")
            .arg(r#"trap '' XFSZ; ulimit -f 6144 || exit 99; exec "$0" "$@""#)
            .arg(env!("CARGO_BIN_EXE_cairn"))
            .arg(db_str),
        script.as_bytes(),
    );
    assert_ne!(limited.status.code(), Some(99), "ulimit unavailable");
    assert_eq!(
        limited.status.code(),
        Some(1),
        "statements failed: {}",
        text(&limited.stderr)
    );
    assert!(
        text(&limited.stderr).contains("File too large"),
        "{}",
        text(&limited.stderr)
    );
    let acknowledged: u64 = text(&limited.stdout)
        .lines()
        .filter_map(|l| l.parse().ok())
        .max()
        .unwrap_or(0);
    assert!(
        acknowledged > 50 && acknowledged < 5000,
        "the disk filled up partway: {acknowledged}"
    );

    // Without the limit: the file is healthy, holds every acknowledged commit, and takes writes.
    let check = run(&mut cairn(&[db_str, "-c", ".check", "-c", "COUNT"]), b"");
    assert!(check.status.success(), "{}", text(&check.stderr));
    let out = text(&check.stdout);
    let count: u64 = out.lines().last().and_then(|l| l.parse().ok()).unwrap_or(0);
    assert!(out.starts_with("ok:") && count >= acknowledged, "{out}");
    let again = run(
        &mut cairn(&[
            db_str,
            "-c",
            "PUT 'after' 'the disk has room'",
            "-c",
            "GET 'after'",
        ]),
        b"",
    );
    assert_eq!(text(&again.stdout), "after\tthe disk has room\n");
}

fn as_nobody(args: &[&str]) -> Option<Output> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .ok()
        .is_some_and(|o| text(&o.stdout).trim() == "0");
    if !root {
        return None;
    }
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        env!("CARGO_BIN_EXE_cairn"),
    ])
    .args(args);
    Some(run(&mut c, b""))
}

#[test]
fn an_unprivileged_user_gets_clear_errors_for_files_it_may_not_write() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    let db = dir.path().join("owned-by-root.cairn");
    let db_str = db.to_str().unwrap_or_default();
    assert!(
        run(&mut cairn(&[db_str, "-c", "PUT 'k' 'v'"]), b"")
            .status
            .success()
    );
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644))
        .unwrap_or_else(|e| panic!("{e}"));
    let before = std::fs::read(&db).unwrap_or_default();

    let Some(o) = as_nobody(&[db_str, "-c", "SCAN"]) else {
        eprintln!("not root, or no setpriv: the permission tests need both; skipped");
        return;
    };
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr)
            .contains("Permission denied (os error 13) (-readonly opens it for reading)"),
        "{}",
        text(&o.stderr)
    );

    let Some(o) = as_nobody(&["-readonly", db_str, "-c", "SCAN"]) else {
        return;
    };
    assert!(
        o.status.success(),
        "read-only opening of a read-only file: {}",
        text(&o.stderr)
    );
    assert_eq!(text(&o.stdout), "k\tv\n");

    let new_in_readonly_dir = dir.path().join("new.cairn");
    let Some(o) = as_nobody(&[
        new_in_readonly_dir.to_str().unwrap_or_default(),
        "-c",
        "SCAN",
    ]) else {
        return;
    };
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("Permission denied"),
        "{}",
        text(&o.stderr)
    );
    assert!(!Path::new(&new_in_readonly_dir).exists());
    assert_eq!(
        std::fs::read(&db).unwrap_or_default(),
        before,
        "nothing modified"
    );
}
