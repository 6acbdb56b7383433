//! Cairn, through its engine API: a transaction of at most [`BATCH_MAX`] changes and
//! [`BATCH_MAX_BYTES`] of keys and values commits as a [`Batch`] (`Database::commit_batch`,
//! as fjall's adapter commits a write batch), whose record goes to the disk before its
//! changes are applied; a larger one through a `WriteTxn`, which applies each change as it
//! is made and is the faster way to load.

use std::path::Path;

use cairn_engine::{Batch, Database, Durability};

use crate::store::{Change, R, Shared, Store};

pub struct Cairn(Database);

/// The most changes, and bytes of keys and values, a transaction commits as a [`Batch`].
/// (Fifty-fifth session, the rows of this comparison: a batch was the faster at 1 and 100
/// changes of 100-byte values, level at 2,000 random ones, 10 % slower at 2,000
/// sequential ones, 10–30 % slower at 100,000 in one transaction and at 32 MiB of 100 KiB
/// or 1 MiB values: it copies them before applying.)
const BATCH_MAX: usize = 1_000;
const BATCH_MAX_BYTES: usize = 64 << 10;

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
        let durability = if durable {
            Durability::Immediate
        } else {
            Durability::Eventual
        };
        let changes: Vec<Change<'_>> = changes.collect();
        let small = changes.len() <= BATCH_MAX
            && changes
                .iter()
                .map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len))
                .sum::<usize>()
                <= BATCH_MAX_BYTES;
        if small {
            let mut b = Batch::new();
            for &(k, v) in &changes {
                match v {
                    Some(v) => b.put("t", k, v),
                    None => b.delete("t", k),
                };
            }
            b.set_durability(durability);
            self.0.commit_batch(b)?;
            return Ok(());
        }
        let mut w = self.0.begin_write()?;
        w.set_durability(durability);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_writes_go_as_batches_and_large_ones_as_transactions_alike() -> R<()> {
        let dir = tempfile::tempdir()?;
        let mut s = open(dir.path())?;
        let keys: Vec<[u8; 8]> = (0..(BATCH_MAX as u64 + 500))
            .map(u64::to_be_bytes)
            .collect();
        // Past the batch's bound: a WriteTxn.
        s.write(
            &mut keys.iter().map(|k| (&k[..], Some(&b"value"[..]))),
            true,
        )?;
        assert_eq!(s.read(&keys)?, 5 * keys.len());
        // At the bound, puts and removals together: a Batch.
        let mut mixed = keys[..BATCH_MAX].iter().enumerate().map(|(i, k)| {
            let v: Option<&[u8]> = if i % 2 == 0 { None } else { Some(b"odd") };
            (&k[..], v)
        });
        s.write(&mut mixed, false)?;
        assert_eq!(s.get(&keys[0])?, 0);
        assert_eq!(s.get(&keys[1])?, 3);
        assert_eq!(s.get(&keys[BATCH_MAX])?, 5);
        assert_eq!(s.range(&[], usize::MAX)?, keys.len() - BATCH_MAX / 2);
        // One change, durable: a Batch too.
        s.write(
            &mut std::iter::once((&keys[0][..], Some(&b"back"[..]))),
            true,
        )?;
        assert_eq!(s.get(&keys[0])?, 4);
        Ok(())
    }
}
