//! `cairn bench`: runs workload scripts and reports throughput and latency percentiles.

mod baseline;
mod report;
mod run;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use cairn_engine::Durability;
use indicatif::{ProgressBar, ProgressStyle};

use baseline::Baseline;
use report::{Comparison, Context, Format, Report};
use run::Plan;

/// Printed by `cairn bench --help`.
pub const USAGE: &str = "\
Usage: cairn bench RUN.cq... [OPTIONS]

Runs each RUN script (parsed before timing starts) against a fresh database: the setup
script first, untimed, then the RUN scripts, timed statement by statement. With several
RUN scripts or --threads, they run concurrently on one database.

Options:
  --setup FILE         a script run before timing (cairn gen writes NAME.setup.cq)
  --runs N             measured runs (default 3)
  --warmup N           runs before those, not reported (default 1)
  --threads N          concurrent copies of the RUN scripts (default: one per script)
  --durability D       immediate or eventual (default immediate)
  --wait W             how a durable commit waits for the disk and for its group: poll
                       (yielding the processor a short while before sleeping; the
                       default) or sleep (the least CPU time)
  --page-size SIZE     page size of the fresh database (default 4096; a SIZE is bytes,
                       or with K, M or G)
  --log-size SIZE      commit log of the fresh database (default: 64K, growing to 2M
                       as durable commits fill it; 0: none, every durable commit syncs
                       the file)
  --db FILE            run against FILE instead of a fresh temporary database
  --memory             run against an in-memory database
  --param NAME VALUE   bind the parameter :NAME in every session to VALUE, a literal
                       ('text', x'00ff', 42) as the shell's .param set takes it
  --format F           table, json, csv or markdown (default table)
  --output FILE        write the report to FILE instead of standard output
  --baseline FILE      an earlier report (--format json) to set each statement kind's
                       throughput and latency beside; settings that differ are named
  --max-slowdown PCT   with --baseline: exit status 1 when a statement kind's throughput
                       is more than PCT percent below the baseline's (after the report)

Exit status: 0, 1 for a slowdown past --max-slowdown, 2 for any other failure.";

fn number(v: Option<&String>, name: &str) -> anyhow::Result<usize> {
    let v = v.with_context(|| format!("{name} needs a value"))?;
    v.parse()
        .with_context(|| format!("{name}: not a number: {v}"))
}

/// A size in bytes, or with K, M or G (as the shell's `-logsize` takes it).
fn size(v: Option<&String>, name: &str) -> anyhow::Result<usize> {
    let v = v.with_context(|| format!("{name} needs a value"))?;
    crate::cli::parse_size(v).with_context(|| format!("{name}: not a size: {v}"))
}

/// Runs `cairn bench` with `args` (after `bench`).
///
/// # Errors
/// Bad arguments, unreadable or invalid scripts, engine failures.
pub fn main(args: &[String]) -> anyhow::Result<()> {
    let mut scripts: Vec<PathBuf> = Vec::new();
    let mut setup = None;
    let (mut runs, mut warmup, mut threads) = (3, 1, None);
    let mut plan = Plan {
        threads: 1,
        durability: Durability::Immediate,
        page_size: 4096,
        log_size: None,
        poll_waits: true,
        db: None,
        memory: false,
        params: Vec::new(),
    };
    // (Values are checked, and `:other` resolved, by binding them in a scratch session,
    // made at the first `--param`.)
    let mut scratch: Option<cairn_query::Session> = None;
    let mut format = Format::Table;
    let mut output: Option<PathBuf> = None;
    let mut baseline: Option<PathBuf> = None;
    let mut max_slowdown: Option<f64> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.trim_start_matches('-') {
            _ if !a.starts_with('-') => scripts.push(a.into()),
            "setup" => setup = Some(PathBuf::from(it.next().context("--setup needs a file")?)),
            "runs" => runs = number(it.next(), a)?,
            "warmup" => warmup = number(it.next(), a)?,
            "threads" => threads = Some(number(it.next(), a)?),
            "page-size" => plan.page_size = size(it.next(), a)?,
            "log-size" => plan.log_size = Some(size(it.next(), a)? as u64),
            "durability" => {
                plan.durability = match it.next().map(String::as_str) {
                    Some("immediate") => Durability::Immediate,
                    Some("eventual") => Durability::Eventual,
                    other => bail!("--durability takes immediate or eventual, not {other:?}"),
                }
            }
            "wait" => {
                plan.poll_waits = match it.next().map(String::as_str) {
                    Some("poll") => true,
                    Some("sleep") => false,
                    other => bail!("--wait takes poll or sleep, not {other:?}"),
                }
            }
            "db" => plan.db = Some(it.next().context("--db needs a file")?.into()),
            "memory" => plan.memory = true,
            "param" => {
                let name = it.next().context("--param needs a name and a value")?;
                let value = it.next().context("--param needs a name and a value")?;
                let session = match &mut scratch {
                    Some(session) => session,
                    None => scratch.insert(cairn_query::Session::new(
                        cairn_engine::Database::in_memory()?,
                    )?),
                };
                crate::param::bind(session, name, value)
                    .map_err(|e| anyhow::anyhow!("--param {name}: {e}"))?;
            }
            "format" => {
                let f = it.next().context("--format needs a value")?;
                format = Format::parse(f).with_context(|| format!("unknown format {f}"))?;
            }
            "output" => output = Some(it.next().context("--output needs a file")?.into()),
            "baseline" => baseline = Some(it.next().context("--baseline needs a file")?.into()),
            "max-slowdown" => {
                let v = it.next().context("--max-slowdown needs a percentage")?;
                let pct: f64 = v
                    .trim_end_matches('%')
                    .parse()
                    .ok()
                    .filter(|p: &f64| p.is_finite() && *p >= 0.0)
                    .with_context(|| format!("--max-slowdown: not a percentage: {v}"))?;
                max_slowdown = Some(pct);
            }
            "h" | "help" => {
                println!("{USAGE}");
                return Ok(());
            }
            _ => bail!("unknown option {a}"),
        }
    }
    if scripts.is_empty() {
        bail!("name at least one script to run (cairn bench --help)");
    }
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    if max_slowdown.is_some() && baseline.is_none() {
        bail!("--max-slowdown needs --baseline");
    }
    plan.threads = threads.unwrap_or(scripts.len()).max(1);
    plan.params = scratch.as_ref().map_or_else(Vec::new, |s| {
        s.params()
            .map(|(n, v)| (n.to_owned(), v.to_vec()))
            .collect()
    });
    let baseline = baseline.as_deref().map(Baseline::load).transpose()?;

    let setup_workload = setup.as_ref().map(run::load).transpose()?;
    let workloads = Arc::new(
        scripts
            .iter()
            .map(run::load)
            .collect::<anyhow::Result<Vec<_>>>()?,
    );
    let per_run: u64 = (0..plan.threads)
        .map(|t| workloads[t % workloads.len()].statements.len() as u64)
        .sum();
    let progress = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(per_run * (runs + warmup) as u64);
        if let Ok(style) = ProgressStyle::default_bar()
            .template("{msg} [{bar:40}] {pos}/{len} statements, {per_sec}, eta {eta}")
        {
            bar.set_style(style);
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    let mut measured = Vec::new();
    for i in 0..runs + warmup {
        let label = if i < warmup {
            format!("warm-up {}", i + 1)
        } else {
            format!("run {}", i + 1 - warmup)
        };
        progress.set_message(label);
        let result = run::run_once(&plan, setup_workload.as_ref(), &workloads, &progress)?;
        if i >= warmup {
            measured.push(result);
        }
    }
    progress.finish_and_clear();
    let ctx = Context {
        scripts: workloads.iter().map(|w| w.name.clone()).collect(),
        setup: setup_workload.map(|w| w.name),
        threads: plan.threads,
        durability: match plan.durability {
            Durability::Immediate => "immediate",
            Durability::Eventual => "eventual",
        },
        wait: if plan.poll_waits { "poll" } else { "sleep" },
        warmup,
    };
    let report = Report::new(&ctx, &measured).context("no measured runs")?;
    let comparison = baseline.as_ref().map(|b| Comparison {
        baseline: b,
        rows: baseline::compare(b, &report.figures),
        differences: b.differences(&report.summary),
    });
    let text = report.render(format, comparison.as_ref());
    match output {
        Some(path) => std::fs::write(&path, text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => std::io::stdout().write_all(text.as_bytes())?,
    }
    let Some(c) = comparison else {
        return Ok(());
    };
    if !c.differences.is_empty() {
        eprintln!(
            "cairn bench: the baseline was measured with other settings ({})",
            c.differences.join("; ")
        );
    }
    match max_slowdown {
        Some(pct) => {
            let slower = baseline::slower(&c.rows, pct);
            if slower.is_empty() {
                Ok(())
            } else {
                Err(Slower { pct, kinds: slower }.into())
            }
        }
        None => Ok(()),
    }
}

/// Statement kinds whose throughput fell past `--max-slowdown`: the run fails with exit
/// status 1.
#[derive(Debug)]
pub struct Slower {
    pub pct: f64,
    pub kinds: Vec<String>,
}

impl std::fmt::Display for Slower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "slower than the baseline by more than {} %: {}",
            self.pct,
            self.kinds.join("; ")
        )
    }
}

impl std::error::Error for Slower {}
