//! Creating a database file in one step. The header and the first commit are written to a
//! new file beside the target, synced, and only then linked to the target's name, so that a
//! process killed (or a disk filling) while creating leaves either no file at the path or a
//! whole database, never an empty or half-written file, which opening refuses.
//!
//! On Linux the new file has no name until it is linked (`O_TMPFILE`), so a killed creator
//! leaves nothing behind. Where the file system cannot do that, it is named
//! `.<name>.<pid>-<n>.creating` in the same directory, and a creator killed before removing
//! that name leaves it: a megabyte or so, never opened by Cairn, safe to delete.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Result;
use crate::recovery;
use crate::storage::FileStorage;

/// Tells apart the named new files of threads of one process creating at the same time.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Creates the database file at `path`, which did not exist when the caller looked. When
/// another process or thread creates it first, theirs is kept and this returns `Ok`: the
/// caller then opens whichever database is there.
pub(crate) fn create_file(path: &Path, page_size: usize) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Some(name) = path.file_name() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )
        .into());
    };
    #[cfg(target_os = "linux")]
    let created = unnamed::create(dir, path, page_size)?;
    #[cfg(not(target_os = "linux"))]
    let created = false;
    if !created {
        create_named(dir, &name.to_string_lossy(), path, page_size)?;
    }
    // The new name itself on stable storage, as the file's contents already are.
    File::open(dir)?.sync_all()?;
    Ok(())
}

/// Writes a new database into `file`, reached by name at `by` for its durable writes.
fn initialise(file: &File, by: &Path, page_size: usize) -> Result<()> {
    let storage = FileStorage::new(file.try_clone()?)?.with_durable_writes(by)?;
    recovery::initialise(&storage, page_size)
}

/// Whether a link or rename into place found the path taken: someone else's database got
/// there first, and it is the one opened.
fn taken(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::AlreadyExists
}

#[cfg(target_os = "linux")]
mod unnamed {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;

    use nix::fcntl::{AT_FDCWD, AtFlags};

    use super::*;

    /// Creates through a file without a name; `false` when the file system cannot make one
    /// (or `/proc`, through which it is reached by name, is missing).
    pub(super) fn create(dir: &Path, path: &Path, page_size: usize) -> Result<bool> {
        let Ok(file) = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(nix::libc::O_TMPFILE)
            .open(dir)
        else {
            return Ok(false);
        };
        let by = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        if !by.exists() {
            return Ok(false);
        }
        initialise(&file, &by, page_size)?;
        match nix::unistd::linkat(AT_FDCWD, &by, AT_FDCWD, path, AtFlags::AT_SYMLINK_FOLLOW) {
            Ok(()) => Ok(true),
            Err(e) => {
                let e = io::Error::from(e);
                if taken(&e) { Ok(true) } else { Err(e.into()) }
            }
        }
    }
}

/// Creates through a named file beside the path, removed once linked or on failure.
fn create_named(dir: &Path, name: &str, path: &Path, page_size: usize) -> Result<()> {
    let (file, new) = new_file(dir, name)?;
    let new = Removed(new);
    initialise(&file, &new.0, page_size)?;
    drop(file);
    match std::fs::hard_link(&new.0, path) {
        Ok(()) => Ok(()),
        Err(e) if taken(&e) => Ok(()),
        // A file system without hard links: renaming cannot refuse an existing target,
        // so it is used only when there still is none.
        Err(_) if !path.exists() => Ok(std::fs::rename(&new.0, path)?),
        Err(e) => Err(e.into()),
    }
}

/// A new, empty file in `dir` whose name no other creator uses.
fn new_file(dir: &Path, name: &str) -> io::Result<(File, PathBuf)> {
    let pid = std::process::id();
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(".{name}.{pid}-{n}.creating"));
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(file) => return Ok((file, path)),
            // Left by a killed process that had the same id: try the next name.
            Err(e) if taken(&e) && n < 1 << 20 => {}
            Err(e) => return Err(e),
        }
    }
}

/// A path removed when dropped: the named new file's own name, once linked or on failure.
struct Removed(PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        // Nothing to do if it is already gone (renamed into place).
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Database;

    fn names(dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    #[test]
    fn creating_leaves_the_database_and_nothing_else() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("new.cairn");
        let db = Database::create(&path)?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        assert_eq!(names(dir.path())?, ["new.cairn"]);
        Ok(())
    }

    #[test]
    fn creators_racing_for_one_path_share_one_database() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("raced.cairn");
        // Each thread creates the file if it can, then commits its own table under the
        // writer lock; a creator that initialised over another's file would erase tables.
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let path = path.clone();
                std::thread::spawn(move || -> Result<()> {
                    let db = Database::builder()
                        .lock_timeout(std::time::Duration::from_secs(30))
                        .create(&path)?;
                    let mut w = db.begin_write()?;
                    w.create_table(&format!("t{i}"))?;
                    w.commit()?;
                    Ok(())
                })
            })
            .collect();
        for t in threads {
            t.join()
                .map_err(|_| io::Error::other("a creator panicked"))??;
        }
        let db = Database::open(&path)?;
        let mut names_of_tables: Vec<String> = db
            .begin_read()?
            .list_tables()?
            .into_iter()
            .map(|t| t.name)
            .collect();
        names_of_tables.sort();
        let expected: Vec<String> = (0..8).map(|i| format!("t{i}")).collect();
        assert_eq!(
            names_of_tables, expected,
            "no creator erased another's table"
        );
        assert_eq!(names(dir.path())?, ["raced.cairn"]);
        Ok(())
    }

    #[test]
    fn the_named_route_also_leaves_only_the_database() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("named.cairn");
        create_named(dir.path(), "named.cairn", &path, 4096)?;
        assert_eq!(names(dir.path())?, ["named.cairn"]);
        // Created a second time, the first database is kept.
        let db = Database::open(&path)?;
        let mut w = db.begin_write()?;
        w.create_table("kept")?;
        w.commit()?;
        drop(db);
        create_named(dir.path(), "named.cairn", &path, 4096)?;
        assert_eq!(names(dir.path())?, ["named.cairn"]);
        let db = Database::open(&path)?;
        assert_eq!(
            db.begin_read()?.list_tables()?.len(),
            1,
            "the first database kept"
        );
        Ok(())
    }
}
