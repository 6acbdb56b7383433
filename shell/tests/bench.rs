//! `cairn gen` writes scripts that parse and run; `cairn bench` reports on them in every
//! format.

use std::path::Path;
use std::process::{Command, Output};

fn cairn(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("spawn: {e}"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

#[test]
fn every_workload_generates_scripts_that_run_without_errors() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let o = cairn(&[
        "gen",
        "all",
        "--records",
        "300",
        "--operations",
        "300",
        "--value-size",
        "20",
        "--out",
        path(dir.path()),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let list = text(&cairn(&["gen", "--list"]).stdout);
    let names: Vec<&str> = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names.len(), 17, "{list}");
    for name in names {
        let setup = dir.path().join(format!("{name}.setup.cq"));
        let run = dir.path().join(format!("{name}.run.cq"));
        let o = cairn(&[
            "bench",
            path(&run),
            "--setup",
            path(&setup),
            "--runs",
            "1",
            "--warmup",
            "0",
            "--format",
            "csv",
            "--durability",
            "eventual",
        ]);
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        let csv = text(&o.stdout);
        let errors: u64 = csv
            .lines()
            .skip(1)
            .filter_map(|l| l.rsplit(',').next()?.parse::<u64>().ok())
            .sum();
        assert_eq!(errors, 0, "{name}: statements failed:\n{csv}");
        assert!(csv.lines().count() >= 2, "{name}: {csv}");
    }
}

#[test]
fn ycsb_mixes_have_their_shares_and_are_reproducible() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let generate = |seed: &str, out: &str| {
        cairn(&[
            "gen",
            "ycsb-b",
            "--records",
            "1000",
            "--operations",
            "10000",
            "--seed",
            seed,
            "--out",
            path(&dir.path().join(out)),
        ])
    };
    assert!(generate("7", "one").status.success());
    assert!(generate("7", "two").status.success());
    assert!(generate("8", "three").status.success());
    let read = |d: &str| {
        std::fs::read_to_string(dir.path().join(d).join("ycsb-b.run.cq")).unwrap_or_default()
    };
    assert_eq!(read("one"), read("two"), "same seed, same script");
    assert_ne!(read("one"), read("three"));
    let script = read("one");
    let gets = script.lines().filter(|l| l.starts_with("GET ")).count();
    let puts = script.lines().filter(|l| l.starts_with("PUT ")).count();
    assert_eq!(gets + puts, 10_000);
    assert!((9_300..9_700).contains(&gets), "95% reads: {gets}");
}

#[test]
fn bench_reports_latency_percentiles_and_io_in_json() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let script = dir.path().join("w.cq");
    let mut src = String::new();
    for i in 0..200 {
        src.push_str(&format!("PUT {i} 'v'\nGET {i}\n"));
    }
    std::fs::write(&script, src).unwrap_or_else(|e| panic!("{e}"));
    let report = dir.path().join("report.json");
    let o = cairn(&[
        "bench",
        path(&script),
        "--runs",
        "2",
        "--warmup",
        "1",
        "--threads",
        "2",
        "--format",
        "json",
        "--output",
        path(&report),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
    let kinds: Vec<&str> = json["statements"].as_array().map_or_else(Vec::new, |a| {
        a.iter().filter_map(|s| s["statement"].as_str()).collect()
    });
    assert_eq!(kinds, vec!["GET", "PUT", "all"]);
    let put = &json["statements"][1];
    assert_eq!(put["count"], 800, "2 runs x 2 threads x 200 puts");
    for q in ["p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs"] {
        assert!(put[q].as_f64().is_some_and(|v| v > 0.0), "{q}");
    }
    assert_eq!(json["summary"]["commits per run"], "400");
    assert_eq!(
        json["summary"]["fsyncs per run"], "400",
        "one fsync per durable commit"
    );
    let o = cairn(&["bench", path(&script), "--format", "yaml"]);
    assert_eq!(o.status.code(), Some(2));
}
