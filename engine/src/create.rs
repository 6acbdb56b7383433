//! Creating a database file in one step. The header and the first commit are written to a
//! new file beside the target, synced, and only then linked to the target's name, so that a
//! process killed (or a disk filling) while creating leaves either no file at the path or a
//! whole database, never an empty or half-written file, which opening refuses. A backup
//! is written the same way, so that a failed one leaves no file that looks like a backup.
//!
//! On Linux the new file has no name until it is linked (`O_TMPFILE`), so a killed creator
//! leaves nothing behind. Where the file system cannot do that, it is named
//! `.<name>.<pid>-<n>.creating` in the same directory, and a creator killed before removing
//! that name leaves it: a megabyte or so, never opened by Cairn, safe to delete. The next
//! creation of the same path (or backup to it) removes such files once their process is
//! gone and they are ten minutes old.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::Result;
use crate::recovery;
use crate::storage::FileStorage;

/// Tells apart the named new files of threads of one process creating at the same time.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Creates the database file at `path`, which did not exist when the caller looked. When
/// another process or thread creates it first, theirs is kept and this returns `Ok`: the
/// caller then opens whichever database is there.
pub(crate) fn create_file(path: &Path, page_size: usize, log_size: Option<u64>) -> Result<()> {
    // A symbolic link to a file yet to be made: the file is created where it points, as
    // opening with `O_CREAT` would (linking onto the link itself would fail).
    let mut target = path.to_path_buf();
    for _ in 0..40 {
        let Ok(to) = std::fs::read_link(&target) else {
            break;
        };
        target = match target.parent() {
            Some(dir) => dir.join(to),
            None => to,
        };
    }
    let new = NewFile::beside(&target)?;
    recovery::initialise(&new.storage()?, page_size, log_size)?;
    new.link(&target)?;
    Ok(())
}

/// A file being written beside a path, given the path's name only once it is whole.
pub(crate) struct NewFile {
    file: File,
    /// The name through which its durable writes reach it.
    by: PathBuf,
    /// Its own name in the directory, if it has one, removed when this is dropped.
    named: Option<Removed>,
    dir: PathBuf,
}

impl NewFile {
    /// A new, empty file in `path`'s directory.
    pub(crate) fn beside(path: &Path) -> Result<NewFile> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let Some(name) = path.file_name() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} names no file", path.display()),
            )
            .into());
        };
        remove_abandoned(&dir, &name.to_string_lossy());
        #[cfg(target_os = "linux")]
        if let Some((file, by)) = unnamed::open(&dir) {
            return Ok(NewFile {
                file,
                by,
                named: None,
                dir,
            });
        }
        NewFile::named(dir, &name.to_string_lossy())
    }

    /// A new file with a name of its own, for file systems without unnamed files.
    fn named(dir: PathBuf, name: &str) -> Result<NewFile> {
        let pid = std::process::id();
        let mut attempts = 0;
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = dir.join(format!(".{name}.{pid}-{n}.creating"));
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(file) => {
                    return Ok(NewFile {
                        file,
                        by: path.clone(),
                        named: Some(Removed(path)),
                        dir,
                    });
                }
                // Left by a killed process that had the same id: try the next name.
                Err(e) if taken(&e) && attempts < 1000 => attempts += 1,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Storage on the file, with durable writes.
    pub(crate) fn storage(&self) -> Result<FileStorage> {
        Ok(FileStorage::new(self.file.try_clone()?)?.with_durable_writes(&self.by)?)
    }

    /// Gives the file `path` as its name, unless something has it already (`false`: the
    /// file is then dropped), and syncs the directory. Whatever was written must be synced
    /// first.
    pub(crate) fn link(self, path: &Path) -> Result<bool> {
        let linked = match &self.named {
            None => {
                #[cfg(target_os = "linux")]
                let linked = unnamed::link(&self.by, path);
                #[cfg(not(target_os = "linux"))]
                let linked = std::fs::hard_link(&self.by, path);
                linked
            }
            Some(named) => match std::fs::hard_link(&named.0, path) {
                // A file system without hard links: renaming cannot refuse an existing
                // target, so it is used only when there still is none.
                Err(e) if !taken(&e) && !path.exists() => std::fs::rename(&named.0, path),
                other => other,
            },
        };
        match linked {
            Ok(()) => {}
            Err(e) if taken(&e) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
        // The new name itself on stable storage, as the file's contents already are.
        File::open(&self.dir)?.sync_all()?;
        Ok(true)
    }
}

/// How old a named new file of a process that is gone must be before it counts as
/// abandoned: a creator on another machine sharing the directory has no process here, and
/// creating takes milliseconds, so one this old is not being written.
const ABANDONED_AFTER: Duration = Duration::from_secs(600);

/// Removes the named new files for `name` in `dir` that a killed creator left: those whose
/// process is gone, last written [`ABANDONED_AFTER`] ago or longer. Best effort: a file it
/// cannot read or remove is left.
fn remove_abandoned(dir: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{name}.");
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(pid) = file_name
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix))
            .and_then(|f| f.strip_suffix(".creating"))
            .and_then(|f| f.split_once('-'))
            .filter(|(pid, n)| digits(pid) && digits(n))
            .and_then(|(pid, _)| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= ABANDONED_AFTER);
        if old && pid > 0 && !process_alive(pid) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether `s` is a number as Cairn writes one in a name: decimal digits, no sign.
fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Whether process `pid` exists on this machine (one that is not ours to signal does).
fn process_alive(pid: i32) -> bool {
    use nix::errno::Errno;
    use nix::sys::signal::kill;
    !matches!(
        kill(nix::unistd::Pid::from_raw(pid), None),
        Err(Errno::ESRCH)
    )
}

/// Whether a link or rename into place found the path taken.
fn taken(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::AlreadyExists
}

#[cfg(target_os = "linux")]
mod unnamed {
    use std::fs::{File, OpenOptions};
    use std::io;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::{Path, PathBuf};

    use nix::fcntl::{AT_FDCWD, AtFlags};

    /// A file without a name in `dir`, and the name through `/proc` that reaches it; `None`
    /// when the file system cannot make one or `/proc` is missing.
    pub(super) fn open(dir: &Path) -> Option<(File, PathBuf)> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(nix::libc::O_TMPFILE)
            .open(dir)
            .ok()?;
        let by = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        by.exists().then_some((file, by))
    }

    /// Links the file reached through `by` to `path`.
    pub(super) fn link(by: &Path, path: &Path) -> io::Result<()> {
        nix::unistd::linkat(AT_FDCWD, by, AT_FDCWD, path, AtFlags::AT_SYMLINK_FOLLOW)
            .map_err(io::Error::from)
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

    /// A killed creator's named file goes once its process is gone and it is old; a file
    /// that is recent, or whose process lives, or that is not a new file for this path,
    /// stays.
    #[test]
    fn an_abandoned_new_file_is_removed_by_the_next_creation() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let long_ago = std::time::SystemTime::now() - 2 * ABANDONED_AFTER;
        // No process has this id (Linux allows at most 2^22).
        let gone = i32::MAX;
        let ours = std::process::id();
        let make = |name: &str, old: bool| -> io::Result<()> {
            let f = File::create(dir.path().join(name))?;
            if old {
                f.set_modified(long_ago)?;
            }
            Ok(())
        };
        make(&format!(".db.cairn.{gone}-0.creating"), true)?;
        make(&format!(".db.cairn.{gone}-1.creating"), false)?;
        make(&format!(".db.cairn.{ours}-7.creating"), true)?;
        make(&format!(".other.cairn.{gone}-0.creating"), true)?;
        make(&format!(".db.cairn.{gone}-x.creating"), true)?;
        make(&format!(".db.cairn.+{gone}-0.creating"), true)?;
        drop(Database::create(dir.path().join("db.cairn"))?);
        let mut expected = vec![
            format!(".db.cairn.{gone}-1.creating"),
            format!(".db.cairn.{gone}-x.creating"),
            format!(".db.cairn.+{gone}-0.creating"),
            format!(".db.cairn.{ours}-7.creating"),
            format!(".other.cairn.{gone}-0.creating"),
            "db.cairn".to_owned(),
        ];
        expected.sort();
        assert_eq!(names(dir.path())?, expected);
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
        let new = NewFile::named(dir.path().to_path_buf(), "named.cairn")?;
        recovery::initialise(&new.storage()?, 4096, None)?;
        assert!(new.link(&path)?);
        assert_eq!(names(dir.path())?, ["named.cairn"]);
        // Created a second time, the first database is kept.
        let db = Database::open(&path)?;
        let mut w = db.begin_write()?;
        w.create_table("kept")?;
        w.commit()?;
        drop(db);
        let new = NewFile::named(dir.path().to_path_buf(), "named.cairn")?;
        recovery::initialise(&new.storage()?, 4096, None)?;
        assert!(!new.link(&path)?, "the path is taken");
        assert_eq!(names(dir.path())?, ["named.cairn"]);
        let db = Database::open(&path)?;
        assert_eq!(
            db.begin_read()?.list_tables()?.len(),
            1,
            "the first database kept"
        );
        Ok(())
    }

    #[test]
    fn a_link_to_a_file_yet_to_be_made_gets_the_database_where_it_points() -> Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("data"))?;
        let link = dir.path().join("db.cairn");
        std::os::unix::fs::symlink("data/real.cairn", &link)?;
        let db = Database::create(&link)?;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        w.commit()?;
        drop(db);
        let real = Database::open(dir.path().join("data/real.cairn"))?;
        assert_eq!(real.begin_read()?.list_tables()?.len(), 1);
        assert!(std::fs::symlink_metadata(&link)?.file_type().is_symlink());
        Ok(())
    }
}
