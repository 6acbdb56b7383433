//! Cairn, through its engine API.

use std::path::Path;

use cairn_engine::{Batch, Database, Durability};

use crate::store::{Change, R, Shared, Store};

pub struct Cairn(Database);

pub fn open(dir: &Path) -> R<Box<dyn Store>> {
    let db = Database::builder()
        .durability(Durability::Eventual)
        .create(dir.join("cairn.db"))?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.set_durability(Durability::Immediate);
    w.commit()?;
    Ok(Box::new(Cairn(db)))
}

impl Store for Cairn {
    fn shared(&self) -> Option<&dyn Shared> {
        Some(self)
    }

    fn counters(&self) -> Option<String> {
        let io = self.0.io_stats();
        Some(format!(
            "commits {} syncs {} file syncs {} writes {}",
            io.commits, io.syncs, io.file_syncs, io.writes
        ))
    }

    fn write(&mut self, changes: &mut dyn Iterator<Item = Change<'_>>, durable: bool) -> R<()> {
        let mut w = self.0.begin_write()?;
        w.set_durability(if durable {
            Durability::Immediate
        } else {
            Durability::Eventual
        });
        let mut t = w.open_table("t")?;
        for (k, v) in changes {
            match v {
                Some(v) => t.insert(k, v)?,
                None => t.remove(k)?,
            };
        }
        w.commit()?;
        Ok(())
    }

    fn read(&self, keys: &[[u8; 8]]) -> R<usize> {
        let r = self.0.begin_read()?;
        let t = r.open_table("t")?;
        let mut n = 0;
        for k in keys {
            n += t.get(k)?.map_or(0, <[u8]>::len);
        }
        Ok(n)
    }

    fn get(&self, key: &[u8]) -> R<usize> {
        let r = self.0.begin_read()?;
        Ok(r.open_table("t")?.get(key)?.map_or(0, <[u8]>::len))
    }

    fn range(&self, start: &[u8], limit: usize) -> R<usize> {
        let r = self.0.begin_read()?;
        let t = r.open_table("t")?;
        let mut n = 0;
        for e in t.range(start..)?.take(limit) {
            e?;
            n += 1;
        }
        Ok(n)
    }
}

impl Shared for Cairn {
    fn put_durable(&self, key: &[u8], value: &[u8]) -> R<()> {
        // Batches from several threads commit together under one sync (group commit).
        let mut b = Batch::new();
        b.put("t", key, value).set_durability(Durability::Immediate);
        self.0.commit_batch(b)?;
        Ok(())
    }

    fn read_shared(&self, keys: &[[u8; 8]]) -> R<usize> {
        Store::read(self, keys)
    }
}
