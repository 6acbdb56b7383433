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
    /// Keys as `'user000000000042'` text instead of 8-byte integers.
    text_keys: bool,
    pub statements: u64,
}

/// A key as it is written in a script.
struct Key(u64, bool);

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.1 {
            write!(f, "'user{:012}'", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

impl ScriptWriter {
    pub fn create(
        path: &Path,
        title: &str,
        max_value: usize,
        seed: u64,
        text_keys: bool,
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
            text_keys,
            statements: 0,
        })
    }

    /// `PUT key value`; the value is the one of `key`'s first version.
    pub fn put(&mut self, key: u64, len: usize) -> io::Result<()> {
        self.put_version(key, len, 0)
    }

    /// `PUT key value` with a value that differs from the key's other versions, so that an
    /// update really changes the stored bytes.
    pub fn put_version(&mut self, key: u64, len: usize, version: u64) -> io::Result<()> {
        self.statements += 1;
        write!(self.out, "PUT {} '", Key(key, self.text_keys))?;
        let start = (key.wrapping_add(version.wrapping_mul(7)) % 64) as usize;
        let end = start + len.min(self.values.len() - 64);
        self.out.write_all(&self.values[start..end])?;
        self.out.write_all(b"'\n")
    }

    pub fn get(&mut self, key: u64) -> io::Result<()> {
        self.statements += 1;
        writeln!(self.out, "GET {}", Key(key, self.text_keys))
    }

    pub fn delete(&mut self, key: u64) -> io::Result<()> {
        self.statements += 1;
        writeln!(self.out, "DELETE {}", Key(key, self.text_keys))
    }

    /// `SCAN start LIMIT n`, or a full scan.
    pub fn scan(&mut self, start: Option<u64>, limit: Option<u64>) -> io::Result<()> {
        self.statements += 1;
        let start = start.map(|s| Key(s, self.text_keys));
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
