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

/// `cairn bench SCRIPT` for one run without warm-up, with `extra` options.
fn bench_once(script: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["bench", path(script), "--runs", "1", "--warmup", "0"];
    args.extend(extra);
    cairn(&args)
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
    // Two threads' autocommitted PUTs share commits when they meet (group commit).
    let commits: u64 = json["summary"]["commits per run"]
        .as_str()
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    assert!((200..=400).contains(&commits), "{commits} commits");
    assert_eq!(
        json["summary"]["syncs per run"], json["summary"]["commits per run"],
        "one sync (a record's durable write or an fdatasync) per durable commit"
    );
    // All but one or two of them a commit-log record's durable write: a fresh file's log
    // holds 128 single-put records, and its cycle's end syncs the file (then it holds 256).
    let file_syncs: u64 = json["summary"]["file syncs per run"]
        .as_str()
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    assert!(
        (1..=2).contains(&file_syncs),
        "{file_syncs} file syncs in {commits} commits"
    );
    let md = bench_once(&script, &["--format", "markdown"]);
    let md_text = text(&md.stdout);
    let tables: Vec<Vec<&str>> = md_text
        .split("\n\n")
        .map(|t| t.lines().collect::<Vec<_>>())
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(tables.len(), 2, "a summary and the statements");
    for t in &tables {
        let columns = t[0].matches('|').count();
        assert!(
            t.iter().all(|l| l.starts_with('|')
                && l.ends_with('|')
                && l.matches('|').count() == columns)
        );
        assert!(
            t[1].chars().all(|c| matches!(c, '|' | '-' | ':')),
            "a Markdown rule under the header"
        );
    }
    let csv = text(&bench_once(&script, &["--format", "csv"]).stdout);
    let widths: Vec<usize> = csv.lines().map(|l| l.split(',').count()).collect();
    assert!(widths.iter().all(|w| *w == 10), "{csv}");
    let o = cairn(&["bench", path(&script), "--format", "yaml"]);
    assert_eq!(o.status.code(), Some(2));
}

/// Regression: YCSB updates once rewrote each key with the bytes it already held, which
/// let a store skip the commit (SQLite did) and made the comparison unequal.
#[test]
fn ycsb_updates_write_new_values() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let o = cairn(&[
        "gen",
        "ycsb-a",
        "--records",
        "50",
        "--operations",
        "200",
        "--out",
        path(dir.path()),
    ]);
    assert!(o.status.success());
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
    let loaded: std::collections::HashMap<String, String> = read("ycsb-a.setup.cq")
        .lines()
        .filter_map(|l| l.strip_prefix("PUT "))
        .filter_map(|l| l.split_once(' ').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect();
    let updates: Vec<(String, String)> = read("ycsb-a.run.cq")
        .lines()
        .filter_map(|l| l.strip_prefix("PUT "))
        .filter_map(|l| l.split_once(' ').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect();
    assert!(updates.len() > 50);
    let unchanged = updates
        .iter()
        .filter(|(k, v)| loaded.get(k) == Some(v))
        .count();
    assert!(
        unchanged * 10 < updates.len(),
        "{unchanged} of {} updates rewrite the same value",
        updates.len()
    );
}

#[test]
fn text_keys_are_zero_padded_so_that_they_sort_like_numbers() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let o = cairn(&[
        "gen",
        "read-seq",
        "--records",
        "12",
        "--keys",
        "text",
        "--out",
        path(dir.path()),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let run = std::fs::read_to_string(dir.path().join("read-seq.run.cq")).unwrap_or_default();
    let keys: Vec<&str> = run.lines().filter_map(|l| l.strip_prefix("GET ")).collect();
    assert_eq!(keys.first(), Some(&"'user000000000000'"));
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(keys, sorted, "text order is number order");
    assert_eq!(
        cairn(&["gen", "read-seq", "--keys", "hex"]).status.code(),
        Some(2)
    );
}

/// `--wait sleep` reaches the database: the run's commits all land and the summary says how
/// they waited; the default polls; anything else is refused.
#[test]
fn bench_waits_by_polling_or_sleeping() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let script = dir.path().join("w.cq");
    let src: String = (0..100).map(|i| format!("PUT {i} 'v'\n")).collect();
    std::fs::write(&script, src).unwrap_or_else(|e| panic!("{e}"));
    for (args, wait) in [(vec!["--wait", "sleep"], "sleep"), (vec![], "poll")] {
        let mut all = vec!["--threads", "2", "--format", "json"];
        all.extend(args);
        let o = bench_once(&script, &all);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let json: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(json["summary"]["waits"], wait);
        assert_eq!(json["statements"][0]["count"], 200, "2 threads x 100 puts");
        assert_eq!(json["statements"][0]["errors"], 0);
    }
    let o = cairn(&["bench", path(&script), "--wait", "nap"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("--wait takes poll or sleep"));
}

#[test]
fn bench_makes_its_fresh_database_with_the_log_size_asked_for() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let script = dir.path().join("w.cq");
    std::fs::write(&script, "PUT 1 'one'\nPUT 2 'two'\n").unwrap_or_else(|e| panic!("{e}"));
    let file_size = |log: &str| -> u64 {
        let o = bench_once(&script, &["--log-size", log, "--format", "json"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let json: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}"));
        json["summary"]["file size (last run)"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no file size in {json}"))
    };
    let (none, eight) = (file_size("0"), file_size("8388608"));
    // As the shell's -logsize, with K, M or G.
    assert_eq!(file_size("8M"), eight);
    assert!(none < 1 << 20, "no log: {none} bytes");
    // (The first commit grows the file by a quarter of its length.)
    assert!(
        eight > 8 << 20 && eight < 11 << 20,
        "an 8 MiB log: {eight} bytes"
    );
    let o = bench_once(&script, &["--log-size", "1000000000"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("commit log of 1000000000 bytes exceeds"));
    let o = bench_once(&script, &["--log-size", "8X"]);
    assert!(
        text(&o.stderr).contains("--log-size: not a size: 8X"),
        "{}",
        text(&o.stderr)
    );
}

/// `report` (a JSON report) with every statement kind's throughput multiplied by `by`.
fn scaled(report: &str, by: f64) -> String {
    let mut json: serde_json::Value =
        serde_json::from_str(report).unwrap_or_else(|e| panic!("{e}: {report}"));
    if let Some(rows) = json["statements"].as_array_mut() {
        for row in rows {
            let ops = row["ops/s"].as_f64().unwrap_or_else(|| panic!("{row}"));
            row["ops/s"] = serde_json::json!((ops * by).round());
        }
    }
    json.to_string()
}

#[test]
fn bench_sets_a_baseline_beside_the_report_and_fails_on_a_slowdown_past_the_threshold() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let script = dir.path().join("w.cq");
    let src: String = (0..300)
        .map(|i| format!("PUT {i} 'v'\nGET {i}\n"))
        .collect();
    std::fs::write(&script, src).unwrap_or_else(|e| panic!("{e}"));
    let memory = ["--memory", "--format", "json"];
    let report = text(&bench_once(&script, &memory).stdout);
    let (faster, slower) = (dir.path().join("fast.json"), dir.path().join("slow.json"));
    // A baseline a thousand times faster than any run: every kind is a slowdown.
    std::fs::write(&faster, scaled(&report, 1000.0)).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&slower, scaled(&report, 0.001)).unwrap_or_else(|e| panic!("{e}"));

    let o = bench_once(
        &script,
        &[
            "--memory",
            "--baseline",
            path(&faster),
            "--max-slowdown",
            "50",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    for kind in ["GET:", "PUT:", "all:"] {
        assert!(err.contains(kind), "{err}");
    }
    let out = text(&o.stdout);
    assert!(
        out.contains("against "),
        "the report, comparison included, comes first: {out}"
    );
    // (A baseline a thousand times faster than the first run: this run's own speed moves
    // the figure between -99.7 % and -100.0 %, but never above -99 %.)
    let changes: Vec<f64> = out
        .split('┆')
        .filter_map(|cell| cell.trim().strip_suffix(" %"))
        .filter_map(|n| n.parse().ok())
        .collect();
    assert_eq!(changes.len(), 3, "{out}");
    assert!(changes.iter().all(|&c| c <= -99.0), "{out}");

    let o = bench_once(
        &script,
        &[
            "--memory",
            "--baseline",
            path(&slower),
            "--max-slowdown",
            "50",
            "--format",
            "json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let json: serde_json::Value =
        serde_json::from_str(&text(&o.stdout)).unwrap_or_else(|e| panic!("{e}"));
    let rows = json["baseline"]["statements"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(rows.len(), 3, "{json}");
    for row in &rows {
        let change = row["change %"].as_f64().unwrap_or(f64::NAN);
        assert!(change > 1000.0, "{row}");
    }
    assert_eq!(
        json["baseline"]["settings that differ"],
        serde_json::json!([])
    );

    // Other settings are named; CSV gains two columns; Markdown a third table.
    let o = bench_once(
        &script,
        &[
            "--memory",
            "--threads",
            "2",
            "--baseline",
            path(&slower),
            "--format",
            "csv",
        ],
    );
    assert!(
        text(&o.stderr).contains("threads: 1 → 2"),
        "{}",
        text(&o.stderr)
    );
    let csv = text(&o.stdout);
    assert!(csv.lines().all(|l| l.split(',').count() == 12), "{csv}");
    let md = text(
        &bench_once(
            &script,
            &[
                "--memory",
                "--baseline",
                path(&slower),
                "--format",
                "markdown",
            ],
        )
        .stdout,
    );
    let tables = md.split("\n\n").filter(|t| t.starts_with('|')).count();
    assert_eq!(tables, 3, "{md}");

    // Parameters are bound in every session: without them each statement fails.
    let keyed = dir.path().join("keyed.cq");
    std::fs::write(&keyed, "PUT :k :v\nGET :k\n").unwrap_or_else(|e| panic!("{e}"));
    let errors = |extra: &[&str]| {
        let mut args = vec!["--memory", "--threads", "2", "--format", "csv"];
        args.extend(extra);
        let csv = text(&bench_once(&keyed, &args).stdout);
        let all = csv
            .lines()
            .find(|l| l.starts_with("all,"))
            .unwrap_or_default()
            .to_owned();
        all.rsplit(',').next().unwrap_or_default().to_owned()
    };
    assert_eq!(errors(&[]), "4", "two statements in each of two sessions");
    assert_eq!(errors(&["--param", "k", "7", "--param", "v", ":k"]), "0");

    // A file that is not a report, and a threshold without a baseline, are refused.
    for bad in [
        vec!["--baseline", path(&script)],
        vec!["--max-slowdown", "5"],
        vec!["--baseline", path(&faster), "--max-slowdown", "x"],
        vec!["--param", "k", "unquoted"],
    ] {
        let o = bench_once(&script, &bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
    }
}
