//! `cairn compact FILE`: compacts a database in place, online (other processes may read
//! it meanwhile). `cairn compact SRC DST`: a dense copy of a database, written from one
//! snapshot, leaving SRC as it is.

use anyhow::{Context, bail};
use cairn_engine::Database;

/// Runs `cairn compact` with `args` (after `compact`).
///
/// # Errors
/// Bad arguments, an unreadable source, or a destination that exists.
pub fn main(args: &[String]) -> anyhow::Result<()> {
    if let [file] = args {
        let db = Database::open(file).with_context(|| format!("cannot open {file}"))?;
        let r = db
            .compact()
            .with_context(|| format!("cannot compact {file}"))?;
        println!(
            "{file}: {} bytes -> {} bytes ({} pages moved, {} nodes merged, {} commits)",
            r.bytes_before, r.bytes_after, r.pages_moved, r.nodes_merged, r.steps
        );
        return Ok(());
    }
    let [src, dst] = args else {
        bail!("usage: cairn compact FILE | cairn compact SRC DST");
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
