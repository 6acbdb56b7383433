//! sled 0.34 (the last stable release): a batch applied atomically, `flush` to make it
//! durable.

use std::path::Path;

use crate::store::{Change, R, Shared, Store};

pub struct Sled(sled::Db);

pub fn open(dir: &Path) -> R<Box<dyn Store>> {
    Ok(Box::new(Sled(sled::open(dir.join("sled"))?)))
}

impl Store for Sled {
    fn shared(&self) -> Option<&dyn Shared> {
        Some(self)
    }

    fn write(&mut self, changes: &mut dyn Iterator<Item = Change<'_>>, durable: bool) -> R<()> {
        let mut batch = sled::Batch::default();
        for (k, v) in changes {
            match v {
                Some(v) => batch.insert(k, v),
                None => batch.remove(k),
            }
        }
        self.0.apply_batch(batch)?;
        if durable {
            self.0.flush()?;
        }
        Ok(())
    }

    fn read(&self, keys: &[[u8; 8]]) -> R<usize> {
        let mut n = 0;
        for k in keys {
            n += self.0.get(k)?.map_or(0, |v| v.len());
        }
        Ok(n)
    }

    fn get(&self, key: &[u8]) -> R<usize> {
        Ok(self.0.get(key)?.map_or(0, |v| v.len()))
    }

    fn range(&self, start: &[u8], limit: usize) -> R<usize> {
        let mut n = 0;
        for e in self.0.range(start..).take(limit) {
            e?;
            n += 1;
        }
        Ok(n)
    }
}

impl Shared for Sled {
    fn put_durable(&self, key: &[u8], value: &[u8]) -> R<()> {
        self.0.insert(key, value)?;
        self.0.flush()?;
        Ok(())
    }

    fn read_shared(&self, keys: &[[u8; 8]]) -> R<usize> {
        Store::read(self, keys)
    }
}
