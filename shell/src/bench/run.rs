//! Running a benchmark: fresh database, untimed setup, timed statements on one or more
//! threads, each statement's latency recorded in a histogram of its kind.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use cairn_engine::{Database, Durability, IoStats};
use cairn_query::{Located, Session, parse_bytes};
use hdrhistogram::Histogram;
use indicatif::ProgressBar;

/// A parsed script, ready to run many times.
pub struct Workload {
    pub name: String,
    pub statements: Vec<Located>,
}

/// Parses `path`, refusing a script with errors (they are printed).
pub fn load(path: &PathBuf) -> anyhow::Result<Workload> {
    let src = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let script = parse_bytes(&src);
    if !script.errors.is_empty() {
        let text = String::from_utf8_lossy(&src);
        for e in script.errors.iter().take(10) {
            eprintln!("{}", e.render(&path.display().to_string(), &text));
        }
        bail!("{} has {} errors", path.display(), script.errors.len());
    }
    Ok(Workload {
        name: path.display().to_string(),
        statements: script.statements,
    })
}

/// Latencies by statement kind, in nanoseconds, with error counts.
#[derive(Clone)]
pub struct Latencies {
    pub by_kind: BTreeMap<&'static str, Histogram<u64>>,
    pub errors: BTreeMap<&'static str, u64>,
    pub rows: u64,
    /// An empty histogram of the right bounds, cloned for each new kind.
    template: Histogram<u64>,
}

impl Latencies {
    pub fn new() -> anyhow::Result<Latencies> {
        Ok(Latencies {
            by_kind: BTreeMap::new(),
            errors: BTreeMap::new(),
            rows: 0,
            // 1 ns to 1 hour, 3 significant digits.
            template: Histogram::new_with_bounds(1, 3_600_000_000_000, 3)?,
        })
    }

    fn record(&mut self, kind: &'static str, nanos: u64) {
        self.by_kind
            .entry(kind)
            .or_insert_with(|| self.template.clone())
            .saturating_record(nanos.max(1));
    }

    pub fn merge(&mut self, other: &Latencies) {
        for (kind, h) in &other.by_kind {
            match self.by_kind.get_mut(kind) {
                Some(mine) => {
                    let _ = mine.add(h);
                }
                None => {
                    self.by_kind.insert(kind, h.clone());
                }
            }
        }
        for (kind, n) in &other.errors {
            *self.errors.entry(kind).or_insert(0) += n;
        }
        self.rows += other.rows;
    }

    /// An empty histogram with the bounds of these.
    pub fn template_like(&self) -> Histogram<u64> {
        self.template.clone()
    }

    pub fn statements(&self) -> u64 {
        self.by_kind.values().map(Histogram::len).sum()
    }
}

/// How to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub threads: usize,
    pub durability: Durability,
    pub page_size: usize,
    /// The fresh database's commit log in bytes (`Builder::log_size`), if not the default.
    pub log_size: Option<u64>,
    /// Whether durable commits poll for the end of their waits (`Builder::poll_waits`).
    pub poll_waits: bool,
    /// A database to run against instead of a fresh one each run.
    pub db: Option<PathBuf>,
    pub memory: bool,
    /// Parameters every session binds: names (without the colon) and bytes.
    pub params: Vec<(String, Vec<u8>)>,
}

/// What one run measured.
pub struct RunResult {
    pub wall: Duration,
    pub latencies: Latencies,
    pub io: IoStats,
    pub file_size: u64,
}

fn run_statements(
    session: &mut Session,
    w: &Workload,
    lat: &mut Latencies,
    progress: &ProgressBar,
) {
    let mut rows = 0u64;
    let mut sink = |_: &[u8], _: &[u8]| rows += 1;
    for (i, stmt) in w.statements.iter().enumerate() {
        let kind = stmt.statement.verb();
        let started = Instant::now();
        let result = session.run(&stmt.statement, &mut sink);
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        lat.record(kind, nanos);
        if result.is_err() {
            *lat.errors.entry(kind).or_insert(0) += 1;
        }
        if i % 1024 == 1023 {
            progress.inc(1024);
        }
    }
    progress.inc(w.statements.len() as u64 % 1024);
    lat.rows += rows;
}

/// One run: open, set up (untimed), then the timed scripts on `plan.threads` threads.
pub fn run_once(
    plan: &Plan,
    setup: Option<&Workload>,
    scripts: &Arc<Vec<Workload>>,
    progress: &ProgressBar,
) -> anyhow::Result<RunResult> {
    let dir = tempfile::tempdir()?;
    let mut builder = Database::builder()
        .durability(plan.durability)
        .page_size(plan.page_size)
        .poll_waits(plan.poll_waits);
    if let Some(bytes) = plan.log_size {
        builder = builder.log_size(bytes);
    }
    let db = match (&plan.db, plan.memory) {
        (_, true) => builder.in_memory()?,
        (Some(path), false) => builder.create(path)?,
        (None, false) => builder.create(dir.path().join("bench.cairn"))?,
    };
    // The session creates the default table now, not inside the timed part.
    let mut session = Session::new(db.clone())?;
    bind(&mut session, &plan.params);
    if let Some(setup) = setup {
        let mut ignore = Latencies::new()?;
        run_statements(&mut session, setup, &mut ignore, &ProgressBar::hidden());
        if let Some((kind, n)) = ignore.errors.iter().next() {
            bail!("the setup script failed: {n} {kind} statements returned errors");
        }
    }
    db.sync()?;
    let before = db.io_stats();
    let started = Instant::now();
    let results: Vec<anyhow::Result<Latencies>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..plan.threads)
            .map(|t| {
                let (db, scripts, progress) = (db.clone(), scripts.clone(), progress.clone());
                scope.spawn(move || -> anyhow::Result<Latencies> {
                    let mut session = Session::new(db)?;
                    bind(&mut session, &plan.params);
                    let mut lat = Latencies::new()?;
                    run_statements(
                        &mut session,
                        &scripts[t % scripts.len()],
                        &mut lat,
                        &progress,
                    );
                    Ok(lat)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a benchmark thread panicked")))
            })
            .collect()
    });
    let wall = started.elapsed();
    let after = db.io_stats();
    let mut latencies = Latencies::new()?;
    for r in results {
        latencies.merge(&r?);
    }
    Ok(RunResult {
        wall,
        latencies,
        io: IoStats {
            commits: after.commits - before.commits,
            syncs: after.syncs - before.syncs,
            file_syncs: after.file_syncs - before.file_syncs,
            writes: after.writes - before.writes,
            bytes_written: after.bytes_written - before.bytes_written,
            file_size: after.file_size,
            pages_spilled: after.pages_spilled - before.pages_spilled,
        },
        file_size: after.file_size,
    })
}

/// Binds `params` (names without their colons, and bytes) in `session`.
fn bind(session: &mut Session, params: &[(String, Vec<u8>)]) {
    for (name, value) in params {
        session.set_param(name, value.clone());
    }
}
