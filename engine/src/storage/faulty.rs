//! A storage backend for testing failures: it fails chosen operations, and it can produce
//! the file as a power cut would leave it.
//!
//! It keeps what the process sees (in memory), the image last made durable by a sync, and
//! the writes and resizes since. A power cut keeps, drops or tears (at 512-byte sectors)
//! each unsynced write independently — so in any order — and loses unsynced growth or
//! shrinking at random. A "lying" sync loses one of the writes it claims to make durable.
//! A sync that fails does what Linux does after a write-back error: some of the unsynced
//! writes reach the disk and the others are forgotten — no longer waiting, so a later sync
//! that succeeds does not make them durable, though the process still reads them.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use super::{MemoryStorage, Region, Storage};

/// The sector size a power cut tears writes at.
pub const SECTOR: usize = 512;

#[derive(Debug, Clone)]
enum Pending {
    Write { offset: u64, data: Vec<u8> },
    Resize(u64),
}

#[derive(Debug, Default)]
struct State {
    durable: Vec<u8>,
    pending: Vec<Pending>,
    ops: u64,
    /// The operation (by count) that fails once with an I/O error.
    fail_at: Option<u64>,
    /// After this many operations every operation fails: the process is gone.
    dead_after: Option<u64>,
    lie: bool,
    /// Whether the next sync fails (once).
    fail_sync: bool,
    /// Whether a failed sync also drops the writes it forgot from what the process reads.
    evict: bool,
    /// What [`Storage::overlap_block`] returns, when not a sector.
    overlap_block: Option<u64>,
    rng: u64,
}

impl State {
    fn next(&mut self) -> u64 {
        // xorshift64*: deterministic for a seed, no dependency.
        let mut x = self.rng.max(1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Counts an operation; an error if it is the one to fail or the process is dead.
    fn admit(&mut self) -> io::Result<()> {
        match self.fault() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Counts an operation; the error it meets, if any.
    fn fault(&mut self) -> Option<io::Error> {
        self.ops += 1;
        if self.dead() {
            return Some(io::Error::other("injected: the process is gone"));
        }
        if self.fail_at == Some(self.ops) {
            return Some(io::Error::other("injected I/O error"));
        }
        None
    }

    fn dead(&self) -> bool {
        self.dead_after.is_some_and(|n| self.ops > n)
    }

    /// Applies each of `pending` to `image` whole, not at all, or torn at sectors, at
    /// random: what reaches the disk of writes that were never synced.
    fn scatter(&mut self, image: &mut Vec<u8>, pending: &[Pending]) {
        for op in pending {
            match op {
                Pending::Resize(_) => {
                    if self.next().is_multiple_of(2) {
                        apply(image, op);
                    }
                }
                Pending::Write { offset, data } => match self.next() % 3 {
                    0 => apply(image, op),
                    1 => {}
                    _ => {
                        // Torn: each sector of the write reaches the disk or not.
                        for (i, sector) in data.chunks(SECTOR).enumerate() {
                            if self.next().is_multiple_of(2) {
                                let at = offset + (i * SECTOR) as u64;
                                apply(
                                    image,
                                    &Pending::Write {
                                        offset: at,
                                        data: sector.to_vec(),
                                    },
                                );
                            }
                        }
                    }
                },
            }
        }
    }
}

fn apply(image: &mut Vec<u8>, op: &Pending) {
    match op {
        Pending::Resize(len) => image.resize(usize::try_from(*len).unwrap_or(usize::MAX), 0),
        Pending::Write { offset, data } => {
            let start = usize::try_from(*offset).unwrap_or(usize::MAX);
            let end = start.saturating_add(data.len());
            if image.len() < end {
                image.resize(end, 0);
            }
            image[start..end].copy_from_slice(data);
        }
    }
}

/// Storage whose failures a test controls.
#[derive(Debug)]
pub struct FaultyStorage {
    live: MemoryStorage,
    state: Mutex<State>,
}

impl FaultyStorage {
    /// An empty store; `seed` drives the power cuts and lies.
    ///
    /// # Errors
    /// When memory cannot be reserved.
    pub fn new(seed: u64) -> io::Result<Arc<FaultyStorage>> {
        Ok(Arc::new(FaultyStorage {
            live: MemoryStorage::new()?,
            state: Mutex::new(State {
                rng: seed ^ 0x9E37_79B9_7F4A_7C15,
                ..State::default()
            }),
        }))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Operations (writes, syncs, resizes) so far.
    pub fn operations(&self) -> u64 {
        self.state().ops
    }

    /// Makes operation number `n` (counting from the first ever) fail once.
    pub fn fail_at(&self, n: u64) {
        self.state().fail_at = Some(n);
    }

    /// Makes the next sync fail, once (other operations go on).
    pub fn fail_next_sync(&self) {
        self.state().fail_sync = true;
    }

    /// Makes every operation after number `n` fail, as if the process had died there.
    pub fn die_after(&self, n: u64) {
        self.state().dead_after = Some(n);
    }

    /// Makes syncs lie: each loses one of the writes it should make durable.
    pub fn lie_about_syncs(&self, lie: bool) {
        self.state().lie = lie;
    }

    /// Makes a failed sync also drop the writes it did not write from the cache: the
    /// process then reads what the disk holds there (the kernel may evict such pages at
    /// any time after a write-back error, since it marked them clean).
    pub fn evict_after_failed_syncs(&self, evict: bool) {
        self.state().evict = evict;
    }

    /// Makes [`Storage::overlap_block`] `bytes` rather than a sector, as a file's page
    /// cache would: a commit log that fills such a block then starts at one
    /// (docs/design.md#commit-log), and a commit's writes in the log's blocks go after its
    /// record rather than during it.
    pub fn set_overlap_block(&self, bytes: u64) {
        self.state().overlap_block = Some(bytes);
    }

    /// The bytes the file holds for the operating system now (what reopening without a
    /// crash reads).
    pub fn live_image(&self) -> Vec<u8> {
        self.live.to_vec()
    }

    /// The bytes a power cut that loses every write since the last sync would leave.
    pub fn durable_image(&self) -> Vec<u8> {
        self.state().durable.clone()
    }

    /// The bytes a power cut now would leave on the disk.
    pub fn power_cut(&self) -> Vec<u8> {
        let mut s = self.state();
        let mut image = s.durable.clone();
        let pending = s.pending.clone();
        s.scatter(&mut image, &pending);
        image
    }
}

impl Storage for FaultyStorage {
    fn len(&self) -> u64 {
        self.live.len()
    }

    fn region(&self) -> Arc<Region> {
        self.live.region()
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.live.read(offset, buf)
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut s = self.state();
        s.admit()?;
        self.live.write(offset, data)?;
        s.pending.push(Pending::Write {
            offset,
            data: data.to_vec(),
        });
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut s = self.state();
        let fault = match s.fault() {
            None if std::mem::take(&mut s.fail_sync) => {
                Some(io::Error::other("injected I/O error"))
            }
            fault => fault,
        };
        if let Some(e) = fault {
            if !s.dead() {
                // A write-back error: what did not reach the disk is forgotten.
                // (The file's length is metadata, which the file system's journal keeps:
                // resizes stay waiting for the next sync.)
                let (writes, resizes): (Vec<Pending>, Vec<Pending>) =
                    std::mem::take(&mut s.pending)
                        .into_iter()
                        .partition(|op| matches!(op, Pending::Write { .. }));
                s.pending = resizes;
                let mut durable = std::mem::take(&mut s.durable);
                s.scatter(&mut durable, &writes);
                if s.evict {
                    let live_len = usize::try_from(self.live.len()).unwrap_or(usize::MAX);
                    for op in &writes {
                        if let Pending::Write { offset, data } = op {
                            let start = usize::try_from(*offset).unwrap_or(usize::MAX);
                            let end = start.saturating_add(data.len()).min(live_len);
                            if start < end {
                                let mut disk = durable
                                    .get(start..end.min(durable.len()))
                                    .unwrap_or(&[])
                                    .to_vec();
                                disk.resize(end - start, 0);
                                self.live.write(*offset, &disk)?;
                            }
                        }
                    }
                }
                s.durable = durable;
            }
            return Err(e);
        }
        let mut pending = std::mem::take(&mut s.pending);
        if s.lie {
            let writes: Vec<usize> = (0..pending.len())
                .filter(|&i| matches!(pending[i], Pending::Write { .. }))
                .collect();
            if !writes.is_empty() {
                let lost = writes[(s.next() % writes.len() as u64) as usize];
                pending.remove(lost);
            }
        }
        for op in &pending {
            apply(&mut s.durable, op);
        }
        Ok(())
    }

    fn durable_writes(&self) -> bool {
        true
    }

    /// Makes this write durable, with every unsynced write it overlaps (the range's own
    /// sync); other unsynced writes stay unsynced. A lying store loses it instead.
    fn write_durable(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut s = self.state();
        s.admit()?;
        self.live.write(offset, data)?;
        let end = offset + data.len() as u64;
        let overlaps = |op: &Pending| match op {
            Pending::Write { offset: o, data: d } => *o < end && offset < o + d.len() as u64,
            Pending::Resize(_) => false,
        };
        let pending = std::mem::take(&mut s.pending);
        let (synced, rest): (Vec<Pending>, Vec<Pending>) = pending.into_iter().partition(overlaps);
        s.pending = rest;
        if s.lie {
            return Ok(());
        }
        for op in &synced {
            apply(&mut s.durable, op);
        }
        apply(
            &mut s.durable,
            &Pending::Write {
                offset,
                data: data.to_vec(),
            },
        );
        Ok(())
    }

    /// The durable write first, then `meanwhile` (which runs whatever the write's outcome):
    /// of the orders a backend that overlaps them can make, the one in which the write is
    /// durable before any of `meanwhile`'s.
    fn write_durable_while(
        &self,
        offset: u64,
        data: &[u8],
        meanwhile: &mut dyn FnMut() -> io::Result<()>,
    ) -> io::Result<()> {
        let written = self.write_durable(offset, data);
        meanwhile()?;
        written
    }

    /// A sector unless set otherwise: every write but the durable one's own goes during
    /// it.
    fn overlap_block(&self) -> u64 {
        self.state().overlap_block.unwrap_or(SECTOR as u64)
    }

    fn resize(&self, len: u64) -> io::Result<()> {
        let mut s = self.state();
        s.admit()?;
        self.live.resize(len)?;
        s.pending.push(Pending::Resize(len));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synced_writes_survive_a_power_cut_and_unsynced_ones_may_not() -> io::Result<()> {
        let s = FaultyStorage::new(3)?;
        s.resize(4096)?;
        s.write(0, &[1; 1024])?;
        s.sync()?;
        s.write(0, &[2; 1024])?;
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..64 {
            let image = s.power_cut();
            assert_eq!(image.len(), 4096);
            // Each sector is old or new, never anything else.
            for sector in image[..1024].chunks(SECTOR) {
                assert!(
                    sector.iter().all(|&b| b == sector[0]) && (sector[0] == 1 || sector[0] == 2)
                );
            }
            seen.insert(image[..1024].to_vec());
        }
        assert!(seen.len() >= 3, "kept, dropped and torn all happen");
        Ok(())
    }

    #[test]
    fn a_durable_write_survives_a_power_cut_alone() -> io::Result<()> {
        let s = FaultyStorage::new(5)?;
        s.resize(8192)?;
        s.sync()?;
        s.write(0, &[1; 512])?;
        s.write_durable(4096, &[2; 512])?;
        let mut first_kept = std::collections::BTreeSet::new();
        for _ in 0..64 {
            let image = s.power_cut();
            assert_eq!(&image[4096..4608], &[2; 512], "the durable write is there");
            first_kept.insert(image[0]);
        }
        assert_eq!(first_kept.len(), 2, "the other write may or may not be");
        Ok(())
    }

    #[test]
    fn a_failed_sync_forgets_what_it_did_not_write() -> io::Result<()> {
        let mut outcomes = std::collections::BTreeSet::new();
        for seed in 0..32 {
            let s = FaultyStorage::new(seed)?;
            s.resize(1024)?;
            s.sync()?;
            s.write(0, &[7; 1024])?;
            s.fail_at(s.operations() + 1);
            assert!(s.sync().is_err());
            s.sync()?;
            let image = s.durable_image();
            assert_eq!(s.power_cut(), image, "nothing is waiting any more");
            let mut b = [0u8; 1];
            s.read(0, &mut b)?;
            assert_eq!(b, [7], "the process still reads the write");
            outcomes.insert((image[0], image[1023]));
        }
        assert!(
            outcomes.contains(&(0, 0)) && outcomes.contains(&(7, 7)),
            "some failed syncs lose the write for good, some write it: {outcomes:?}"
        );
        Ok(())
    }

    #[test]
    fn injected_failures_and_death() -> io::Result<()> {
        let s = FaultyStorage::new(1)?;
        s.resize(1024)?;
        s.fail_at(2);
        assert!(s.write(0, b"x").is_err());
        assert!(s.write(0, b"x").is_ok(), "a one-off failure");
        s.die_after(3);
        assert!(s.sync().is_err() && s.write(0, b"y").is_err());
        let mut b = [0u8; 1];
        s.read(0, &mut b)?;
        assert_eq!(&b, b"x", "a failed write changes nothing");
        Ok(())
    }
}
