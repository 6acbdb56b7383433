//! Printing: statements back as source text (so that `parse(print(ast)) == ast`), and
//! keys and values for people (text when printable, hex otherwise).

use std::borrow::Cow;
use std::fmt::{self, Write};

use crate::ast::{KeyRange, Literal, Statement};

/// Whether `bytes` are UTF-8 without control characters, so that printing them as text
/// loses nothing and shows nothing misleading.
pub fn is_printable(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok_and(|s| !s.chars().any(char::is_control))
}

/// Bytes for people: the text itself when printable, else `x'..'` hex. Text that begins
/// as a hex literal does (`x'`) prints as hex too, so that what is printed reads back as
/// what is stored (the shell's `.import` reads `x'..'` as hex).
pub fn display_bytes(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) if is_printable(bytes) && !s.starts_with("x'") && !s.starts_with("X'") => {
            Cow::Borrowed(s)
        }
        _ => Cow::Owned(hex(bytes)),
    }
}

/// The integer the language stores as these bytes, for people who store integers: 8 bytes
/// that do not print as text (`42` is `x'000000000000002a'`; `'abcdefgh'` stays text).
/// The number reads back as the same bytes, as a literal of the language.
pub fn as_integer(bytes: &[u8]) -> Option<u64> {
    let bytes: [u8; 8] = bytes.try_into().ok()?;
    (!is_printable(&bytes)).then(|| u64::from_be_bytes(bytes))
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(3 + 2 * bytes.len());
    s.push_str("x'");
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s.push('\'');
    s
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Int(n) => write!(f, "{n}"),
            Literal::Param(name) => write!(f, ":{name}"),
            Literal::Blob(b) => f.write_str(&hex(b)),
            Literal::Text(s) => {
                f.write_char('\'')?;
                for c in s.chars() {
                    match c {
                        '\'' => f.write_str("''")?,
                        '\\' => f.write_str("\\\\")?,
                        '\n' => f.write_str("\\n")?,
                        '\t' => f.write_str("\\t")?,
                        '\r' => f.write_str("\\r")?,
                        '\0' => f.write_str("\\0")?,
                        c if c.is_ascii_control() => write!(f, "\\x{:02x}", c as u32)?,
                        c => f.write_char(c)?,
                    }
                }
                f.write_char('\'')
            }
        }
    }
}

/// A table name as source: bare when it is a word, quoted otherwise.
fn table(name: &str) -> Cow<'_, str> {
    let word = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if word {
        Cow::Borrowed(name)
    } else {
        Cow::Owned(Literal::Text(name.to_owned()).to_string())
    }
}

fn range(f: &mut fmt::Formatter<'_>, r: &KeyRange) -> fmt::Result {
    if let Some(s) = &r.start {
        write!(f, " {s}")?;
        if let Some(e) = &r.end {
            write!(f, " {e}")?;
        }
    }
    if let Some(p) = &r.prefix {
        write!(f, " PREFIX {p}")?;
    }
    Ok(())
}

impl fmt::Display for Statement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Statement::Put { key, value } => write!(f, "PUT {key} {value}"),
            Statement::Get { key } => write!(f, "GET {key}"),
            Statement::Delete { key } => write!(f, "DELETE {key}"),
            Statement::DeleteRange { range: r } => {
                f.write_str("DELETE RANGE")?;
                range(f, r)
            }
            Statement::Scan {
                range: r,
                reverse,
                limit,
            } => {
                f.write_str("SCAN")?;
                range(f, r)?;
                if *reverse {
                    f.write_str(" REVERSE")?;
                }
                if let Some(n) = limit {
                    write!(f, " LIMIT {n}")?;
                }
                Ok(())
            }
            Statement::Count { range: r } => {
                f.write_str("COUNT")?;
                range(f, r)
            }
            Statement::Begin => f.write_str("BEGIN"),
            Statement::BeginRead => f.write_str("BEGIN READ"),
            Statement::Commit => f.write_str("COMMIT"),
            Statement::Rollback => f.write_str("ROLLBACK"),
            Statement::Savepoint { name } => write!(f, "SAVEPOINT {}", table(name)),
            Statement::RollbackTo { name } => write!(f, "ROLLBACK TO {}", table(name)),
            Statement::Release { name } => write!(f, "RELEASE {}", table(name)),
            Statement::Tables => f.write_str("TABLES"),
            Statement::Use { table: t } => write!(f, "USE {}", table(t)),
            Statement::CreateTable {
                table: t,
                if_not_exists,
            } => {
                let guard = if *if_not_exists { " IF NOT EXISTS" } else { "" };
                write!(f, "CREATE TABLE{guard} {}", table(t))
            }
            Statement::DropTable {
                table: t,
                if_exists,
            } => {
                let guard = if *if_exists { " IF EXISTS" } else { "" };
                write!(f, "DROP TABLE{guard} {}", table(t))
            }
            Statement::RenameTable { from, to } => {
                write!(f, "RENAME TABLE {} TO {}", table(from), table(to))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_print_as_text_only_when_printable() {
        assert_eq!(display_bytes(b"caf\xc3\xa9"), "café");
        assert_eq!(display_bytes(b"a\tb"), "x'610962'");
        assert_eq!(display_bytes(&[0, 255]), "x'00ff'");
        assert_eq!(display_bytes(b"x'00'"), "x'78273030 27'".replace(' ', ""));
        assert_eq!(display_bytes(b"X'"), "x'5827'");
        assert_eq!(display_bytes(b"x"), "x");
        assert_eq!(display_bytes(b""), "");
    }

    #[test]
    fn eight_bytes_that_are_not_text_read_as_the_integer_stored() {
        assert_eq!(as_integer(&42u64.to_be_bytes()), Some(42));
        assert_eq!(as_integer(&u64::MAX.to_be_bytes()), Some(u64::MAX));
        assert_eq!(as_integer(b"abcdefgh"), None, "text stays text");
        assert_eq!(as_integer(&[0; 7]), None);
        assert_eq!(as_integer(&[0; 9]), None);
    }

    #[test]
    fn literals_and_names_print_as_source() {
        assert_eq!(
            Literal::Text("it's\\\n\u{1}".into()).to_string(),
            r"'it''s\\\n\x01'"
        );
        assert_eq!(Literal::Int(7).to_string(), "7");
        assert_eq!(Literal::Blob(vec![0xab]).to_string(), "x'ab'");
        assert_eq!(table("_t1"), "_t1");
        assert_eq!(table("1t"), "'1t'");
        assert_eq!(table("a b"), "'a b'");
    }
}
