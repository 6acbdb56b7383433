//! Script tests: each `tests/scripts/NAME.cq` is run through the `cairn` binary and its
//! standard output, standard error and exit code compared with `NAME.out`, `NAME.err` and
//! `NAME.code` (absent files mean empty output and exit code 0).
//!
//! A first line `-- cairn ARGS` gives the command line (placeholders: `{db}` a fresh
//! database file, `{dir}` a scratch folder, `{scripts}` this folder, `{script}` the script
//! itself; they are filled in the script's text too); without it, the script is piped to
//! `cairn` on an in-memory database.
//! `CAIRN_BLESS=1` rewrites the expected files from what the binary printed.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scripts")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Runs one script; returns a description of every difference.
fn run_script(script: &Path) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let src = read(script);
    let fill = |s: &str| {
        s.replace("{db}", &dir.path().join("test.cairn").display().to_string())
            .replace("{dir}", &dir.path().display().to_string())
            .replace("{scripts}", &scripts_dir().display().to_string())
            .replace(
                "{script}",
                &dir.path().join("script.cq").display().to_string(),
            )
    };
    // The script runs as a copy with its placeholders filled in.
    let copy = dir.path().join("script.cq");
    std::fs::write(&copy, fill(&src)).unwrap_or_else(|e| panic!("write {}: {e}", copy.display()));
    let src = fill(&src);
    let header = src.lines().next().and_then(|l| l.strip_prefix("-- cairn"));
    let args: Vec<String> = header.map_or_else(Vec::new, |h| {
        h.split_whitespace().map(str::to_owned).collect()
    });
    let piped = !args.iter().any(|a| *a == copy.display().to_string());
    let out = common::run_with(
        Command::new(env!("CARGO_BIN_EXE_cairn")).args(&args),
        piped.then_some(src.as_bytes()),
    );
    let unfill = |s: &[u8]| {
        String::from_utf8_lossy(s)
            .replace(&dir.path().display().to_string(), "{dir}")
            .replace(&scripts_dir().display().to_string(), "{scripts}")
    };
    let actual = [
        ("out", unfill(&out.stdout)),
        ("err", unfill(&out.stderr)),
        ("code", format!("{}\n", out.status.code().unwrap_or(-1))),
    ];
    let mut diffs = Vec::new();
    for (ext, got) in actual {
        let expected_path = script.with_extension(ext);
        let default = if ext == "code" { "0\n" } else { "" };
        if std::env::var_os("CAIRN_BLESS").is_some() {
            if got == default {
                let _ = std::fs::remove_file(&expected_path);
            } else if let Err(e) = std::fs::write(&expected_path, &got) {
                diffs.push(format!("cannot write {}: {e}", expected_path.display()));
            }
            continue;
        }
        let want = if expected_path.exists() {
            read(&expected_path)
        } else {
            default.to_owned()
        };
        if got != want {
            diffs.push(format!(
                "{}: {ext} differs\n--- expected\n{want}--- got\n{got}",
                script.display()
            ));
        }
    }
    diffs
}

#[test]
fn scripts_print_what_is_expected() {
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(scripts_dir())
        .unwrap_or_else(|e| panic!("read {}: {e}", scripts_dir().display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "cq"))
        .collect();
    scripts.sort();
    assert!(
        scripts.len() >= 9,
        "scripts missing from {}",
        scripts_dir().display()
    );
    let diffs: Vec<String> = scripts.iter().flat_map(|s| run_script(s)).collect();
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
