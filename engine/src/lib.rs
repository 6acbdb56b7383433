//! Cairn's storage engine: one file, a copy-on-write B+tree of checksummed pages, one
//! writer and any number of readers on stable snapshots, named tables.
//!
//! ```
//! use cairn_engine::Database;
//!
//! # fn main() -> cairn_engine::Result<()> {
//! let db = Database::in_memory()?;
//! let mut txn = db.begin_write()?;
//! txn.create_table("fruit")?;
//! txn.open_table("fruit")?.insert(b"apple", b"red")?;
//! txn.commit()?;
//!
//! let read = db.begin_read()?;
//! let fruit = read.open_table("fruit")?;
//! assert_eq!(fruit.get(b"apple")?, Some(&b"red"[..]));
//! # Ok(())
//! # }
//! ```
//!
//! The file format and the commit protocol are described in `docs/design.md`.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod backup;
mod batch;
mod btree;
mod check;
mod close;
mod commit;
mod compact;
mod create;
mod db;
mod error;
mod eventual_sync;
mod finger;
mod follow;
mod format;
mod freelist;
mod group;
mod info;
#[cfg(test)]
mod killed_writer;
mod lock;
mod oplog;
mod page_map;
mod page_set;
mod pager;
mod poll;
mod read_txn;
mod reader_slots;
mod readers;
mod recovery;
mod resync;
mod salvage;
mod savepoint;
mod stats;
pub mod storage;
mod table;
mod table_cache;
mod txn_tables;
mod verified;
mod write_txn;
mod writer_slot;

pub use batch::Batch;
pub use check::{CheckReport, Problem};
pub use compact::CompactReport;
pub use db::{Builder, Database, Durability, IoStats};
pub use error::{Error, Result};
pub use format::{MAX_PAGE_SIZE, MAX_VALUE_LEN, MIN_PAGE_SIZE, max_key_len, prefix_end};
pub use info::{FileInfo, SlotInfo, inspect};
pub use page_map::{PageDump, PageEntry, PageInfo};
pub use read_txn::ReadTxn;
pub use salvage::{Lost, LostKeys, SalvageReport, Salvaged, salvage, salvage_storage};
pub use savepoint::Savepoint;
pub use stats::{Stats, TableStats};
pub use table::{Range, Table, TableInfo, TableMut};
pub use write_txn::WriteTxn;
