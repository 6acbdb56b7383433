//! A read-only opening of a file whose writer stopped before applying the commits only its
//! commit log holds reads a private copy with them applied in memory, which does not follow
//! the file (the engine's `db/private_copy.rs`). Once a writer has applied that log to the
//! file, the shell opens the file again, read-only, and follows the writer's commits from
//! then on, as an opening at that moment would: no need to `.open` it again by hand.

use std::io;
use std::time::{Duration, Instant};

use cairn_engine::Database;
use cairn_query::{Session, Statement};

use crate::shell::Shell;

/// How often a shell on a private copy looks at the file.
const LOOK_EVERY: Duration = Duration::from_secs(1);

impl Shell {
    /// On a private copy, between statements and outside a transaction, at most once a
    /// [`LOOK_EVERY`]: when the file's log no longer holds commits to apply (a writer
    /// applied them), reads the file itself from now on, on the same table, with the same
    /// parameters, and says so.
    ///
    /// # Errors
    /// Only failures to write the note; a look that fails leaves the copy as it is.
    pub(crate) fn follow_once_the_log_is_applied(&mut self) -> io::Result<()> {
        let db = self.session.database();
        if !db.is_private_copy() || self.session.in_transaction() {
            return Ok(());
        }
        let now = Instant::now();
        if self
            .copy_looked_at
            .is_some_and(|then| now.duration_since(then) < LOOK_EVERY)
        {
            return Ok(());
        }
        self.copy_looked_at = Some(now);
        let Some(path) = db.path().map(std::path::Path::to_path_buf) else {
            return Ok(());
        };
        // (A cheap look first: while the log still holds commits to apply, an opening
        // would make another copy.)
        if !cairn_engine::inspect(&path).is_ok_and(|info| info.unapplied_commits == Some(0)) {
            return Ok(());
        }
        let Ok(file) = Database::builder().read_only(true).open(&path) else {
            return Ok(());
        };
        if file.is_private_copy() {
            return Ok(());
        }
        let Ok(mut session) = Session::new(file) else {
            return Ok(());
        };
        session.set_interrupt_flag(self.interrupt_flag());
        for (name, value) in self.session.params() {
            session.set_param(name, value);
        }
        // (A table the writer dropped since: the session stays on its default one.)
        let table = self.session.table().to_owned();
        let _ = session.execute(&Statement::Use { table });
        drop(std::mem::replace(&mut self.session, session));
        self.note(&format!(
            "{}: a writer has applied the commits its log held to the file: its commits \
             show here from now on",
            path.display()
        ))
    }
}
