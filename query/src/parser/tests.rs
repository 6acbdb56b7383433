//! Parser tests: every statement form, every error class and its position.

use super::*;
use crate::Position;

fn one(src: &str) -> Statement {
    let script = parse_script(src);
    assert!(script.errors.is_empty(), "{src:?}: {:?}", script.errors);
    assert_eq!(script.statements.len(), 1, "{src:?}");
    script.statements[0].statement.clone()
}

/// The single error of `src`: its (line, column) and message.
fn error(src: &str) -> (usize, usize, String) {
    let script = parse_script(src);
    assert_eq!(script.errors.len(), 1, "{src:?}: {:?}", script.errors);
    let e = &script.errors[0];
    let p = Position::of(src, e.offset);
    (p.line, p.column, e.message.clone())
}

fn text(s: &str) -> Literal {
    Literal::Text(s.into())
}

fn range(start: Option<Literal>, end: Option<Literal>, prefix: Option<Literal>) -> KeyRange {
    KeyRange { start, end, prefix }
}

#[test]
fn every_statement_form() {
    assert_eq!(
        one("PUT 'a' 'b'"),
        Statement::Put {
            key: text("a"),
            value: text("b")
        }
    );
    assert_eq!(
        one("put \"a\" x'00FF'"),
        Statement::Put {
            key: text("a"),
            value: Literal::Blob(vec![0, 255])
        }
    );
    assert_eq!(
        one("GET 42"),
        Statement::Get {
            key: Literal::Int(42)
        }
    );
    assert_eq!(one("Delete 'k'"), Statement::Delete { key: text("k") });
    assert_eq!(
        one("DELETE x'00'"),
        Statement::Delete {
            key: Literal::Blob(vec![0])
        }
    );
    assert_eq!(
        one("DELETE RANGE"),
        Statement::DeleteRange {
            range: KeyRange::default()
        }
    );
    assert_eq!(
        one("delete range 'a' 'b' prefix 'x'"),
        Statement::DeleteRange {
            range: range(Some(text("a")), Some(text("b")), Some(text("x")))
        }
    );
    assert_eq!(
        one("DELETE PREFIX 'user:'"),
        Statement::DeleteRange {
            range: range(None, None, Some(text("user:")))
        }
    );
    let scan = |range, reverse, limit| Statement::Scan {
        range,
        reverse,
        limit,
    };
    assert_eq!(one("SCAN"), scan(KeyRange::default(), false, None));
    assert_eq!(
        one("SCAN 'a'"),
        scan(range(Some(text("a")), None, None), false, None)
    );
    assert_eq!(
        one("SCAN 'a' 'b'"),
        scan(range(Some(text("a")), Some(text("b")), None), false, None)
    );
    assert_eq!(
        one("SCAN PREFIX 'p'"),
        scan(range(None, None, Some(text("p"))), false, None)
    );
    assert_eq!(
        one("scan 1 REVERSE limit 10"),
        scan(
            range(Some(Literal::Int(1)), None, None),
            true,
            Some(Literal::Int(10))
        )
    );
    assert_eq!(
        one("SCAN LIMIT 3 REVERSE PREFIX x'00'"),
        scan(
            range(None, None, Some(Literal::Blob(vec![0]))),
            true,
            Some(Literal::Int(3))
        )
    );
    assert_eq!(
        one("SCAN LIMIT :n"),
        scan(KeyRange::default(), false, Some(Literal::Param("n".into())))
    );
    assert_eq!(
        one("COUNT"),
        Statement::Count {
            range: KeyRange::default()
        }
    );
    assert_eq!(
        one("COUNT 'a' 'b' PREFIX 'x'"),
        Statement::Count {
            range: range(Some(text("a")), Some(text("b")), Some(text("x")))
        }
    );
    assert_eq!(one("BEGIN"), Statement::Begin);
    assert_eq!(one("BEGIN READ"), Statement::BeginRead);
    assert_eq!(one("begin read only"), Statement::BeginRead);
    assert_eq!(one("commit"), Statement::Commit);
    assert_eq!(one("Rollback"), Statement::Rollback);
}

#[test]
fn a_name_in_bytes_is_refused_as_bytes_at_the_x() {
    for (src, column, what) in [
        ("USE x'00'", 5, "a table name in text, not bytes"),
        ("CREATE TABLE X'61'", 14, "a table name in text, not bytes"),
        (
            "DROP TABLE IF EXISTS x'61'",
            22,
            "a table name in text, not bytes",
        ),
        ("SAVEPOINT x'61'", 11, "a savepoint name in text, not bytes"),
        (
            "RELEASE SAVEPOINT x'61'",
            19,
            "a savepoint name in text, not bytes",
        ),
        ("ROLLBACK TO x''", 13, "a savepoint name in text, not bytes"),
        ("USE '\\xff'", 5, "a table name in text, not bytes"),
    ] {
        let (line, col, message) = error(src);
        assert_eq!((line, col), (1, column), "{src}: {message}");
        assert!(message.contains(what), "{src}: {message}");
    }
    // The word x alone, or before a space and a string, is a name.
    assert_eq!(one("USE x"), Statement::Use { table: "x".into() });
    assert_eq!(
        one("SAVEPOINT X"),
        Statement::Savepoint { name: "X".into() }
    );
}

#[test]
fn savepoint_statements_parse_with_and_without_the_optional_word() {
    let named = |name: &str| name.to_owned();
    assert_eq!(
        one("SAVEPOINT a"),
        Statement::Savepoint { name: named("a") }
    );
    assert_eq!(
        one("savepoint 'two words'"),
        Statement::Savepoint {
            name: named("two words")
        }
    );
    for src in ["ROLLBACK TO a", "rollback to savepoint a"] {
        assert_eq!(
            one(src),
            Statement::RollbackTo { name: named("a") },
            "{src}"
        );
    }
    for src in ["RELEASE a", "Release Savepoint a"] {
        assert_eq!(one(src), Statement::Release { name: named("a") }, "{src}");
    }
    // A savepoint may be called SAVEPOINT (or TO).
    assert_eq!(
        one("RELEASE SAVEPOINT"),
        Statement::Release {
            name: named("SAVEPOINT")
        }
    );
    assert_eq!(
        one("ROLLBACK TO TO"),
        Statement::RollbackTo { name: named("TO") }
    );
    for (src, column) in [("SAVEPOINT", 10), ("ROLLBACK TO", 12), ("RELEASE 42", 9)] {
        let (line, col, message) = error(src);
        assert_eq!((line, col), (1, column), "{src}: {message}");
        assert!(
            message.contains("savepoint name") || message.contains("table name"),
            "{src}: {message}"
        );
    }
    assert_eq!(one("TABLES"), Statement::Tables);
    assert_eq!(
        one("USE t_1"),
        Statement::Use {
            table: "t_1".into()
        }
    );
    assert_eq!(
        one("USE 'my table'"),
        Statement::Use {
            table: "my table".into()
        }
    );
    assert_eq!(
        one("CREATE TABLE t"),
        Statement::CreateTable {
            table: "t".into(),
            if_not_exists: false
        }
    );
    assert_eq!(
        one("drop table \"t\""),
        Statement::DropTable {
            table: "t".into(),
            if_exists: false
        }
    );
    assert_eq!(
        one("create table if not exists t"),
        Statement::CreateTable {
            table: "t".into(),
            if_not_exists: true
        }
    );
    assert_eq!(
        one("DROP TABLE IF EXISTS 'my t'"),
        Statement::DropTable {
            table: "my t".into(),
            if_exists: true
        }
    );
    assert_eq!(
        one("rename table 'my t' to \"your t\""),
        Statement::RenameTable {
            from: "my t".into(),
            to: "your t".into()
        }
    );
    // Each part missing, or a name in bytes: an error where it should be.
    for (src, column, what) in [
        ("RENAME t TO u", 8, "TABLE"),
        ("RENAME TABLE", 13, "a table name"),
        ("RENAME TABLE t u", 16, "TO"),
        ("RENAME TABLE t TO", 18, "a table name"),
        (
            "RENAME TABLE t TO x'75'",
            19,
            "a table name in text, not bytes",
        ),
    ] {
        let (line, col, message) = error(src);
        assert_eq!((line, col), (1, column), "{src}: {message}");
        assert!(message.contains(what), "{src}: {message}");
    }
    let stmt = one("RENAME TABLE a TO 'b c'");
    assert_eq!(stmt.to_string(), "RENAME TABLE a TO 'b c'");
    assert_eq!(one(&stmt.to_string()), stmt);
    assert_eq!(stmt.verb(), "RENAME TABLE");
    // Without all of its guard's words, `IF` is a table's name.
    assert_eq!(
        one("CREATE TABLE if"),
        Statement::CreateTable {
            table: "if".into(),
            if_not_exists: false
        }
    );
    assert_eq!(
        one("DROP TABLE IF EXISTS if"),
        Statement::DropTable {
            table: "if".into(),
            if_exists: true
        }
    );
}

#[test]
fn literals_and_escapes() {
    let key = |src: &str| match one(&format!("GET {src}")) {
        Statement::Get { key } => key,
        other => panic!("{other:?}"),
    };
    assert_eq!(key("'it''s'"), text("it's"));
    assert_eq!(key("\"say \"\"hi\"\"\""), text("say \"hi\""));
    assert_eq!(key(r#""a\tb\n\r\0\\\'\"""#), text("a\tb\n\r\0\\'\""));
    assert_eq!(key(r"'\x41\x7a'"), text("Az"));
    assert_eq!(
        key(r"'\xff'"),
        Literal::Blob(vec![0xff]),
        "invalid UTF-8 text is a blob"
    );
    assert_eq!(key("''"), text(""));
    assert_eq!(key("x''"), Literal::Blob(vec![]));
    assert_eq!(key("'caf\u{e9} \u{1F600}'"), text("caf\u{e9} \u{1F600}"));
    assert_eq!(key("'multi\nline'"), text("multi\nline"));
    assert_eq!(key("18446744073709551615"), Literal::Int(u64::MAX));
    assert_eq!(key("'a\0b'"), text("a\0b"));
    assert_eq!(key(":user_id"), Literal::Param("user_id".into()));
    assert_eq!(key(":_9"), Literal::Param("_9".into()));
}

#[test]
fn parameters_stand_wherever_a_literal_does() {
    let p = |name: &str| Some(Literal::Param(name.into()));
    assert_eq!(
        one("PUT :k :v"),
        Statement::Put {
            key: Literal::Param("k".into()),
            value: Literal::Param("v".into()),
        }
    );
    assert_eq!(
        one("SCAN :from :to PREFIX :p LIMIT 3"),
        Statement::Scan {
            range: KeyRange {
                start: p("from"),
                end: p("to"),
                prefix: p("p"),
            },
            reverse: false,
            limit: Some(Literal::Int(3)),
        }
    );
    assert_eq!(
        one("DELETE PREFIX :p"),
        Statement::DeleteRange {
            range: KeyRange {
                prefix: p("p"),
                ..KeyRange::default()
            }
        }
    );
    assert_eq!(
        one("DELETE :k"),
        Statement::Delete {
            key: Literal::Param("k".into())
        }
    );
    // Inside quotes a colon is text.
    assert_eq!(
        one("GET ':k'"),
        Statement::Get {
            key: Literal::Text(":k".into())
        }
    );
}

#[test]
fn separators_comments_and_spans() {
    let src = "PUT 'a' 'b'; GET 'a' -- read it back\n\n  -- a comment line\n;;TABLES\r\n";
    let script = parse_script(src);
    assert!(script.errors.is_empty(), "{:?}", script.errors);
    let spans: Vec<&str> = script
        .statements
        .iter()
        .map(|s| &src[s.span.start..s.span.end])
        .collect();
    assert_eq!(spans, vec!["PUT 'a' 'b'", "GET 'a'", "TABLES"]);
    assert_eq!(
        Position::of(src, script.statements[2].span.start),
        Position { line: 4, column: 3 }
    );
    assert!(parse_script("").statements.is_empty());
    assert!(parse_script(" -- only a comment").errors.is_empty());
}

#[test]
fn each_error_class_reports_its_position() {
    let cases: &[(&str, (usize, usize), &str)] = &[
        ("FOO 'a'", (1, 1), "expected a statement"),
        ("FOO 'a'", (1, 1), "found 'FOO'"),
        (
            "select * from t",
            (1, 1),
            "found 'select': the language is not SQL",
        ),
        (
            "alter table t rename to u",
            (1, 1),
            "not SQL (RENAME TABLE t TO u renames a table)",
        ),
        ("GET 'a' bcd", (1, 9), "found 'bcd'"),
        (
            "GET 1; .mode csv",
            (1, 8),
            "found the dot-command .mode: a dot-command goes on a line of its own",
        ),
        ("GET 1;  .5", (1, 9), "expected a statement (PUT"),
        ("GET", (1, 4), "expected a key"),
        ("PUT 'a'", (1, 8), "expected a value"),
        ("PUT 'a' b", (1, 9), "expected a value"),
        ("PUT 'a", (1, 5), "unterminated string"),
        ("PUT 'a\\q' 'b'", (1, 7), "expected an escape"),
        ("GET '\\x4'", (1, 6), "two hexadecimal digits"),
        ("GET x'0g'", (1, 8), "expected a hexadecimal digit"),
        ("GET x'0'", (1, 8), "even number of hexadecimal digits"),
        ("GET x'00", (1, 5), "unterminated hex literal"),
        ("GET -1", (1, 5), "negative integers are not supported"),
        ("GET 18446744073709551616", (1, 5), "integer out of range"),
        (
            "GET 12ab",
            (1, 7),
            "expected a space or the end of the integer",
        ),
        ("GET 'a' 'b'", (1, 9), "expected the end of the statement"),
        ("GET :", (1, 6), "expected a parameter's name after ':'"),
        ("PUT : 'v'", (1, 6), "expected a parameter's name after ':'"),
        ("GET :9", (1, 6), "expected a parameter's name after ':'"),
        ("SCAN :a-b", (1, 8), "expected the end of the statement"),
        ("LIMIT", (1, 1), "expected a statement"),
        (
            "SCAN 'a' 'b' FOO",
            (1, 14),
            "expected PREFIX, REVERSE, LIMIT",
        ),
        (
            "SCAN 'a' FOO",
            (1, 10),
            "expected an end key, PREFIX, REVERSE, LIMIT",
        ),
        (
            "SCAN FOO",
            (1, 6),
            "expected a start key, PREFIX, REVERSE, LIMIT",
        ),
        (
            "SCAN LIMIT 1 FOO",
            (1, 14),
            "expected PREFIX, REVERSE, LIMIT",
        ),
        (
            "COUNT FOO",
            (1, 7),
            "expected a start key, PREFIX or the end",
        ),
        (
            "COUNT 1 FOO",
            (1, 9),
            "expected an end key, PREFIX or the end",
        ),
        (
            "COUNT REVERSE",
            (1, 7),
            "expected a start key, PREFIX or the end",
        ),
        (
            "COUNT PREFIX 'a' FOO",
            (1, 18),
            "expected PREFIX or the end",
        ),
        (
            "DELETE",
            (1, 7),
            "expected a key (a quoted string, x'..', an integer or a :parameter), RANGE or PREFIX",
        ),
        ("DELETE ALL", (1, 8), "expected a key"),
        (
            "DELETE RANGE 1 2 LIMIT 3",
            (1, 18),
            "expected PREFIX or the end",
        ),
        (
            "DELETE RANGE 1 LIMIT 3",
            (1, 16),
            "expected an end key, PREFIX",
        ),
        ("DELETE PREFIX", (1, 14), "expected a quoted string"),
        (
            "DELETE PREFIX 'a' 'b'",
            (1, 19),
            "expected the end of the statement",
        ),
        ("SCAN LIMIT 1 LIMIT 2", (1, 14), "LIMIT given twice"),
        ("SCAN LIMIT", (1, 11), "expected a number of rows"),
        (
            "SCAN LIMIT 'a'",
            (1, 12),
            "expected a number of rows (or a :parameter)",
        ),
        (
            "SCAN LIMIT -1",
            (1, 12),
            "expected a number of rows, not a negative one",
        ),
        ("SCAN LIMIT :", (1, 13), "expected a parameter's name"),
        ("SCAN PREFIX", (1, 12), "expected a quoted string"),
        ("CREATE t", (1, 8), "expected TABLE"),
        ("DROP TABLE", (1, 11), "expected a table name"),
        ("USE x'00'", (1, 5), "a table name in text, not bytes"),
        (
            "BEGIN now",
            (1, 7),
            "expected READ or the end of the statement",
        ),
        ("BEGIN 5", (1, 7), "expected the end of the statement"),
        (
            "BEGIN READ now",
            (1, 12),
            "expected the end of the statement",
        ),
        ("\n\n  GET 'a' @", (3, 11), "found '@'"),
        ("GET 'a'\0", (1, 8), "expected the end of the statement"),
    ];
    for (src, (line, column), message) in cases {
        let (l, c, m) = error(src);
        assert_eq!((l, c), (*line, *column), "{src:?}: {m}");
        assert!(m.contains(message), "{src:?}: {m:?} lacks {message:?}");
    }
}

#[test]
fn a_bare_word_where_a_literal_goes_is_told_to_be_quoted() {
    let quote = |w: &str| format!("found '{w}' (a word, not a literal: text is quoted, '{w}')");
    // Where the first key goes, a word may be a table's name written the SQL way.
    let table = "found 'users' (a word, not a literal: text is quoted, 'users'; a statement \
                 works on the table USE chose)";
    let sql = |w: &str| {
        format!("found '{w}': the language is not SQL (.help in the shell lists its statements)")
    };
    for (src, ending) in [
        ("GET users 'alice'", table.to_owned()),
        ("PUT users 'alice' 'x'", table.to_owned()),
        ("DELETE users 'alice'", table.to_owned()),
        ("SCAN users", table.to_owned()),
        ("COUNT users", table.to_owned()),
        // Elsewhere only the quotes are missing.
        ("PUT 'k' hello", quote("hello")),
        ("SCAN 'a' zebra", quote("zebra")),
        ("SCAN PREFIX abc", quote("abc")),
        ("PUT 1 value", quote("value")),
        // SQL's words, wherever they are met, are told to be SQL.
        ("DELETE FROM users", sql("FROM")),
        ("GET where", sql("where")),
        ("SCAN 'a' 'b' ORDER BY k", sql("ORDER")),
        ("PUT INTO t 'k' 'v'", sql("INTO")),
        ("select * from t", sql("select")),
    ] {
        let (_, _, m) = error(src);
        assert!(m.ends_with(&ending), "{src:?}: {m}");
    }
    // Not a word, or past the keys, or a keyword meant as one: no hint.
    for src in [
        "GET 'a' 'b' users",
        "SCAN LIMIT 1 users",
        "PUT 'a' 12ab",
        "USE 5",
        "DELETE RANGE LIMIT 1",
        "DELETE ALL",
    ] {
        let (_, _, m) = error(src);
        assert!(!m.contains("a word, not a literal"), "{src:?}: {m}");
    }
    // Past a parameter's value, nothing more was to stand: no hint either.
    let Err(e) = parse_literal("'a' b") else {
        panic!("a second word after a value parsed")
    };
    assert_eq!(e.message, "expected the end of the value, found 'b'");
    // The texts of where a literal could stand are the ones the grammar uses.
    for (src, slot) in [
        ("GET", LiteralSlot::FirstKey),
        ("PUT", LiteralSlot::FirstKey),
        ("DELETE", LiteralSlot::FirstKey),
        ("SCAN zebra", LiteralSlot::FirstKey),
        ("COUNT zebra", LiteralSlot::FirstKey),
        ("PUT 'k'", LiteralSlot::Other),
        ("SCAN 'a' zebra", LiteralSlot::Other),
        ("COUNT 'a' zebra", LiteralSlot::Other),
        ("SCAN PREFIX", LiteralSlot::Other),
    ] {
        let script = parse_script(src);
        let expected = script.errors.first().map(|e| e.message.clone());
        let expected = expected
            .as_deref()
            .and_then(|m| m.strip_prefix("expected "));
        let slot_of = [
            KEY,
            VALUE,
            DELETE_KEY,
            SCAN_START,
            SCAN_END,
            COUNT_START,
            COUNT_END,
            LITERAL,
        ]
        .into_iter()
        .find(|text| expected.is_some_and(|m| m.starts_with(&format!("{text}, found"))))
        .and_then(literal_slot);
        assert_eq!(slot_of, Some(slot), "{src:?}: {expected:?}");
    }
}

#[test]
fn the_keyword_list_is_the_grammars() {
    // Statements that use every keyword: each parses, and they use exactly `KEYWORDS`.
    let uses = "BEGIN READ ONLY\nCOMMIT\nBEGIN\nSAVEPOINT s\nROLLBACK TO s\nRELEASE s\nROLLBACK\n\
                PUT 1 2\nGET 1\nDELETE 1\nDELETE RANGE 1 2 PREFIX 'a'\n\
                SCAN 1 PREFIX 'a' REVERSE LIMIT 2\nCOUNT\nUSE t\nTABLES\n\
                CREATE TABLE IF NOT EXISTS t\nDROP TABLE IF EXISTS t\nRENAME TABLE t TO u";
    let script = parse_script(uses);
    assert!(script.errors.is_empty(), "{:?}", script.errors);
    let words: std::collections::BTreeSet<&str> = uses
        .split_whitespace()
        .filter(|w| w.len() > 1 && w.chars().all(|c| c.is_ascii_uppercase()))
        .collect();
    let keywords: std::collections::BTreeSet<&str> = crate::KEYWORDS.into_iter().collect();
    assert_eq!(words, keywords);
}

#[test]
fn limits_are_errors() {
    let limits = Limits {
        max_literal: 4,
        max_statement: 20,
    };
    let script = parse_script_with("PUT 'abcd' 'abcde'", limits);
    assert_eq!(script.errors.len(), 1);
    assert_eq!(script.errors[0].offset, 11);
    assert!(
        script.errors[0]
            .message
            .contains("literal longer than 4 bytes")
    );
    let script = parse_script_with("PUT x'0102030405' 1", limits);
    assert!(
        script.errors[0]
            .message
            .contains("literal longer than 4 bytes")
    );
    let script = parse_script_with("PUT 1                        2\nGET 1", limits);
    assert!(
        script.errors[0]
            .message
            .contains("statement longer than 20 bytes")
    );
    assert_eq!(script.statements.len(), 1, "the next statement still runs");
}

#[test]
fn errors_do_not_stop_the_statements_around_them() {
    let src = "PUT 'a' 'b'\nFOO\nGET 'a'; BAR 'x;y'; TABLES\nPUT 'z\n";
    let script = parse_script(src);
    let verbs: Vec<&str> = script
        .statements
        .iter()
        .map(|s| s.statement.verb())
        .collect();
    assert_eq!(verbs, vec!["PUT", "GET", "TABLES"]);
    let positions: Vec<(usize, usize)> = script
        .errors
        .iter()
        .map(|e| {
            let p = Position::of(src, e.offset);
            (p.line, p.column)
        })
        .collect();
    assert_eq!(positions, vec![(2, 1), (3, 10), (4, 5)]);
}

#[test]
fn hostile_inputs_return_errors_quickly() {
    let quotes = "'".repeat(100_001);
    assert_eq!(parse_script(&quotes).errors.len(), 1);
    let put_quotes = format!("PUT {}", "'".repeat(100_000));
    assert_eq!(parse_script(&put_quotes).errors.len(), 1);

    let big = "a".repeat(10 << 20);
    let script = parse_script(&format!("PUT 'k' '{big}'"));
    assert!(script.errors.is_empty());
    assert_eq!(script.statements.len(), 1);
    let script = parse_script(&format!("PUT 'k' '{big}"));
    assert_eq!((script.statements.len(), script.errors.len()), (0, 1));

    let nul = parse_script("\0\0\0");
    assert_eq!(nul.errors.len(), 1);
    let deep = parse_script(&"(".repeat(100_000));
    assert_eq!(deep.errors.len(), 1);
}

#[test]
fn invalid_utf8_is_an_error_in_its_statement_only() {
    let src = b"PUT 'a' 'b'\nPUT '\xff\xfe' 'x'\nGET 'a'\n\xc3";
    let script = parse_bytes(src);
    let verbs: Vec<&str> = script
        .statements
        .iter()
        .map(|s| s.statement.verb())
        .collect();
    assert_eq!(verbs, vec!["PUT", "GET"]);
    let offsets: Vec<usize> = script.errors.iter().map(|e| e.offset).collect();
    assert_eq!(offsets, vec![17, 33]);
    assert!(
        script
            .errors
            .iter()
            .all(|e| e.message.contains("invalid UTF-8"))
    );
}

#[test]
fn errors_render_with_a_caret() {
    let src = "PUT 'a' 'b'\n\tGET 'a' 'b'";
    let script = parse_script(src);
    let shown = script.errors[0].render("script.cq", src);
    assert_eq!(
        shown,
        "script.cq:2:10: expected the end of the statement (';' or a new line), found '\\''\n\tGET 'a' 'b'\n\t        ^"
    );
}

/// The examples in docs/language.md parse as the document says.
#[test]
fn the_language_document_examples_parse() {
    let doc = include_str!("../../../docs/language.md");
    let mut blocks = 0;
    for block in doc.split("```").skip(1).step_by(2) {
        if block.starts_with("ebnf") || block.contains("^\n") || block.contains("script.cq:") {
            continue;
        }
        let script = parse_script(block);
        assert!(script.errors.is_empty(), "{block}: {:?}", script.errors);
        blocks += 1;
    }
    assert_eq!(blocks, 6);
}

#[test]
fn a_literal_alone_parses_and_anything_after_it_is_an_error() {
    assert_eq!(parse_literal(" 'it''s' "), Ok(text("it's")));
    assert_eq!(parse_literal("42 -- the answer\n"), Ok(Literal::Int(42)));
    assert_eq!(parse_literal("x'00ff'"), Ok(Literal::Blob(vec![0, 0xff])));
    assert_eq!(parse_literal(":other"), Ok(Literal::Param("other".into())));
    let err = |src: &str| parse_literal(src).err().map(|e| (e.offset, e.message));
    assert_eq!(
        err("'a' 'b'"),
        Some((4, "expected the end of the value, found '\\''".into()))
    );
    assert!(err("").is_some_and(|(at, m)| at == 0 && m.starts_with("expected a quoted string")));
    assert!(err("'open").is_some_and(|(_, m)| m.starts_with("unterminated string")));
    assert!(err("-3").is_some_and(|(_, m)| m.starts_with("negative integers")));
}
