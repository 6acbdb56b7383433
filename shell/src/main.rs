//! `cairn`: the database shell. Interactive on a terminal, a batch runner otherwise.
//!
//! Exit status: 0 when every statement succeeded, 1 when one failed, 2 on bad usage or a
//! file that cannot be opened, 130 when a batch was interrupted (Ctrl-C). Writing into a
//! closed pipe ends the program quietly with 0.

mod bench;
mod check;
mod cli;
mod compact;
mod csv_file;
mod dot;
mod dump;
mod info;
mod inspect;
mod output;
mod param;
mod private_copy;
mod recover;
mod render;
mod repl;
mod script_reader;
mod shell;
mod timer;
mod workload;

use std::io::{self, IsTerminal};
use std::process::ExitCode;

use cli::Source;
use render::Mode;
use shell::{Access, Flow, Settings, Shell, Tuning};

/// A subcommand: `cairn gen`, `cairn bench`.
type Tool = fn(&[String]) -> anyhow::Result<()>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("check") => return check::main(&args[1..]),
        Some("recover") => return recover::main(&args[1..]),
        _ => {}
    }
    let tool: Option<Tool> = match args.first().map(String::as_str) {
        Some("bench") => Some(bench::main),
        Some("gen") => Some(workload::main),
        Some("info") => Some(info::main),
        Some("compact") => Some(compact::main),
        _ => None,
    };
    if let Some(tool) = tool {
        return match tool(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e)
                if e.downcast_ref::<io::Error>()
                    .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe) =>
            {
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("cairn {}: {e:#}", args[0]);
                // A benchmark slower than its baseline ran; it measured a regression.
                ExitCode::from(if e.is::<bench::Slower>() { 1 } else { 2 })
            }
        };
    }
    let options = match cli::parse(&args) {
        Ok(o) => o,
        Err(message) => {
            eprintln!("cairn: {message}\nRun cairn --help for usage.");
            return ExitCode::from(2);
        }
    };
    if options.help {
        println!("{}", cli::USAGE);
        return ExitCode::SUCCESS;
    }
    if options.version {
        println!("cairn {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    match run(options) {
        Ok(code) => code,
        Err(e)
            if e.downcast_ref::<io::Error>()
                .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cairn: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(options: cli::Options) -> anyhow::Result<ExitCode> {
    let interactive = options.sources.is_empty() && io::stdin().is_terminal();
    let access = match (options.read_only, interactive) {
        (true, _) => Access::ReadOnly,
        (false, true) => Access::WriteOrRead,
        (false, false) => Access::Write,
    };
    let tuning = Tuning {
        txn_memory: options.txn_memory,
        log_size: options.log_size,
        durability: options.durability,
    };
    let opened = match shell::open_session(options.file.as_deref(), access, tuning) {
        Ok(opened) => opened,
        Err(e) => {
            eprintln!("cairn: {e:#}");
            if let Some(file) = options.file.as_deref()
                && e.downcast_ref::<cairn_engine::Error>()
                    .is_some_and(recover::damaged)
            {
                eprintln!("cairn: {}", recover::hint(&file.display().to_string()));
            }
            return Ok(ExitCode::from(2));
        }
    };
    let mode = options.mode.unwrap_or(if interactive {
        Mode::Table
    } else {
        Mode::Plain
    });
    let settings = Settings {
        mode,
        headers: options.headers.unwrap_or(mode == Mode::Table),
        timer: false,
        changes: false,
        bail: options.bail,
        echo: options.echo,
        integers: options.integers,
        tuning,
        interactive,
    };
    let mut session = opened.session;
    for (name, value) in &options.params {
        if let Err(message) = param::bind(&mut session, name, value) {
            eprintln!("cairn: -param {name}: {message}");
            return Ok(ExitCode::from(2));
        }
    }
    let mut shell = Shell::new(session, opened.label, settings);
    shell.catch_interrupts()?;
    let mut flow = Flow::Continue;
    if interactive {
        repl::run(&mut shell, opened.opening_note.as_deref())?;
    } else if options.sources.is_empty() {
        flow = shell.run_script("stdin", io::stdin().lock())?;
    } else {
        for source in &options.sources {
            flow = match source {
                Source::Text(text) => shell.run_script("-c", text.as_bytes())?,
                Source::Argument(text) => {
                    // Whether this argument failed, whatever the sources before it did.
                    let failed_before = std::mem::take(&mut shell.failed);
                    let flow = shell.run_script("argument", text.as_bytes())?;
                    let failed_here = shell.failed;
                    shell.failed |= failed_before;
                    if failed_here && std::path::Path::new(text).is_file() {
                        shell.note(&format!(
                            "({text} is a file: cairn opens one FILE, and runs what follows \
                             it as statements; run a script with -f)"
                        ))?;
                    }
                    flow
                }
                Source::File(path) => match shell::open_script(path) {
                    Ok(file) => shell.run_script(&path.display().to_string(), file)?,
                    Err(e) => {
                        shell.error(&format!("cairn: cannot read {}: {e}", path.display()))?;
                        Flow::Quit
                    }
                },
            };
            if flow != Flow::Continue {
                break;
            }
        }
    }
    let failed = shell.close()?;
    Ok(if flow == Flow::Interrupted {
        ExitCode::from(130)
    } else if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
