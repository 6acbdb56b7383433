//! Closing a database: dropping its last handle, or `Database::close`, which reports what
//! closing meets. Either makes every commit durable and seals the file
//! (docs/design.md, *Clean close*).

use std::sync::PoisonError;
use std::sync::atomic::Ordering;

use crate::db::{Database, Inner, WriterState};
use crate::error::Result;
use crate::format::{SLOT_OFFSET, Slot};

impl Drop for Inner {
    fn drop(&mut self) {
        // Errors cannot be reported from drop; `Database::sync` reports them to callers
        // who need to know, and an unsealed file is still consistent.
        let _ = self.seal();
    }
}

impl Inner {
    /// Closes cleanly: makes every commit durable, then writes a copy of the newest slot
    /// that records itself as durable into the other slot, so that the next open has no
    /// pages to verify and damage found later is reported, not mistaken for a torn commit.
    fn seal(&self) -> Result<()> {
        match self.take_writer_for_close() {
            Some(mut ws) => self.seal_with(&mut ws),
            None => Ok(()),
        }
    }

    /// [`Inner::seal`] with the writer state `ws`, which stays out of the writer slot for
    /// good: no write transaction follows.
    fn seal_with(&self, ws: &mut WriterState) -> Result<()> {
        self.sync_with(ws)?;
        let latest = self.state().latest.slot;
        if latest.durable_txid < latest.txid {
            self.write_sealed(ws, latest)?;
        }
        Ok(())
    }

    /// Writes a copy of `slot`, the newest commit's, durable already, that records itself
    /// as durable into the slot beside the durable one, and syncs; returns the copy.
    pub(crate) fn write_sealed(&self, ws: &WriterState, slot: Slot) -> Result<Slot> {
        let sealed = Slot {
            durable_txid: slot.txid,
            ..slot
        };
        let other = 1 - ws.durable_slot;
        let at = other as u64 * self.page_size as u64 + SLOT_OFFSET as u64;
        self.storage.write(at, &sealed.encode())?;
        self.sync_counted()?;
        Ok(sealed)
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        // The last handle stops the background sync and waits for it, so that closing
        // happens here (when no transaction outlives the handle), not on its thread.
        if self.inner.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.stop_background_sync();
        }
    }
}

impl Database {
    fn stop_background_sync(&self) {
        let syncer = self
            .inner
            .syncer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(syncer) = syncer {
            syncer.stop();
        }
    }

    /// Closes this handle and reports what closing met, which dropping it cannot. The last
    /// handle of a database waits for an open write transaction to end, makes every
    /// commit durable and seals the file (the next opening has nothing to verify or
    /// replay); the file itself closes when the last read transaction ends. Any other
    /// handle syncs, as [`Database::sync`].
    ///
    /// # Errors
    /// An I/O error from the final sync or the seal's write (the file then reopens at its
    /// last durable commit, or a later one);
    /// [`Error::Corruption`](crate::Error::Corruption) as for [`Database::sync`];
    /// [`Error::WriteTxnOnThisThread`](crate::Error::WriteTxnOnThisThread) when this
    /// thread holds the write transaction.
    pub fn close(self) -> Result<()> {
        if self.inner.read_only {
            return Ok(());
        }
        // Clones come from handles: with this one the last, none can appear meanwhile.
        if self.inner.handles.load(Ordering::Acquire) > 1 {
            return self.sync();
        }
        self.stop_background_sync();
        // (An error the background sync met is behind us once the final sync succeeds.)
        self.inner
            .background_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let mut ws = self.inner.take_writer()?;
        let sealed = self.inner.seal_with(&mut ws);
        if sealed.is_err() {
            // Dropping the last reference tries once more, quietly.
            self.inner.put_writer(ws);
        }
        sealed
    }
}
