//! Any bytes given to the parser: no panic, errors inside the input, and every statement
//! that parses prints back to source that parses to the same statement.
#![no_main]

use cairn_query::{parse_bytes, parse_script};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let script = parse_bytes(data);
    for e in &script.errors {
        assert!(e.offset <= data.len());
    }
    for s in &script.statements {
        assert!(s.span.start <= s.span.end && s.span.end <= data.len());
        let printed = s.statement.to_string();
        let again = parse_script(&printed);
        assert!(again.errors.is_empty(), "{printed:?}: {:?}", again.errors);
        assert_eq!(again.statements.len(), 1);
        assert_eq!(again.statements[0].statement, s.statement);
    }
});
