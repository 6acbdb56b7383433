//! The workloads of the published reports Cairn is measured against: bulk loads, point
//! reads, scans, batches, large values, updates and deletes, 1 KiB records, and the BoltDB
//! record-encoding study.

use std::io;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::script::ScriptWriter;
use super::{Params, Scripts};

/// The suites, with what each measures.
pub const SUITES: [(&str, &str); 11] = [
    (
        "seq-write",
        "N keys written in key order in one transaction",
    ),
    (
        "read-seq",
        "N point reads in key order, after loading N keys",
    ),
    (
        "read-random",
        "N point reads in random order, after loading N keys",
    ),
    ("scan-full", "10 full scans of N keys"),
    ("scan-10pct", "10 scans of N/10 keys from random starts"),
    ("batches", "N/100 transactions of 100 random puts"),
    (
        "large-values",
        "N values of --value-size bytes (default 1 MiB; N capped at 256 MiB in all), one per transaction, then read back",
    ),
    (
        "update-delete",
        "N updates then N deletes, one per transaction, after loading N keys",
    ),
    (
        "kv-1k",
        "N 1 KiB records written in key order in batches of 2,000, then random order, then read back",
    ),
    (
        "encoding",
        "N records one per transaction vs all in one; N/2 random reads; N/3 consecutive; full scan; N/2 updates",
    ),
    (
        "scan-sizes",
        "point reads and scans of 10, 100 and 1,000 keys over N keys",
    ),
];

/// The most bytes of values `large-values` writes, whatever N is.
const LARGE_VALUES_BUDGET: u64 = 256 << 20;

/// Writes suite `name`; `None` when there is no such suite.
pub fn generate(name: &str, p: &Params, scripts: &Scripts) -> io::Result<Option<(u64, u64)>> {
    let n = p.records;
    let title = format!("{name}: {n} records, {}-byte values", p.value_size);
    let value_size = if name == "large-values" && !p.value_size_given {
        1 << 20
    } else if name == "kv-1k" && !p.value_size_given {
        1024
    } else {
        p.value_size
    };
    let mut setup = ScriptWriter::create(
        &scripts.setup,
        &format!("{title} (setup)"),
        value_size,
        p.seed,
        p.text_keys,
    )?;
    let mut run = ScriptWriter::create(&scripts.run, &title, value_size, p.seed, p.text_keys)?;
    let mut rng = SmallRng::seed_from_u64(p.seed);
    let mut shuffled: Vec<u64> = (0..n).collect();
    shuffled.shuffle(&mut rng);
    match name {
        "seq-write" => run.load(0..n, value_size, usize::MAX)?,
        "read-seq" | "read-random" | "scan-full" | "scan-10pct" | "update-delete"
        | "scan-sizes" => {
            setup.load(0..n, value_size, 10_000)?;
            match name {
                "read-seq" => (0..n).try_for_each(|k| run.get(k))?,
                "read-random" => shuffled.iter().try_for_each(|&k| run.get(k))?,
                "scan-full" => (0..10).try_for_each(|_| run.scan(None, None))?,
                "scan-10pct" => (0..10).try_for_each(|_| {
                    run.scan(Some(rng.random_range(0..n.max(1))), Some(n / 10))
                })?,
                "update-delete" => {
                    shuffled
                        .iter()
                        .try_for_each(|&k| run.put_version(k, value_size, 1))?;
                    shuffled.iter().try_for_each(|&k| run.delete(k))?;
                }
                _ => {
                    (0..1000).try_for_each(|_| run.get(rng.random_range(0..n.max(1))))?;
                    for (count, len) in [(1000, 10), (100, 100), (10, 1000)] {
                        (0..count).try_for_each(|_| {
                            run.scan(Some(rng.random_range(0..n.max(1))), Some(len))
                        })?;
                    }
                }
            }
        }
        "batches" => {
            for _ in 0..n.div_ceil(100) {
                run.line("BEGIN")?;
                (0..100)
                    .try_for_each(|_| run.put(rng.random_range(0..n.max(1) * 10), value_size))?;
                run.line("COMMIT")?;
            }
        }
        "large-values" => {
            let n = n.min((LARGE_VALUES_BUDGET / value_size.max(1) as u64).max(1));
            (0..n).try_for_each(|k| run.put(k, value_size))?;
            (0..n).try_for_each(|k| run.get(k))?;
        }
        "kv-1k" => {
            run.line("CREATE TABLE sequential")?;
            run.line("CREATE TABLE random")?;
            run.line("USE sequential")?;
            run.load(0..n, value_size, 2000)?;
            run.line("USE random")?;
            run.load(shuffled.iter().copied(), value_size, 2000)?;
            run.line("USE sequential")?;
            (0..n).try_for_each(|k| run.get(k))?;
            run.line("USE random")?;
            shuffled.iter().try_for_each(|&k| run.get(k))?;
        }
        "encoding" => {
            run.line("CREATE TABLE single")?;
            run.line("CREATE TABLE batch")?;
            run.line("USE single")?;
            (0..n).try_for_each(|k| run.put(k, value_size))?;
            run.line("USE batch")?;
            run.load(0..n, value_size, usize::MAX)?;
            shuffled
                .iter()
                .take((n / 2) as usize)
                .try_for_each(|&k| run.get(k))?;
            run.scan(Some(rng.random_range(0..n.max(1))), Some(n / 3))?;
            run.scan(None, None)?;
            shuffled
                .iter()
                .rev()
                .take((n / 2) as usize)
                .try_for_each(|&k| run.put(k, value_size))?;
        }
        _ => return Ok(None),
    }
    Ok(Some((setup.finish()?, run.finish()?)))
}
