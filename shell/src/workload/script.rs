//! Writing workload scripts fast: integer keys, generated printable values, one statement
//! a line. A script is written beside its path and renamed into place once whole, so that a
//! `cairn gen` killed or failing half-way leaves the previous script (or none), never a
//! truncated one that `cairn bench` would run without noticing.

use std::io::{self, BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tempfile::NamedTempFile;

/// A script being written.
pub struct ScriptWriter {
    out: BufWriter<NamedTempFile>,
    /// Where the script goes once whole.
    path: PathBuf,
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
        // A symbolic link to an existing script is written through, as `File::create`
        // would, rather than replaced by the rename.
        let path = &std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        // Mode 0666 less the umask, as `File::create` would give (a temporary file's own
        // default is 0600); a script written over keeps the old one's mode, as it would
        // with `File::create`.
        let file = tempfile::Builder::new()
            .prefix(".cairn-gen-")
            .permissions(std::fs::Permissions::from_mode(0o666))
            .tempfile_in(dir)?;
        if let Ok(old) = std::fs::metadata(path) {
            file.as_file().set_permissions(old.permissions())?;
        }
        let mut out = BufWriter::with_capacity(1 << 20, file);
        writeln!(out, "-- {title}")?;
        Ok(ScriptWriter {
            out,
            path: path.to_path_buf(),
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

    /// Gives the script its name. Until then (and if this is never called) no file is at
    /// the path, or the one that was there before.
    pub fn finish(self) -> io::Result<u64> {
        let file = self
            .out
            .into_inner()
            .map_err(io::IntoInnerError::into_error)?;
        file.persist(&self.path).map_err(|e| e.error)?;
        Ok(self.statements)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn writer(path: &Path) -> io::Result<ScriptWriter> {
        ScriptWriter::create(path, "test", 8, 1, false)
    }

    #[test]
    fn a_script_appears_whole_or_not_at_all() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("w.run.cq");
        std::fs::write(&path, "GET 1\n")?;

        // Abandoned half-way (as by an error): the old script stays, nothing else is left.
        let mut w = writer(&path)?;
        w.load(0..10_000, 8, 100)?;
        assert_eq!(std::fs::read_to_string(&path)?, "GET 1\n");
        drop(w);
        assert_eq!(std::fs::read_to_string(&path)?, "GET 1\n");
        assert_eq!(std::fs::read_dir(dir.path())?.count(), 1);

        // Finished: the new script, whole, with the mode a plain new file gets.
        let mut w = writer(&path)?;
        w.get(7)?;
        assert_eq!(w.finish()?, 1);
        assert_eq!(std::fs::read_to_string(&path)?, "-- test\nGET 7\n");
        let plain = dir.path().join("plain");
        std::fs::File::create(&plain)?;
        assert_eq!(
            std::fs::metadata(&path)?.mode() & 0o777,
            std::fs::metadata(&plain)?.mode() & 0o777
        );
        Ok(())
    }

    #[test]
    fn a_script_written_over_keeps_its_mode() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("x.cq");
        std::fs::write(&path, "GET 1\n")?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o750))?;
        let mut w = writer(&path)?;
        w.get(2)?;
        w.finish()?;
        assert_eq!(std::fs::read_to_string(&path)?, "-- test\nGET 2\n");
        assert_eq!(std::fs::metadata(&path)?.mode() & 0o777, 0o750);
        Ok(())
    }

    #[test]
    fn a_link_to_a_script_is_written_through() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("scripts"))?;
        let real = dir.path().join("scripts/real.cq");
        std::fs::write(&real, "GET 1\n")?;
        let link = dir.path().join("link.cq");
        std::os::unix::fs::symlink("scripts/real.cq", &link)?;
        let mut w = writer(&link)?;
        w.get(9)?;
        w.finish()?;
        assert!(std::fs::symlink_metadata(&link)?.file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&real)?, "-- test\nGET 9\n");
        Ok(())
    }
}
