//! A report measured against an earlier one: `cairn bench --baseline OLD.json` puts each
//! statement kind's throughput and latency beside the baseline's, and `--max-slowdown
//! PCT` turns a kind that lost more than PCT % of its throughput into a failed run.

use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use super::report::Figures;

/// One statement kind's figures in the baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct Before {
    pub ops: f64,
    pub p50: f64,
    pub p99: f64,
}

/// An earlier report, as `--format json` wrote it.
#[derive(Debug)]
pub struct Baseline {
    pub name: String,
    /// The settings it was measured with (scripts, threads, durability, ...).
    pub summary: serde_json::Map<String, Value>,
    pub kinds: Vec<(String, Before)>,
}

/// The summary entries that make two reports measure the same thing.
const SETTINGS: [&str; 5] = ["scripts", "setup", "threads", "durability", "waits"];

impl Baseline {
    /// Reads the JSON report at `path`.
    ///
    /// # Errors
    /// An unreadable file, or one that is not a `cairn bench --format json` report.
    pub fn load(path: &Path) -> anyhow::Result<Baseline> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the baseline {}", path.display()))?;
        Baseline::parse(&text)
            .with_context(|| {
                format!(
                    "{} is not a report of cairn bench --format json",
                    path.display()
                )
            })
            .map(|mut b| {
                b.name = path.display().to_string();
                b
            })
    }

    fn parse(text: &str) -> anyhow::Result<Baseline> {
        let doc: Value = serde_json::from_str(text)?;
        let summary = doc["summary"]
            .as_object()
            .context("no \"summary\" object")?
            .clone();
        let rows = doc["statements"]
            .as_array()
            .context("no \"statements\" list")?;
        let mut kinds = Vec::new();
        for row in rows {
            let name = row["statement"]
                .as_str()
                .context("a statement without its kind")?;
            let figure = |key: &str| {
                row[key]
                    .as_f64()
                    .with_context(|| format!("statement {name}: no number for \"{key}\""))
            };
            kinds.push((
                name.to_owned(),
                Before {
                    ops: figure("ops/s")?,
                    p50: figure("p50 µs")?,
                    p99: figure("p99 µs")?,
                },
            ));
        }
        if kinds.is_empty() {
            bail!("no statements measured");
        }
        Ok(Baseline {
            name: String::new(),
            summary,
            kinds,
        })
    }

    fn before(&self, kind: &str) -> Option<&Before> {
        self.kinds.iter().find(|(k, _)| k == kind).map(|(_, b)| b)
    }

    /// The settings in which `now` (a report's summary) differs from the baseline's, as
    /// "name: there → here".
    pub fn differences(&self, now: &[(&str, String)]) -> Vec<String> {
        SETTINGS
            .iter()
            .filter_map(|key| {
                let here = now.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
                let there = self.summary.get(*key).and_then(Value::as_str);
                (here != there).then(|| {
                    format!(
                        "{key}: {} → {}",
                        there.unwrap_or("(none)"),
                        here.unwrap_or("(none)")
                    )
                })
            })
            .collect()
    }
}

/// One statement kind measured now and in the baseline (either may lack it).
#[derive(Debug, Clone)]
pub struct Compared {
    pub kind: String,
    pub before: Option<Before>,
    pub now: Option<Figures>,
}

impl Compared {
    /// The change in throughput, in percent (negative: slower now).
    pub fn change(&self) -> Option<f64> {
        let (b, n) = (self.before.as_ref()?, self.now.as_ref()?);
        (b.ops > 0.0).then(|| (n.ops / b.ops - 1.0) * 100.0)
    }
}

/// The kinds measured now, in their order, then those only the baseline has.
pub fn compare(baseline: &Baseline, now: &[Figures]) -> Vec<Compared> {
    let mut out: Vec<Compared> = now
        .iter()
        .map(|f| Compared {
            kind: f.kind.clone(),
            before: baseline.before(&f.kind).cloned(),
            now: Some(f.clone()),
        })
        .collect();
    for (kind, b) in &baseline.kinds {
        if !now.iter().any(|f| &f.kind == kind) {
            out.push(Compared {
                kind: kind.clone(),
                before: Some(b.clone()),
                now: None,
            });
        }
    }
    out
}

/// The kinds whose throughput fell by more than `pct` percent.
pub fn slower(rows: &[Compared], pct: f64) -> Vec<String> {
    rows.iter()
        .filter_map(|r| {
            let change = r.change()?;
            (change < -pct).then(|| {
                format!(
                    "{}: {:.0} → {:.0} statements/s ({change:+.1} %)",
                    r.kind,
                    r.before.as_ref().map_or(0.0, |b| b.ops),
                    r.now.as_ref().map_or(0.0, |n| n.ops),
                )
            })
        })
        .collect()
}

/// The column names of the comparison's table.
pub const COLUMNS: [&str; 8] = [
    "statement",
    "ops/s before",
    "ops/s now",
    "change",
    "p50 µs before",
    "p50 µs now",
    "p99 µs before",
    "p99 µs now",
];

fn or_dash(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.digits$}"))
}

/// The comparison's table rows, as text.
pub fn cells(rows: &[Compared]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| {
            let (b, n) = (r.before.as_ref(), r.now.as_ref());
            vec![
                r.kind.clone(),
                or_dash(b.map(|b| b.ops), 0),
                or_dash(n.map(|n| n.ops), 0),
                r.change()
                    .map_or_else(|| "–".to_owned(), |c| format!("{c:+.1} %")),
                or_dash(b.map(|b| b.p50), 2),
                or_dash(n.map(|n| n.p50_us()), 2),
                or_dash(b.map(|b| b.p99), 2),
                or_dash(n.map(|n| n.p99_us()), 2),
            ]
        })
        .collect()
}

/// The comparison as JSON.
pub fn to_json(baseline: &Baseline, rows: &[Compared], differences: &[String]) -> Value {
    let statements: Vec<Value> = rows
        .iter()
        .map(|r| {
            let (b, n) = (r.before.as_ref(), r.now.as_ref());
            json!({
                "statement": r.kind,
                "ops/s before": b.map(|b| b.ops),
                "ops/s now": n.map(|n| n.ops),
                "change %": r.change(),
                "p50 µs before": b.map(|b| b.p50),
                "p50 µs now": n.map(Figures::p50_us),
                "p99 µs before": b.map(|b| b.p99),
                "p99 µs now": n.map(Figures::p99_us),
            })
        })
        .collect();
    json!({
        "file": baseline.name,
        "settings that differ": differences,
        "statements": statements,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(kind: &str, ops: f64) -> Figures {
        Figures {
            kind: kind.to_owned(),
            count: 10,
            ops,
            mean: 1000.0,
            p50: 1000.0,
            p90: 2000.0,
            p99: 3000.0,
            p999: 4000.0,
            max: 5000.0,
            errors: 0,
        }
    }

    const REPORT: &str = r#"{
        "summary": {"scripts": "a.cq", "threads": "1", "durability": "immediate"},
        "statements": [
            {"statement": "GET", "ops/s": 1000, "p50 µs": 1.5, "p99 µs": 9.0},
            {"statement": "PUT", "ops/s": 200.0, "p50 µs": 80, "p99 µs": 300}
        ]
    }"#;

    #[test]
    fn a_report_is_read_with_each_kinds_figures() -> anyhow::Result<()> {
        let b = Baseline::parse(REPORT)?;
        assert_eq!(
            b.kinds,
            vec![
                (
                    "GET".to_owned(),
                    Before {
                        ops: 1000.0,
                        p50: 1.5,
                        p99: 9.0
                    }
                ),
                (
                    "PUT".to_owned(),
                    Before {
                        ops: 200.0,
                        p50: 80.0,
                        p99: 300.0
                    }
                ),
            ]
        );
        Ok(())
    }

    #[test]
    fn other_json_is_refused_with_what_is_missing() {
        for (text, says) in [
            ("[1, 2]", "summary"),
            (r#"{"summary": {}}"#, "statements"),
            (r#"{"summary": {}, "statements": []}"#, "no statements"),
            (
                r#"{"summary": {}, "statements": [{"statement": "GET", "ops/s": "fast"}]}"#,
                "ops/s",
            ),
            ("not json", "expected"),
        ] {
            let err = Baseline::parse(text).map(|_| ()).err();
            let message = err.map(|e| format!("{e:#}")).unwrap_or_default();
            assert!(message.contains(says), "{text}: {message}");
        }
    }

    #[test]
    fn changes_are_relative_to_the_baseline_and_missing_kinds_are_kept() -> anyhow::Result<()> {
        let b = Baseline::parse(REPORT)?;
        let rows = compare(&b, &[figures("GET", 1100.0), figures("SCAN", 5.0)]);
        let kinds: Vec<&str> = rows.iter().map(|r| r.kind.as_str()).collect();
        assert_eq!(kinds, ["GET", "SCAN", "PUT"]);
        let change = rows[0].change().unwrap_or(f64::NAN);
        assert!((change - 10.0).abs() < 1e-9, "{change}");
        assert_eq!(rows[1].change(), None, "SCAN is new");
        assert_eq!(rows[2].change(), None, "PUT was not measured now");
        assert_eq!(cells(&rows)[0][3], "+10.0 %");
        assert_eq!(cells(&rows)[2][2], "–");
        Ok(())
    }

    #[test]
    fn only_a_kind_slower_than_the_threshold_fails() -> anyhow::Result<()> {
        let b = Baseline::parse(REPORT)?;
        let rows = compare(&b, &[figures("GET", 900.0), figures("PUT", 100.0)]);
        assert_eq!(slower(&rows, 60.0), Vec::<String>::new());
        let failed = slower(&rows, 20.0);
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert!(failed[0].starts_with("PUT: 200 → 100"), "{failed:?}");
        assert_eq!(slower(&rows, 5.0).len(), 2);
        Ok(())
    }

    #[test]
    fn settings_that_differ_are_named() -> anyhow::Result<()> {
        let b = Baseline::parse(REPORT)?;
        let now = [
            ("scripts", "a.cq".to_owned()),
            ("setup", "none".to_owned()),
            ("threads", "4".to_owned()),
            ("durability", "immediate".to_owned()),
            ("waits", "poll".to_owned()),
        ];
        assert_eq!(
            b.differences(&now),
            [
                "setup: (none) → none",
                "threads: 1 → 4",
                "waits: (none) → poll"
            ]
        );
        Ok(())
    }
}
