//! SQLite, through rusqlite: a WITHOUT ROWID table, WAL journal, full sync on commit.

use std::cell::RefCell;
use std::path::Path;

use rusqlite::{Connection, params};

use crate::store::{Change, R, Store};

pub struct Sqlite(RefCell<Connection>);

pub fn open(dir: &Path) -> R<Box<dyn Store>> {
    let c = Connection::open(dir.join("sqlite.db"))?;
    c.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
         CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID;",
    )?;
    Ok(Box::new(Sqlite(RefCell::new(c))))
}

impl Store for Sqlite {
    fn write(&mut self, changes: &mut dyn Iterator<Item = Change<'_>>, durable: bool) -> R<()> {
        let mut c = self.0.borrow_mut();
        c.execute_batch(if durable {
            "PRAGMA synchronous=FULL"
        } else {
            "PRAGMA synchronous=OFF"
        })?;
        let t = c.transaction()?;
        {
            let mut put = t.prepare_cached("INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)")?;
            let mut delete = t.prepare_cached("DELETE FROM kv WHERE k = ?1")?;
            for (k, v) in changes {
                match v {
                    Some(v) => put.execute(params![k, v])?,
                    None => delete.execute(params![k])?,
                };
            }
        }
        t.commit()?;
        Ok(())
    }

    fn read(&self, keys: &[[u8; 8]]) -> R<usize> {
        let mut c = self.0.borrow_mut();
        let t = c.transaction()?;
        let mut n = 0;
        {
            let mut get = t.prepare_cached("SELECT v FROM kv WHERE k = ?1")?;
            for k in keys {
                let mut rows = get.query(params![&k[..]])?;
                if let Some(row) = rows.next()? {
                    n += row.get_ref(0)?.as_blob()?.len();
                }
            }
        }
        t.commit()?;
        Ok(n)
    }

    fn get(&self, key: &[u8]) -> R<usize> {
        let c = self.0.borrow();
        let mut get = c.prepare_cached("SELECT v FROM kv WHERE k = ?1")?;
        let mut rows = get.query(params![key])?;
        Ok(match rows.next()? {
            Some(row) => row.get_ref(0)?.as_blob()?.len(),
            None => 0,
        })
    }

    fn range(&self, start: &[u8], limit: usize) -> R<usize> {
        let c = self.0.borrow();
        let mut s = c.prepare_cached("SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k LIMIT ?2")?;
        let mut rows = s.query(params![start, i64::try_from(limit).unwrap_or(i64::MAX)])?;
        let mut n = 0;
        while rows.next()?.is_some() {
            n += 1;
        }
        Ok(n)
    }
}
