//! `.export` and `.import` through the binary, checked against the engine: every key and
//! value survives the round trip byte for byte, whatever bytes they hold.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

type Entries = BTreeMap<Vec<u8>, Vec<u8>>;

fn entries(path: &Path) -> Entries {
    let read = || -> cairn_engine::Result<Entries> {
        let db = cairn_engine::Database::open(path)?;
        let r = db.begin_read()?;
        let t = r.open_table(cairn_query::DEFAULT_TABLE)?;
        t.iter()?
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect()
    };
    read().unwrap_or_else(|e| panic!("{e}"))
}

/// Bytes that stress CSV and the shell's printing: separators, quotes, line ends, text
/// that begins like a hex literal, invalid UTF-8, empty strings.
fn awkward(rng: &mut SmallRng) -> Vec<u8> {
    const PIECES: [&[u8]; 12] = [
        b",",
        b"\"",
        b"\n",
        b"\r\n",
        b"x'",
        b"X'00'",
        b"'",
        b" ",
        b"\xff\xfe",
        b"\0",
        b"caf\xc3\xa9",
        b"plain",
    ];
    (0..rng.random_range(0..6))
        .flat_map(|_| match rng.random_range(0..3) {
            0 => PIECES[rng.random_range(0..PIECES.len())].to_vec(),
            1 => vec![rng.random::<u8>()],
            _ => b"text".to_vec(),
        })
        .collect()
}

/// Runs `cairn DB -c COMMAND`.
fn cairn(db: &Path, command: &str) -> Output {
    common::run(
        Command::new(env!("CARGO_BIN_EXE_cairn"))
            .arg(db)
            .arg("-c")
            .arg(command),
        b"",
    )
}

/// Runs `cairn DB -c COMMAND`, which must succeed.
fn succeeds(db: &Path, command: &str) -> Output {
    let out = cairn(db, command);
    assert!(
        out.status.success(),
        "{command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn a_table_survives_export_and_import_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (from, to, csv) = (
        dir.path().join("from.cairn"),
        dir.path().join("to.cairn"),
        dir.path().join("rows.csv"),
    );
    let mut rng = SmallRng::seed_from_u64(33);
    let mut data = Entries::new();
    for i in 0..2000u32 {
        let mut key = awkward(&mut rng);
        key.extend_from_slice(&i.to_be_bytes());
        data.insert(key, awkward(&mut rng));
    }
    common::database_with(&from, &data);
    succeeds(&from, &format!(".export '{}'", csv.display()));
    let out = succeeds(&to, &format!(".import '{}'", csv.display()));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "imported 2000 rows into main"
    );
    assert_eq!(entries(&to), data);
}

#[test]
fn a_row_import_could_not_read_back_fails_the_export() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (db, csv) = (dir.path().join("db.cairn"), dir.path().join("rows.csv"));
    // 40 MiB of bytes that print as hex: an 80 MiB row.
    common::database_with(&db, [(b"big".to_vec(), vec![0xffu8; 40 << 20])]);
    let out = cairn(&db, &format!(".export '{}'", csv.display()));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the row of big is over the 64 MiB"), "{err}");
}

/// `-txnmemory` bounds the memory of a large `.import`: its transaction writes leaves
/// before it commits (`.stats` counts them), and the table it leaves is whole.
#[test]
fn a_large_import_under_a_small_transaction_budget_spills_and_loads_every_row() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (db, csv) = (dir.path().join("db.cairn"), dir.path().join("rows.csv"));
    let mut rng = SmallRng::seed_from_u64(34);
    let mut data = Entries::new();
    let mut text = String::new();
    for _ in 0..20_000 {
        let (key, value) = (rng.random::<u64>(), rng.random::<u64>());
        text.push_str(&format!("k{key},v{value}\n"));
        data.insert(
            format!("k{key}").into_bytes(),
            format!("v{value}").into_bytes(),
        );
    }
    std::fs::write(&csv, text).unwrap_or_else(|e| panic!("{e}"));
    let command = format!(".import '{}'\n.stats\n.check", csv.display());
    let out = common::run(
        Command::new(env!("CARGO_BIN_EXE_cairn")).arg(&db).args([
            "-txnmemory",
            "64K",
            "-c",
            &command,
        ]),
        b"",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spilled = stdout
        .lines()
        .find_map(|l| l.strip_prefix("pages spilled\t"))
        .and_then(|n| n.trim().parse::<u64>().ok());
    assert!(spilled.is_some_and(|n| n > 100), "{stdout}");
    assert!(
        stdout.contains("ok: ") && stdout.contains(" 20000 entries"),
        "{stdout}"
    );
    assert_eq!(entries(&db), data);
}
