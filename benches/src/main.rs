//! Cairn against peer stores, on the same workloads, in one run on one machine:
//! `cd benches && cargo run --release -- [--keys N] [--runs N] [--stores a,b] [--workloads 'x;y']`
//! (workloads by the start of their names, which hold commas: separated by semicolons);
//! `--memory DIR` measures the memory of a process reading a 1 GiB database instead.
//! With `CAIRN_PEERS_DETAIL` set, the rows of durable commits from threads print each
//! measurement's commit latencies and the store's own counters (Cairn's commits and syncs)
//! to standard error, the rows of readers beside a writer the writer's commits a second,
//! and the rows taken in turns each turn's figure.
//!
//! Every store gets a fresh folder and a fresh process (`child.rs`) for every measurement,
//! after a system-wide `sync`; loads that are not measured happen first. Each figure is the median of the runs. The last column is Cairn's figure
//! over the best peer's (for latencies, the best peer's over Cairn's): above 1 means Cairn
//! is ahead.

mod child;
mod memory;
mod script;
mod store;
mod stores;

use std::time::Instant;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use store::{R, Store};

const VALUE: usize = 100;

struct Params {
    keys: u64,
}

/// How a workload's figure reads.
#[derive(Clone, Copy, PartialEq)]
enum Unit {
    PerSecond,
    Micros,
    MegabytesPerSecond,
    /// The store's folder on disk after the run, with the store closed: the blocks its
    /// files take (a sparse file's holes count nothing), in MiB.
    MebibytesOnDisk,
    /// One figure over another of the same store, both taken in the same process.
    Times,
}

struct Workload {
    name: &'static str,
    unit: Unit,
    /// Whether `keys` sequential keys are loaded (untimed) first.
    loaded: bool,
    run: fn(&mut dyn Store, &Params) -> R<f64>,
}

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn shuffled(n: u64) -> Vec<[u8; 8]> {
    let mut k: Vec<[u8; 8]> = (0..n).map(key).collect();
    k.shuffle(&mut SmallRng::seed_from_u64(42));
    k
}

fn load(s: &mut dyn Store, keys: &[[u8; 8]], len: usize) -> R<()> {
    let v = vec![b'v'; len];
    s.write(&mut keys.iter().map(|k| (&k[..], Some(&v[..]))), true)
}

fn per_second(n: u64, f: impl FnOnce() -> R<()>) -> R<f64> {
    let t = Instant::now();
    f()?;
    Ok(n as f64 / t.elapsed().as_secs_f64())
}

fn sequential(n: u64) -> Vec<[u8; 8]> {
    (0..n).map(key).collect()
}

/// Starts of `count` ranges spread over `n` keys.
fn starts(n: u64, count: u64) -> Vec<[u8; 8]> {
    shuffled(n).into_iter().take(count as usize).collect()
}

/// `count` range reads of `len` keys, as a script: a store whose calls cross into another
/// runtime makes one crossing for all of them.
fn scans(s: &mut dyn Store, p: &Params, count: u64, len: usize) -> R<f64> {
    let ops: Vec<script::Op> = starts(p.keys, count)
        .iter()
        .map(|k| script::Op::Range(k.to_vec(), len))
        .collect();
    Ok(count as f64 / s.replay(&ops, true)?)
}

/// Writes `total` bytes of values of `len` bytes each in one durable transaction.
fn big_values(s: &mut dyn Store, len: usize, total: usize) -> R<f64> {
    let v = vec![b'm'; len];
    let n = (total / len) as u64;
    let keys = sequential(n);
    let t = Instant::now();
    s.write(&mut keys.iter().map(|k| (&k[..], Some(&v[..]))), true)?;
    Ok((n as usize * len) as f64 / (1 << 20) as f64 / t.elapsed().as_secs_f64())
}

fn batches_of_1k(s: &mut dyn Store, keys: &[[u8; 8]]) -> R<f64> {
    let v = [b'k'; 1024];
    per_second(keys.len() as u64, || {
        keys.chunks(2000)
            .try_for_each(|c| s.write(&mut c.iter().map(|k| (&k[..], Some(&v[..]))), true))
    })
}

/// Durable single-put commits from `threads` threads at once (1,000 in all, new keys from
/// `first` on after the loaded ones); returns commits per second over all threads.
fn on_threads(s: &mut dyn Store, p: &Params, threads: u64, first: u64) -> R<f64> {
    let detail = std::env::var_os("CAIRN_PEERS_DETAIL").is_some();
    let before = s.counters();
    let shared = s.shared().ok_or(store::NOT_SHARED)?;
    let per_thread = 1_000 / threads;
    let v = [b'w'; VALUE];
    let t = Instant::now();
    let outcomes: Vec<Result<Vec<f64>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|th| {
                scope.spawn(move || {
                    let mut waits = Vec::with_capacity(per_thread as usize);
                    for i in 0..per_thread {
                        let k = key(p.keys + first + th * per_thread + i);
                        let started = Instant::now();
                        shared.put_durable(&k, &v).map_err(|e| e.to_string())?;
                        waits.push(started.elapsed().as_secs_f64() * 1e6);
                    }
                    Ok(waits)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("panicked".to_owned())))
            .collect()
    });
    let elapsed = t.elapsed().as_secs_f64();
    let mut waits = Vec::new();
    for outcome in outcomes {
        waits.extend(outcome?);
    }
    if detail {
        waits.sort_by(f64::total_cmp);
        let at = |q: f64| waits[((waits.len() - 1) as f64 * q) as usize];
        eprintln!(
            "{threads} threads: {:.1} ms, commit µs p50 {:.0} p90 {:.0} p99 {:.0} max {:.0}; before: {}; after: {}",
            elapsed * 1e3,
            at(0.5),
            at(0.9),
            at(0.99),
            at(1.0),
            before.unwrap_or_default(),
            s.counters().unwrap_or_default()
        );
    }
    Ok((threads * per_thread) as f64 / elapsed)
}

/// The median of `xs`.
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Takes `measure`'s figure with `a` and with `b` in this process, in turns (a, b, b, a,
/// a, b); returns the median of `b`'s three over that of `a`'s. Taken in rows of their
/// own, the two figures are seconds or minutes apart, and the machine's speed (the disk's
/// most), which drifts by half over minutes on a shared virtual machine, can fall on one
/// of them alone. `measure` gets its turn's number too.
fn in_turns(a: u64, b: u64, mut measure: impl FnMut(u64, usize) -> R<f64>) -> R<f64> {
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    let detail = std::env::var_os("CAIRN_PEERS_DETAIL").is_some();
    for (turn, x) in [a, b, b, a, a, b].into_iter().enumerate() {
        let figure = measure(x, turn)?;
        if detail {
            eprintln!("turn {turn} with {x}: {figure:.0}");
        }
        if x == a {
            xs.push(figure)
        } else {
            ys.push(figure)
        }
    }
    Ok(median(ys) / median(xs))
}

/// How long readers read beside a writer.
const READING: std::time::Duration = std::time::Duration::from_secs(1);

/// Random gets from `readers` threads, in read transactions of 100 keys each, for
/// [`READING`] while another thread commits durable single puts of existing keys without
/// pause; returns gets per second over all readers.
fn readers_beside_writer(s: &mut dyn Store, p: &Params, readers: usize) -> R<f64> {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    let shared = s.shared().ok_or(store::NOT_SHARED)?;
    let keys = &shuffled(p.keys);
    let stop = &AtomicBool::new(false);
    let v = [b'u'; VALUE];
    let outcome = std::thread::scope(|scope| -> Result<f64, String> {
        let writer = scope.spawn(move || -> Result<u64, String> {
            let mut commits = 0;
            for k in keys.iter().cycle() {
                if stop.load(Relaxed) {
                    break;
                }
                shared.put_durable(k, &v).map_err(|e| e.to_string())?;
                commits += 1;
            }
            Ok(commits)
        });
        let start = Instant::now();
        let handles: Vec<_> = (0..readers)
            .map(|r| {
                scope.spawn(move || -> Result<usize, String> {
                    let mut n = 0;
                    let mut chunks = keys.chunks(100).cycle().skip(r * 97);
                    while start.elapsed() < READING {
                        let chunk = chunks.next().unwrap_or_default();
                        shared.read_shared(chunk).map_err(|e| e.to_string())?;
                        n += chunk.len();
                    }
                    Ok(n)
                })
            })
            .collect();
        let mut read = 0;
        let mut failed = None;
        for h in handles {
            match h.join() {
                Ok(Ok(n)) => read += n,
                Ok(Err(e)) => failed = Some(e),
                Err(_) => failed = Some("a reader panicked".into()),
            }
        }
        let secs = start.elapsed().as_secs_f64();
        stop.store(true, Relaxed);
        let commits = writer
            .join()
            .map_err(|_| "the writer panicked".to_owned())??;
        if std::env::var_os("CAIRN_PEERS_DETAIL").is_some() {
            eprintln!(
                "{readers} readers: {:.0} gets a second, the writer {:.0} commits a second",
                read as f64 / secs,
                commits as f64 / secs
            );
        }
        failed.map_or(Ok(read as f64 / secs), Err)
    });
    Ok(outcome?)
}

/// `p.keys` keys with 1 KiB values, loaded (untimed) in durable batches of 2,000, then each
/// read once in one read transaction, in key order or shuffled.
fn gets_of_1k(s: &mut dyn Store, p: &Params, random: bool) -> R<f64> {
    let keys = sequential(p.keys);
    let v = [b'k'; 1024];
    keys.chunks(2000)
        .try_for_each(|c| s.write(&mut c.iter().map(|k| (&k[..], Some(&v[..]))), true))?;
    let order = if random { shuffled(p.keys) } else { keys };
    per_second(p.keys, || s.read(&order).map(|_| ()))
}

/// Writes every key of `keys` in durable transactions of 1,000 random keys each.
fn in_random_batches(s: &mut dyn Store, keys: &[[u8; 8]], fill: u8) -> R<()> {
    let v = [fill; VALUE];
    keys.chunks(1000)
        .try_for_each(|c| s.write(&mut c.iter().map(|k| (&k[..], Some(&v[..]))), true))
}

const BIG: usize = 32 << 20;

const WORKLOADS: [Workload; 30] = [
    Workload {
        name: "insert, sequential, 1 txn",
        unit: Unit::PerSecond,
        loaded: false,
        run: |s, p| {
            let keys = sequential(p.keys);
            per_second(p.keys, || load(s, &keys, VALUE))
        },
    },
    Workload {
        name: "insert, random, 1 txn",
        unit: Unit::PerSecond,
        loaded: false,
        run: |s, p| {
            let keys = shuffled(p.keys);
            per_second(p.keys, || load(s, &keys, VALUE))
        },
    },
    Workload {
        name: "get, random",
        unit: Unit::PerSecond,
        loaded: true,
        run: |s, p| {
            let keys = shuffled(p.keys);
            per_second(p.keys, || s.read(&keys).map(|_| ()))
        },
    },
    Workload {
        name: "get, sequential",
        unit: Unit::PerSecond,
        loaded: true,
        run: |s, p| {
            let keys = sequential(p.keys);
            per_second(p.keys, || s.read(&keys).map(|_| ()))
        },
    },
    Workload {
        name: "get, random, 1 reader beside a writer",
        unit: Unit::PerSecond,
        loaded: true,
        run: |s, p| readers_beside_writer(s, p, 1),
    },
    Workload {
        name: "get, random, 2 readers beside a writer",
        unit: Unit::PerSecond,
        loaded: true,
        run: |s, p| readers_beside_writer(s, p, 2),
    },
    Workload {
        name: "get, random, beside a writer, what a second reader adds",
        unit: Unit::Times,
        loaded: true,
        run: |s, p| {
            in_turns(1, 2, |readers, _| {
                readers_beside_writer(s, p, readers as usize)
            })
            .map(|two_over_one| two_over_one - 1.0)
        },
    },
    Workload {
        name: "scan, full",
        unit: Unit::PerSecond,
        loaded: true,
        run: |s, p| per_second(p.keys, || s.range(&[], usize::MAX).map(|_| ())),
    },
    Workload {
        name: "scan, 10% from 10 random starts",
        unit: Unit::PerSecond,
        loaded: true,
        run: |s, p| {
            let from = starts(p.keys, 10);
            let len = (p.keys / 10) as usize;
            let t = Instant::now();
            let mut n = 0;
            for k in &from {
                n += s.range(k, len)?;
            }
            Ok(n as f64 / t.elapsed().as_secs_f64())
        },
    },
    Workload {
        name: "scans of 10 keys",
        unit: Unit::PerSecond,
        loaded: true,
        run: |s, p| scans(s, p, 10_000, 10),
    },
    Workload {
        name: "scans of 100 keys",
        unit: Unit::PerSecond,
        loaded: true,
        run: |s, p| scans(s, p, 1_000, 100),
    },
    Workload {
        name: "scans of 1,000 keys",
        unit: Unit::PerSecond,
        loaded: true,
        run: |s, p| scans(s, p, 100, 1000),
    },
    Workload {
        name: "update 10,000 random keys, 1 txn",
        unit: Unit::PerSecond,
        loaded: true,
        run: |s, p| {
            let keys = starts(p.keys, 10_000);
            let v = [b'u'; VALUE];
            per_second(keys.len() as u64, || {
                s.write(&mut keys.iter().map(|k| (&k[..], Some(&v[..]))), true)
            })
        },
    },
    Workload {
        name: "delete 10,000 random keys, 1 txn",
        unit: Unit::PerSecond,
        loaded: true,
        run: |s, p| {
            let keys = starts(p.keys, 10_000);
            per_second(keys.len() as u64, || {
                s.write(&mut keys.iter().map(|k| (&k[..], None)), true)
            })
        },
    },
    Workload {
        name: "durable commit, 1 put",
        unit: Unit::Micros,
        loaded: true,
        run: |s, p| {
            let n = 500u64;
            let v = [b'w'; VALUE];
            let t = Instant::now();
            for i in 0..n {
                let k = key(p.keys + i);
                s.write(&mut std::iter::once((&k[..], Some(&v[..]))), true)?;
            }
            Ok(t.elapsed().as_secs_f64() * 1e6 / n as f64)
        },
    },
    Workload {
        name: "durable commits of 1 put, 1 thread",
        unit: Unit::PerSecond,
        loaded: true,
        run: |s, p| on_threads(s, p, 1, 0),
    },
    Workload {
        name: "durable commits of 1 put, 4 threads",
        unit: Unit::PerSecond,
        loaded: true,
        run: |s, p| on_threads(s, p, 4, 0),
    },
    Workload {
        name: "durable commits of 1 put, 4 threads over 1",
        unit: Unit::Times,
        loaded: true,
        run: |s, p| {
            in_turns(1, 4, |threads, turn| {
                on_threads(s, p, threads, turn as u64 * 1_000)
            })
        },
    },
    Workload {
        name: "durable txns of 100 random puts",
        unit: Unit::PerSecond,
        loaded: true,
        run: |s, p| {
            let txns = 200u64;
            let v = [b'w'; VALUE];
            let keys = shuffled(p.keys);
            per_second(txns, || {
                keys.chunks(100)
                    .cycle()
                    .take(txns as usize)
                    .try_for_each(|c| s.write(&mut c.iter().map(|k| (&k[..], Some(&v[..]))), true))
            })
        },
    },
    Workload {
        name: "1 KiB values, batches of 2,000, sequential",
        unit: Unit::PerSecond,
        loaded: false,
        run: |s, p| batches_of_1k(s, &sequential(p.keys)),
    },
    Workload {
        name: "1 KiB values, batches of 2,000, random",
        unit: Unit::PerSecond,
        loaded: false,
        run: |s, p| batches_of_1k(s, &shuffled(p.keys)),
    },
    Workload {
        name: "1 KiB values, get, sequential",
        unit: Unit::PerSecond,
        loaded: false,
        run: |s, p| gets_of_1k(s, p, false),
    },
    Workload {
        name: "1 KiB values, get, random",
        unit: Unit::PerSecond,
        loaded: false,
        run: |s, p| gets_of_1k(s, p, true),
    },
    Workload {
        name: "1 KiB values, 32 MiB in 1 txn",
        unit: Unit::MegabytesPerSecond,
        loaded: false,
        run: |s, _| big_values(s, 1 << 10, BIG),
    },
    Workload {
        name: "10 KiB values, 32 MiB in 1 txn",
        unit: Unit::MegabytesPerSecond,
        loaded: false,
        run: |s, _| big_values(s, 10 << 10, BIG),
    },
    Workload {
        name: "100 KiB values, 32 MiB in 1 txn",
        unit: Unit::MegabytesPerSecond,
        loaded: false,
        run: |s, _| big_values(s, 100 << 10, BIG),
    },
    Workload {
        name: "1 MiB values, 32 MiB in 1 txn",
        unit: Unit::MegabytesPerSecond,
        loaded: false,
        run: |s, _| big_values(s, 1 << 20, BIG),
    },
    Workload {
        name: "1 MiB values, 1 durable txn each",
        unit: Unit::MegabytesPerSecond,
        loaded: false,
        run: |s, _| {
            let v = vec![b'm'; 1 << 20];
            per_second(32, || {
                (0..32u64).try_for_each(|i| {
                    let k = key(i);
                    s.write(&mut std::iter::once((&k[..], Some(&v[..]))), true)
                })
            })
        },
    },
    Workload {
        name: "space, random inserts in batches of 1,000",
        unit: Unit::MebibytesOnDisk,
        loaded: false,
        run: |s, p| in_random_batches(s, &shuffled(p.keys), b'v').map(|()| 0.0),
    },
    Workload {
        name: "space, then every key updated twice",
        unit: Unit::MebibytesOnDisk,
        loaded: false,
        run: |s, p| {
            let keys = shuffled(p.keys);
            in_random_batches(s, &keys, b'v')?;
            let mut again = keys;
            for fill in [b'u', b'w'] {
                again.reverse();
                in_random_batches(s, &again, fill)?;
            }
            Ok(0.0)
        },
    },
];

/// The blocks the files under `dir` take on disk, in bytes.
fn disk_usage(dir: &std::path::Path) -> R<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            disk_usage(&entry.path())?
        } else {
            meta.blocks() * 512
        };
    }
    Ok(total)
}

fn measure(open: stores::Opener, w: &Workload, p: &Params) -> R<f64> {
    let dir = tempfile::tempdir()?;
    let mut store = open(dir.path())?;
    if w.loaded {
        load(store.as_mut(), &sequential(p.keys), VALUE)?;
    }
    let figure = (w.run)(store.as_mut(), p)?;
    if w.unit != Unit::MebibytesOnDisk {
        return Ok(figure);
    }
    drop(store);
    Ok(disk_usage(dir.path())? as f64 / (1 << 20) as f64)
}

fn list(arg: Option<String>, separator: char) -> Option<Vec<String>> {
    arg.map(|s| s.split(separator).map(str::to_owned).collect())
}

/// Flushes every file's dirty pages (the `sync` command) before a measurement, so that the
/// writeback the measurements before it left behind, often another store's, does not land
/// in it: a durable write waits for the device's queue, whoever filled it.
fn settle_disk() {
    let _ = std::process::Command::new("sync").status();
}

/// Measures one row: each store `runs` times, printing the medians and ratios.
///
/// The runs go round the stores (one run of each, then the next round, every other round in
/// the reverse order), so that a change in the machine's speed during a row — on a shared
/// virtual machine, often 1.5× within minutes — falls on every store alike instead of on
/// whichever stores ran in the slow minutes.
fn row(name: &str, unit: Unit, stores: &[&str], runs: usize, measure: &dyn Fn(&str) -> R<f64>) {
    let unit_name = match unit {
        Unit::PerSecond => "ops/s",
        Unit::Micros => "µs",
        Unit::MegabytesPerSecond => "MiB/s",
        Unit::MebibytesOnDisk => "MiB",
        Unit::Times => "×",
    };
    print!("| {name} | {unit_name} |");
    // Each store's figures so far, and whether it can run this row at all.
    let mut xs: Vec<(Vec<f64>, bool)> = vec![(Vec::new(), true); stores.len()];
    for round in 0..runs {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..stores.len()).collect()
        } else {
            (0..stores.len()).rev().collect()
        };
        for i in order {
            let store = stores[i];
            if !xs[i].1 {
                continue;
            }
            settle_disk();
            match measure(store) {
                Ok(x) => xs[i].0.push(x),
                Err(e) if e.to_string() == store::NOT_SHARED => xs[i].1 = false,
                Err(e) => eprintln!("{store}, {name}: {e}"),
            }
        }
    }
    let figures: Vec<(&str, Option<f64>)> = stores
        .iter()
        .zip(&mut xs)
        .map(|(store, (x, _))| {
            x.sort_by(f64::total_cmp);
            (*store, x.get(x.len() / 2).copied())
        })
        .collect();
    let cairn = figures
        .iter()
        .find(|(n, _)| *n == "cairn")
        .and_then(|(_, x)| *x);
    // How far ahead `a` is of `b`, for this unit.
    let less_is_better = matches!(unit, Unit::Micros | Unit::MebibytesOnDisk);
    let ahead = |a: f64, b: f64| if less_is_better { b / a } else { a / b };
    for (store, figure) in &figures {
        let shown = match figure {
            Some(x) if less_is_better => format!("{x:.1}"),
            Some(x) if unit == Unit::Times => format!("{x:.2}"),
            Some(x) => format!("{x:.0}"),
            None => "–".into(),
        };
        match (cairn, figure) {
            (Some(c), Some(x)) if *store != "cairn" => print!(" {shown} ({:.2}) |", ahead(*x, c)),
            _ => print!(" {shown} |"),
        }
    }
    let best = figures
        .iter()
        .filter(|(n, _)| *n != "cairn")
        .filter_map(|(_, x)| *x)
        .reduce(|a, b| if ahead(a, b) >= 1.0 { a } else { b });
    match (cairn, best) {
        (Some(c), Some(b)) => println!(" {:.2} |", ahead(c, b)),
        _ => println!(" – |"),
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
}

fn main() -> R<()> {
    let mut args = std::env::args().skip(1);
    let (mut keys, mut runs, mut only_stores, mut only_workloads) =
        (100_000u64, 3usize, None, None);
    let (mut scripts, mut durable) = (None, true);
    let (mut child, mut workload, mut script) = (None, None, None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--keys" => keys = args.next().ok_or("--keys N")?.parse()?,
            "--runs" => runs = args.next().ok_or("--runs N")?.parse()?,
            "--stores" => only_stores = list(args.next(), ','),
            "--workloads" => only_workloads = list(args.next(), ';'),
            "--scripts" => {
                scripts = Some(std::path::PathBuf::from(
                    args.next().ok_or("--scripts DIR")?,
                ))
            }
            "--eventual" => durable = false,
            "--child" => child = Some(args.next().ok_or("--child STORE")?),
            "--workload" => workload = Some(args.next().ok_or("--workload NAME")?),
            "--script" => {
                script = Some(std::path::PathBuf::from(
                    args.next().ok_or("--script FILE")?,
                ))
            }
            "--memory" => {
                return memory::run(std::path::Path::new(&args.next().ok_or("--memory DIR")?));
            }
            "--memory-probe" => {
                return memory::probe(std::path::Path::new(
                    &args.next().ok_or("--memory-probe FILE")?,
                ));
            }
            _ => return Err(format!("unknown argument {a}").into()),
        }
    }
    let p = Params { keys };
    if let Some(store) = child {
        let open = stores::ALL
            .iter()
            .find(|(n, _)| *n == store)
            .map(|(_, open)| *open)
            .ok_or_else(|| format!("no store {store}"))?;
        return child::report(|| match (&workload, &script) {
            (Some(name), _) => {
                let w = WORKLOADS
                    .iter()
                    .find(|w| w.name == name)
                    .ok_or_else(|| format!("no workload {name}"))?;
                measure(open, w, &p)
            }
            (None, Some(run)) => {
                let setup = match child::setup_of(run) {
                    Some(path) => script::load(&path)?,
                    None => Vec::new(),
                };
                let ops = script::load(run)?;
                let dir = tempfile::tempdir()?;
                let mut store = open(dir.path())?;
                script::replay(store.as_mut(), &setup, true)?;
                script::replay(store.as_mut(), &ops, durable)
            }
            (None, None) => Err("--child needs --workload or --script".into()),
        });
    }
    let stores: Vec<&str> = stores::ALL
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| {
            only_stores
                .as_ref()
                .is_none_or(|o: &Vec<String>| o.iter().any(|x| x == n))
        })
        .collect();
    match &scripts {
        Some(dir) => println!(
            "Scripts from {} (cairn gen), {} commits, median of {runs} runs. A peer's cell: its figure \
             (its ratio to Cairn's: above 1, the peer is ahead). Last column: Cairn over the best peer.\n",
            dir.display(),
            if durable {
                "durable"
            } else {
                "non-durable (LMDB's stay durable)"
            }
        ),
        None => println!(
            "{keys} keys of 8 bytes, {VALUE}-byte values unless said, median of {runs} runs. A peer's cell: its \
             figure (its ratio to Cairn's: above 1, the peer is ahead). Last column: Cairn over the best \
             peer (above 1, Cairn is ahead). Latencies (µs) and space on disk (MiB, after closing) count lower as better.\n"
        ),
    }
    print!("| workload | unit |");
    for name in &stores {
        print!(" {name} |");
    }
    println!(" cairn / best peer |");
    println!("|{}", "---|".repeat(stores.len() + 3));
    if let Some(dir) = scripts {
        let mut runs_found: Vec<_> = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.to_string_lossy().ends_with(".run.cq"))
            .collect();
        runs_found.sort();
        for run in runs_found {
            let name = run
                .file_name()
                .map(|n| n.to_string_lossy().trim_end_matches(".run.cq").to_owned())
                .unwrap_or_default();
            let what = child::Measure::Script(&run);
            row(&name, Unit::PerSecond, &stores, runs, &|store| {
                child::measure(store, &what, keys, durable)
            });
        }
        return Ok(());
    }
    for w in WORKLOADS.iter().filter(|w| {
        only_workloads
            .as_ref()
            .is_none_or(|o: &Vec<String>| o.iter().any(|x| w.name.starts_with(x.as_str())))
    }) {
        let what = child::Measure::Workload(w.name);
        row(w.name, w.unit, &stores, runs, &|store| {
            child::measure(store, &what, keys, durable)
        });
    }
    Ok(())
}
