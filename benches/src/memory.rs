//! Resident memory of a process that opens a 1 GiB Cairn database and reads 1,000 random
//! keys (issue 7's memory target): `cargo run --release -- --memory DIR`. The database
//! (1,000,000 keys of 8 bytes with 1 KiB values) is built in DIR first unless it is there;
//! a child process of this program then opens it, reads, and reports its own memory from
//! `/proc/self/status`: anonymous memory is what the process allocated, file memory is
//! what the OS maps of the database file.

use std::path::Path;
use std::process::Command;

use cairn_engine::{Database, Durability};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::store::R;

const KEYS: u64 = 1_000_000;
const VALUE: usize = 1024;

/// Builds the database if needed, then measures a fresh process reading from it.
pub fn run(dir: &Path) -> R<()> {
    let path = dir.join("memory.cairn");
    if !path.exists() {
        let db = Database::builder()
            .durability(Durability::Eventual)
            .create(&path)?;
        let v = [b'm'; VALUE];
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        for first in (0..KEYS).step_by(10_000) {
            let mut w = db.begin_write()?;
            let mut t = w.open_table("t")?;
            for k in first..(first + 10_000).min(KEYS) {
                t.insert(&k.to_be_bytes(), &v)?;
            }
            w.set_durability(Durability::Immediate);
            w.commit()?;
        }
    }
    let size = std::fs::metadata(&path)?.len();
    let out = Command::new(std::env::current_exe()?)
        .arg("--memory-probe")
        .arg(&path)
        .output()?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
    }
    println!(
        "database: {} ({:.2} GiB, {KEYS} keys, {VALUE}-byte values)\n",
        path.display(),
        size as f64 / f64::from(1 << 30)
    );
    print!("{}", String::from_utf8_lossy(&out.stdout));
    Ok(())
}

/// In the child: open, read 1,000 random keys, report memory before and after.
pub fn probe(path: &Path) -> R<()> {
    let start = status()?;
    let db = Database::open(path)?;
    let opened = status()?;
    let r = db.begin_read()?;
    let t = r.open_table("t")?;
    let mut rng = SmallRng::seed_from_u64(7);
    let mut found = 0;
    for _ in 0..1000 {
        let k: u64 = rng.random_range(0..KEYS);
        found += usize::from(t.get(&k.to_be_bytes())?.is_some());
    }
    if found != 1000 {
        return Err(format!("{found} of 1,000 keys found").into());
    }
    let read = status()?;
    println!("| moment | resident (MiB) | anonymous (MiB) | file-backed (MiB) |");
    println!("|---|---|---|---|");
    for (name, (rss, anon, file)) in [
        ("process start", start),
        ("database opened", opened),
        ("1,000 random gets read", read),
    ] {
        let mib = |kib: u64| kib as f64 / 1024.0;
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} |",
            mib(rss),
            mib(anon),
            mib(file)
        );
    }
    Ok(())
}

/// `VmRSS`, `RssAnon` and `RssFile` of this process, in KiB.
fn status() -> R<(u64, u64, u64)> {
    let text = std::fs::read_to_string("/proc/self/status")?;
    let field = |name: &str| -> R<u64> {
        let line = text
            .lines()
            .find(|l| l.starts_with(name))
            .ok_or_else(|| format!("{name} missing from /proc/self/status"))?;
        Ok(line
            .trim_start_matches(name)
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()?)
    };
    Ok((field("VmRSS:")?, field("RssAnon:")?, field("RssFile:")?))
}
