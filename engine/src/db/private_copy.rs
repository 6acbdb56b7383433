//! A read-only opening of a file whose commit log holds commits its tree does not (its
//! writer stopped, in a power cut say, before applying them; a writable opening applies
//! them): the commits are applied to a private copy of the file in memory, and the file is
//! left as it was. The copy maps the file's pages privately, so that it costs memory only
//! for the pages the replay writes (docs/design.md, *Read-only after a crash*).
//!
//! No writer can open the file while the copy is built: the opening holds its shared lock
//! (`opening_alone.rs`) until then. A writer in another process may open the file later,
//! apply the log itself and go on; the copy keeps to what it applied and does not follow
//! (a new read-only opening does).
//! Before reading a page it pins the older of the two commits the slots name, as a
//! following reader pins its snapshot, so that the writer neither overwrites nor cuts off
//! a page of either; it writes only the header pages, pages of those commits, and new
//! pages past both (the file's free pages are withheld from the replay).

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::{Builder, Database, Durability};
use crate::error::{Error, Result};
use crate::format::Slot;
use crate::recovery;
use crate::storage::{MemoryStorage, Storage};
use crate::writer_slot::WriterSlot;

/// How many times an opening begins again when a writer changes the slots under it.
const MAX_RETRIES: u8 = 8;

/// Address space reserved for the replay's new pages beyond twice the file and eight times
/// its log (the replay copies each page at most once and adds what the records hold).
const SPARE_RESERVATION: u64 = 64 << 20;

/// Opens `storage`, read-only, with the `commits` that only its log holds applied to a
/// private copy. `lock_file` is the file itself, when `storage` is one.
pub(super) fn open(
    builder: Builder,
    storage: Arc<dyn Storage>,
    path: Option<PathBuf>,
    lock_file: Option<File>,
    page_size: usize,
) -> Result<Database> {
    let slots = intact_slots(storage.as_ref(), page_size)?;
    let Some(oldest) = slots.iter().map(|s| s.txid).min() else {
        return Err(Error::NoValidCommit {
            slot0: "changed while opening".into(),
            slot1: "changed while opening".into(),
        });
    };
    if let Some(file) = &lock_file {
        crate::lock::pin(file, oldest)?;
        // A writer that began before the pin may have gone past both commits: open again,
        // as the file is now (the log applied, or a writer alive to follow), a few times.
        if intact_slots(storage.as_ref(), page_size)? != slots {
            crate::lock::unpin(file, oldest)?;
            if builder.copy_retries >= MAX_RETRIES {
                return Err(Error::Io(std::io::Error::other(
                    "the file's commits kept changing while it was opened read-only",
                )));
            }
            let again = Builder {
                copy_retries: builder.copy_retries + 1,
                ..builder
            };
            return again.build(storage, false, path, lock_file, None);
        }
    }
    let (copy, file_backed) =
        private_copy(storage.as_ref(), lock_file.as_ref(), &slots, page_size)?;
    let writable = Builder {
        read_only: false,
        durability: Durability::Immediate,
        eventual_sync: Some(None),
        withhold_free: true,
        ..builder
    };
    let mut db = writable.build(copy, false, path, None, None)?;
    let inner = Arc::get_mut(&mut db.inner).ok_or_else(|| {
        Error::Io(std::io::Error::other(
            "a private copy was shared while it was opened",
        ))
    })?;
    inner.read_only = true;
    inner.writer = Mutex::new(WriterSlot::new(None));
    inner.private_copy = true;
    inner.file_backed = if lock_file.is_some() { file_backed } else { 0 };
    inner.pin = lock_file;
    Ok(db)
}

/// The commit slots that verify, in slot order.
fn intact_slots(storage: &dyn Storage, page_size: usize) -> Result<Vec<Slot>> {
    let (slots, _) = recovery::read_slots(storage, page_size)?;
    // (A slot with an id past the range is damage recovery refused: nothing to pin.)
    Ok(slots
        .into_iter()
        .map(|(s, _)| s)
        .filter(Slot::txid_in_range)
        .collect())
}

/// A copy of `storage` whose writes stay in memory: for a file, a private map of the pages
/// both commits have (the pins keep them in the file) and a copy of those one of them has;
/// and how many bytes at its start show the file (the map, at most).
fn private_copy(
    storage: &dyn Storage,
    file: Option<&File>,
    slots: &[Slot],
    page_size: usize,
) -> Result<(Arc<dyn Storage>, u64)> {
    let p = page_size as u64;
    let len = storage.len();
    let pages = |f: fn(u64, u64) -> u64| {
        slots
            .iter()
            .map(|s| s.page_count)
            .reduce(f)
            .unwrap_or(0)
            .saturating_mul(p)
            .min(len)
    };
    let (shared, used) = (pages(u64::min), pages(u64::max));
    let log = slots
        .iter()
        .map(|s| s.log_pages)
        .max()
        .unwrap_or(0)
        .saturating_mul(p);
    let capacity = len
        .saturating_mul(2)
        .saturating_add(log.saturating_mul(8))
        .saturating_add(SPARE_RESERVATION);
    #[cfg(target_os = "linux")]
    if let Some(file) = file {
        let copy = MemoryStorage::private_copy(file, shared, used, len, capacity)?;
        return Ok((Arc::new(copy), shared));
    }
    let _ = (file, shared, capacity);
    // Not a file (or no private maps here): a whole copy in memory.
    let mut bytes = vec![0u8; usize::try_from(used).map_err(std::io::Error::other)?];
    storage.read(0, &mut bytes)?;
    let copy = MemoryStorage::from_bytes(&bytes)?;
    copy.resize(len)?;
    Ok((Arc::new(copy), 0))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use crate::format::SLOT_OFFSET;
    use crate::storage::{Call, FaultyStorage, FileStorage, Hooked};
    use crate::{Builder, Database, Result};

    const PAGE: usize = 1024;

    fn contents(db: &Database) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let r = db.begin_read()?;
        let t = r.open_table("t")?;
        t.iter()?
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect()
    }

    #[test]
    fn a_writer_applying_the_log_meanwhile_makes_the_opening_begin_again() -> Result<()> {
        let dir = tempfile::tempdir()?;
        for seed in 0..100 {
            // A durable commit, then commits only the log holds, and a power cut.
            let storage = FaultyStorage::new(seed)?;
            let db =
                Builder::default()
                    .page_size(PAGE)
                    .with_storage(storage.clone(), true, None)?;
            let mut w = db.begin_write()?;
            w.create_table("t")?;
            w.commit()?;
            db.sync()?;
            for i in 0u32..10 {
                let mut w = db.begin_write()?;
                w.open_table("t")?.insert(&i.to_be_bytes(), b"logged")?;
                w.commit()?;
            }
            let image = storage.power_cut();
            drop(db);
            let path = dir.path().join(format!("{seed}.cairn"));
            std::fs::write(&path, &image)?;
            let plain = Database::builder().read_only(true).open(&path)?;
            if !plain.is_private_copy() {
                continue;
            }
            let want = contents(&plain)?;
            drop(plain);
            // The copy reads both slots, pins, and reads them again: a writer opens the
            // file (applying the log) before the second look.
            let slot_reads = AtomicUsize::new(0);
            let writer = Arc::new(Mutex::new(None));
            let (came, at) = (writer.clone(), path.clone());
            let racing = Hooked::new(
                FileStorage::new(std::fs::File::open(&path)?)?,
                move |call| {
                    let slot = matches!(call, Call::Read(offset)
                    if offset < 2 * PAGE as u64 && offset % PAGE as u64 == SLOT_OFFSET as u64);
                    if slot && slot_reads.fetch_add(1, Ordering::SeqCst) == 2 {
                        let db = Database::open(&at).map_err(std::io::Error::other)?;
                        if let Ok(mut w) = came.lock() {
                            *w = Some(db);
                        }
                    }
                    Ok(())
                },
            );
            let db = super::open(
                Builder::default().read_only(true),
                Arc::new(racing),
                Some(path.clone()),
                Some(std::fs::File::open(&path)?),
                PAGE,
            )?;
            let writer = writer.lock().map(|mut w| w.take()).ok().flatten();
            assert!(writer.is_some(), "seed {seed}: the writer came");
            assert!(
                !db.is_private_copy(),
                "seed {seed}: opened again, at the writer's commit, which holds the log's"
            );
            assert_eq!(contents(&db)?, want, "seed {seed}");
            assert!(db.check()?.is_ok(), "seed {seed}");
            return Ok(());
        }
        panic!("no power cut left commits only the log held");
    }
}
