//! Property: printing a statement and parsing it back gives the same statement, for
//! generated statements with quotes, escapes, control characters, non-UTF-8 blobs and
//! integers up to 2^64 - 1.

use cairn_query::{KeyRange, Literal, Statement, parse_script};
use proptest::prelude::*;

fn literal() -> impl Strategy<Value = Literal> {
    prop_oneof![
        any::<String>().prop_map(Literal::Text),
        "[a-z'\"\\\\\\n\\t\\r\\x00 -]{0,12}".prop_map(Literal::Text),
        proptest::collection::vec(any::<u8>(), 0..24).prop_map(Literal::Blob),
        any::<u64>().prop_map(Literal::Int),
        Just(Literal::Int(u64::MAX)),
        "[a-zA-Z_][a-zA-Z0-9_]{0,8}".prop_map(Literal::Param),
    ]
}

fn key_range() -> impl Strategy<Value = KeyRange> {
    (
        proptest::option::of((literal(), proptest::option::of(literal()))),
        proptest::option::of(literal()),
    )
        .prop_map(|(bounds, prefix)| {
            let (start, end) = match bounds {
                Some((s, e)) => (Some(s), e),
                None => (None, None),
            };
            KeyRange { start, end, prefix }
        })
}

fn table() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z_][A-Za-z0-9_]{0,10}",
        any::<String>(),
        Just("TABLE".to_owned()),
    ]
}

/// Savepoint names, the words that may stand before one among them.
fn savepoint_name() -> impl Strategy<Value = String> {
    prop_oneof![
        table(),
        Just("SAVEPOINT".to_owned()),
        Just("savepoint".to_owned()),
        Just("TO".to_owned()),
    ]
}

fn statement() -> impl Strategy<Value = Statement> {
    prop_oneof![
        (literal(), literal()).prop_map(|(key, value)| Statement::Put { key, value }),
        literal().prop_map(|key| Statement::Get { key }),
        literal().prop_map(|key| Statement::Delete { key }),
        (
            key_range(),
            any::<bool>(),
            proptest::option::of(prop_oneof![
                any::<u64>().prop_map(Literal::Int),
                "[a-zA-Z_][a-zA-Z0-9_]{0,8}".prop_map(Literal::Param),
            ])
        )
            .prop_map(|(range, reverse, limit)| Statement::Scan {
                range,
                reverse,
                limit
            }),
        key_range().prop_map(|range| Statement::Count { range }),
        key_range().prop_map(|range| Statement::DeleteRange { range }),
        Just(Statement::Begin),
        Just(Statement::BeginRead),
        Just(Statement::Commit),
        Just(Statement::Rollback),
        Just(Statement::Tables),
        savepoint_name().prop_map(|name| Statement::Savepoint { name }),
        savepoint_name().prop_map(|name| Statement::RollbackTo { name }),
        savepoint_name().prop_map(|name| Statement::Release { name }),
        table().prop_map(|table| Statement::Use { table }),
        (table(), any::<bool>()).prop_map(|(table, if_not_exists)| Statement::CreateTable {
            table,
            if_not_exists
        }),
        (table(), any::<bool>())
            .prop_map(|(table, if_exists)| Statement::DropTable { table, if_exists }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn parse_of_print_is_identity(stmt in statement()) {
        let src = stmt.to_string();
        let script = parse_script(&src);
        prop_assert!(script.errors.is_empty(), "{src:?}: {:?}", script.errors);
        prop_assert_eq!(script.statements.len(), 1);
        prop_assert_eq!(&script.statements[0].statement, &stmt, "printed as {:?}", src);
    }

    #[test]
    fn a_script_of_printed_statements_parses_back(stmts in proptest::collection::vec(statement(), 0..20)) {
        let src: Vec<String> = stmts.iter().map(ToString::to_string).collect();
        let script = parse_script(&src.join(";\n"));
        prop_assert!(script.errors.is_empty());
        let parsed: Vec<Statement> = script.statements.into_iter().map(|s| s.statement).collect();
        prop_assert_eq!(parsed, stmts);
    }
}
