//! Any bytes as a database file: opening, listing, scanning every table and checking never
//! panic, hang or allocate without bound; errors are fine.
#![no_main]

use std::sync::Arc;

use cairn_engine::Database;
use cairn_engine::storage::MemoryStorage;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(storage) = MemoryStorage::from_bytes(data) else { return };
    let Ok(db) = Database::builder().read_only(true).with_storage(Arc::new(storage), false, None) else {
        return;
    };
    let _ = db.check();
    let _ = db.stats();
    let Ok(r) = db.begin_read() else { return };
    let Ok(tables) = r.list_tables() else { return };
    for info in tables {
        let Ok(t) = r.open_table(&info.name) else { continue };
        if let Ok(rows) = t.iter() {
            for row in rows.take(100_000) {
                if row.is_err() {
                    break;
                }
            }
        }
        if let Ok(rows) = t.iter() {
            let _ = rows.rev().take(1000).count();
        }
        let _ = t.get(b"k");
    }
});
