//! Each measurement runs in a process of its own: the harness starts itself again with
//! `--child STORE` and what to measure, and reads back one figure.
//!
//! In one process, a store inherited the state the stores before it left: the allocator's
//! heap (memory an LSM's memtables had touched, and that the C library kept, served the
//! next store's mallocs without page faults), threads still winding down, the caches. With
//! every store in one process, LMDB wrote 32 MiB of 10 KiB values at 919–941 MiB/s after
//! fjall and sled had run, 752–771 MiB/s beside Cairn alone; Cairn's figure moved too
//! (docs/benchmark-history.md, twenty-ninth session).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::store::{NOT_SHARED, R};

/// What a child measures.
pub enum Measure<'a> {
    /// One of the built-in workloads, by its full name.
    Workload(&'a str),
    /// A workload script (`NAME.run.cq`, after its `NAME.setup.cq` if there is one).
    Script(&'a Path),
}

/// The line a child prints for a store that cannot run the row.
const NOT_SHARED_LINE: &str = "not-shared";
/// How the line with a child's figure starts.
const FIGURE: &str = "figure ";

/// Runs one measurement of `store` in a new process of this program; returns its figure.
///
/// # Errors
/// The child's failure (its standard error is passed through), or [`NOT_SHARED`].
pub fn measure(store: &str, what: &Measure<'_>, keys: u64, durable: bool) -> R<f64> {
    let mut c = Command::new(std::env::current_exe()?);
    c.args(["--child", store, "--keys", &keys.to_string()]);
    if !durable {
        c.arg("--eventual");
    }
    match what {
        Measure::Workload(name) => c.args(["--workload", name]),
        Measure::Script(run) => c.arg("--script").arg(run),
    };
    let out = c.stderr(Stdio::inherit()).output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    if last == NOT_SHARED_LINE {
        return Err(NOT_SHARED.into());
    }
    match last.strip_prefix(FIGURE).map(str::parse::<f64>) {
        Some(Ok(x)) if out.status.success() => Ok(x),
        _ => Err(format!("{store}: the measuring process failed ({})", out.status).into()),
    }
}

/// In the child: prints the outcome of `run` as [`measure`] reads it.
///
/// # Errors
/// `run`'s, other than [`NOT_SHARED`].
pub fn report(run: impl FnOnce() -> R<f64>) -> R<()> {
    match run() {
        Ok(x) => println!("{FIGURE}{x}"),
        Err(e) if e.to_string() == NOT_SHARED => println!("{NOT_SHARED_LINE}"),
        Err(e) => return Err(e),
    }
    Ok(())
}

/// The setup script that goes with `run` (`NAME.setup.cq` beside `NAME.run.cq`), if any.
pub fn setup_of(run: &Path) -> Option<PathBuf> {
    let name = run.file_name()?.to_string_lossy();
    let setup = run.with_file_name(format!("{}.setup.cq", name.strip_suffix(".run.cq")?));
    setup.exists().then_some(setup)
}
