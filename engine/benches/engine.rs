//! Engine micro-benchmarks: `cargo bench -p cairn-engine`.
//!
//! Ids carry their parameter (`get_random/100000`). Inserts run in one transaction on an
//! in-memory database, so they measure the tree, not the disk (`insert_spilling` under a
//! transaction memory budget smaller than the tree); `commit_durable` measures
//! one durable single-put commit on a real file; `commit_eventual` one single-put update
//! of a 100,000-key table committed without a sync (the commit's own CPU: copying the path,
//! encoding and writing its pages); `put_large` 32 MiB of values of one size in one
//! Eventual transaction on a real file; `remove_range` and `remove_each` every key of a
//! table in one transaction, by range and key by key.

use std::hint::black_box;

use cairn_engine::{Database, Durability};
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;

const SIZES: [u64; 2] = [1_000, 100_000];
const VALUE: [u8; 100] = [7; 100];

fn keys(n: u64, random: bool) -> Vec<[u8; 8]> {
    let mut k: Vec<[u8; 8]> = (0..n).map(u64::to_be_bytes).collect();
    if random {
        k.shuffle(&mut SmallRng::seed_from_u64(42));
    }
    k
}

fn loaded(n: u64) -> Database {
    let db = Database::builder()
        .durability(Durability::Eventual)
        .in_memory()
        .unwrap_or_else(|e| panic!("{e}"));
    load(&db, n);
    db
}

/// Creates table `t` in `db` holding `n` sequential keys.
fn load(db: &Database, n: u64) {
    let run = || -> cairn_engine::Result<()> {
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        let mut t = w.open_table("t")?;
        for k in keys(n, false) {
            t.insert(&k, &VALUE)?;
        }
        w.commit()
    };
    run().unwrap_or_else(|e| panic!("{e}"));
}

/// Inserts `ks` into a new table of `db` (made untimed) in one transaction, and commits.
fn insert_all(db: cairn_engine::Result<Database>, ks: &[[u8; 8]]) -> cairn_engine::Result<()> {
    let mut w = db?.begin_write()?;
    w.create_table("t")?;
    let mut t = w.open_table("t")?;
    for k in ks {
        t.insert(k, &VALUE)?;
    }
    w.commit()
}

fn insert(c: &mut Criterion) {
    for random in [false, true] {
        let name = if random {
            "insert_random"
        } else {
            "insert_sequential"
        };
        let mut g = c.benchmark_group(name);
        for n in SIZES {
            g.throughput(Throughput::Elements(n));
            let ks = keys(n, random);
            g.bench_with_input(BenchmarkId::from_parameter(n), &ks, |b, ks| {
                b.iter_batched(
                    || {
                        Database::builder()
                            .durability(Durability::Eventual)
                            .in_memory()
                    },
                    |db| insert_all(db, ks),
                    BatchSize::PerIteration,
                );
            });
        }
        g.finish();
    }
}

/// The inserts of [`insert`] at 100,000 keys under a 1 MiB transaction memory budget (the
/// tree's leaves take about 11 MiB): what spilling costs a transaction, sequential loads
/// writing each leaf once, random ones reading back and writing again the leaves they
/// change after a spill.
fn insert_spilling(c: &mut Criterion) {
    let mut g = c.benchmark_group("insert_spilling");
    let n = 100_000;
    g.throughput(Throughput::Elements(n));
    for random in [false, true] {
        let ks = keys(n, random);
        let id = if random { "random" } else { "sequential" };
        g.bench_with_input(BenchmarkId::new(id, n), &ks, |b, ks| {
            b.iter_batched(
                || {
                    Database::builder()
                        .durability(Durability::Eventual)
                        .txn_memory(1 << 20)
                        .in_memory()
                },
                |db| insert_all(db, ks),
                BatchSize::PerIteration,
            );
        });
    }
    g.finish();
}

fn get(c: &mut Criterion) {
    for random in [false, true] {
        let name = if random {
            "get_random"
        } else {
            "get_sequential"
        };
        let mut g = c.benchmark_group(name);
        for n in SIZES {
            let db = loaded(n);
            let ks = keys(n, random);
            g.throughput(Throughput::Elements(n));
            g.bench_function(BenchmarkId::from_parameter(n), |b| {
                b.iter(|| -> cairn_engine::Result<usize> {
                    let r = db.begin_read()?;
                    let t = r.open_table("t")?;
                    let mut total = 0;
                    for k in &ks {
                        total += t.get(k)?.map_or(0, <[u8]>::len);
                    }
                    Ok(black_box(total))
                });
            });
        }
        g.finish();
    }
}

fn scan(c: &mut Criterion) {
    let mut g = c.benchmark_group("range_scan");
    for n in SIZES {
        let db = loaded(n);
        g.throughput(Throughput::Elements(n));
        g.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| -> cairn_engine::Result<usize> {
                let r = db.begin_read()?;
                let t = r.open_table("t")?;
                let mut total = 0;
                for e in t.iter()? {
                    total += e?.1.len();
                }
                Ok(black_box(total))
            });
        });
    }
    g.finish();
}

/// Ranges of `len` keys from random starts over 100,000 keys, each in a read transaction of
/// its own (the comparison's "scans of N keys" rows, here warm and in memory).
fn short_scans(c: &mut Criterion) {
    let n = 100_000;
    let db = loaded(n);
    let starts = keys(n, true);
    let mut g = c.benchmark_group("short_scans");
    for len in [10usize, 100, 1_000] {
        let mut next = starts.iter().cycle();
        g.throughput(Throughput::Elements(len as u64));
        g.bench_function(BenchmarkId::from_parameter(len), |b| {
            b.iter(|| -> cairn_engine::Result<usize> {
                let start = next.next().copied().unwrap_or_default();
                let r = db.begin_read()?;
                let t = r.open_table("t")?;
                let mut total = 0;
                for e in t.range(&start[..]..)?.take(len) {
                    total += e?.1.len();
                }
                Ok(black_box(total))
            });
        });
    }
    g.finish();
}

fn commit_durable(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = Database::create(dir.path().join("bench.cairn")).unwrap_or_else(|e| panic!("{e}"));
    let setup = || -> cairn_engine::Result<()> {
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.commit()
    };
    setup().unwrap_or_else(|e| panic!("{e}"));
    let mut i = 0u64;
    c.bench_function("commit_durable/1", |b| {
        b.iter(|| -> cairn_engine::Result<()> {
            i += 1;
            let mut w = db.begin_write()?;
            w.open_table("t")?.insert(&i.to_be_bytes(), &VALUE)?;
            w.commit()
        });
    });
}

fn commit_eventual(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = Database::builder()
        .durability(Durability::Eventual)
        .create(dir.path().join("bench.cairn"))
        .unwrap_or_else(|e| panic!("{e}"));
    let n = 100_000u64;
    load(&db, n);
    let order = keys(n, true);
    let mut next = order.iter().cycle();
    c.bench_function("commit_eventual/update_1_of_100000", |b| {
        b.iter(|| -> cairn_engine::Result<()> {
            let k = next.next().copied().unwrap_or_default();
            let mut w = db.begin_write()?;
            w.open_table("t")?.insert(&k, &[9; 100])?;
            w.commit()
        });
    });
}

fn put_large(c: &mut Criterion) {
    let mut g = c.benchmark_group("put_large");
    g.sample_size(20);
    for len in [10 << 10, 1 << 20] {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let db = Database::builder()
            .durability(Durability::Eventual)
            .create(dir.path().join("bench.cairn"))
            .unwrap_or_else(|e| panic!("{e}"));
        let value = vec![b'v'; len];
        let count = (32usize << 20) / len;
        g.throughput(Throughput::Bytes((count * len) as u64));
        g.bench_function(BenchmarkId::from_parameter(len), |b| {
            b.iter(|| -> cairn_engine::Result<()> {
                let mut w = db.begin_write()?;
                if !w.table_exists("t")? {
                    w.create_table("t")?;
                }
                let mut t = w.open_table("t")?;
                for i in 0..count as u64 {
                    t.insert(&i.to_be_bytes(), &value)?;
                }
                w.commit()
            });
        });
    }
    g.finish();
}

/// Removing every key of a table in one transaction (rolled back, not committed): with
/// `remove_range`, and with one `remove` per key in key order.
fn remove(c: &mut Criterion) {
    for each in [false, true] {
        let name = if each { "remove_each" } else { "remove_range" };
        let mut g = c.benchmark_group(name);
        for n in SIZES {
            g.throughput(Throughput::Elements(n));
            let ks = keys(n, false);
            g.bench_with_input(BenchmarkId::from_parameter(n), &ks, |b, ks| {
                b.iter_batched(
                    || loaded(n),
                    // The database is handed back, to be dropped outside the timing.
                    |db| -> cairn_engine::Result<(u64, Database)> {
                        let mut w = db.begin_write()?;
                        let mut t = w.open_table("t")?;
                        let removed = if each {
                            let mut removed = 0;
                            for k in ks {
                                removed += u64::from(t.remove(k)?);
                            }
                            removed
                        } else {
                            t.remove_range::<[u8], _>(..)?
                        };
                        drop(w);
                        Ok((black_box(removed), db))
                    },
                    BatchSize::PerIteration,
                );
            });
        }
        g.finish();
    }
}

criterion_group!(
    benches,
    insert,
    insert_spilling,
    get,
    scan,
    short_scans,
    remove,
    commit_durable,
    commit_eventual,
    put_large
);
criterion_main!(benches);
