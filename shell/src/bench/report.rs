//! The benchmark report: per statement kind, count, throughput and latency percentiles;
//! per run, wall time, commits, syncs, bytes written and file size. As a table, JSON, CSV
//! or Markdown.

use comfy_table::{Table, presets};
use serde_json::json;

use super::baseline::{self, Baseline};
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

/// One statement kind's (or all statements') figures; times in nanoseconds.
#[derive(Debug, Clone)]
pub struct Figures {
    pub kind: String,
    pub count: u64,
    /// Statements per second of measured wall time.
    pub ops: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub errors: u64,
}

impl Figures {
    fn new(kind: &str, h: &hdrhistogram::Histogram<u64>, seconds: f64, errors: u64) -> Figures {
        let q = |p: f64| h.value_at_quantile(p) as f64;
        Figures {
            kind: kind.to_owned(),
            count: h.len(),
            ops: (h.len() as f64 / seconds.max(1e-9)).round(),
            mean: h.mean(),
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            max: h.max() as f64,
            errors,
        }
    }

    pub fn p50_us(&self) -> f64 {
        self.p50 / 1000.0
    }

    pub fn p99_us(&self) -> f64 {
        self.p99 / 1000.0
    }

    /// The row of the latency table, as text (the order of [`COLUMNS`]).
    fn cells(&self) -> Vec<String> {
        vec![
            self.kind.clone(),
            self.count.to_string(),
            format!("{:.0}", self.ops),
            micros(self.mean),
            micros(self.p50),
            micros(self.p90),
            micros(self.p99),
            micros(self.p999),
            micros(self.max),
            self.errors.to_string(),
        ]
    }
}

/// The figures of the latency table: one per kind, then all statements together.
fn figures(all: &Latencies, seconds: f64) -> Vec<Figures> {
    let mut out = Vec::new();
    let mut total = all.template_like();
    for (kind, h) in &all.by_kind {
        let _ = total.add(h);
        let errors = all.errors.get(kind).copied().unwrap_or(0);
        out.push(Figures::new(kind, h, seconds, errors));
    }
    if all.by_kind.len() > 1 {
        out.push(Figures::new(
            "all",
            &total,
            seconds,
            all.errors.values().sum(),
        ));
    }
    out
}

/// What the measured runs gave: the settings and totals, and each kind's figures.
pub struct Report {
    pub summary: Vec<(&'static str, String)>,
    pub figures: Vec<Figures>,
}

impl Report {
    /// The report of the measured `runs` (`None` when there are none).
    pub fn new(ctx: &Context<'_>, runs: &[RunResult]) -> Option<Report> {
        let mut all = runs.first()?.latencies.clone();
        for r in &runs[1..] {
            all.merge(&r.latencies);
        }
        let seconds: f64 = runs.iter().map(|r| r.wall.as_secs_f64()).sum();
        let n = runs.len() as u64;
        let per_run = |f: fn(&RunResult) -> u64| runs.iter().map(f).sum::<u64>() / n.max(1);
        let mut walls: Vec<f64> = runs.iter().map(|r| r.wall.as_secs_f64()).collect();
        walls.sort_by(f64::total_cmp);
        let summary = vec![
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
            ("syncs per run", per_run(|r| r.io.syncs).to_string()),
            (
                "file syncs per run",
                per_run(|r| r.io.file_syncs).to_string(),
            ),
            (
                "bytes written per run",
                per_run(|r| r.io.bytes_written).to_string(),
            ),
            (
                "file size (last run)",
                runs.last().map_or(0, |r| r.file_size).to_string(),
            ),
        ];
        Some(Report {
            summary,
            figures: figures(&all, seconds),
        })
    }

    /// The report in `format`, with the comparison to a baseline when there is one.
    pub fn render(&self, format: Format, comparison: Option<&Comparison<'_>>) -> String {
        let table: Vec<Vec<String>> = self.figures.iter().map(Figures::cells).collect();
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
                for (k, v) in &self.summary {
                    s.insert((*k).to_owned(), json!(v));
                }
                let mut doc = json!({ "summary": s, "statements": kinds });
                if let Some(c) = comparison {
                    doc["baseline"] = baseline::to_json(c.baseline, &c.rows, &c.differences);
                }
                format!(
                    "{}\n",
                    serde_json::to_string_pretty(&doc).unwrap_or_default()
                )
            }
            Format::Csv => {
                let mut header = COLUMNS.join(",");
                if comparison.is_some() {
                    header += ",baseline ops/s,change %";
                }
                let mut out = header + "\n";
                for (f, r) in self.figures.iter().zip(&table) {
                    let mut line = r.join(",");
                    if let Some(c) = comparison {
                        let row = c.rows.iter().find(|x| x.kind == f.kind);
                        let before = row.and_then(|x| x.before.as_ref());
                        let change = row.and_then(baseline::Compared::change);
                        line += &format!(
                            ",{},{}",
                            before.map_or_else(String::new, |b| format!("{:.0}", b.ops)),
                            change.map_or_else(String::new, |c| format!("{c:.1}"))
                        );
                    }
                    out += &(line + "\n");
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
                for (k, v) in &self.summary {
                    s.add_row(vec![(*k).to_owned(), v.clone()]);
                }
                let mut out = format!("{s}\n\n{t}\n");
                if let Some(c) = comparison {
                    let mut b = Table::new();
                    b.load_style(style).set_header(baseline::COLUMNS.to_vec());
                    for r in baseline::cells(&c.rows) {
                        b.add_row(r);
                    }
                    out += &format!("\nagainst {}:\n\n{b}\n", c.baseline.name);
                }
                out
            }
        }
    }
}

/// The report beside a baseline.
pub struct Comparison<'a> {
    pub baseline: &'a Baseline,
    pub rows: Vec<baseline::Compared>,
    /// The settings that differ, as "name: there → here".
    pub differences: Vec<String>,
}
