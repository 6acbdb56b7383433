//! Whether a read-only opening has the file to itself.
//!
//! Recovery reads a file differently where no writer is live: the commit log is then what
//! the last writer left, so a slot whose record the log lacks is refused, a break in the
//! records is damage, a commit the other slot proves durable is not verified again, and
//! commits only the log holds go to a private copy. Beside a live writer all of that is
//! the writer's business, mid-commit.
//!
//! Until the forty-eighth session the opening asked the kernel once whether a writer held
//! the file's writer byte: a writer could open the file a moment later, in the middle of
//! the opening's reads, and a writer in the opening's own process was never seen (the
//! kernel reports only other processes' POSIX locks), so a read-only handle opened beside
//! it could take a commit under way for a finished one and open a private copy that never
//! followed. Now the opening takes a shared `flock` without waiting: a writer holds an
//! exclusive one for as long as it is open (in any process, through any open file), so
//! the shared one is refused beside it, and while the opening holds it no writer can
//! start (one that tries waits its lock timeout, retrying every 10 ms).

use std::fs::File;

/// A shared `flock` on the file, let go when dropped.
#[derive(Debug)]
pub(crate) struct Alone(File);

/// Takes the shared lock on `file` if no writer holds it; `None` beside a writer. Where
/// the file system refuses `flock`, falls back to asking for the writer byte (as writers
/// cannot open such a file, none is live).
pub(crate) fn alone(file: &File) -> Option<Alone> {
    let own = file.try_clone().ok()?;
    match own.try_lock_shared() {
        Ok(()) => Some(Alone(own)),
        Err(std::fs::TryLockError::WouldBlock) => None,
        Err(std::fs::TryLockError::Error(_)) => {
            (!crate::lock::writer_alive(file)).then_some(Alone(own))
        }
    }
}

impl Drop for Alone {
    fn drop(&mut self) {
        // Unlocking an open file's own lock fails only on a bad descriptor; the lock goes
        // with the file in any case.
        let _ = self.0.unlock();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use crate::storage::{Call, FileStorage, Hooked};
    use crate::{Builder, Database, Result};

    fn put(db: &Database, value: &[u8]) -> Result<()> {
        let mut w = db.begin_write()?;
        w.open_table("t")?.insert(b"k", value)?;
        w.commit()
    }

    fn value(db: &Database) -> Result<Option<Vec<u8>>> {
        Ok(db
            .begin_read()?
            .open_table("t")?
            .get(b"k")?
            .map(<[u8]>::to_vec))
    }

    #[test]
    fn a_read_only_opening_beside_a_writer_of_its_own_process_follows_it() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("beside.cairn");
        let writer = Database::create(&path)?;
        let mut w = writer.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        put(&writer, b"one")?;
        // While recovery verifies the newest commit, the writer logs one more.
        let busy = Mutex::new(Some(writer.clone()));
        let storage = Hooked::new(
            FileStorage::new(std::fs::File::open(&path)?)?,
            move |call| {
                if call != Call::Region {
                    return Ok(());
                }
                if let Some(writer) = busy.lock().map(|mut w| w.take()).ok().flatten() {
                    put(&writer, b"two").map_err(std::io::Error::other)?;
                }
                Ok(())
            },
        );
        let ro = Builder::default().read_only(true).build(
            Arc::new(storage),
            false,
            Some(path.clone()),
            Some(std::fs::File::open(&path)?),
            None,
        )?;
        assert!(!ro.is_private_copy(), "the log is the live writer's");
        assert_eq!(value(&ro)?.as_deref(), Some(&b"two"[..]));
        put(&writer, b"three")?;
        assert_eq!(
            value(&ro)?.as_deref(),
            Some(&b"three"[..]),
            "follows the writer"
        );
        Ok(())
    }

    #[test]
    fn a_writer_waits_for_a_read_only_opening_to_finish() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("waits.cairn");
        let db = Database::create(&path)?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        put(&db, b"one")?;
        drop(db);
        // While recovery verifies, a writer tries to open the file and is refused.
        let tried = Arc::new(Mutex::new(None));
        let (seen, at) = (tried.clone(), path.clone());
        let storage = Hooked::new(
            FileStorage::new(std::fs::File::open(&path)?)?,
            move |call| {
                if let (Call::Region, Ok(mut seen)) = (call, seen.lock())
                    && seen.is_none()
                {
                    let opened = Database::builder()
                        .lock_timeout(std::time::Duration::ZERO)
                        .open(&at);
                    *seen = Some(matches!(opened, Err(crate::Error::Locked { .. })));
                }
                Ok(())
            },
        );
        let ro = Builder::default().read_only(true).build(
            Arc::new(storage),
            false,
            Some(path.clone()),
            Some(std::fs::File::open(&path)?),
            None,
        )?;
        let refused = tried.lock().map(|t| *t).ok().flatten();
        assert_eq!(
            refused,
            Some(true),
            "the writer was kept out while the opening read"
        );
        // Once open, the read-only handle no longer keeps writers out.
        let writer = Database::builder()
            .lock_timeout(std::time::Duration::ZERO)
            .open(&path)?;
        put(&writer, b"two")?;
        assert_eq!(value(&ro)?.as_deref(), Some(&b"two"[..]));
        Ok(())
    }
}
