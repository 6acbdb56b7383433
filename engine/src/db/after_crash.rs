//! A writer that opens an older commit than the newest one a slot names: the commits of a
//! killed writer that only its log holds (applied again as one commit), or a commit
//! recovery refused.
//!
//! Readers elsewhere may hold those newer commits, and the pages they use are unknown to
//! the opened commit: free in it, or past its end. The writer's commits take ids past the
//! newest named (a reader at an id would otherwise take one commit for another), and every
//! page free or waiting when it opens, and every page past the opened commit's end, waits
//! as if its first commit had freed it (`FreeList::hold_all`): until no reader elsewhere
//! is older than that commit and one from it on is durable, the writer takes pages past
//! the file's end.
//!
//! The pages wait whenever a read-only handle has the file open (each holds a lock saying
//! so from before its opening reads a slot until it closes: `lock::reading`), whether or
//! not it pins one of those commits when the writer opens. A handle that opened the
//! newest commit holds no pin between its read transactions, and its next one takes that
//! commit again while no slot names a newer one: a writer that dies while applying the
//! log, after writing its commit's pages and before its slot, leaves exactly that. Until
//! the forty-ninth session the pages waited only when the writer saw a pin, and such a
//! reader then read the dead writer's pages in place of its own (a freelist page where a
//! leaf was, in the test below; a page of zeros, once in thirty-two minutes of
//! `tests/tests/openings_beside_writer.rs`, may have been a log the dead writer moved over
//! them: the window is too narrow for that test to meet it often).
//!
//! The cost, where a handle is open: the commit that applies the log, or the commits
//! until a sync, grow the file instead of reusing its free pages (by a growth step, a
//! quarter of the file, which stays), and those wait in memory until then, an entry each.
//! With no handle open, none: a handle that opens later waits for the writer's opening
//! (`lock::recovering`), and sees its commits only. (A handle of a build before the
//! forty-ninth session takes no such lock, and is covered only while it pins.)

use crate::recovery::Opened;

/// The id the writer's first commit takes at least (`next_txid`, or past `opened`'s newest
/// named commit when that is newer than the opened one); when it is, and a read-only
/// handle has the file open (`file_pages`: its length in pages), the pages wait in
/// `opened`'s free set.
pub(super) fn first_txid(opened: &mut Opened, next_txid: u64, file_pages: Option<u64>) -> u64 {
    if opened.newest_named <= opened.snapshot.slot.txid {
        return next_txid;
    }
    let past = opened.newest_named + 1;
    if let Some(pages) = file_pages {
        opened.freelist.hold_all(past, pages);
    }
    next_txid.max(past)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use crate::killed_writer::KilledWriter;
    use crate::storage::Call;
    use crate::{Database, Durability, Result};

    type Rows = Vec<(Vec<u8>, Vec<u8>)>;

    fn rows(db: &Database) -> Result<Rows> {
        let read = db.begin_read()?;
        let t = read.open_table("t")?;
        t.iter()?
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect()
    }

    /// Puts `value` under every `step`-th of 2,000 keys in one commit.
    fn round(db: &Database, step: usize, value: u8, durability: Durability) -> Result<()> {
        let mut w = db.begin_write()?;
        w.set_durability(durability);
        let mut t = w.open_table("t")?;
        for i in (0..2_000u32).step_by(step) {
            t.insert(&i.to_be_bytes(), &[value; 100])?;
        }
        w.commit()
    }

    /// The file of a writer killed with commits only its log holds, which took pages free
    /// in its durable commit.
    fn killed_with_log() -> Result<Vec<u8>> {
        let killed = KilledWriter::new(0, 64 << 10)?;
        let mut w = killed.db.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        round(&killed.db, 1, 0, Durability::Immediate)?;
        round(&killed.db, 1, 1, Durability::Immediate)?;
        for value in 2..6 {
            round(&killed.db, 97, value, Durability::Eventual)?;
        }
        Ok(killed.kill())
    }

    #[test]
    fn with_no_read_only_handle_open_the_writer_after_a_crash_reuses_free_pages() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let image = killed_with_log()?;
        let (alone, beside) = (
            dir.path().join("alone.cairn"),
            dir.path().join("beside.cairn"),
        );
        std::fs::write(&alone, &image)?;
        std::fs::write(&beside, &image)?;
        let len = image.len() as u64;
        // No handle open: the commit that applies the log takes free pages.
        let db = Database::open(&alone)?;
        assert!(db.check()?.is_ok());
        assert_eq!(std::fs::metadata(&alone)?.len(), len, "free pages reused");
        // A read-only handle open: they wait, and the commit goes past the file's end.
        let reader = Database::builder().read_only(true).open(&beside)?;
        let db = Database::open(&beside)?;
        assert!(db.check()?.is_ok());
        assert!(std::fs::metadata(&beside)?.len() > len, "pages held");
        assert_eq!(rows(&reader)?, rows(&db)?, "the reader follows");
        Ok(())
    }

    #[test]
    fn a_writer_that_dies_applying_the_log_leaves_the_newest_commit_to_its_readers() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("died.cairn");
        std::fs::write(&path, killed_with_log()?)?;
        // A reader opens the killed writer's newest commit; between its read transactions
        // it pins nothing.
        let reader = Database::builder().read_only(true).open(&path)?;
        assert!(!reader.is_private_copy());
        let newest = reader.begin_read()?.txid();
        let before = rows(&reader)?;
        // The next writer applies the log and dies before its commit's slot is written (a
        // write to the header pages fails).
        let pages_written = Arc::new(AtomicU64::new(0));
        let counted = pages_written.clone();
        let died = super::super::opening_alone::writer_through(&path, move |call| match call {
            Call::Write(at) if at < 2 * 1024 => Err(std::io::Error::other("died")),
            Call::Write(_) => {
                counted.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            _ => Ok(()),
        });
        assert!(died.is_err(), "the writer's commit failed at its slot");
        drop(died);
        assert!(
            pages_written.load(Ordering::Relaxed) > 0,
            "its pages written"
        );
        // The slots name the same newest commit: the reader reads it again, whole.
        assert_eq!(reader.begin_read()?.txid(), newest);
        assert_eq!(rows(&reader)?, before);
        let check = reader.check()?;
        assert!(check.is_ok(), "{:?}", check.problems);
        Ok(())
    }
}
