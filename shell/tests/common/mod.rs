//! What the shell's integration tests share: running the binary with input, and making
//! a database to run it on.

#![allow(dead_code)] // Each test crate uses some of these.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs `cmd` with `stdin` as its standard input, gathering its output. The input is
/// written from a thread: the shell runs statements as it reads them, so it may fill its
/// output pipes before it has read all its input.
pub fn run(cmd: &mut Command, stdin: &[u8]) -> Output {
    run_with(cmd, Some(stdin))
}

/// As [`run`]; with `None`, standard input is empty (`/dev/null`), not a pipe.
pub fn run_with(cmd: &mut Command, stdin: Option<&[u8]>) -> Output {
    let mut child = cmd
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    let writer = child.stdin.take().zip(stdin).map(|(mut input, stdin)| {
        let stdin = stdin.to_vec();
        std::thread::spawn(move || {
            let _ = input.write_all(&stdin);
        })
    });
    let output = child.wait_with_output();
    if let Some(w) = writer {
        let _ = w.join();
    }
    output.unwrap_or_else(|e| panic!("wait: {e}"))
}

/// A new database at `path` whose default table holds `entries`, made through the engine.
pub fn database_with<K, V>(path: &Path, entries: impl IntoIterator<Item = (K, V)>)
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    let load = || -> cairn_engine::Result<()> {
        let db = cairn_engine::Database::create(path)?;
        let mut txn = db.begin_write()?;
        txn.create_table(cairn_query::DEFAULT_TABLE)?;
        let mut t = txn.open_table(cairn_query::DEFAULT_TABLE)?;
        for (k, v) in entries {
            t.insert(k.as_ref(), v.as_ref())?;
        }
        txn.commit()
    };
    load().unwrap_or_else(|e| panic!("{e}"));
}
