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

#[test]
fn spill_corpus() {
    replay("spill", cairn_tests::fuzz::spill);
}

/// The seeds `fuzz/seeds.rs` writes for the `open` target are databases that open, one
/// whose log a writable open replays among them, and pass the target's property.
#[test]
fn open_seeds_open() -> Result<(), cairn_engine::Error> {
    use cairn_engine::Database;
    use cairn_engine::storage::MemoryStorage;
    use std::sync::Arc;
    let seeds = cairn_tests::fuzz::open_seeds()?;
    let mut replayed = 0;
    for (name, image) in &seeds {
        let open = |read_only| {
            Database::builder().read_only(read_only).with_storage(
                Arc::new(MemoryStorage::from_bytes(image)?),
                false,
                None,
            )
        };
        let db = open(false).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(db.check()?.is_ok(), "{name}");
        assert!(!db.begin_read()?.list_tables()?.is_empty(), "{name}");
        replayed += usize::from(db.io_stats().commits > 0);
        if !name.starts_with("seed-logged") {
            open(true).unwrap_or_else(|e| panic!("{name} read-only: {e}"));
        }
        cairn_tests::fuzz::open(image);
    }
    assert!(replayed > 0, "a seed holds commits only its log has");
    assert!(seeds.iter().all(|(_, image)| image.len() <= 64 << 10));
    Ok(())
}
