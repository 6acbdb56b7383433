//! Writes seed files for the `open` target: small, valid databases of several shapes
//! (`cairn_tests::fuzz::open_seeds` says which).
//! `cargo run --bin make-seeds -- corpus/open`

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "corpus/open".into()),
    );
    std::fs::create_dir_all(&dir)?;
    for (name, image) in cairn_tests::fuzz::open_seeds()? {
        std::fs::write(dir.join(name), image)?;
    }
    Ok(())
}
