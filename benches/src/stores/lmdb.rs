//! LMDB, through heed.

use std::path::Path;

use heed::types::Bytes;
use heed::{Env, EnvOpenOptions};

use crate::store::{Change, R, Shared, Store};

pub struct Lmdb {
    env: Env,
    db: heed::Database<Bytes, Bytes>,
}

pub fn open(dir: &Path) -> R<Box<dyn Store>> {
    let path = dir.join("lmdb");
    std::fs::create_dir_all(&path)?;
    // SAFETY: heed requires the caller to ensure that no other `Env` maps this directory in
    // this process; each benchmark opens a fresh directory of its own.
    let env = unsafe {
        EnvOpenOptions::new()
            .map_size(32 << 30)
            .max_dbs(1)
            .open(&path)?
    };
    let mut w = env.write_txn()?;
    let db = env.create_database(&mut w, Some("t"))?;
    w.commit()?;
    Ok(Box::new(Lmdb { env, db }))
}

impl Store for Lmdb {
    fn shared(&self) -> Option<&dyn Shared> {
        Some(self)
    }

    fn write(&mut self, changes: &mut dyn Iterator<Item = Change<'_>>, durable: bool) -> R<()> {
        let mut w = self.env.write_txn()?;
        for (k, v) in changes {
            match v {
                Some(v) => self.db.put(&mut w, k, v)?,
                None => drop(self.db.delete(&mut w, k)?),
            }
        }
        w.commit()?;
        if !durable {
            // LMDB syncs every commit by default; there is no cheaper mode without
            // reopening with NO_SYNC, so non-durable writes are durable here too.
        }
        Ok(())
    }

    fn read(&self, keys: &[[u8; 8]]) -> R<usize> {
        let r = self.env.read_txn()?;
        let mut n = 0;
        for k in keys {
            n += self.db.get(&r, k)?.map_or(0, <[u8]>::len);
        }
        Ok(n)
    }

    fn get(&self, key: &[u8]) -> R<usize> {
        let r = self.env.read_txn()?;
        Ok(self.db.get(&r, key)?.map_or(0, <[u8]>::len))
    }

    fn range(&self, start: &[u8], limit: usize) -> R<usize> {
        let r = self.env.read_txn()?;
        let mut n = 0;
        // LMDB refuses an empty key, even as a bound: an empty start is no bound at all.
        let lower = if start.is_empty() {
            std::ops::Bound::Unbounded
        } else {
            std::ops::Bound::Included(start)
        };
        let bounds = (lower, std::ops::Bound::Unbounded);
        for e in self.db.range(&r, &bounds)?.take(limit) {
            e?;
            n += 1;
        }
        Ok(n)
    }
}

impl Shared for Lmdb {
    fn put_durable(&self, key: &[u8], value: &[u8]) -> R<()> {
        let mut w = self.env.write_txn()?;
        self.db.put(&mut w, key, value)?;
        w.commit()?;
        Ok(())
    }

    fn read_shared(&self, keys: &[[u8; 8]]) -> R<usize> {
        Store::read(self, keys)
    }
}
