//! A file that runs a hook before chosen calls, for tests of a writer racing an opening:
//! the hook lets the writer go on at exactly the step the test names.

use std::io;
use std::sync::Arc;

use super::{FileStorage, Region, Storage};

/// A call the hook runs before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    /// A request for the map (recovery's, before it verifies a commit).
    Region,
    /// A read at this offset.
    Read(u64),
    /// A write at this offset (a hook that fails it fails the write, which then writes
    /// nothing).
    Write(u64),
}

type Hook = Box<dyn Fn(Call) -> io::Result<()> + Send + Sync>;

/// Passes every call through to `file`, running `hook` first on [`Call`]s.
pub(crate) struct Hooked {
    file: FileStorage,
    hook: Hook,
}

impl Hooked {
    pub fn new(
        file: FileStorage,
        hook: impl Fn(Call) -> io::Result<()> + Send + Sync + 'static,
    ) -> Hooked {
        Hooked {
            file,
            hook: Box::new(hook),
        }
    }
}

impl std::fmt::Debug for Hooked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooked").field("file", &self.file).finish()
    }
}

impl Storage for Hooked {
    fn len(&self) -> u64 {
        self.file.len()
    }
    fn region(&self) -> Arc<Region> {
        // (A hook that fails here only fails the test's writer, which the test sees.)
        let _ = (self.hook)(Call::Region);
        self.file.region()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (self.hook)(Call::Read(offset))?;
        self.file.read(offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        (self.hook)(Call::Write(offset))?;
        self.file.write(offset, data)
    }
    fn sync(&self) -> io::Result<()> {
        self.file.sync()
    }
    fn resize(&self, len: u64) -> io::Result<()> {
        self.file.resize(len)
    }
    fn refresh(&self) -> io::Result<()> {
        self.file.refresh()
    }
}
