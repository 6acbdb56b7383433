//! What the language costs over the engine API: the same autocommitted GETs and PUTs,
//! once through `cairn_engine` directly and once as parsed statements run by a `Session`.
//! `cargo bench -p cairn-query --bench exec`.

use std::hint::black_box;

use cairn_engine::{Database, Durability};
use cairn_query::{Session, Statement, parse_script};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const KEYS: u64 = 100_000;
const OPS: u64 = 1_000;

fn database() -> cairn_engine::Result<Database> {
    let db = Database::builder()
        .durability(Durability::Eventual)
        .in_memory()?;
    let mut w = db.begin_write()?;
    w.create_table("main")?;
    let mut t = w.open_table("main")?;
    for k in 0..KEYS {
        t.insert(&k.to_be_bytes(), &[b'v'; 100])?;
    }
    w.commit()?;
    Ok(db)
}

/// `OPS` keys spread over the table.
fn keys() -> Vec<u64> {
    (0..OPS)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % KEYS)
        .collect()
}

fn statements(verb: &str) -> Vec<Statement> {
    let value = "v".repeat(100);
    let src: String = keys()
        .iter()
        .map(|k| {
            if verb == "GET" {
                format!("GET {k}\n")
            } else {
                format!("PUT {k} '{value}'\n")
            }
        })
        .collect();
    parse_script(&src)
        .statements
        .into_iter()
        .map(|s| s.statement)
        .collect()
}

fn overhead(c: &mut Criterion) {
    let db = database().unwrap_or_else(|e| panic!("{e}"));
    let mut session = Session::new(db.clone()).unwrap_or_else(|e| panic!("{e}"));
    let keys: Vec<[u8; 8]> = keys().into_iter().map(u64::to_be_bytes).collect();
    let value = [b'v'; 100];

    let mut g = c.benchmark_group("get");
    g.throughput(Throughput::Elements(OPS));
    g.bench_function(BenchmarkId::new("engine", OPS), |b| {
        b.iter(|| -> cairn_engine::Result<usize> {
            let mut n = 0;
            for k in &keys {
                let r = db.begin_read()?;
                n += r.open_table("main")?.get(k)?.map_or(0, <[u8]>::len);
            }
            Ok(black_box(n))
        });
    });
    let gets = statements("GET");
    g.bench_function(BenchmarkId::new("language", OPS), |b| {
        b.iter(|| {
            let mut n = 0;
            for s in &gets {
                let _ = session.run(s, &mut |_, v| n += v.len());
            }
            black_box(n)
        });
    });
    g.finish();

    let mut g = c.benchmark_group("put");
    g.throughput(Throughput::Elements(OPS));
    g.bench_function(BenchmarkId::new("engine", OPS), |b| {
        b.iter(|| -> cairn_engine::Result<()> {
            for k in &keys {
                let mut w = db.begin_write()?;
                w.open_table("main")?.insert(k, &value)?;
                w.commit()?;
            }
            Ok(())
        });
    });
    let puts = statements("PUT");
    g.bench_function(BenchmarkId::new("language", OPS), |b| {
        b.iter(|| {
            for s in &puts {
                let _ = session.run(s, &mut |_, _| {});
            }
        });
    });
    g.finish();
}

criterion_group!(benches, overhead);
criterion_main!(benches);
