//! Parsing speed on a large workload script: `cargo bench -p cairn-query --bench parse`.

use std::fmt::Write;
use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// A YCSB-like mix of 100,000 statements: puts of 100-byte values, gets, short scans.
fn workload() -> String {
    let mut s = String::new();
    for i in 0u64..100_000 {
        let key = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000;
        let _ = match i % 4 {
            0 => writeln!(s, "PUT {key} '{}'", "v".repeat(100)),
            1 | 2 => writeln!(s, "GET {key}"),
            _ => writeln!(s, "SCAN {key} LIMIT 10"),
        };
    }
    s
}

fn parse(c: &mut Criterion) {
    let script = workload();
    let mut g = c.benchmark_group("parse_script");
    g.throughput(Throughput::Elements(100_000));
    g.bench_function("ycsb_mix/100000", |b| {
        b.iter(|| {
            black_box(cairn_query::parse_script(black_box(&script)))
                .statements
                .len()
        });
    });
    g.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
