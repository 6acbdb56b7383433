//! Writing workload scripts fast: integer keys, generated printable values, one statement
//! a line.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A script being written.
pub struct ScriptWriter {
    out: BufWriter<File>,
    /// Printable bytes that values are sliced from (a value of key `k` starts at `k % 64`).
    values: Vec<u8>,
    pub statements: u64,
}

impl ScriptWriter {
    pub fn create(
        path: &Path,
        title: &str,
        max_value: usize,
        seed: u64,
    ) -> io::Result<ScriptWriter> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let values = (0..max_value + 64)
            .map(|_| b'a' + rng.random_range(0..26))
            .collect();
        let mut out = BufWriter::with_capacity(1 << 20, File::create(path)?);
        writeln!(out, "-- {title}")?;
        Ok(ScriptWriter {
            out,
            values,
            statements: 0,
        })
    }

    pub fn put(&mut self, key: u64, len: usize) -> io::Result<()> {
        self.statements += 1;
        write!(self.out, "PUT {key} '")?;
        let start = (key % 64) as usize;
        let end = start + len.min(self.values.len() - 64);
        self.out.write_all(&self.values[start..end])?;
        self.out.write_all(b"'\n")
    }

    pub fn get(&mut self, key: u64) -> io::Result<()> {
        self.statements += 1;
        writeln!(self.out, "GET {key}")
    }

    pub fn delete(&mut self, key: u64) -> io::Result<()> {
        self.statements += 1;
        writeln!(self.out, "DELETE {key}")
    }

    /// `SCAN start LIMIT n`, or a full scan.
    pub fn scan(&mut self, start: Option<u64>, limit: Option<u64>) -> io::Result<()> {
        self.statements += 1;
        match (start, limit) {
            (Some(s), Some(n)) => writeln!(self.out, "SCAN {s} LIMIT {n}"),
            (Some(s), None) => writeln!(self.out, "SCAN {s}"),
            (None, Some(n)) => writeln!(self.out, "SCAN LIMIT {n}"),
            (None, None) => writeln!(self.out, "SCAN"),
        }
    }

    /// A statement without arguments (`BEGIN`, `COMMIT`, `USE t`, …).
    pub fn line(&mut self, statement: &str) -> io::Result<()> {
        self.statements += 1;
        writeln!(self.out, "{statement}")
    }

    /// Inserts keys `keys` with values of `len` bytes, `batch` to a transaction.
    pub fn load(
        &mut self,
        keys: impl IntoIterator<Item = u64>,
        len: usize,
        batch: usize,
    ) -> io::Result<()> {
        let mut in_batch = 0;
        for key in keys {
            if in_batch == 0 {
                self.line("BEGIN")?;
            }
            self.put(key, len)?;
            in_batch += 1;
            if in_batch == batch {
                self.line("COMMIT")?;
                in_batch = 0;
            }
        }
        if in_batch > 0 {
            self.line("COMMIT")?;
        }
        Ok(())
    }

    pub fn finish(mut self) -> io::Result<u64> {
        self.out.flush()?;
        Ok(self.statements)
    }
}
