//! Replaying `cairn gen` scripts against any store, so that every store runs exactly the
//! same workload: PUT and DELETE outside a transaction are one write each, `BEGIN … COMMIT`
//! is one write, GET is a read transaction of its own, `SCAN start LIMIT n` a range read.

use std::path::Path;
use std::time::Instant;

use cairn_query::{Literal, Statement, parse_bytes};

use crate::store::{R, Store};

/// The changes of one transaction: values to store, or (`None`) keys to remove.
type Changes = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// A script reduced to store operations.
pub enum Op {
    Write(Changes),
    Get(Vec<u8>),
    Range(Vec<u8>, usize),
}

fn bytes(l: &Literal) -> R<Vec<u8>> {
    match l.bytes() {
        Some(b) => Ok(b.to_vec()),
        None => Err(format!("{l}: the comparison binds no parameters").into()),
    }
}

/// Reads and converts the script at `path`.
pub fn load(path: &Path) -> R<Vec<Op>> {
    let script = parse_bytes(&std::fs::read(path)?);
    if let Some(e) = script.errors.first() {
        return Err(format!("{}: {}", path.display(), e.message).into());
    }
    let mut ops = Vec::new();
    let mut txn: Option<Changes> = None;
    for s in script.statements {
        let change = match &s.statement {
            Statement::Put { key, value } => (bytes(key)?, Some(bytes(value)?)),
            Statement::Delete { key } => (bytes(key)?, None),
            Statement::Get { key } => {
                ops.push(Op::Get(bytes(key)?));
                continue;
            }
            Statement::Scan {
                range,
                reverse: false,
                limit,
            } if range.end.is_none() && range.prefix.is_none() => {
                let start = range
                    .start
                    .as_ref()
                    .map(bytes)
                    .transpose()?
                    .unwrap_or_default();
                let limit = match limit {
                    None => usize::MAX,
                    Some(Literal::Int(n)) => usize::try_from(*n).unwrap_or(usize::MAX),
                    Some(other) => {
                        return Err(
                            format!("LIMIT {other}: the comparison binds no parameters").into()
                        );
                    }
                };
                ops.push(Op::Range(start, limit));
                continue;
            }
            Statement::Begin => {
                txn = Some(Vec::new());
                continue;
            }
            Statement::Commit => {
                ops.push(Op::Write(txn.take().ok_or("COMMIT without BEGIN")?));
                continue;
            }
            other => {
                return Err(format!(
                    "{}: {} is not supported in a comparison script",
                    path.display(),
                    other.verb()
                )
                .into());
            }
        };
        match &mut txn {
            Some(changes) => changes.push(change),
            None => ops.push(Op::Write(vec![change])),
        }
    }
    Ok(ops)
}

/// Runs `ops` against `store`; returns operations per second.
pub fn replay(store: &mut dyn Store, ops: &[Op], durable: bool) -> R<f64> {
    Ok(ops.len() as f64 / store.replay(ops, durable)?)
}

/// Runs `ops` one store call at a time; returns the seconds they took.
pub fn each<S: Store + ?Sized>(store: &mut S, ops: &[Op], durable: bool) -> R<f64> {
    let started = Instant::now();
    for op in ops {
        match op {
            Op::Write(changes) => store.write(
                &mut changes.iter().map(|(k, v)| (&k[..], v.as_deref())),
                durable,
            )?,
            Op::Get(k) => drop(store.get(k)?),
            Op::Range(start, limit) => drop(store.range(start, *limit)?),
        }
    }
    Ok(started.elapsed().as_secs_f64())
}
