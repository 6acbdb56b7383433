//! The shell's state, and running scripts: statements and dot-command lines, results
//! printed in the current mode, errors reported with their position.

use std::borrow::Cow;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use cairn_engine::Database;
use cairn_query::{
    ExecError, Limits, Located, Outcome, Session, Statement, as_integer, display_bytes,
    parse_bytes, render_from_line,
};

use crate::output::Output;
use crate::render::{Cell, Mode, RowWriter};
use crate::script_reader::{Piece, ScriptReader};
use crate::timer::Stamp;

/// Whether to go on after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Quit,
    /// Ctrl-C: the rest of the input is not run (the REPL then waits for the next line).
    Interrupted,
}

/// Output settings, changed by dot-commands.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub mode: Mode,
    pub headers: bool,
    pub timer: bool,
    /// Print how many keys each write statement changed (`.changes on`).
    pub changes: bool,
    pub bail: bool,
    /// Print each line of input before running it (`.echo on`, `-echo`).
    pub echo: bool,
    /// Print keys and values of 8 bytes that are not text as the integers the language
    /// stores that way (`.integers on`, `-integers`).
    pub integers: bool,
    /// Engine choices for the databases the shell opens.
    pub tuning: Tuning,
    /// Whether a person types the input (the REPL): `.open` then opens read-only a file
    /// it cannot write (another process writes it, or this user may not), where a script
    /// fails.
    pub interactive: bool,
}

/// An open database with its session and settings.
pub struct Shell {
    pub session: Session,
    /// The file, or `:memory:`.
    pub label: String,
    pub settings: Settings,
    /// Where results go: standard output, or a file (`.output`, `.once`).
    pub out: Output,
    /// Whether any statement or command has failed.
    pub failed: bool,
    /// How many `.read` commands are running inside each other.
    pub reading: usize,
    /// When a shell on a private copy last looked whether the file's log was applied
    /// (`private_copy.rs`).
    pub(crate) copy_looked_at: Option<std::time::Instant>,
    /// Keys changed by the statements run on this database (`.changes`' total; rolled
    /// back changes count too, as in sqlite3).
    pub total_changes: u64,
    /// Raised by Ctrl-C (see [`Shell::catch_interrupts`]); the session's statements look
    /// at it too.
    interrupt: Arc<AtomicBool>,
}

/// A writer of result rows to `out` in the mode and with the headers of `settings`;
/// tables at their natural width when results go to a file.
///
/// # Errors
/// Writing the first lines of output.
pub fn row_writer<'w>(
    out: &'w mut Output,
    settings: Settings,
    columns: &'static [&'static str],
) -> io::Result<RowWriter<'w>> {
    let to_file = out.file().is_some();
    let w = RowWriter::new(out, settings.mode, settings.headers, columns)?;
    Ok(if to_file { w.natural_width() } else { w })
}

/// Engine choices for the databases the shell opens, when the command line gives them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tuning {
    /// `Builder::txn_memory` (`-txnmemory`).
    pub txn_memory: Option<usize>,
    /// `Builder::log_size` (`-logsize`).
    pub log_size: Option<u64>,
    /// `Builder::durability` (`-durability`).
    pub durability: Option<cairn_engine::Durability>,
}

/// How the shell opens a database file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// For reading and writing, created if missing.
    Write,
    /// For reading only (`-readonly`, `.open --readonly`).
    ReadOnly,
    /// For writing, or for reading only when it cannot be written (another process
    /// writes it, or this user may not): what a person at the prompt wants, to look at a
    /// database an application is using, or one owned by another user.
    WriteOrRead,
}

/// A database the shell opened.
pub struct Opened {
    pub session: Session,
    /// The file, or `:memory:`.
    pub label: String,
    /// What the person at the prompt should know about how the file opened: why a file
    /// opened with [`Access::WriteOrRead`] is read-only, or that commits only its log held
    /// were applied in memory.
    pub opening_note: Option<String>,
}

/// Opens `file` (created if missing unless read-only), or a database in memory, with the
/// engine choices of `tuning` (the engine's defaults where it gives none).
///
/// # Errors
/// When the file cannot be opened, with the engine's reason; when it cannot be written
/// (another process writes it, or this user may not) and `access` is [`Access::Write`],
/// with a hint to open it read-only.
pub fn open_session(file: Option<&Path>, access: Access, tuning: Tuning) -> anyhow::Result<Opened> {
    let mut builder = Database::builder();
    if let Some(bytes) = tuning.txn_memory {
        builder = builder.txn_memory(bytes);
    }
    if let Some(bytes) = tuning.log_size {
        builder = builder.log_size(bytes);
    }
    if let Some(d) = tuning.durability {
        builder = builder.durability(d);
    }
    let Some(path) = file else {
        return Ok(Opened {
            session: Session::new(builder.in_memory()?)?,
            label: ":memory:".to_owned(),
            opening_note: None,
        });
    };
    let cannot_open = || format!("cannot open {}", path.display());
    let mut opening_note = None;
    let db = match access {
        Access::ReadOnly => builder.read_only(true).open(path),
        Access::Write | Access::WriteOrRead => match builder.clone().create(path) {
            // The shell holds one database at a time: this is the one it has open.
            Err(cairn_engine::Error::AlreadyOpen { .. }) => {
                return Err(anyhow::anyhow!(
                    "{}: it is the database open here",
                    cannot_open()
                ));
            }
            Err(e) => match readable_instead(&e, path) {
                Some(note) if access == Access::WriteOrRead => {
                    opening_note = Some(note);
                    builder.read_only(true).open(path)
                }
                Some(_) => {
                    return Err(anyhow::anyhow!(
                        "{}: {e} (-readonly opens it for reading)",
                        cannot_open()
                    ));
                }
                None => Err(e),
            },
            opened => opened,
        },
    }
    .with_context(cannot_open)?;
    if db.is_private_copy() {
        let copy = format!(
            "{}: its writer stopped before applying the commits only its commit log holds: \
             they are applied in memory and the file is unchanged (opening it for writing \
             applies them to the file); once a writer has, its commits show here",
            path.display()
        );
        opening_note = Some(match opening_note {
            Some(why) => format!("{why}\n{copy}"),
            None => copy,
        });
    }
    Ok(Opened {
        session: Session::new(db)?,
        label: path.display().to_string(),
        opening_note,
    })
}

/// What to say when `path`, which could not be opened for writing (`e`), is opened for
/// reading instead: when another process writes it, or this user may not (a file the user
/// may not read then fails the read-only opening with its own error).
fn readable_instead(e: &cairn_engine::Error, path: &Path) -> Option<String> {
    match e {
        cairn_engine::Error::Locked { .. } => Some(format!(
            "{e}: opened read-only (writes fail until that process closes it)"
        )),
        cairn_engine::Error::Io(io)
            if matches!(
                io.kind(),
                io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
            ) && path.is_file() =>
        {
            Some(format!(
                "{}: this user may not write it ({io}): opened read-only",
                path.display()
            ))
        }
        _ => None,
    }
}

/// Closes `session`, on the database `label` names: the note to give when that rolled
/// back a transaction, and the error closing the database met.
fn close_session(session: Session, label: &str) -> (Option<&'static str>, Option<String>) {
    // (A read transaction has nothing to roll back.)
    let rolled_back = (session.in_transaction() && !session.in_read_transaction())
        .then_some("rolled back the open transaction");
    let failed = session
        .close()
        .err()
        .map(|e| format!("closing {label} failed: {e}"));
    (rolled_back, failed)
}

/// How a message about line `line` of script `name` (or about the script) begins:
/// `name:line:1: `, or nothing for input typed at the prompt (named `""`), whose line the
/// user has just typed.
pub fn prefix(name: &str, line: Option<usize>) -> String {
    match (name, line) {
        ("", _) => String::new(),
        (name, Some(line)) => format!("{name}:{line}:1: "),
        (name, None) => format!("{name}: "),
    }
}

/// Opens a script file to run. A directory is refused here, with the error reading it
/// would give, so that it is reported as a file that cannot be read.
///
/// # Errors
/// Opening `path`, or `path` naming a directory.
pub fn open_script(path: &Path) -> io::Result<std::fs::File> {
    let file = std::fs::File::open(path)?;
    if file.metadata()?.is_dir() {
        return Err(io::Error::from(io::ErrorKind::IsADirectory));
    }
    Ok(file)
}

impl Shell {
    pub fn new(mut session: Session, label: String, settings: Settings) -> Shell {
        let interrupt = Arc::new(AtomicBool::new(false));
        session.set_interrupt_flag(Arc::clone(&interrupt));
        Shell {
            session,
            label,
            settings,
            out: Output::stdout(),
            failed: false,
            reading: 0,
            copy_looked_at: None,
            total_changes: 0,
            interrupt,
        }
    }

    /// Makes Ctrl-C (`SIGINT`) interrupt instead of ending the process: a `SCAN`, a
    /// `COUNT` or a `.dump` stops within a few hundred rows, and the statements and
    /// commands after it in the same input are not run. A second Ctrl-C before the
    /// shell has noticed the first (a long commit, `DELETE RANGE`, `.compact` or `.check`,
    /// which are never cut short) ends the process with status 130, rolling back an open
    /// transaction.
    ///
    /// # Errors
    /// When the handler cannot be installed.
    pub fn catch_interrupts(&self) -> io::Result<()> {
        use signal_hook::consts::SIGINT;
        signal_hook::flag::register_conditional_shutdown(SIGINT, 130, Arc::clone(&self.interrupt))?;
        signal_hook::flag::register(SIGINT, Arc::clone(&self.interrupt))?;
        Ok(())
    }

    /// Whether Ctrl-C was pressed since [`Shell::clear_interrupt`].
    pub fn interrupted(&self) -> bool {
        self.interrupt.load(Ordering::Relaxed)
    }

    /// Forgets an interrupt that has been dealt with.
    pub fn clear_interrupt(&self) {
        self.interrupt.store(false, Ordering::Relaxed);
    }

    /// The flag Ctrl-C raises, for commands that look at it as they go.
    pub fn interrupt_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.interrupt)
    }

    /// Says that script `name` was interrupted (not a failure: a batch ends with its own
    /// status, and in the REPL it is the user's doing).
    fn report_interrupt(&mut self, name: &str) -> io::Result<Flow> {
        self.note(&format!("{}interrupted", prefix(name, None)))?;
        Ok(Flow::Interrupted)
    }

    /// Reports an error on standard error (after flushing results, to keep the order).
    pub fn error(&mut self, message: &str) -> io::Result<()> {
        self.failed = true;
        self.flush_before_stderr()?;
        let mut err = io::stderr().lock();
        writeln!(err, "{message}")
    }

    /// Flushes the results before a message on standard error. Failing to write a file
    /// of results is left to the next write to report (see [`Shell::output_failed`]).
    fn flush_before_stderr(&mut self) -> io::Result<()> {
        match self.out.flush() {
            Err(e) if self.out.file().is_none() => Err(e),
            _ => Ok(()),
        }
    }

    /// Flushes the results.
    ///
    /// # Errors
    /// Writing to standard output (a closed pipe ends the shell).
    pub fn flush(&mut self) -> io::Result<()> {
        match self.out.flush() {
            Err(e) => self.output_failed(e, ""),
            Ok(()) => Ok(()),
        }
    }

    /// Deals with a failure to write results (made by the script line `at`, a [`prefix`]):
    /// to a file (a full disk), it is reported and the results go to standard output
    /// again; to standard output (a closed pipe), it is returned, and ends the shell.
    fn output_failed(&mut self, e: io::Error, at: &str) -> io::Result<()> {
        let Some(file) = self.out.file().map(str::to_owned) else {
            return Err(e);
        };
        self.out.drop_file();
        self.error(&format!(
            "{at}cannot write {file}: {e} (results go to standard output again)"
        ))
    }

    /// Runs a script named `name` (a file name, `stdin`, `-c`): its statements and
    /// dot-commands in order, each as soon as it has been read (the results so far are
    /// flushed whenever the input makes the shell wait). With `bail`, stops at the first
    /// failure. A failure to read the input is reported, and ends the script.
    ///
    /// # Errors
    /// Only failures to write the output; statement errors are reported and counted.
    pub fn run_script(&mut self, name: &str, input: impl Read) -> io::Result<Flow> {
        let mut reader = ScriptReader::new(input);
        loop {
            if self.interrupted() {
                return self.report_interrupt(name);
            }
            if reader.may_wait() {
                self.flush()?;
            }
            let piece = match reader.next_piece() {
                Ok(Some(piece)) => piece,
                Ok(None) => break,
                Err(e) => {
                    self.error(&format!("{}cannot read: {e}", prefix(name, None)))?;
                    break;
                }
            };
            self.follow_once_the_log_is_applied()?;
            let at = match &piece {
                Piece::Command { line, .. }
                | Piece::Statements { line, .. }
                | Piece::TooLong { line } => prefix(name, Some(*line)),
            };
            if self.settings.echo {
                let text = match &piece {
                    Piece::Command { text, .. } => text.as_bytes(),
                    Piece::Statements { text, .. } => text,
                    Piece::TooLong { .. } => b"",
                };
                let text = String::from_utf8_lossy(text);
                writeln!(self.out, "{}", text.trim_end_matches(['\n', '\r']))?;
            }
            let ran = match piece {
                Piece::Command { text, .. } => crate::dot::run(self, &text, &at),
                Piece::Statements { line, text } => self.run_statements(name, line, &text),
                Piece::TooLong { line } => self
                    .error(&format!(
                        "{}a statement or line longer than {} bytes, skipped to the end of \
                         its line",
                        prefix(name, Some(line)),
                        Limits::default().max_statement
                    ))
                    .map(|()| Flow::Continue),
            };
            let flow = match ran.and_then(|flow| self.out.line_done().map(|()| flow)) {
                Ok(flow) => flow,
                Err(e) => {
                    self.output_failed(e, &at)?;
                    Flow::Continue
                }
            };
            match flow {
                Flow::Continue if self.failed && self.settings.bail => return Ok(Flow::Quit),
                Flow::Continue => {}
                stop => return Ok(stop),
            }
        }
        if self.interrupted() {
            return self.report_interrupt(name);
        }
        Ok(Flow::Continue)
    }

    /// Runs the statements of `text`, which starts at line `line` of script `name`.
    fn run_statements(&mut self, name: &str, line: usize, text: &[u8]) -> io::Result<Flow> {
        let script = parse_bytes(text);
        let full = String::from_utf8_lossy(text);
        let render = |offset, message: &str| render_from_line(name, &full, line, offset, message);
        let mut errors = script.errors.iter().peekable();
        for stmt in &script.statements {
            while let Some(e) = errors.next_if(|e| e.offset < stmt.span.start) {
                self.error(&render(e.offset, &e.message))?;
                if self.settings.bail {
                    return Ok(Flow::Quit);
                }
            }
            if let Err((message, offset)) = self.run_statement(stmt, &full)? {
                self.error(&render(stmt.span.start + offset, &message))?;
                if self.settings.bail {
                    return Ok(Flow::Quit);
                }
            }
            if self.interrupted() {
                return self.report_interrupt(name);
            }
        }
        for e in errors {
            self.error(&render(e.offset, &e.message))?;
            if self.settings.bail {
                return Ok(Flow::Quit);
            }
        }
        Ok(Flow::Continue)
    }

    /// Runs one statement (of script text `src`) and prints its result; `Ok(Err(..))`
    /// when it failed: the message, and where in the statement to show it.
    fn run_statement(
        &mut self,
        stmt: &Located,
        src: &str,
    ) -> io::Result<Result<(), (String, usize)>> {
        let started = Stamp::now();
        let produces_rows = matches!(
            stmt.statement,
            Statement::Get { .. } | Statement::Scan { .. }
        );
        let outcome = if produces_rows {
            let mut writer = row_writer(&mut self.out, self.settings, &["key", "value"])?
                .interruptible(&self.interrupt);
            let mut io_error = None;
            let integers = self.settings.integers;
            let result = self.session.run(&stmt.statement, &mut |k, v| {
                if io_error.is_none()
                    && let Err(e) = writer.row(&[cell(k, integers), cell(v, integers)])
                {
                    io_error = Some(e);
                }
            });
            if let Some(e) = io_error {
                return Err(e);
            }
            let empty = writer.rows() == 0;
            writer.finish()?;
            // At the keyboard, an answer of nothing says so (a script's output stays
            // the rows alone).
            if empty && result.is_ok() && self.settings.interactive {
                self.note(match stmt.statement {
                    Statement::Get { .. } => "(not found)",
                    _ => "(no rows)",
                })?;
            }
            result
        } else {
            self.session.run(&stmt.statement, &mut |_, _| {})
        };
        let outcome = match outcome {
            Ok(o) => o,
            // The rows before the interrupt are printed; the caller reports it.
            Err(ExecError::Interrupted) => return Ok(Ok(())),
            Err(e) => {
                let text = src.get(stmt.span.start..stmt.span.end).unwrap_or_default();
                return Ok(Err((e.to_string(), e.offset_in(text))));
            }
        };
        let changed = match outcome {
            Outcome::Put { .. } => Some(1),
            Outcome::Delete { existed } => Some(u64::from(existed)),
            Outcome::DeletedRange { count } => Some(count),
            _ => None,
        };
        match outcome {
            Outcome::Count(n) => {
                let mut w = row_writer(&mut self.out, self.settings, &["count"])?;
                w.row(&[Cell::Number(n)])?;
                w.finish()?;
            }
            Outcome::DeletedRange { count } => {
                let mut w = row_writer(&mut self.out, self.settings, &["deleted"])?;
                w.row(&[Cell::Number(count)])?;
                w.finish()?;
            }
            Outcome::Tables(tables) => {
                let mut w = row_writer(&mut self.out, self.settings, &["table", "entries"])?;
                for t in &tables {
                    w.row(&[Cell::Text(Cow::Borrowed(&t.name)), Cell::Number(t.len)])?;
                }
                w.finish()?;
            }
            _ => {}
        }
        if let Some(n) = changed {
            self.total_changes += n;
            if self.settings.changes {
                writeln!(
                    self.out,
                    "changes: {n}   total_changes: {}",
                    self.total_changes
                )?;
            }
        }
        if self.settings.timer {
            writeln!(self.out, "{}", started.report())?;
        }
        Ok(Ok(()))
    }

    /// Replaces the session with one on `file`, rolling back an open transaction.
    ///
    /// One handle at a time may write a file: reopening for writing the file open here
    /// for writing (to start afresh, as sqlite3's `.open` does) closes it first, and
    /// opens it again as it was when that fails. Errors are reported at `at` (the
    /// script's name, line and column, as for any command).
    pub fn reopen(&mut self, file: Option<&Path>, access: Access, at: &str) -> io::Result<()> {
        let reopening = match file {
            Some(path) if access != Access::ReadOnly && self.writes(path) => Some(path),
            _ => None,
        };
        if reopening.is_some() {
            match open_session(None, Access::Write, self.settings.tuning) {
                Ok(in_memory) => self.replace(in_memory)?,
                Err(e) => return self.error(&format!("{at}{e:#}")),
            }
        }
        match open_session(file, access, self.settings.tuning) {
            Ok(opened) => self.replace(opened),
            Err(e) => {
                self.error(&format!("{at}{e:#}"))?;
                match reopening {
                    Some(path) => {
                        match open_session(Some(path), Access::Write, self.settings.tuning) {
                            Ok(opened) => self.replace(opened),
                            Err(again) => self.error(&format!(
                                "{at}{again:#}: the shell goes on with a database in memory"
                            )),
                        }
                    }
                    None => Ok(()),
                }
            }
        }
    }

    /// Whether the database open here writes the file `path` names.
    /// (The same file by device and inode: under another name, a hard link too.)
    fn writes(&self, path: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        let id = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
        let db = self.session.database();
        !db.is_read_only()
            && db
                .path()
                .and_then(id)
                .is_some_and(|open| id(path) == Some(open))
    }

    /// Puts `opened` in place of the session, closing the one it replaces.
    fn replace(&mut self, opened: Opened) -> io::Result<()> {
        let Opened {
            mut session,
            label,
            opening_note,
        } = opened;
        session.set_interrupt_flag(Arc::clone(&self.interrupt));
        // The parameters stay bound across `.open`: they belong to the shell's statements.
        for (name, value) in self.session.params() {
            session.set_param(name, value);
        }
        let old = std::mem::replace(&mut self.session, session);
        let old_label = std::mem::replace(&mut self.label, label);
        // (`.changes`' total is the database's, as sqlite3's is its connection's.)
        self.total_changes = 0;
        let (rolled_back, failed_close) = close_session(old, &old_label);
        if let Some(note) = rolled_back {
            self.note(note)?;
        }
        if let Some(message) = failed_close {
            self.error(&message)?;
        }
        match opening_note {
            Some(why) => self.note(&why),
            None => Ok(()),
        }
    }

    /// A message on standard error that is not a failure.
    pub fn note(&mut self, message: &str) -> io::Result<()> {
        self.flush_before_stderr()?;
        writeln!(io::stderr().lock(), "{message}")
    }

    /// Ends the shell, closing its database; returns whether anything failed, closing
    /// included.
    pub fn close(mut self) -> io::Result<bool> {
        self.flush()?;
        let (rolled_back, failed_close) = close_session(self.session, &self.label);
        let mut err = io::stderr().lock();
        if let Some(note) = rolled_back {
            writeln!(err, "{note}")?;
        }
        if let Some(message) = &failed_close {
            writeln!(err, "{message}")?;
        }
        Ok(self.failed || failed_close.is_some())
    }
}

/// A key or value for people: text or hex, or with `integers`, the integer 8 bytes that
/// are not text store.
pub(crate) fn cell(bytes: &[u8], integers: bool) -> Cell<'_> {
    match integers.then(|| as_integer(bytes)).flatten() {
        Some(n) => Cell::Number(n),
        None => Cell::Text(display_bytes(bytes)),
    }
}
