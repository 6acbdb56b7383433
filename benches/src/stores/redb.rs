//! redb.

use std::path::Path;

use redb::{Durability, ReadableDatabase, TableDefinition};

use crate::store::{Change, R, Shared, Store};

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("t");

pub struct Redb(redb::Database);

pub fn open(dir: &Path) -> R<Box<dyn Store>> {
    let db = redb::Database::create(dir.join("redb.db"))?;
    let w = db.begin_write()?;
    w.open_table(TABLE)?;
    w.commit()?;
    Ok(Box::new(Redb(db)))
}

impl Store for Redb {
    fn shared(&self) -> Option<&dyn Shared> {
        Some(self)
    }

    fn write(&mut self, changes: &mut dyn Iterator<Item = Change<'_>>, durable: bool) -> R<()> {
        let mut w = self.0.begin_write()?;
        w.set_durability(if durable {
            Durability::Immediate
        } else {
            Durability::None
        })?;
        {
            let mut t = w.open_table(TABLE)?;
            for (k, v) in changes {
                match v {
                    Some(v) => drop(t.insert(k, v)?),
                    None => drop(t.remove(k)?),
                }
            }
        }
        w.commit()?;
        Ok(())
    }

    fn read(&self, keys: &[[u8; 8]]) -> R<usize> {
        let r = self.0.begin_read()?;
        let t = r.open_table(TABLE)?;
        let mut n = 0;
        for k in keys {
            n += t.get(&k[..])?.map_or(0, |v| v.value().len());
        }
        Ok(n)
    }

    fn get(&self, key: &[u8]) -> R<usize> {
        let r = self.0.begin_read()?;
        let t = r.open_table(TABLE)?;
        Ok(t.get(key)?.map_or(0, |v| v.value().len()))
    }

    fn range(&self, start: &[u8], limit: usize) -> R<usize> {
        let r = self.0.begin_read()?;
        let t = r.open_table(TABLE)?;
        let mut n = 0;
        for e in redb::ReadableTable::range(&t, start..)?.take(limit) {
            e?;
            n += 1;
        }
        Ok(n)
    }
}

impl Shared for Redb {
    fn put_durable(&self, key: &[u8], value: &[u8]) -> R<()> {
        let mut w = self.0.begin_write()?;
        w.set_durability(Durability::Immediate)?;
        drop(w.open_table(TABLE)?.insert(key, value)?);
        w.commit()?;
        Ok(())
    }

    fn read_shared(&self, keys: &[[u8; 8]]) -> R<usize> {
        Store::read(self, keys)
    }
}
