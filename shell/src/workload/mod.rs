//! Workloads, and `cairn gen`, which writes them as scripts (plain query files) for `cairn bench`.

mod distribution;
mod script;
mod suites;
mod ycsb;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};

pub use distribution::Distribution;

/// Printed by `cairn gen --help`.
pub const USAGE: &str = "\
Usage: cairn gen WORKLOAD... [OPTIONS]

Writes WORKLOAD.setup.cq (run before timing) and WORKLOAD.run.cq (timed) for cairn bench.
Keys are 8-byte big-endian integers unless --keys text; values are printable bytes.

Workloads: ycsb-a … ycsb-f (the YCSB core workloads, one transaction per operation),
the suites listed by --list, or all.

Options:
  --records N          records loaded, or written (default 100000)
  --operations N       operations of a YCSB run (default 100000)
  --value-size BYTES   value size (default 100; large-values 1 MiB, kv-1k 1 KiB)
  --distribution D     uniform, zipfian or latest (YCSB; default as the workload says)
  --seed S             random seed (default 1)
  --keys int|text      8-byte big-endian integers (default), or text 'user000000000042'
                       (YCSB's style, zero-padded so that text order is number order)
  --out DIR            where to write (default .)
  --list               list the workloads";

/// What the workload generators are given.
#[derive(Debug, Clone)]
pub struct Params {
    pub records: u64,
    pub operations: u64,
    pub value_size: usize,
    pub value_size_given: bool,
    pub distribution: Option<Distribution>,
    pub seed: u64,
    pub text_keys: bool,
}

/// The two files of a workload.
#[derive(Debug, Clone)]
pub struct Scripts {
    pub setup: PathBuf,
    pub run: PathBuf,
}

fn workloads() -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = ('a'..='f')
        .map(|l| {
            (
                format!("ycsb-{l}"),
                format!("YCSB core workload {}", l.to_ascii_uppercase()),
            )
        })
        .collect();
    all.extend(
        suites::SUITES
            .iter()
            .map(|(n, d)| ((*n).to_owned(), (*d).to_owned())),
    );
    all
}

fn number(v: Option<&String>, name: &str) -> anyhow::Result<u64> {
    let v = v.with_context(|| format!("{name} needs a value"))?;
    v.replace('_', "")
        .parse()
        .with_context(|| format!("{name}: not a number: {v}"))
}

/// Runs `cairn gen` with `args` (after `gen`).
///
/// # Errors
/// Bad arguments (the caller exits with 2) or failures to write.
pub fn main(args: &[String]) -> anyhow::Result<()> {
    let mut p = Params {
        records: 100_000,
        operations: 100_000,
        value_size: 100,
        value_size_given: false,
        distribution: None,
        seed: 1,
        text_keys: false,
    };
    let mut out = PathBuf::from(".");
    let mut names = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.trim_start_matches('-') {
            _ if !a.starts_with('-') => names.push(a.clone()),
            "records" => p.records = number(it.next(), a)?,
            "operations" => p.operations = number(it.next(), a)?,
            "value-size" => {
                p.value_size = usize::try_from(number(it.next(), a)?)?;
                p.value_size_given = true;
            }
            "seed" => p.seed = number(it.next(), a)?,
            "distribution" => {
                let d = it.next().context("--distribution needs a value")?;
                p.distribution = Some(
                    Distribution::parse(d).with_context(|| format!("unknown distribution {d}"))?,
                );
            }
            "keys" => {
                p.text_keys = match it.next().map(String::as_str) {
                    Some("int") => false,
                    Some("text") => true,
                    other => bail!("--keys takes int or text, not {other:?}"),
                }
            }
            "out" => out = it.next().context("--out needs a value")?.into(),
            "list" => {
                for (name, what) in workloads() {
                    println!("{name:14} {what}");
                }
                return Ok(());
            }
            "h" | "help" => {
                println!("{USAGE}");
                return Ok(());
            }
            _ => bail!("unknown option {a}"),
        }
    }
    if names.is_empty() {
        bail!("name a workload (cairn gen --list)");
    }
    if p.value_size > 16 << 20 {
        bail!("--value-size above the language's 16 MiB literal limit");
    }
    if names.iter().any(|n| n == "all") {
        names = workloads().into_iter().map(|(n, _)| n).collect();
    }
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    for name in names {
        generate(&name, &p, &out)?;
    }
    Ok(())
}

fn generate(name: &str, p: &Params, dir: &Path) -> anyhow::Result<()> {
    let started = Instant::now();
    let scripts = Scripts {
        setup: dir.join(format!("{name}.setup.cq")),
        run: dir.join(format!("{name}.run.cq")),
    };
    let counts = match name.strip_prefix("ycsb-").and_then(|l| l.chars().next()) {
        Some(letter) if name.len() == 6 => ycsb::generate(letter, p, &scripts)?,
        _ => suites::generate(name, p, &scripts)?,
    };
    let Some((setup, run)) = counts else {
        bail!("unknown workload {name:?} (cairn gen --list)");
    };
    eprintln!(
        "{name}: {} ({setup} statements), {} ({run} statements) in {:.2} s",
        scripts.setup.display(),
        scripts.run.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
