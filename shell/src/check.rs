//! `cairn check FILE`: the integrity check of a database (`Database::check`), opened
//! read-only, so that a writer in another process may go on meanwhile. Exit status 0
//! when the check finds nothing, 1 when it finds problems (each printed), 2 when the file
//! cannot be opened or read.

use std::process::ExitCode;

use cairn_engine::Database;

/// Runs `cairn check` with `args` (after `check`).
pub fn main(args: &[String]) -> ExitCode {
    let [file] = args else {
        eprintln!("cairn check: usage: cairn check FILE");
        return ExitCode::from(2);
    };
    let checked = Database::builder()
        .read_only(true)
        .open(file)
        .and_then(|db| db.check());
    match checked {
        Ok(report) if report.is_ok() => {
            println!(
                "{file}: ok, {} pages, {} entries",
                report.pages_checked, report.entries
            );
            ExitCode::SUCCESS
        }
        Ok(report) => {
            println!("{file}: {} problems found", report.problems.len());
            for problem in &report.problems {
                println!("{problem}");
            }
            eprintln!("cairn check: {}", crate::recover::hint(file));
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("cairn check: cannot check {file}: {e}");
            if crate::recover::damaged(&e) {
                eprintln!("cairn check: {}", crate::recover::hint(file));
            }
            ExitCode::from(2)
        }
    }
}
