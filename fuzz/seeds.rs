//! Writes seed files for the `open` target: small, valid databases of several shapes
//! (sealed and unsealed, overflow values, several tables, a non-empty freelist).
//! `cargo run --bin make-seeds -- corpus/open`

use std::path::PathBuf;
use std::sync::Arc;

use cairn_engine::storage::MemoryStorage;
use cairn_engine::{Database, Durability};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "corpus/open".into()),
    );
    std::fs::create_dir_all(&dir)?;
    for (i, (tables, big, churn, seal)) in [
        (1, false, false, true),
        (2, true, true, true),
        (1, true, true, false),
        (3, false, true, false),
    ]
    .into_iter()
    .enumerate()
    {
        let storage = Arc::new(MemoryStorage::new()?);
        let db = Database::builder()
            .page_size(1024)
            .durability(Durability::Eventual)
            .with_storage(storage.clone(), true, None)?;
        for round in 0..if churn { 3 } else { 1 } {
            let mut w = db.begin_write()?;
            for t in 0..tables {
                let name = format!("t{t}");
                if round == 0 {
                    w.create_table(&name)?;
                }
                let mut table = w.open_table(&name)?;
                for k in 0u32..30 {
                    if churn && (k + round) % 3 == 0 {
                        table.remove(&k.to_be_bytes())?;
                    } else {
                        let len = if big && k == 5 { 1500 } else { 10 };
                        table.insert(&k.to_be_bytes(), &vec![k as u8; len])?;
                    }
                }
            }
            w.commit()?;
        }
        let image = if seal {
            drop(db);
            storage.to_vec()
        } else {
            storage.to_vec()
        };
        // Only the pages in use: the reserved tail is zeros.
        let used = image
            .iter()
            .rposition(|&b| b != 0)
            .map_or(0, |n| n + 1)
            .next_multiple_of(1024);
        std::fs::write(dir.join(format!("seed-{i}")), &image[..used])?;
    }
    Ok(())
}
