//! `cairn compact SRC DST`: a dense copy of a database, written from one snapshot.

use anyhow::{Context, bail};
use cairn_engine::Database;

/// Runs `cairn compact` with `args` (after `compact`).
///
/// # Errors
/// Bad arguments, an unreadable source, or a destination that exists.
pub fn main(args: &[String]) -> anyhow::Result<()> {
    let [src, dst] = args else {
        bail!("usage: cairn compact SRC DST");
    };
    let db = Database::builder()
        .read_only(true)
        .open(src)
        .with_context(|| format!("cannot open {src}"))?;
    let entries = db
        .backup(dst)
        .with_context(|| format!("cannot write {dst}"))?;
    let before = std::fs::metadata(src)?.len();
    let after = std::fs::metadata(dst)?.len();
    println!("{src}: {before} bytes -> {dst}: {after} bytes ({entries} entries)");
    Ok(())
}
