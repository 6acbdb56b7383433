//! Replays the committed fuzzing corpora (`fuzz/corpus/TARGET/`) through the fuzz targets'
//! properties, so that CI runs every target on every input the fuzzer kept.

use std::path::Path;

fn replay(target: &str, property: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut inputs = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let outcome = std::panic::catch_unwind(|| property(&data));
        assert!(outcome.is_ok(), "{target}: {} fails", path.display());
        inputs += 1;
    }
    assert!(inputs > 10, "{target}: corpus missing");
    eprintln!("{target}: {inputs} inputs replayed");
}

#[test]
fn parse_corpus() {
    replay("parse", cairn_tests::fuzz::parse);
}

#[test]
fn script_corpus() {
    replay("script", cairn_tests::fuzz::script);
}

#[test]
fn open_corpus() {
    replay("open", cairn_tests::fuzz::open);
}

#[test]
fn io_failures_corpus() {
    replay("io_failures", cairn_tests::fuzz::io_failures);
}
