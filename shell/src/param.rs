//! `.param`: the parameters a session's statements name as `:name`, bound from the shell
//! (and from the command line: `-param NAME VALUE`).

use std::borrow::Cow;

use cairn_query::{Literal, Session, display_bytes, parse_literal};

use crate::dot::print_rows;
use crate::render::Cell;
use crate::shell::Shell;

/// The usage line of `.param`.
pub const USAGE: &str = ".param [list] | .param set NAME VALUE | .param unset NAME | .param clear";

/// The bytes of `value`, a literal in the language's syntax (`'text'`, `x'00ff'`, `42`, or
/// `:other`, a parameter bound already), as a parameter's value.
///
/// # Errors
/// A message naming what is wrong, with the column in `value` for a malformed literal.
pub fn value_of(session: &Session, value: &str) -> Result<Vec<u8>, String> {
    let literal = parse_literal(value).map_err(|e| {
        let column = value.get(..e.offset).map_or(0, |s| s.chars().count()) + 1;
        format!("{} (in the value, at column {column})", e.message)
    })?;
    match &literal {
        Literal::Param(name) => session
            .params()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.to_vec())
            .ok_or_else(|| format!("parameter :{name} has no value to copy")),
        other => Ok(other.bytes().map(|b| b.to_vec()).unwrap_or_default()),
    }
}

/// `-param NAME VALUE` (or `--param`) bound in `session`: a name and a value as
/// `.param set` takes them.
///
/// # Errors
/// What is wrong with the name or the value.
pub fn bind(session: &mut Session, name: &str, value: &str) -> Result<(), String> {
    let name = name_of(name)?.to_owned();
    let bytes = value_of(session, value)?;
    session.set_param(&name, bytes);
    Ok(())
}

/// A parameter's name as written: without its colon, a word (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn name_of(word: &str) -> Result<&str, String> {
    let name = word.strip_prefix(':').unwrap_or(word);
    let ok = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(name)
    } else {
        Err(format!(
            "{word:?} is not a parameter's name: a letter or '_', then letters, digits or '_'"
        ))
    }
}

/// Runs `.param` with `rest`, the line after the command (kept whole: a value is a
/// literal of the language, quotes and all, not a word a shell would split).
pub fn run(shell: &mut Shell, rest: &str) -> Result<String, String> {
    let rest = rest.trim();
    let (sub, args) = rest
        .split_once(char::is_whitespace)
        .map_or((rest, ""), |(s, a)| (s, a.trim_start()));
    match (sub, args) {
        ("" | "list", "") => {
            // (Owned: the rows are printed through the shell that holds the session.)
            let rows: Vec<[Cell<'static>; 2]> = shell
                .session
                .params()
                .map(|(name, value)| {
                    [
                        Cell::Text(Cow::Owned(format!(":{name}"))),
                        Cell::Text(Cow::Owned(display_bytes(value).into_owned())),
                    ]
                })
                .collect();
            print_rows(shell, &["parameter", "value"], rows)
        }
        ("set", args) => {
            let (name, value) = args
                .split_once(char::is_whitespace)
                .ok_or_else(|| format!("usage: {USAGE}"))?;
            let name = name_of(name)?;
            let bytes = value_of(&shell.session, value)?;
            shell.session.set_param(name, bytes);
            Ok(String::new())
        }
        ("unset", name) if !name.is_empty() && !name.contains(char::is_whitespace) => {
            let name = name_of(name)?;
            if shell.session.unset_param(name) {
                Ok(String::new())
            } else {
                Err(format!("parameter :{name} is not set"))
            }
        }
        ("clear", "") => {
            shell.session.clear_params();
            Ok(String::new())
        }
        _ => Err(format!("usage: {USAGE}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_words_with_or_without_their_colon() {
        assert_eq!(name_of(":user_1"), Ok("user_1"));
        assert_eq!(name_of("_x"), Ok("_x"));
        for bad in [":", "", "1a", ":a-b", "é"] {
            assert!(name_of(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn values_are_literals_of_the_language() -> Result<(), Box<dyn std::error::Error>> {
        let mut s = Session::new(cairn_engine::Database::in_memory()?)?;
        assert_eq!(value_of(&s, "'it''s'")?, b"it's");
        assert_eq!(value_of(&s, " 7 ")?, 7u64.to_be_bytes());
        assert_eq!(value_of(&s, "x'00ff' -- two bytes")?, [0, 0xff]);
        s.set_param("a", "copied");
        assert_eq!(value_of(&s, ":a")?, b"copied");
        assert!(value_of(&s, ":b").is_err_and(|e| e.contains(":b has no value")));
        assert!(value_of(&s, "'a' 'b'").is_err_and(|e| e.contains("at column 5")));
        assert!(value_of(&s, "text").is_err_and(|e| e.contains("expected a quoted string")));
        Ok(())
    }
}
