//! Where results go: standard output, or the file that `.output FILE` names (until
//! `.output` alone), or that `.once FILE` names for the next line of input. Errors and
//! notes always go to standard error.

use std::fs::File;
use std::io::{self, BufWriter, Write};

/// The shell's results writer.
pub struct Output {
    writer: BufWriter<Box<dyn Write>>,
    /// The file results go to, when not standard output.
    file: Option<String>,
    /// Lines of input left before a `.once` file gives way to standard output: the
    /// `.once` line itself, then the next.
    once: u8,
}

impl Output {
    pub fn stdout() -> Output {
        Output {
            writer: BufWriter::new(Box::new(io::stdout())),
            file: None,
            once: 0,
        }
    }

    /// The file results go to, if they do not go to standard output.
    pub fn file(&self) -> Option<&str> {
        self.file.as_deref()
    }

    /// Sends the results from now on to `path` (created, or emptied), for the next line
    /// of input only when `once`.
    ///
    /// # Errors
    /// Creating the file (results then go where they went), or flushing the results
    /// so far to where they went.
    pub fn send_to_file(&mut self, path: &str, once: bool) -> io::Result<()> {
        let file = File::create(path)?;
        self.flush()?;
        self.writer = BufWriter::new(Box::new(file));
        self.file = Some(path.to_owned());
        self.once = if once { 2 } else { 0 };
        Ok(())
    }

    /// Sends the results to standard output again.
    ///
    /// # Errors
    /// Writing the rest of the results to the file they went to (which they then still
    /// go to: see [`Output::drop_file`]).
    pub fn send_to_stdout(&mut self) -> io::Result<()> {
        self.flush()?;
        self.drop_file();
        Ok(())
    }

    /// Sends the results to standard output again, dropping what could not be written to
    /// the file.
    pub fn drop_file(&mut self) {
        if self.file.take().is_some() {
            let file = std::mem::replace(&mut self.writer, BufWriter::new(Box::new(io::stdout())));
            // What it still holds could not be written: let it go without a second try.
            let _ = file.into_parts();
        }
        self.once = 0;
    }

    /// Counts a line of input done: a file's results are flushed, so that a failure to
    /// write them (a full disk) is reported with the line that made them; after the line
    /// that follows a `.once`, the results go to standard output again.
    ///
    /// # Errors
    /// Writing to the file (which results still go to).
    pub fn line_done(&mut self) -> io::Result<()> {
        match (&self.file, self.once) {
            (None, _) => Ok(()),
            (Some(_), 1) => self.send_to_stdout(),
            (Some(_), 0) => self.flush(),
            (Some(_), _) => {
                self.once -= 1;
                self.flush()
            }
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.writer.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_lasts_for_the_line_after_it() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("once.txt");
        let path = path.to_str().unwrap_or_default();
        let mut out = Output::stdout();
        out.send_to_file(path, true)?;
        writeln!(out, "to the file")?;
        out.line_done()?; // the `.once` line
        assert_eq!(out.file(), Some(path));
        writeln!(out, "still to the file")?;
        out.line_done()?; // the line after it
        assert_eq!(out.file(), None);
        assert_eq!(
            std::fs::read_to_string(path)?,
            "to the file\nstill to the file\n"
        );
        Ok(())
    }

    #[test]
    fn output_lasts_until_stdout_is_asked_for() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("out.txt");
        let path = path.to_str().unwrap_or_default();
        let mut out = Output::stdout();
        out.send_to_file(path, false)?;
        for _ in 0..3 {
            writeln!(out, "line")?;
            out.line_done()?;
        }
        assert_eq!(out.file(), Some(path));
        out.send_to_stdout()?;
        assert_eq!(std::fs::read_to_string(path)?, "line\nline\nline\n");
        // A file that cannot be created leaves the results where they went.
        assert!(out.send_to_file("/nonexistent/dir/x", false).is_err());
        assert_eq!(out.file(), None);
        Ok(())
    }
}
