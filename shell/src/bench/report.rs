//! The benchmark report: per statement kind, count, throughput and latency percentiles;
//! per run, wall time, commits, syncs, bytes written and file size. As a table, JSON, CSV
//! or Markdown.

use comfy_table::{Table, presets};
use serde_json::json;

use super::run::{Latencies, RunResult};

/// How the report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Csv,
    Markdown,
}

impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        Some(match s {
            "table" => Format::Table,
            "json" => Format::Json,
            "csv" => Format::Csv,
            "markdown" | "md" => Format::Markdown,
            _ => return None,
        })
    }
}

/// What a report describes besides the numbers.
pub struct Context<'a> {
    pub scripts: Vec<String>,
    pub setup: Option<String>,
    pub threads: usize,
    pub durability: &'a str,
    /// How durable commits waited: `poll` or `sleep`.
    pub wait: &'a str,
    pub warmup: usize,
}

const COLUMNS: [&str; 10] = [
    "statement",
    "count",
    "ops/s",
    "mean µs",
    "p50 µs",
    "p90 µs",
    "p99 µs",
    "p99.9 µs",
    "max µs",
    "errors",
];

fn micros(nanos: f64) -> String {
    format!("{:.2}", nanos / 1000.0)
}

/// The rows of the latency table: one per kind, then all statements together.
fn rows(all: &Latencies, seconds: f64) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut total = all.template_like();
    for (kind, h) in &all.by_kind {
        let _ = total.add(h);
        out.push(row(
            kind,
            h,
            seconds,
            all.errors.get(kind).copied().unwrap_or(0),
        ));
    }
    if all.by_kind.len() > 1 {
        out.push(row("all", &total, seconds, all.errors.values().sum()));
    }
    out
}

fn row(kind: &str, h: &hdrhistogram::Histogram<u64>, seconds: f64, errors: u64) -> Vec<String> {
    let q = |p: f64| micros(h.value_at_quantile(p) as f64);
    vec![
        kind.to_owned(),
        h.len().to_string(),
        format!("{:.0}", h.len() as f64 / seconds.max(1e-9)),
        micros(h.mean()),
        q(0.5),
        q(0.9),
        q(0.99),
        q(0.999),
        micros(h.max() as f64),
        errors.to_string(),
    ]
}

/// Renders the report of the measured `runs`.
pub fn render(format: Format, ctx: &Context<'_>, runs: &[RunResult]) -> String {
    let mut all = match runs.first() {
        Some(r) => r.latencies.clone(),
        None => return String::from("no measured runs\n"),
    };
    for r in &runs[1..] {
        all.merge(&r.latencies);
    }
    let seconds: f64 = runs.iter().map(|r| r.wall.as_secs_f64()).sum();
    let n = runs.len() as u64;
    let per_run = |f: fn(&RunResult) -> u64| runs.iter().map(f).sum::<u64>() / n.max(1);
    let mut walls: Vec<f64> = runs.iter().map(|r| r.wall.as_secs_f64()).collect();
    walls.sort_by(f64::total_cmp);
    let summary: Vec<(&str, String)> = vec![
        ("scripts", ctx.scripts.join(", ")),
        ("setup", ctx.setup.clone().unwrap_or_else(|| "none".into())),
        ("threads", ctx.threads.to_string()),
        ("durability", ctx.durability.to_owned()),
        ("waits", ctx.wait.to_owned()),
        (
            "runs (after warm-up)",
            format!("{} (+{})", runs.len(), ctx.warmup),
        ),
        (
            "wall s per run (min/median/max)",
            format!(
                "{:.3} / {:.3} / {:.3}",
                walls.first().copied().unwrap_or(0.0),
                walls.get(walls.len() / 2).copied().unwrap_or(0.0),
                walls.last().copied().unwrap_or(0.0)
            ),
        ),
        (
            "statements per second",
            format!("{:.0}", all.statements() as f64 / seconds.max(1e-9)),
        ),
        ("rows read", (all.rows / n.max(1)).to_string()),
        ("commits per run", per_run(|r| r.io.commits).to_string()),
        ("fsyncs per run", per_run(|r| r.io.syncs).to_string()),
        (
            "bytes written per run",
            per_run(|r| r.io.bytes_written).to_string(),
        ),
        (
            "file size (last run)",
            runs.last().map_or(0, |r| r.file_size).to_string(),
        ),
    ];
    let table = rows(&all, seconds);
    match format {
        Format::Json => {
            let kinds: Vec<serde_json::Value> = table
                .iter()
                .map(|r| {
                    let mut o = serde_json::Map::new();
                    for (c, v) in COLUMNS.iter().zip(r) {
                        let value = match (v.parse::<u64>(), v.parse::<f64>()) {
                            (Ok(n), _) => json!(n),
                            (_, Ok(x)) => json!(x),
                            _ => json!(v),
                        };
                        o.insert((*c).to_owned(), value);
                    }
                    serde_json::Value::Object(o)
                })
                .collect();
            let mut s = serde_json::Map::new();
            for (k, v) in &summary {
                s.insert((*k).to_owned(), json!(v));
            }
            let doc = json!({ "summary": s, "statements": kinds });
            format!(
                "{}\n",
                serde_json::to_string_pretty(&doc).unwrap_or_default()
            )
        }
        Format::Csv => {
            let mut out = COLUMNS.join(",") + "\n";
            for r in &table {
                out += &(r.join(",") + "\n");
            }
            out
        }
        Format::Table | Format::Markdown => {
            let style = if format == Format::Table {
                presets::UTF8_FULL_CONDENSED
            } else {
                presets::ASCII_MARKDOWN
            };
            let mut t = Table::new();
            t.load_style(style).set_header(COLUMNS.to_vec());
            for r in &table {
                t.add_row(r.clone());
            }
            let mut s = Table::new();
            s.load_style(style).set_header(vec!["", "value"]);
            for (k, v) in &summary {
                s.add_row(vec![(*k).to_owned(), v.clone()]);
            }
            format!("{s}\n\n{t}\n")
        }
    }
}
