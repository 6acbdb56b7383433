//! The `cairn` shell (issue 4). For now it only reports its version.

fn main() {
    println!("cairn {}", env!("CARGO_PKG_VERSION"));
}
