//! The interactive shell: line editing, history, completion, multi-line statements.

use std::borrow::Cow;
use std::cell::RefCell;
use std::io::{self, Write};
use std::path::PathBuf;
use std::rc::Rc;

use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Editor, Helper};

use crate::shell::{Flow, Shell};

/// Offered for completion besides the language's keywords: the default table, a blob.
const OTHER_WORDS: [&str; 2] = ["main", "x''"];

/// Completion of keywords, dot-commands, table names, bound parameters and file names;
/// multi-line input while a quote is open.
struct CairnHelper {
    /// The tables' names, and the bound parameters' as `:name`.
    tables: Rc<RefCell<Vec<String>>>,
    files: FilenameCompleter,
}

impl Completer for CairnHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        if in_file_argument(line, pos) {
            return self.files.complete_path(line, pos);
        }
        Ok(candidates(line, pos, &self.tables.borrow()))
    }
}

/// Whether `pos` in `line` is in the argument of a dot-command that names a file (the
/// command shortened too, as it may be run: `.op`).
fn in_file_argument(line: &str, pos: usize) -> bool {
    let before = line.get(..pos).unwrap_or(line).trim_start();
    before
        .split_once(char::is_whitespace)
        .and_then(|(command, _)| crate::dot::resolve(command).ok())
        .is_some_and(|command| crate::dot::FILE_COMMANDS.contains(&command))
}

/// What the word before `pos` in `line` may complete to: a dot-command, or a keyword or
/// one of `tables` (table names, and parameters as `:name`; keywords in the case the word
/// is typed in); and where the word starts. A word that has one completion gets a space
/// after it too, unless one follows already.
fn candidates(line: &str, pos: usize, tables: &[String]) -> (usize, Vec<Pair>) {
    let before = line.get(..pos).unwrap_or(line);
    let mut start = before
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .map_or(0, |i| i + 1);
    // A parameter's colon belongs to its word.
    if before[..start].ends_with(':') {
        start -= 1;
    }
    let word = &before[start..];
    let lower = word.chars().all(|c| !c.is_ascii_uppercase());
    let mut out: Vec<Pair> = Vec::new();
    let mut offer = |candidate: &str, keep_case: bool| {
        // (`get`: a table name's first characters may not end where the word does.)
        if candidate
            .get(..word.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(word))
        {
            let replacement = if lower && !keep_case {
                candidate.to_ascii_lowercase()
            } else {
                candidate.to_owned()
            };
            out.push(Pair {
                display: candidate.to_owned(),
                replacement,
            });
        }
    };
    if word.starts_with('.') {
        crate::dot::COMMANDS.iter().for_each(|c| offer(c, true));
    } else if !word.is_empty() {
        cairn_query::KEYWORDS
            .iter()
            .chain(&OTHER_WORDS)
            .for_each(|k| offer(k, false));
        tables.iter().for_each(|t| offer(t, true));
    }
    let spaced = line[before.len()..].starts_with(char::is_whitespace);
    if let [only] = &mut out[..]
        && !spaced
        && !only.replacement.ends_with('\'')
    {
        only.replacement.push(' ');
    }
    (start, out)
}

impl Validator for CairnHelper {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        let input = ctx.input();
        if !input.trim_start().starts_with('.') && cairn_query::unclosed_quote(input) {
            return Ok(ValidationResult::Incomplete);
        }
        Ok(ValidationResult::Valid(None))
    }
}

impl Hinter for CairnHelper {
    type Hint = String;
}

impl Highlighter for CairnHelper {
    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(&'s self, prompt: &'p str, _: bool) -> Cow<'b, str> {
        Cow::Borrowed(prompt)
    }
}

impl Helper for CairnHelper {}

/// Where history is kept: `$XDG_STATE_HOME/cairn/history`, else
/// `~/.local/state/cairn/history`.
fn history_file() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    let dir = state.join("cairn");
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir.join("history"))
}

/// Sets `tables` to the tables' names and the bound parameters' (as `:name`).
fn refresh_tables(shell: &mut Shell, tables: &RefCell<Vec<String>>) {
    if let Ok(cairn_query::Outcome::Tables(list)) = shell
        .session
        .run(&cairn_query::Statement::Tables, &mut |_, _| {})
    {
        let params = shell.session.params().map(|(name, _)| format!(":{name}"));
        *tables.borrow_mut() = list.into_iter().map(|t| t.name).chain(params).collect();
    }
}

/// Runs the interactive loop until `.quit` or end of input;
/// `opening_note` says what to know about how the file opened (see [`crate::shell::Opened`]).
///
/// # Errors
/// Failures of the terminal or of writing output.
pub fn run(shell: &mut Shell, opening_note: Option<&str>) -> anyhow::Result<()> {
    let tables = Rc::new(RefCell::new(Vec::new()));
    let mut editor: Editor<CairnHelper, rustyline::history::DefaultHistory> = Editor::new()?;
    editor.set_helper(Some(CairnHelper {
        tables: tables.clone(),
        files: FilenameCompleter::new(),
    }));
    let history = history_file();
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    println!(
        "Cairn {} — enter .help for usage, .quit to leave.",
        env!("CARGO_PKG_VERSION")
    );
    if shell.label == ":memory:" {
        println!(
            "Connected to a transient in-memory database.\nUse \".open FILE\" to open a database file."
        );
    } else {
        println!("Connected to {}.", shell.label);
    }
    if let Some(why) = opening_note {
        println!("{why}");
    }
    loop {
        refresh_tables(shell, &tables);
        let savepoints: Vec<&str> = shell.session.savepoints().collect();
        let txn = if shell.session.in_read_transaction() {
            " [read txn]".to_owned()
        } else if !savepoints.is_empty() {
            format!(" [txn: {}]", savepoints.join(", "))
        } else if shell.session.in_transaction() {
            " [txn]".to_owned()
        } else {
            String::new()
        };
        let read_only = if shell.session.database().is_read_only() {
            " [read-only]"
        } else {
            ""
        };
        let prompt = format!("{}{read_only}{txn}> ", shell.session.table());
        match editor.readline(&prompt) {
            Ok(line) => {
                if line.trim().is_empty() {
                    continue;
                }
                let _ = editor.add_history_entry(line.as_str());
                shell.clear_interrupt();
                // (No name: errors say "line 1, column 5", not a script's name.)
                let flow = shell.run_script("", line.as_bytes())?;
                shell.flush()?;
                match flow {
                    Flow::Quit => break,
                    Flow::Interrupted => shell.clear_interrupt(),
                    Flow::Continue => {}
                }
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(h) = &history {
        let _ = editor.save_history(h);
    }
    io::stdout().flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{FilenameCompleter, candidates, in_file_argument};

    fn complete(line: &str, tables: &[&str]) -> (usize, Vec<String>) {
        let tables: Vec<String> = tables.iter().map(|t| (*t).to_owned()).collect();
        let (start, pairs) = candidates(line, line.len(), &tables);
        (start, pairs.into_iter().map(|p| p.replacement).collect())
    }

    #[test]
    fn keywords_complete_in_the_case_typed_and_one_completion_gets_a_space() {
        assert_eq!(complete("US", &[]), (0, vec!["USE ".to_owned()]));
        assert_eq!(complete("sc", &[]), (0, vec!["scan ".to_owned()]));
        assert_eq!(
            complete("PUT 1 2; del", &[]),
            (9, vec!["delete ".to_owned()])
        );
        // Two completions: no space, the editor shows both.
        assert_eq!(
            complete("TAB", &[]),
            (0, vec!["TABLE".to_owned(), "TABLES".to_owned()])
        );
        assert_eq!(
            complete("CREATE TABLE IF NOT ex", &[]),
            (20, vec!["exists ".to_owned()])
        );
        assert_eq!(complete("zzz", &[]), (0, vec![]));
        assert_eq!(complete("", &[]), (0, vec![]));
    }

    #[test]
    fn bound_parameters_complete_after_their_colon() {
        let names = ["main", ":user", ":user_id", ":value"];
        assert_eq!(complete("PUT :v", &names), (4, vec![":value ".to_owned()]));
        assert_eq!(
            complete("GET :us", &names),
            (4, vec![":user".to_owned(), ":user_id".to_owned()])
        );
        assert_eq!(complete("GET :x", &names), (4, vec![]));
        // Without the colon, a word is a keyword or a table.
        assert_eq!(complete("GET val", &names), (4, vec![]));
    }

    #[test]
    fn table_names_complete_as_they_are_spelt() {
        assert_eq!(
            complete("use Fr", &["Fruit", "veg"]),
            (4, vec!["Fruit ".to_owned()])
        );
        assert_eq!(
            complete("USE v", &["Fruit", "veg"]),
            (4, vec!["veg ".to_owned()])
        );
        // A name whose first character takes two bytes, against a one-letter word.
        assert_eq!(
            complete("USE a", &["ávila", "ash"]),
            (4, vec!["ash ".to_owned()])
        );
    }

    #[test]
    fn dot_commands_complete_and_a_following_space_is_not_doubled() {
        assert_eq!(complete(".ti", &[]), (0, vec![".timer ".to_owned()]));
        let (start, pairs) = candidates(".ti on", 3, &[]);
        let got: Vec<String> = pairs.into_iter().map(|p| p.replacement).collect();
        assert_eq!((start, got), (0, vec![".timer".to_owned()]));
    }

    #[test]
    fn file_arguments_complete_to_file_names() -> rustyline::Result<()> {
        assert!(in_file_argument(".open fr", 8));
        assert!(in_file_argument("  .read ", 8));
        assert!(
            !in_file_argument(".open", 5),
            "the command itself completes as one"
        );
        assert!(!in_file_argument(".mode ta", 8));
        assert!(
            in_file_argument(".op fr", 6),
            "a command shortened as it may be run"
        );
        assert!(
            !in_file_argument(".o fr", 5),
            ".once, .open or .output: not known"
        );
        assert!(!in_file_argument("PUT 'a' 1", 9));
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("fruit.cairn"), b"")?;
        std::fs::write(dir.path().join("with space.cq"), b"")?;
        let files = FilenameCompleter::new();
        let dir = dir.path().display().to_string();
        let line = format!(".open {dir}/fr");
        let (start, pairs) = files.complete_path(&line, line.len())?;
        assert_eq!(start, ".open ".len());
        let found: Vec<&str> = pairs.iter().map(|p| p.replacement.as_str()).collect();
        assert_eq!(found, [format!("{dir}/fruit.cairn")]);
        // A space in a name comes escaped, as the dot-command reads it back.
        let line = format!(".read {dir}/wi");
        let (_, pairs) = files.complete_path(&line, line.len())?;
        let found: Vec<&str> = pairs.iter().map(|p| p.replacement.as_str()).collect();
        assert_eq!(found, [format!("{dir}/with\\ space.cq")]);
        Ok(())
    }
}
