//! Random operations with an I/O failure injected at the k-th storage call (once, or from
//! then on), then a power cut: no panic, and the file reopens consistent.
#![no_main]

use std::sync::Arc;

use cairn_engine::storage::{FaultyStorage, MemoryStorage};
use cairn_engine::{Database, Durability};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [k, mode, seed, ops @ ..] = data else { return };
    let Ok(storage) = FaultyStorage::new(u64::from(*seed)) else { return };
    let Ok(db) = Database::builder().page_size(1024).with_storage(storage.clone(), true, None) else {
        return;
    };
    let at = storage.operations() + u64::from(*k);
    if mode % 2 == 0 {
        storage.fail_at(at);
    } else {
        storage.die_after(at);
    }
    for chunk in ops.chunks(3) {
        let Ok(mut w) = db.begin_write() else { return };
        w.set_durability(if chunk[0] % 2 == 0 { Durability::Immediate } else { Durability::Eventual });
        let _ = w.create_table("t");
        if let Ok(mut t) = w.open_table("t") {
            let key = [chunk[0] % 64];
            let len = usize::from(chunk.get(1).copied().unwrap_or(0)) * 20;
            let _ = if chunk.get(2).is_some_and(|b| b % 4 == 0) { t.remove(&key).map(|_| ()) } else { t.insert(&key, &vec![1; len]).map(|_| ()) };
        }
        let _ = w.commit();
        if chunk[0] % 7 == 0 {
            let _ = db.sync();
        }
    }
    let image = storage.power_cut();
    drop(db);
    let Ok(mem) = MemoryStorage::from_bytes(&image) else { return };
    let db = Database::builder().with_storage(Arc::new(mem), false, None);
    let db = db.unwrap_or_else(|e| panic!("a power cut left an unopenable file: {e}"));
    let report = db.check().unwrap_or_else(|e| panic!("check failed to run: {e}"));
    assert!(report.is_ok(), "{:?}", report.problems);
});
