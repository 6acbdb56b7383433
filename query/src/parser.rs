//! The parser: a script of statements separated by `;` or new lines, `--` comments.
//!
//! One function per production; each commits with `cut` once its verb is read, so that
//! errors point at what was expected rather than at the start of the statement. Spans and
//! error positions are byte offsets into the source. A statement that fails to parse is
//! skipped up to the next separator outside quotes, so one run reports every error.
//! Grammar: docs/language.md.

use nom::branch::alt;
use nom::bytes::complete::tag_no_case;
use nom::character::complete::digit1;
use nom::combinator::{cut, opt};
use nom::error::{ContextError, ErrorKind, ParseError as NomParseError, context};
use nom::{IResult, Parser};

use crate::ast::{KeyRange, Literal, Located, Span, Statement};
use crate::error::ParseError;
use crate::lexer::LexState;

/// Bounds on what the parser accepts, so that no input makes it allocate without bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest literal, in bytes after unescaping.
    pub max_literal: usize,
    /// The longest statement, in bytes of source.
    pub max_statement: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_literal: 16 << 20,
            max_statement: 64 << 20,
        }
    }
}

/// A parsed script: its statements in order, and an error for each one that failed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    /// The statements that parsed, in order, each with its span.
    pub statements: Vec<Located>,
    /// An error for each statement that did not, in order.
    pub errors: Vec<ParseError>,
}

/// The parser's error: where it stopped and what it expected there.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PError<'a> {
    at: &'a str,
    expected: Option<&'static str>,
    message: Option<String>,
}

impl<'a> NomParseError<&'a str> for PError<'a> {
    fn from_error_kind(at: &'a str, _: ErrorKind) -> Self {
        PError {
            at,
            expected: None,
            message: None,
        }
    }
    fn append(_: &'a str, _: ErrorKind, other: Self) -> Self {
        other
    }
    /// Of two alternatives, the one that got further explains more.
    fn or(self, other: Self) -> Self {
        if other.at.len() < self.at.len() {
            other
        } else {
            self
        }
    }
}

impl<'a> ContextError<&'a str> for PError<'a> {
    /// The innermost context is the most precise: outer ones do not overwrite it.
    fn add_context(_: &'a str, ctx: &'static str, mut other: Self) -> Self {
        if other.expected.is_none() && other.message.is_none() {
            other.expected = Some(ctx);
        }
        other
    }
}

impl PError<'_> {
    fn describe(&self) -> String {
        if let Some(m) = &self.message {
            return m.clone();
        }
        let found = match self.at.chars().next() {
            None => "the end of the input".to_owned(),
            Some('\n') => "the end of the line".to_owned(),
            // A word is shown whole (`found 'SELECT'`), up to 32 characters.
            Some(c) if is_word_char(c) => {
                let word: String = self
                    .at
                    .chars()
                    .take_while(|&c| is_word_char(c))
                    .take(32)
                    .collect();
                let hint = bare_word_hint(self.expected, &word);
                format!("'{word}'{hint}")
            }
            Some(c) => format!("{c:?}"),
        };
        format!(
            "expected {}, found {found}",
            self.expected.unwrap_or("something else")
        )
    }
}

/// The language's keywords (any case in a statement), as the grammar uses them.
pub const KEYWORDS: [&str; 26] = [
    "PUT",
    "GET",
    "DELETE",
    "SCAN",
    "COUNT",
    "BEGIN",
    "READ",
    "ONLY",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT",
    "RELEASE",
    "TO",
    "USE",
    "CREATE",
    "DROP",
    "RENAME",
    "TABLE",
    "TABLES",
    "IF",
    "NOT",
    "EXISTS",
    "PREFIX",
    "RANGE",
    "REVERSE",
    "LIMIT",
];

/// What to say of a word found where something else was expected: one who knows SQL
/// writes `SELECT ..`, `GET users 'alice'`, `PUT 'k' hello` or `DELETE FROM t`, and the
/// language takes neither SQL, nor a table in a statement, nor text without quotes. Where
/// a literal could have stood is told by what was expected there ([`literal_slot`]).
fn bare_word_hint(expected: Option<&str>, word: &str) -> String {
    const SQL: [&str; 15] = [
        "SELECT", "INSERT", "UPDATE", "UPSERT", "REPLACE", "WITH", "FROM", "WHERE", "INTO",
        "VALUES", "SET", "ORDER", "BY", "AND", "OR",
    ];
    if SQL.iter().any(|k| k.eq_ignore_ascii_case(word)) {
        return ": the language is not SQL (.help in the shell lists its statements)".to_owned();
    }
    let Some(expected) = expected else {
        return String::new();
    };
    // A keyword of the language was meant as one (and `ALL` as `DELETE ALL` means it):
    // quoting it would not help.
    if word.starts_with(|c: char| c.is_ascii_digit())
        || word.eq_ignore_ascii_case("ALL")
        || KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(word))
    {
        return String::new();
    }
    match literal_slot(expected) {
        Some(LiteralSlot::FirstKey) => format!(
            " (a word, not a literal: text is quoted, '{word}'; a statement works on the \
             table USE chose)"
        ),
        Some(LiteralSlot::Other) => format!(" (a word, not a literal: text is quoted, '{word}')"),
        None => String::new(),
    }
}

type Res<'a, T> = IResult<&'a str, T, PError<'a>>;

const STATEMENT: &str = "a statement (PUT, GET, DELETE, SCAN, COUNT, BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE, USE, CREATE, DROP or TABLES)";
const LITERAL: &str = "a quoted string, x'..', an integer or a :parameter";
/// What is expected where a key, a value or a range's end could stand: a word found there
/// is told that text is quoted ([`literal_slot`]).
const KEY: &str = "a key: a quoted string, x'..', an integer or a :parameter";
const VALUE: &str = "a value: a quoted string, x'..', an integer or a :parameter";
const DELETE_KEY: &str =
    "a key (a quoted string, x'..', an integer or a :parameter), RANGE or PREFIX";
const SCAN_START: &str = "a start key, PREFIX, REVERSE, LIMIT or the end of the statement";
const SCAN_END: &str = "an end key, PREFIX, REVERSE, LIMIT or the end of the statement";
const COUNT_START: &str = "a start key, PREFIX or the end of the statement";
const COUNT_END: &str = "an end key, PREFIX or the end of the statement";

/// Where a literal could have stood, told by what was expected there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LiteralSlot {
    /// A statement's first key, where one who knows SQL names a table.
    FirstKey,
    /// A value, a range's end key, a prefix, a parameter's value.
    Other,
}

fn literal_slot(expected: &str) -> Option<LiteralSlot> {
    match expected {
        KEY | DELETE_KEY | SCAN_START | COUNT_START => Some(LiteralSlot::FirstKey),
        VALUE | SCAN_END | COUNT_END | LITERAL => Some(LiteralSlot::Other),
        _ => None,
    }
}

fn failure<'a, T>(at: &'a str, expected: &'static str) -> Res<'a, T> {
    Err(nom::Err::Failure(PError {
        at,
        expected: Some(expected),
        message: None,
    }))
}

fn failure_msg<T>(at: &str, message: String) -> Res<'_, T> {
    Err(nom::Err::Failure(PError {
        at,
        expected: None,
        message: Some(message),
    }))
}

fn no_match<T>(at: &str) -> Res<'_, T> {
    Err(nom::Err::Error(PError::from_error_kind(at, ErrorKind::Tag)))
}

/// Spaces, tabs and `--` comments (not new lines: they separate statements).
fn ws(i: &str) -> Res<'_, ()> {
    let mut rest = i;
    loop {
        rest = rest.trim_start_matches([' ', '\t', '\r']);
        match rest.strip_prefix("--") {
            Some(comment) => rest = &comment[comment.find('\n').unwrap_or(comment.len())..],
            None => return Ok((rest, ())),
        }
    }
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `word = (letter | "_") { letter | digit | "_" }`
fn word(i: &str) -> Res<'_, &str> {
    let (i, ()) = ws(i)?;
    let end = i.find(|c| !is_word_char(c)).unwrap_or(i.len());
    if end == 0 || i.starts_with(|c: char| c.is_ascii_digit()) {
        return no_match(i);
    }
    Ok((&i[end..], &i[..end]))
}

/// A keyword, in any case.
fn keyword(kw: &'static str) -> impl Fn(&str) -> Res<'_, ()> {
    move |i| {
        let (rest, w) = word(i)?;
        if w.eq_ignore_ascii_case(kw) {
            Ok((rest, ()))
        } else {
            no_match(ws(i)?.0)
        }
    }
}

/// `literal = string | blob | integer | param`
fn literal(limits: Limits) -> impl Fn(&str) -> Res<'_, Literal> {
    move |i| {
        let (i, ()) = ws(i)?;
        alt((blob(limits), string(limits), integer, param)).parse(i)
    }
}

/// `param = ":" word`: a parameter, bound where the statement runs.
fn param(i: &str) -> Res<'_, Literal> {
    let Some(name) = i.strip_prefix(':') else {
        return no_match(i);
    };
    let end = name.find(|c| !is_word_char(c)).unwrap_or(name.len());
    if end == 0 || name.starts_with(|c: char| c.is_ascii_digit()) {
        return failure(
            name,
            "a parameter's name after ':' (a letter or '_', then letters, digits or '_')",
        );
    }
    Ok((&name[end..], Literal::Param(name[..end].to_owned())))
}

/// `blob = "x'" { hex hex } "'"`
fn blob(limits: Limits) -> impl Fn(&str) -> Res<'_, Literal> {
    move |i| {
        let (body, _) = tag_no_case("x'").parse(i)?;
        let Some(end) = body.find('\'') else {
            return failure_msg(i, "unterminated hex literal: no closing quote".into());
        };
        let digits = &body[..end];
        if let Some(bad) = digits.find(|c: char| !c.is_ascii_hexdigit()) {
            return failure(&body[bad..], "a hexadecimal digit");
        }
        if digits.len() % 2 == 1 {
            return failure(&body[end..], "an even number of hexadecimal digits");
        }
        if digits.len() / 2 > limits.max_literal {
            return failure_msg(
                i,
                format!("literal longer than {} bytes", limits.max_literal),
            );
        }
        let bytes = digits
            .as_bytes()
            .chunks(2)
            .map(|pair| (hex_value(pair[0]) << 4) | hex_value(pair[1]))
            .collect();
        Ok((&body[end + 1..], Literal::Blob(bytes)))
    }
}

fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        _ => digit.wrapping_sub(b'A').wrapping_add(10) & 0x0f,
    }
}

/// `string = "'" { char | "''" | escape } "'" | '"' { char | '""' | escape } '"'`
/// `escape = "\" ( "n" | "t" | "r" | "0" | "\" | "'" | '"' | "x" hex hex )`
///
/// Text whose escapes make it invalid UTF-8 becomes a blob.
fn string(limits: Limits) -> impl Fn(&str) -> Res<'_, Literal> {
    move |i| {
        let quote = match i.chars().next() {
            Some(q @ ('\'' | '"')) => q,
            _ => return no_match(i),
        };
        let body = &i[1..];
        let mut out = Vec::new();
        let mut chars = body.char_indices().peekable();
        let rest = loop {
            let Some((at, c)) = chars.next() else {
                return failure_msg(i, "unterminated string: no closing quote".into());
            };
            if c == quote {
                if chars.peek().is_some_and(|&(_, next)| next == quote) {
                    chars.next();
                    out.push(quote as u8);
                    continue;
                }
                break &body[at + 1..];
            }
            if c != '\\' {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            } else {
                let byte = match chars.next() {
                    Some((_, 'n')) => b'\n',
                    Some((_, 't')) => b'\t',
                    Some((_, 'r')) => b'\r',
                    Some((_, '0')) => 0,
                    Some((_, c @ ('\\' | '\'' | '"'))) => c as u8,
                    Some((_, 'x')) => {
                        let hex = body
                            .get(at + 2..at + 4)
                            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
                        let Some(hex) = hex else {
                            return failure(&body[at..], "two hexadecimal digits after \\x");
                        };
                        chars.next();
                        chars.next();
                        (hex_value(hex.as_bytes()[0]) << 4) | hex_value(hex.as_bytes()[1])
                    }
                    _ => {
                        return failure(
                            &body[at..],
                            "an escape: \\n \\t \\r \\0 \\\\ \\' \\\" or \\xHH",
                        );
                    }
                };
                out.push(byte);
            }
            if out.len() > limits.max_literal {
                return failure_msg(
                    i,
                    format!("literal longer than {} bytes", limits.max_literal),
                );
            }
        };
        let literal = match String::from_utf8(out) {
            Ok(s) => Literal::Text(s),
            Err(e) => Literal::Blob(e.into_bytes()),
        };
        Ok((rest, literal))
    }
}

/// `integer = digit { digit }`: 0 to 2^64 - 1.
fn integer(i: &str) -> Res<'_, Literal> {
    unsigned(i).map(|(rest, n)| (rest, Literal::Int(n)))
}

fn unsigned(i: &str) -> Res<'_, u64> {
    if i.starts_with('-') && i[1..].starts_with(|c: char| c.is_ascii_digit()) {
        return failure_msg(
            i,
            "negative integers are not supported: integers are stored as unsigned big-endian \
             bytes so that they sort numerically"
                .into(),
        );
    }
    let (rest, digits) = digit1(i)?;
    if rest.starts_with(is_word_char) {
        return failure(rest, "a space or the end of the integer");
    }
    match digits.parse() {
        Ok(n) => Ok((rest, n)),
        Err(_) => failure_msg(i, format!("integer out of range (0 to {})", u64::MAX)),
    }
}

/// `table = word | string`
fn table_name(limits: Limits) -> impl Fn(&str) -> Res<'_, String> {
    name(limits, "a table name in text, not bytes")
}

/// A table's or a savepoint's name: `word | string`, where the string is text; `bytes`
/// says what was expected when it is not.
fn name(limits: Limits, bytes: &'static str) -> impl Fn(&str) -> Res<'_, String> {
    move |i| {
        let (i, ()) = ws(i)?;
        if let Ok((rest, w)) = word(i) {
            // `x'..'` is bytes, not the word `x` followed by a string.
            if w.eq_ignore_ascii_case("x") && rest.starts_with('\'') {
                return failure(i, bytes);
            }
            return Ok((rest, w.to_owned()));
        }
        match string(limits)(i)? {
            (rest, Literal::Text(s)) => Ok((rest, s)),
            _ => failure(i, bytes),
        }
    }
}

/// `[ "SAVEPOINT" ] name`, after `ROLLBACK TO` and `RELEASE` (a name alone may be
/// `SAVEPOINT`).
fn savepoint_name(limits: Limits) -> impl Fn(&str) -> Res<'_, String> {
    const BYTES: &str = "a savepoint name in text, not bytes";
    move |i| {
        if let Ok((rest, ())) = keyword("SAVEPOINT").parse(i) {
            match name(limits, BYTES)(rest) {
                // Nothing after it: the name is `SAVEPOINT`.
                Err(nom::Err::Error(_)) => {}
                named => return named,
            }
        }
        context("a savepoint name", cut(name(limits, BYTES))).parse(i)
    }
}

/// `put = "PUT" literal literal`
fn put_stmt(limits: Limits) -> impl Fn(&str) -> Res<'_, Statement> {
    move |i| {
        (
            context(KEY, cut(literal(limits))),
            context(VALUE, cut(literal(limits))),
        )
            .map(|(key, value)| Statement::Put { key, value })
            .parse(i)
    }
}

/// `key_stmt = "GET" literal`
fn key_stmt(limits: Limits, make: fn(Literal) -> Statement) -> impl Fn(&str) -> Res<'_, Statement> {
    move |i| context(KEY, cut(literal(limits))).map(make).parse(i)
}

/// `delete = "DELETE" ( literal | "RANGE" range [ "PREFIX" literal ] | "PREFIX" literal )`
/// `BEGIN [READ [ONLY]]`
fn begin_stmt(i: &str) -> Res<'_, Statement> {
    match word(i) {
        Ok((rest, w)) if w.eq_ignore_ascii_case("READ") => {
            // (`ONLY`, as SQL's `READ ONLY` has it, changes nothing.)
            let (rest, _) = opt(keyword("ONLY")).parse(rest)?;
            Ok((rest, Statement::BeginRead))
        }
        Ok(_) => failure(ws(i)?.0, "READ or the end of the statement"),
        Err(_) => Ok((i, Statement::Begin)),
    }
}

fn delete_stmt(limits: Limits) -> impl Fn(&str) -> Res<'_, Statement> {
    move |i| {
        // A literal first: `x'00'` starts with a word character.
        if let (rest, Some(key)) = opt(literal(limits)).parse(i)? {
            return Ok((rest, Statement::Delete { key }));
        }
        match word(i) {
            Ok((rest, w)) if w.eq_ignore_ascii_case("RANGE") => {
                let (rest, stmt) = scan_stmt(limits, true)(rest)?;
                let Statement::Count { range } = stmt else {
                    return failure(ws(rest)?.0, "the end of the statement");
                };
                Ok((rest, Statement::DeleteRange { range }))
            }
            Ok((rest, w)) if w.eq_ignore_ascii_case("PREFIX") => {
                let (rest, p) = context(LITERAL, cut(literal(limits))).parse(rest)?;
                let range = KeyRange {
                    prefix: Some(p),
                    ..KeyRange::default()
                };
                Ok((rest, Statement::DeleteRange { range }))
            }
            _ => failure(ws(i)?.0, DELETE_KEY),
        }
    }
}

/// `range = [ literal [ literal ] ]`
fn key_range(limits: Limits) -> impl Fn(&str) -> Res<'_, KeyRange> {
    move |i| {
        let (i, start) = opt(literal(limits)).parse(i)?;
        let (i, end) = match start {
            Some(_) => opt(literal(limits)).parse(i)?,
            None => (i, None),
        };
        Ok((
            i,
            KeyRange {
                start,
                end,
                prefix: None,
            },
        ))
    }
}

/// `scan = "SCAN" range { "PREFIX" literal | "REVERSE" | "LIMIT" ( integer | param ) }`
/// `count = "COUNT" range [ "PREFIX" literal ]`
fn scan_stmt(limits: Limits, count: bool) -> impl Fn(&str) -> Res<'_, Statement> {
    move |i| {
        let (mut i, mut range) = key_range(limits)(i)?;
        let (mut reverse, mut limit) = (false, None);
        // Right after the range, a key could still have stood there.
        let mut options = match (count, &range.start, &range.end) {
            (false, None, _) => SCAN_START,
            (false, Some(_), None) => SCAN_END,
            (true, None, _) => COUNT_START,
            (true, Some(_), None) => COUNT_END,
            (false, Some(_), Some(_)) => "PREFIX, REVERSE, LIMIT or the end of the statement",
            (true, Some(_), Some(_)) => "PREFIX or the end of the statement",
        };
        while let Ok((rest, w)) = word(i) {
            let at = ws(i)?.0;
            match w.to_ascii_uppercase().as_str() {
                "PREFIX" if range.prefix.is_none() => {
                    let (rest, p) = context(LITERAL, cut(literal(limits))).parse(rest)?;
                    range.prefix = Some(p);
                    i = rest;
                }
                "REVERSE" if !count && !reverse => {
                    reverse = true;
                    i = rest;
                }
                "LIMIT" if !count && limit.is_none() => {
                    let (rest, ()) = ws(rest)?;
                    // (A negative count is not an integer the language stores: say so in
                    // LIMIT's terms.)
                    if rest.starts_with('-') {
                        return failure(rest, "a number of rows, not a negative one");
                    }
                    let rows = alt((integer, param));
                    let (rest, n) =
                        context("a number of rows (or a :parameter)", cut(rows)).parse(rest)?;
                    limit = Some(n);
                    i = rest;
                }
                "REVERSE" | "LIMIT" if count => return failure(at, options),
                "PREFIX" | "REVERSE" | "LIMIT" => {
                    return failure_msg(at, format!("{} given twice", w.to_ascii_uppercase()));
                }
                _ => return failure(at, options),
            }
            // Past an option, no key can come.
            options = if count {
                "PREFIX or the end of the statement"
            } else {
                "PREFIX, REVERSE, LIMIT or the end of the statement"
            };
        }
        let stmt = if count {
            Statement::Count { range }
        } else {
            Statement::Scan {
                range,
                reverse,
                limit,
            }
        };
        Ok((i, stmt))
    }
}

/// `create = "CREATE" "TABLE" [ "IF" "NOT" "EXISTS" ] table`,
/// `drop = "DROP" "TABLE" [ "IF" "EXISTS" ] table`
fn table_stmt(
    limits: Limits,
    guard: &'static [&'static str],
    make: fn(String, bool) -> Statement,
) -> impl Fn(&str) -> Res<'_, Statement> {
    move |i| {
        let (i, ()) = context("TABLE", cut(keyword("TABLE"))).parse(i)?;
        // `IF` and the guard's words, all of them: else `IF` is the table's name.
        let guarded = keyword("IF")
            .parse(i)
            .and_then(|(rest, ())| guard.iter().try_fold(rest, |at, kw| Ok(keyword(kw)(at)?.0)));
        let (i, guarded) = match guarded {
            Ok(rest) => (rest, true),
            Err(_) => (i, false),
        };
        let (i, table) = context("a table name", cut(table_name(limits))).parse(i)?;
        Ok((i, make(table, guarded)))
    }
}

/// `rename = "RENAME" "TABLE" table "TO" table`
fn rename_stmt(limits: Limits) -> impl Fn(&str) -> Res<'_, Statement> {
    move |i| {
        let (i, ()) = context("TABLE", cut(keyword("TABLE"))).parse(i)?;
        let (i, from) = context("a table name", cut(table_name(limits))).parse(i)?;
        let (i, ()) = context("TO", cut(keyword("TO"))).parse(i)?;
        let (i, to) = context("a table name", cut(table_name(limits))).parse(i)?;
        Ok((i, Statement::RenameTable { from, to }))
    }
}

/// `statement = put | get | delete | scan | count | "BEGIN" [ "READ" [ "ONLY" ] ] | "COMMIT" | "ROLLBACK"
///            | "SAVEPOINT" name | "ROLLBACK" "TO" [ "SAVEPOINT" ] name | "RELEASE" [ "SAVEPOINT" ] name
///            | "USE" table | create | drop | rename | "TABLES"`
fn statement(limits: Limits) -> impl Fn(&str) -> Res<'_, Statement> {
    move |i| {
        let Ok((rest, verb)) = word(i) else {
            let (at, ()) = ws(i)?;
            if at.starts_with('.') && at[1..].starts_with(|c: char| c.is_ascii_alphabetic()) {
                // The shell's dot-commands are lines of their own, not statements.
                let name: String = at
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '_')
                    .take(32)
                    .collect();
                let message = format!(
                    "expected a statement, found the dot-command {name}: a dot-command goes on \
                     a line of its own"
                );
                return failure_msg(at, message);
            }
            return failure(at, STATEMENT);
        };
        match verb.to_ascii_uppercase().as_str() {
            "PUT" => put_stmt(limits)(rest),
            "GET" => key_stmt(limits, |key| Statement::Get { key })(rest),
            "DELETE" => delete_stmt(limits)(rest),
            "SCAN" => scan_stmt(limits, false)(rest),
            "COUNT" => scan_stmt(limits, true)(rest),
            "BEGIN" => begin_stmt(rest),
            "COMMIT" => Ok((rest, Statement::Commit)),
            "ROLLBACK" => match keyword("TO").parse(rest) {
                Ok((rest, ())) => savepoint_name(limits)
                    .map(|name| Statement::RollbackTo { name })
                    .parse(rest),
                Err(_) => Ok((rest, Statement::Rollback)),
            },
            "SAVEPOINT" => context(
                "a savepoint name",
                cut(name(limits, "a savepoint name in text, not bytes")),
            )
            .map(|name| Statement::Savepoint { name })
            .parse(rest),
            "RELEASE" => savepoint_name(limits)
                .map(|name| Statement::Release { name })
                .parse(rest),
            "TABLES" => Ok((rest, Statement::Tables)),
            "USE" => context("a table name", cut(table_name(limits)))
                .map(|table| Statement::Use { table })
                .parse(rest),
            "CREATE" => table_stmt(limits, &["NOT", "EXISTS"], |table, if_not_exists| {
                Statement::CreateTable {
                    table,
                    if_not_exists,
                }
            })(rest),
            "DROP" => table_stmt(limits, &["EXISTS"], |table, if_exists| {
                Statement::DropTable { table, if_exists }
            })(rest),
            "RENAME" => rename_stmt(limits)(rest),
            "ALTER" => failure_msg(
                ws(i)?.0,
                format!(
                    "expected {STATEMENT}, found '{verb}': the language is not SQL (RENAME \
                     TABLE t TO u renames a table)"
                ),
            ),
            // (SQL's verbs are told to be SQL's where the error is described.)
            _ => failure(ws(i)?.0, STATEMENT),
        }
    }
}

/// After a statement: `";" | new line | end of input`.
fn end_of_statement(i: &str) -> Res<'_, ()> {
    let (i, ()) = ws(i)?;
    match i.chars().next() {
        None => Ok((i, ())),
        Some(';' | '\n') => Ok((&i[1..], ())),
        Some(_) => failure(i, "the end of the statement (';' or a new line)"),
    }
}

/// Where the statement after a broken one starts: past the next `;` or new line outside
/// quotes and comments.
fn recover(src: &str, from: usize) -> usize {
    let mut state = LexState::default();
    src.as_bytes()[from..]
        .iter()
        .position(|&b| state.step(b))
        .map_or(src.len(), |n| from + n + 1)
}

/// Parses a script with the default [`Limits`].
pub fn parse_script(src: &str) -> Script {
    parse_script_with(src, Limits::default())
}

/// Parses a script: every statement that parses, and an error for every one that does not.
pub fn parse_script_with(src: &str, limits: Limits) -> Script {
    let mut script = Script::default();
    let offset = |rest: &str| src.len() - rest.len();
    let mut pos = 0;
    loop {
        // Separators, blank lines and comments between statements.
        let mut rest = &src[pos..];
        loop {
            rest = ws(rest).map_or(rest, |(r, ())| r);
            match rest.strip_prefix([';', '\n']) {
                Some(r) => rest = r,
                None => break,
            }
        }
        pos = offset(rest);
        if rest.is_empty() {
            return script;
        }
        let parsed = statement(limits)(rest).and_then(|(after, stmt)| {
            let end = offset(after);
            end_of_statement(after).map(|(next, ())| (stmt, end, offset(next)))
        });
        match parsed {
            Ok((statement, end, next)) if end - pos <= limits.max_statement => {
                script.statements.push(Located {
                    statement,
                    span: Span { start: pos, end },
                });
                pos = next;
            }
            Ok((_, _, next)) => {
                script.errors.push(ParseError {
                    offset: pos,
                    message: format!("statement longer than {} bytes", limits.max_statement),
                });
                pos = next;
            }
            Err(nom::Err::Error(e) | nom::Err::Failure(e)) => {
                script.errors.push(ParseError {
                    offset: offset(e.at),
                    message: e.describe(),
                });
                pos = recover(src, pos);
            }
            Err(nom::Err::Incomplete(_)) => {
                script.errors.push(ParseError {
                    offset: src.len(),
                    message: "unexpected end of input".into(),
                });
                return script;
            }
        }
    }
}

/// Parses one literal (`'text'`, `x'00ff'`, `42`, `:name`), alone in `src` but for
/// spaces and a `--` comment: a parameter's value, say (the shell's `.param set`).
///
/// # Errors
/// What the literal lacks, or what follows it, with its offset in `src`.
pub fn parse_literal(src: &str) -> Result<Literal, ParseError> {
    let limits = Limits::default();
    let parsed = context(LITERAL, cut(literal(limits)))
        .parse(src)
        .and_then(|(rest, l)| {
            let (rest, ()) = ws(rest)?;
            if rest.trim_end_matches(['\n', '\r']).is_empty() {
                Ok(l)
            } else {
                // (Always an error: `map` only gives it the literal's type.)
                failure::<()>(rest, "the end of the value").map(|_| l)
            }
        });
    parsed.map_err(|e| match e {
        nom::Err::Error(e) | nom::Err::Failure(e) => ParseError {
            offset: src.len() - e.at.len(),
            message: e.describe(),
        },
        nom::Err::Incomplete(_) => ParseError {
            offset: src.len(),
            message: "unexpected end of input".into(),
        },
    })
}

/// Parses a script given as bytes. Invalid UTF-8 is an error in the statement holding it;
/// the statements around it still parse.
pub fn parse_bytes(src: &[u8]) -> Script {
    parse_bytes_with(src, Limits::default())
}

/// [`parse_bytes`] with explicit limits.
pub fn parse_bytes_with(src: &[u8], limits: Limits) -> Script {
    let text = match std::str::from_utf8(src) {
        Ok(text) => return parse_script_with(text, limits),
        Err(_) => src,
    };
    // Each invalid byte becomes a one-byte stand-in so that offsets stay true; statements
    // that contain one are then turned into errors.
    let mut clean = Vec::with_capacity(text.len());
    let mut bad = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(valid) => {
                clean.extend_from_slice(valid.as_bytes());
                break;
            }
            Err(e) => {
                let (valid, after) = rest.split_at(e.valid_up_to());
                clean.extend_from_slice(valid);
                let n = e.error_len().unwrap_or(after.len());
                for &b in &after[..n] {
                    bad.push((clean.len(), b));
                    clean.push(0x1a);
                }
                rest = &after[n..];
            }
        }
    }
    let clean = String::from_utf8(clean).unwrap_or_default();
    let mut script = parse_script_with(&clean, limits);
    let invalid_in = |start: usize, end: usize| {
        bad.iter()
            .find(|(at, _)| (start..end.max(start + 1)).contains(at))
    };
    let mut errors = Vec::new();
    script
        .statements
        .retain(|s| match invalid_in(s.span.start, s.span.end) {
            Some(&(at, byte)) => {
                errors.push(invalid_utf8(at, byte));
                false
            }
            None => true,
        });
    for e in &mut script.errors {
        if let Some(&(at, byte)) = bad
            .iter()
            .find(|(at, _)| *at <= e.offset && e.offset <= *at + 1)
        {
            *e = invalid_utf8(at, byte);
        }
    }
    script.errors.extend(errors);
    script.errors.sort_by_key(|e| e.offset);
    script
}

/// The byte offset of what follows the first word of `src` (a statement's source): the key
/// of a `PUT`, `GET` or `DELETE`.
pub(crate) fn after_verb(src: &str) -> Option<usize> {
    let (rest, _) = word(src).ok()?;
    let (rest, ()) = ws(rest).ok()?;
    (!rest.is_empty()).then(|| src.len() - rest.len())
}

/// Every word and text string of `src` (a statement's source) with its byte offset, in
/// order: the places an error about a name (a table's, a savepoint's) can point at.
pub(crate) fn names_in(src: &str) -> Vec<(usize, String)> {
    let mut names = Vec::new();
    let mut i = src;
    while let Ok((rest, ())) = ws(i) {
        let at = src.len() - rest.len();
        if let Ok((after, w)) = word(rest) {
            names.push((at, w.to_owned()));
            i = after;
        } else if let Ok((after, Literal::Text(text))) = string(Limits::default())(rest) {
            names.push((at, text));
            i = after;
        } else {
            // (Anything else: a number, bytes' quotes, `;`, a new line.)
            let Some(c) = rest.chars().next() else {
                break;
            };
            i = &rest[c.len_utf8()..];
        }
    }
    names
}

fn invalid_utf8(offset: usize, byte: u8) -> ParseError {
    ParseError {
        offset,
        message: format!("invalid UTF-8 (byte 0x{byte:02x}); write binary data as x'..'"),
    }
}

#[cfg(test)]
mod tests;
