//! The interactive shell on a pseudo-terminal, as a person at a keyboard uses it: prompts,
//! tables, Tab completion, multi-line input, lines typed ahead, transactions, Ctrl-C at
//! the prompt and while a statement runs, Ctrl-D rolling back an open transaction.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_engine::Database;
use nix::pty::{Winsize, openpty};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The shell on the slave side of a pseudo-terminal; what it prints is gathered from the
/// master side by a thread.
struct Terminal {
    child: Child,
    keys: std::fs::File,
    screen: Arc<Mutex<Vec<u8>>>,
    /// How much of `screen` earlier expectations consumed.
    seen: usize,
}

impl Terminal {
    fn open(file: &Path, state: &Path) -> Terminal {
        Terminal::open_through(&[], file, state)
    }

    /// The shell started by `launcher` (a command and its arguments, to which the shell's
    /// path and arguments are added), or directly when `launcher` is empty.
    fn open_through(launcher: &[&str], file: &Path, state: &Path) -> Terminal {
        let size = Winsize {
            ws_row: 40,
            ws_col: 100,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = openpty(&size, None).unwrap_or_else(|e| panic!("openpty: {e}"));
        let slave = |fd: &std::os::fd::OwnedFd| {
            Stdio::from(fd.try_clone().unwrap_or_else(|e| panic!("dup: {e}")))
        };
        let mut command = match launcher {
            [] => Command::new(env!("CARGO_BIN_EXE_cairn")),
            [program, args @ ..] => {
                let mut c = Command::new(program);
                c.args(args).arg(env!("CARGO_BIN_EXE_cairn"));
                c
            }
        };
        let child = command
            .arg(file)
            .env("TERM", "xterm")
            .env("XDG_STATE_HOME", state)
            .stdin(slave(&pty.slave))
            .stdout(slave(&pty.slave))
            .stderr(slave(&pty.slave))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn: {e}"));
        drop(pty.slave);
        let mut master = std::fs::File::from(pty.master);
        let keys = master.try_clone().unwrap_or_else(|e| panic!("dup: {e}"));
        let screen = Arc::new(Mutex::new(Vec::new()));
        let gathered = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            // Ends when the shell has gone (EIO on the master).
            while let Ok(n @ 1..) = master.read(&mut buf) {
                if let Ok(mut s) = gathered.lock() {
                    s.extend_from_slice(&buf[..n]);
                }
            }
        });
        Terminal {
            child,
            keys,
            screen,
            seen: 0,
        }
    }

    /// Waits for the editor to ask for a new line with `prompt` (it turns bracketed paste
    /// on each time it starts reading a line; a prompt drawn again as keys are typed
    /// does not), after what was printed before it; returns that.
    fn prompt(&mut self, prompt: &str) -> String {
        let printed = self.expect("\x1b[?2004h");
        self.expect(prompt);
        printed
    }

    /// Types a line and waits for the next prompt; returns what the line printed.
    fn enter(&mut self, line: &str, prompt: &str) -> String {
        self.type_keys(line);
        self.type_keys("\r");
        self.prompt(prompt)
    }

    fn type_keys(&mut self, keys: &str) {
        self.keys
            .write_all(keys.as_bytes())
            .unwrap_or_else(|e| panic!("typing {keys:?}: {e}"));
    }

    /// Waits until the shell has printed `text` since the last expectation; returns what
    /// it printed up to and including it.
    fn expect(&mut self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = self.screen.lock().map(|s| s.clone()).unwrap_or_default();
            let fresh =
                String::from_utf8_lossy(&screen[self.seen.min(screen.len())..]).into_owned();
            if let Some(at) = fresh.find(text) {
                self.seen += fresh[..at + text.len()].len();
                return fresh[..at + text.len()].to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "waited for {text:?}; the shell printed:\n{fresh}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[test]
fn a_session_at_the_keyboard() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("fruit.cairn");
    {
        // Enough rows that a scan of them takes a while to print.
        let db = Database::create(&file)?;
        let mut w = db.begin_write()?;
        w.create_table("main")?;
        w.create_table("many")?;
        let mut t = w.open_table("many")?;
        for i in 0u64..300_000 {
            t.insert(&i.to_be_bytes(), b"a value")?;
        }
        w.commit()?;
    }
    let mut term = Terminal::open(&file, dir.path());
    term.prompt("main> ");

    // A statement, then a result as a table.
    term.enter("PUT 'apple' 'red'", "main> ");
    let table = term.enter("SCAN", "main> ");
    assert!(table.contains("│ key   ┆ value │"), "{table}");
    assert!(table.contains("│ apple ┆ red   │"), "{table}");

    // An answer of nothing says so at the keyboard.
    let missing = term.enter("GET 'pear'", "main> ");
    assert!(
        missing.lines().any(|l| l.trim() == "(not found)"),
        "{missing}"
    );
    let none = term.enter("SCAN PREFIX 'z'", "main> ");
    assert!(none.lines().any(|l| l.trim() == "(no rows)"), "{none}");

    // Tab completes a keyword (and a space), then a table name.
    term.type_keys("US\t");
    term.expect("USE ");
    term.type_keys("man\t");
    term.expect("many ");
    term.type_keys("\r");
    term.prompt("many> ");

    // A parameter bound at the prompt completes after its colon, and runs.
    term.enter(".param set fruit_name 'apple'", "many> ");
    term.enter("USE main", "main> ");
    term.type_keys("GET :fr\t");
    term.expect("GET :fruit_name ");
    term.type_keys("\r");
    let row = term.prompt("main> ");
    assert!(row.contains("│ apple ┆ red   │"), "{row}");

    // A quote left open goes on to the next line.
    term.enter("USE main", "main> ");
    term.type_keys("PUT 'two\r");
    term.enter("lines' 'v'", "main> ");
    let count = term.enter("COUNT", "main> ");
    assert!(count.contains("│ 2     │"), "{count}");

    // Lines typed (or pasted without bracketed paste) ahead of the prompt all run: the
    // editor keeps what it read past a line's end for the next line. (Until the
    // thirty-second session, rustyline dropped it: only the first line ran.)
    term.type_keys("PUT 'k1' 1\rPUT 'k2' 2\rCOUNT PREFIX 'k'\r");
    let ahead = term.expect("│ count │");
    let ahead = ahead + &term.prompt("main> ");
    assert!(ahead.contains("│ 2     │"), "{ahead}");

    // Ctrl-C at the prompt drops what was typed.
    term.type_keys("DELETE 'apple'");
    term.expect("DELETE 'apple'");
    term.type_keys("\x03");
    term.prompt("main> ");

    // Ctrl-C while a long scan runs stops it and skips the rest of the line; the shell
    // goes on.
    term.type_keys("USE many; SCAN; PUT 'skipped' 1\r");
    term.expect("\x1b[?2004l");
    // (Printing 300,000 rows on a terminal takes seconds.)
    std::thread::sleep(Duration::from_millis(200));
    let pid = Pid::from_raw(i32::try_from(term.child.id())?);
    kill(pid, Signal::SIGINT)?;
    let interrupted = term.prompt("many> ");
    assert!(
        interrupted.lines().any(|l| l.trim() == "interrupted"),
        "{interrupted}"
    );

    // A transaction shows in the prompt, a read one as such; Ctrl-D rolls one back and
    // says so.
    term.enter("USE main", "main> ");
    term.enter("BEGIN READ", "main [read txn]> ");
    term.enter("COMMIT", "main> ");
    term.enter("BEGIN", "main [txn]> ");
    term.enter("SAVEPOINT a; SAVEPOINT 'b c'", "main [txn: a, b c]> ");
    term.enter("ROLLBACK TO a", "main [txn: a]> ");
    term.enter("RELEASE a", "main [txn]> ");
    term.enter("PUT 'uncommitted' 1", "main [txn]> ");
    term.type_keys("\x04");
    term.expect("rolled back the open transaction");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = term.child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = term.child.kill();
            panic!("the shell did not leave at Ctrl-D");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(status.success(), "{status}");

    let db = Database::open(&file)?;
    let r = db.begin_read()?;
    let main = r.open_table("main")?;
    assert_eq!(
        main.get(b"apple")?,
        Some(&b"red"[..]),
        "Ctrl-C at the prompt ran nothing"
    );
    assert_eq!(main.get(b"two\nlines")?, Some(&b"v"[..]));
    assert_eq!(main.len(), 4, "apple, two lines, k1, k2");
    assert_eq!(main.get(b"uncommitted")?, None);
    assert_eq!(r.open_table("many")?.get(b"skipped")?, None);
    Ok(())
}

/// A shell in batch mode writing `file`, fed through a pipe: the file stays open for
/// writing in another process while it lives.
struct Writer {
    child: Child,
    input: std::process::ChildStdin,
    output: std::io::BufReader<std::process::ChildStdout>,
}

impl Writer {
    fn open(file: &Path) -> Writer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .arg(file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn: {e}"));
        let input = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
        let output = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        Writer {
            child,
            input,
            output: std::io::BufReader::new(output),
        }
    }

    /// Runs `line`, which prints one row, and returns that row: once it is back, the
    /// statements before it have committed.
    fn row(&mut self, line: &str) -> String {
        use std::io::BufRead;
        writeln!(self.input, "{line}").unwrap_or_else(|e| panic!("writing {line:?}: {e}"));
        let mut row = String::new();
        self.output
            .read_line(&mut row)
            .unwrap_or_else(|e| panic!("reading the row of {line:?}: {e}"));
        row
    }

    fn close(mut self) {
        drop(self.input);
        let status = self.child.wait().unwrap_or_else(|e| panic!("wait: {e}"));
        assert!(status.success(), "{status}");
    }
}

#[test]
fn a_file_another_process_writes_opens_read_only_and_follows_its_commits()
-> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("busy.cairn");
    let mut writer = Writer::open(&file);
    assert_eq!(writer.row("PUT 'a' 'first'; GET 'a'"), "a\tfirst\n");

    // The file is locked for writing: the shell says so and opens it for reading.
    let mut term = Terminal::open(&file, dir.path());
    let opened = term.prompt("main [read-only]> ");
    assert!(
        opened.contains(&format!(
            "locked by another process (pid {}): opened read-only",
            writer.child.id()
        )),
        "{opened}"
    );
    let refused = term.enter("PUT 'mine' 1", "main [read-only]> ");
    assert!(
        refused.contains("the database is open read-only"),
        "{refused}"
    );

    // It sees what the other process commits after it opened.
    assert_eq!(writer.row("PUT 'b' 'later'; GET 'b'"), "b\tlater\n");
    let rows = term.enter("SCAN", "main [read-only]> ");
    assert!(rows.contains("│ a   ┆ first │"), "{rows}");
    assert!(rows.contains("│ b   ┆ later │"), "{rows}");

    // `.open --readonly` asks for reading alone, and says nothing (the prompt says it).
    let read_only = "main [read-only]> ";
    let quiet = term.enter(&format!(".open --readonly {}", file.display()), read_only);
    assert!(!quiet.contains("opened read-only"), "{quiet}");

    // Once the writer has gone, `.open` opens the file for writing again: the prompt
    // loses its mark, and a PUT works.
    writer.close();
    let reopened = term.enter(&format!(".open {}", file.display()), "main> ");
    assert!(!reopened.contains("opened read-only"), "{reopened}");
    let written = term.enter("PUT 'mine' 1", "main> ");
    assert!(!written.contains("open read-only"), "{written}");
    // An error points at what was typed: its line in the entry, its column, a caret.
    let error = term.enter("GET 'a' 'b'", "main> ");
    assert!(
        error.contains("line 1, column 9: expected the end of the statement"),
        "{error}"
    );
    assert!(error.contains("GET 'a' 'b'\r\n        ^"), "{error}");
    term.type_keys("PUT 'a\r");
    let error = term.enter("b' c", "main> ");
    assert!(
        error.contains("line 2, column 4: expected a value"),
        "{error}"
    );

    term.type_keys("\x04");
    let status = term.child.wait()?;
    assert_eq!(status.code(), Some(1), "the refused PUT failed: {status}");

    let db = Database::open(&file)?;
    let r = db.begin_read()?;
    assert_eq!(
        r.open_table("main")?.get(b"mine")?,
        Some(&[0, 0, 0, 0, 0, 0, 0, 1][..])
    );
    Ok(())
}

#[test]
fn a_file_this_user_may_not_write_opens_read_only() -> Result<(), Box<dyn std::error::Error>> {
    use std::os::unix::fs::PermissionsExt;
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let setpriv = Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !root || !setpriv {
        eprintln!("not root, or no setpriv: the test runs the shell as nobody; skipped");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))?;
    let file = dir.path().join("owned-by-root.cairn");
    {
        let db = Database::create(&file)?;
        let mut w = db.begin_write()?;
        w.create_table("main")?;
        w.open_table("main")?.insert(b"k", b"v")?;
        w.commit()?;
    }
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644))?;
    let before = std::fs::read(&file)?;
    let nobody = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ];
    let mut term = Terminal::open_through(&nobody, &file, dir.path());
    let opened = term.prompt("main [read-only]> ");
    assert!(
        opened.contains(
            "this user may not write it (Permission denied (os error 13)): opened read-only"
        ),
        "{opened}"
    );
    let rows = term.enter("SCAN", "main [read-only]> ");
    assert!(rows.contains("│ k   ┆ v     │"), "{rows}");
    let refused = term.enter("PUT 'k' 'w'", "main [read-only]> ");
    assert!(
        refused.contains("the database is open read-only"),
        "{refused}"
    );
    term.type_keys("\x04");
    let status = term.child.wait()?;
    assert_eq!(status.code(), Some(1), "the refused PUT failed: {status}");
    assert_eq!(std::fs::read(&file)?, before, "nothing modified");
    Ok(())
}
