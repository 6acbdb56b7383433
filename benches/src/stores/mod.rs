//! The stores compared, each in its own file.

mod bbolt;
mod cairn;
mod fjall;
mod lmdb;
mod redb;
mod sled;
mod sqlite;

use std::path::Path;

use crate::store::{R, Store};

/// A store's name and how to open a fresh one in a folder.
pub type Opener = fn(&Path) -> R<Box<dyn Store>>;

pub const ALL: [(&str, Opener); 7] = [
    ("cairn", cairn::open),
    ("bbolt", bbolt::open),
    ("fjall", fjall::open),
    ("lmdb", lmdb::open),
    ("redb", redb::open),
    ("sled", sled::open),
    ("sqlite", sqlite::open),
];
