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
//!
//! Beside a writer, what recovery reads may change under it: a commit that grows the
//! file after its length was taken leaves slots that ask for more bytes than it saw (an
//! error, `Truncated`), say. An opening that fails there begins again while the file's
//! length or slots have moved since it began ([`recover`]).

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use super::opening_pin;
use crate::error::{Error, Result};
use crate::format::Slot;
use crate::recovery::{self, Opened};
use crate::storage::Storage;

/// How often an opening beside a writer begins again while the writer changes the file.
const MAX_TRIES: usize = 20;

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
            (!crate::lock::writer_byte_held(file)).then_some(Alone(own))
        }
    }
}

/// Recovery for an opening (`read_only`, of the file `file` at `path` when it is one):
/// the commit it opens, and the shared lock when it has the file to itself. Read-only, the
/// newest commit is pinned while recovery reads it (`opening_pin.rs`); beside a writer
/// whose own opening is recovering the file, it waits up to `wait` for that to end (the
/// slots may name a commit the writer is about to refuse), else fails with
/// [`Error::Locked`]; beside a writer, a failure while the writer changed the file under
/// it begins again.
pub(crate) fn recover(
    storage: &dyn Storage,
    read_only: bool,
    file: Option<&File>,
    path: Option<&Path>,
    wait: Duration,
) -> (Result<Opened>, Option<Alone>) {
    let Some(file) = file.filter(|_| read_only) else {
        return (recovery::open(storage, !read_only, true), None);
    };
    let until = Instant::now().checked_add(wait);
    let mut tries = 1;
    loop {
        let pinned = opening_pin::pin_newest(storage, file);
        let held = alone(file);
        if held.is_some() {
            // (The length taken when the file was opened may be a writer's that has gone
            // since: the slots now read are its last.)
            let _ = storage.refresh();
        }
        if held.is_none() && crate::lock::writer_recovering(file) {
            if let Some(txid) = pinned {
                opening_pin::unpin(file, txid);
            }
            if until.is_some_and(|until| Instant::now() >= until) {
                let locked = Error::Locked {
                    path: path.map(Path::to_path_buf).unwrap_or_default(),
                    pid: crate::lock::writer_holding(file).flatten(),
                };
                return (Err(locked), None);
            }
            std::thread::sleep(Duration::from_millis(1));
            // (Its slots are another writer's now: its length too, maybe.)
            let _ = storage.refresh();
            continue;
        }
        let before = moment(storage);
        let opened = recovery::open(storage, false, held.is_some());
        if let Some(txid) = pinned {
            opening_pin::unpin(file, txid);
        }
        if opened.is_ok() || held.is_some() || tries == MAX_TRIES {
            return (opened, held);
        }
        if storage.refresh().is_err() || moment(storage) == before {
            return (opened, held);
        }
        tries += 1;
    }
}

/// The file's length and the slots it holds, as far as they read.
fn moment(storage: &dyn Storage) -> Option<(u64, Vec<Slot>)> {
    let page_size = recovery::read_header(storage).ok()?.page_size as usize;
    let (slots, _) = recovery::read_slots(storage, page_size).ok()?;
    Some((storage.len(), slots.into_iter().map(|(s, _)| s).collect()))
}

impl Drop for Alone {
    fn drop(&mut self) {
        // Unlocking an open file's own lock fails only on a bad descriptor; the lock goes
        // with the file in any case.
        let _ = self.0.unlock();
    }
}

/// For tests: opens `path` for writing (its locks taken, as [`crate::Builder::open`]
/// does) through a file that runs `hook` before chosen calls (`storage/hooked.rs`).
#[cfg(test)]
pub(super) fn writer_through(
    path: &Path,
    hook: impl Fn(crate::storage::Call) -> std::io::Result<()> + Send + Sync + 'static,
) -> Result<crate::Database> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    crate::lock::lock_exclusive(&file, path, Duration::ZERO)?;
    let storage =
        crate::storage::Hooked::new(crate::storage::FileStorage::new(file.try_clone()?)?, hook);
    crate::Builder::default().build(
        std::sync::Arc::new(storage),
        false,
        Some(path.to_path_buf()),
        Some(file),
        None,
    )
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

    /// Opens `path` read-only through a file that, at the first call `at` accepts, runs
    /// `meanwhile` (a writer's steps racing the opening).
    fn read_only_meanwhile(
        path: &std::path::Path,
        at: impl Fn(Call) -> bool + Send + Sync + 'static,
        meanwhile: impl FnOnce() -> Result<()> + Send + 'static,
    ) -> Result<Database> {
        let once = Mutex::new(Some(meanwhile));
        let storage = Hooked::new(FileStorage::new(std::fs::File::open(path)?)?, move |call| {
            if !at(call) {
                return Ok(());
            }
            if let Some(steps) = once.lock().map(|mut f| f.take()).ok().flatten() {
                steps().map_err(std::io::Error::other)?;
            }
            Ok(())
        });
        Builder::default().read_only(true).build(
            Arc::new(storage),
            false,
            Some(path.to_path_buf()),
            Some(std::fs::File::open(path)?),
            None,
        )
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
        let busy = writer.clone();
        let ro = read_only_meanwhile(
            &path,
            |call| call == Call::Region,
            move || put(&busy, b"two"),
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
    fn beside_a_writer_the_opening_reads_no_page_of_an_older_commit() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("shrinking.cairn");
        let writer = Builder::default()
            .page_size(1024)
            .log_size(16 << 10)
            .create(&path)?;
        let mut w = writer.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        put(&writer, b"one")?;
        // A durable commit puts a table's pages at the file's end; the newest commit
        // frees them, and its slot names that one as durable.
        let mut w = writer.begin_write()?;
        w.create_table("bulk")?;
        let mut bulk = w.open_table("bulk")?;
        for i in 0u32..4_000 {
            bulk.insert(&i.to_be_bytes(), &[1; 100])?;
        }
        w.commit()?;
        let mut w = writer.begin_write()?;
        w.set_durability(crate::Durability::Eventual);
        w.drop_table("bulk")?;
        w.commit()?;
        let before = std::fs::metadata(&path)?.len();
        // While the opening verifies, the writer makes that durable and gives the pages
        // back to the file system: a read of one through the map is a SIGBUS.
        let busy = writer.clone();
        let ro = read_only_meanwhile(
            &path,
            |call| call == Call::Region,
            move || {
                busy.sync()?;
                put(&busy, b"two")?;
                busy.compact().map(|_| ())
            },
        )?;
        let after = std::fs::metadata(&path)?.len();
        assert!(
            after < before / 4,
            "the writer cut the file: {before} -> {after}"
        );
        assert_eq!(value(&ro)?.as_deref(), Some(&b"two"[..]));
        assert!(ro.check()?.is_ok());
        Ok(())
    }

    #[test]
    fn beside_a_writer_that_grows_the_file_the_opening_tries_again() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("growing.cairn");
        let writer = Builder::default().page_size(1024).create(&path)?;
        let mut w = writer.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        put(&writer, b"one")?;
        // Once the opening has taken the file's length, the writer grows it and both
        // slots name commits past that length.
        let busy = writer.clone();
        let at_a_slot = |call| matches!(call, Call::Read(offset) if offset < 2048);
        let ro = read_only_meanwhile(&path, at_a_slot, move || {
            let grow = |n: u32| -> Result<()> {
                let mut w = busy.begin_write()?;
                let mut t = w.open_table("t")?;
                for i in 0..2_000u32 {
                    t.insert(&(n * 10_000 + i).to_be_bytes(), &[2; 100])?;
                }
                t.insert(b"k", b"two")?;
                w.commit()
            };
            grow(1).and_then(|()| grow(2))
        })?;
        assert_eq!(value(&ro)?.as_deref(), Some(&b"two"[..]));
        assert_eq!(ro.begin_read()?.open_table("t")?.len(), 4_001);
        Ok(())
    }

    #[test]
    fn beside_a_writer_recovering_from_a_crash_the_opening_sees_what_it_opens() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("crashed.cairn");
        let killed = crate::killed_writer::KilledWriter::new(0, 0)?;
        let mut w = killed.db.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        put(&killed.db, b"durable")?;
        let mut w = killed.db.begin_write()?;
        w.set_durability(crate::Durability::Eventual);
        w.open_table("t")?.insert(b"k", b"lost")?;
        w.commit()?;
        // A power cut loses the newest commit's leaf: its slot stays, its page is zeros.
        let leaf = killed
            .db
            .pages()?
            .into_iter()
            .find(|p| p.kind == "leaf" && p.owner == "t")
            .map(|p| p.page)
            .ok_or(crate::Error::corrupt(0, "no leaf"))?;
        let mut image = killed.kill();
        let at = usize::try_from(leaf * 1024).map_err(|_| crate::Error::corrupt(leaf, "far"))?;
        image[at..at + 1024].fill(0);
        std::fs::write(&path, &image)?;
        // A writer opens it; while its recovery reads, a read-only opening comes, on a
        // thread of its own.
        let reader = Arc::new(Mutex::new(None));
        let (started, at) = (reader.clone(), path.clone());
        let writer = super::writer_through(&path, move |call| {
            if let (Call::Region, Ok(mut started)) = (call, started.lock())
                && started.is_none()
            {
                let at = at.clone();
                let (done, finished) = std::sync::mpsc::channel();
                *started = Some(std::thread::spawn(move || {
                    let read = Database::builder()
                        .read_only(true)
                        .open(&at)
                        .and_then(|ro| Ok((value(&ro)?, ro)));
                    let _ = done.send(());
                    read
                }));
                // The recovery goes on once the reader is done, or has waited a while
                // (as it must: the writer's recovery has not ended).
                let _ = finished.recv_timeout(std::time::Duration::from_millis(300));
            }
            Ok(())
        })?;
        assert_eq!(value(&writer)?.as_deref(), Some(&b"durable"[..]));
        let reader = reader.lock().map(|mut r| r.take()).ok().flatten();
        let (seen, ro) = reader
            .ok_or(crate::Error::corrupt(0, "no reader came"))?
            .join()
            .map_err(|_| crate::Error::corrupt(0, "the reader panicked"))??;
        assert_eq!(
            seen.as_deref(),
            Some(&b"durable"[..]),
            "waited for the writer"
        );
        // The refused commit is gone from its slot: a reader follows the writer only.
        put(&writer, b"after")?;
        assert_eq!(value(&ro)?.as_deref(), Some(&b"after"[..]));
        Ok(())
    }

    #[test]
    fn a_read_transaction_elsewhere_waits_for_a_writer_recovering_the_file() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("recovering.cairn");
        let db = Database::create(&path)?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        put(&db, b"one")?;
        drop(db);
        let ro = Arc::new(Database::builder().read_only(true).open(&path)?);
        // While the writer's opening recovers the file, a read transaction of the
        // read-only handle begins (its first: it takes a new pin).
        let during = Arc::new(Mutex::new(None));
        let (seen, reader) = (during.clone(), ro.clone());
        let writer = super::writer_through(&path, move |call| {
            if let (Call::Region, Ok(mut seen)) = (call, seen.lock())
                && seen.is_none()
            {
                let (done, finished) = std::sync::mpsc::channel();
                let reader = reader.clone();
                std::thread::spawn(move || {
                    let _ = done.send(reader.begin_read().map(|r| r.txid()));
                });
                // (It must not begin while the recovery goes on.)
                let early = finished.recv_timeout(std::time::Duration::from_millis(300));
                *seen = Some((early.is_ok(), finished));
            }
            Ok(())
        })?;
        put(&writer, b"two")?;
        let (early, finished) = during
            .lock()
            .map(|mut s| s.take())
            .ok()
            .flatten()
            .ok_or(crate::Error::corrupt(0, "the writer's recovery never ran"))?;
        assert!(
            !early,
            "a read transaction began during the writer's recovery"
        );
        let began = finished
            .recv_timeout(std::time::Duration::from_secs(10))
            .map_err(|_| crate::Error::corrupt(0, "the read transaction never began"))?;
        assert!(began.is_ok(), "{began:?}");
        assert_eq!(value(&ro)?.as_deref(), Some(&b"two"[..]));
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
        let ro = read_only_meanwhile(
            &path,
            |call| call == Call::Region,
            move || {
                let opened = Database::builder()
                    .lock_timeout(std::time::Duration::ZERO)
                    .open(&at);
                if let Ok(mut seen) = seen.lock() {
                    *seen = Some(matches!(opened, Err(crate::Error::Locked { .. })));
                }
                Ok(())
            },
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
