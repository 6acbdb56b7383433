//! The YCSB core workloads A–F, one transaction per operation.

use std::io;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::distribution::{Distribution, Picker};
use super::script::ScriptWriter;
use super::{Params, Scripts};

/// What a workload's operations are, by share.
struct Mix {
    read: f64,
    update: f64,
    insert: f64,
    scan: f64,
    read_modify_write: f64,
    default: Distribution,
}

fn mix(letter: char) -> Option<Mix> {
    let m = |read, update, insert, scan, read_modify_write, default| Mix {
        read,
        update,
        insert,
        scan,
        read_modify_write,
        default,
    };
    Some(match letter {
        'a' => m(0.5, 0.5, 0.0, 0.0, 0.0, Distribution::Zipfian),
        'b' => m(0.95, 0.05, 0.0, 0.0, 0.0, Distribution::Zipfian),
        'c' => m(1.0, 0.0, 0.0, 0.0, 0.0, Distribution::Zipfian),
        'd' => m(0.95, 0.0, 0.05, 0.0, 0.0, Distribution::Latest),
        'e' => m(0.0, 0.0, 0.05, 0.95, 0.0, Distribution::Zipfian),
        'f' => m(0.5, 0.0, 0.0, 0.0, 0.5, Distribution::Zipfian),
        _ => return None,
    })
}

/// Writes the load (setup) and run scripts of YCSB workload `letter`.
pub fn generate(letter: char, p: &Params, scripts: &Scripts) -> io::Result<Option<(u64, u64)>> {
    let Some(mix) = mix(letter) else {
        return Ok(None);
    };
    let title = format!(
        "YCSB workload {}: {} records, {} operations, {}-byte values",
        letter.to_ascii_uppercase(),
        p.records,
        p.operations,
        p.value_size
    );
    let mut setup = ScriptWriter::create(
        &scripts.setup,
        &format!("{title} (load)"),
        p.value_size,
        p.seed,
        p.text_keys,
    )?;
    setup.load(0..p.records, p.value_size, 10_000)?;
    let mut run = ScriptWriter::create(&scripts.run, &title, p.value_size, p.seed, p.text_keys)?;
    let picker = Picker::new(p.distribution.unwrap_or(mix.default), p.records);
    let mut rng = SmallRng::seed_from_u64(p.seed);
    let mut records = p.records;
    for op in 1..=p.operations {
        let r: f64 = rng.random();
        let key = picker.pick(&mut rng, records);
        if r < mix.read {
            run.get(key)?;
        } else if r < mix.read + mix.update {
            run.put_version(key, p.value_size, op)?;
        } else if r < mix.read + mix.update + mix.insert {
            run.put(records, p.value_size)?;
            records += 1;
        } else if r < mix.read + mix.update + mix.insert + mix.scan {
            run.scan(Some(key), Some(rng.random_range(1..=100)))?;
        } else if mix.read_modify_write > 0.0 {
            run.line("BEGIN")?;
            run.get(key)?;
            run.put_version(key, p.value_size, op)?;
            run.line("COMMIT")?;
        }
    }
    Ok(Some((setup.finish()?, run.finish()?)))
}
