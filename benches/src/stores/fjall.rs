//! fjall, an LSM-tree: a write batch per transaction, synced with `fdatasync` when durable.

use std::path::Path;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use crate::store::{Change, R, Shared, Store};

pub struct Fjall {
    db: Database,
    keyspace: Keyspace,
}

pub fn open(dir: &Path) -> R<Box<dyn Store>> {
    let db = Database::builder(dir.join("fjall")).open()?;
    let keyspace = db.keyspace("t", KeyspaceCreateOptions::default)?;
    Ok(Box::new(Fjall { db, keyspace }))
}

impl Store for Fjall {
    fn shared(&self) -> Option<&dyn Shared> {
        Some(self)
    }

    fn write(&mut self, changes: &mut dyn Iterator<Item = Change<'_>>, durable: bool) -> R<()> {
        let mut batch = self
            .db
            .batch()
            .durability(durable.then_some(PersistMode::SyncData));
        for (k, v) in changes {
            match v {
                Some(v) => batch.insert(&self.keyspace, k, v),
                None => batch.remove(&self.keyspace, k),
            }
        }
        batch.commit()?;
        Ok(())
    }

    fn read(&self, keys: &[[u8; 8]]) -> R<usize> {
        let mut n = 0;
        for k in keys {
            n += self.keyspace.get(k)?.map_or(0, |v| v.len());
        }
        Ok(n)
    }

    fn get(&self, key: &[u8]) -> R<usize> {
        Ok(self.keyspace.get(key)?.map_or(0, |v| v.len()))
    }

    fn range(&self, start: &[u8], limit: usize) -> R<usize> {
        let mut n = 0;
        for e in self.keyspace.range(start..).take(limit) {
            e.into_inner()?;
            n += 1;
        }
        Ok(n)
    }
}

impl Shared for Fjall {
    fn put_durable(&self, key: &[u8], value: &[u8]) -> R<()> {
        let mut batch = self.db.batch().durability(Some(PersistMode::SyncData));
        batch.insert(&self.keyspace, key, value);
        batch.commit()?;
        Ok(())
    }

    fn read_shared(&self, keys: &[[u8; 8]]) -> R<usize> {
        Store::read(self, keys)
    }
}
