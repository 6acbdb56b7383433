//! What a commit changed since its durable one, which the other slot holds: the pages it
//! wrote, the older pages it points at, and the pages of the durable commit's trees it no
//! longer reaches. Recovery verifies the commit with it, and rebuilds an implied free set.
//!
//! Pages freed after the durable commit wait for the next sync before reuse, so that
//! commit's trees are whole on the disk; the two commits' trees part where the newer
//! one's pages since the durable commit point at older pages, which recovery's walk of
//! those pages (`new_pages.rs`) hands over without reading more than their headers. An
//! older page that the durable commit's trees point at under the same checksum is that
//! commit's page, unchanged: it need not be read. Every other one is read and checked (a
//! page that should be newer but whose write a power cut lost reads as older, and fails).
//!
//! One exception: the newer commit may have been made durable since its slot was
//! written (a writer's sync keeps the slot as it was; until the forty-seventh session an
//! opening's did too, which now seals it: `db/opening_seal.rs`), and the pages it no
//! longer uses reused by later commits that failed before their slot was written. Its
//! own pages stay whole (they are in use), but the durable commit's walk then meets pages
//! that do not verify: it does not descend into them, what it meets elsewhere still
//! proves, and the older pages under them are read and checked (until the forty-seventh
//! session the opening read every older page's header then: 829 of about 6,500
//! verifications over 1,000 power cuts of `crash.rs`; now only openings whose other slot
//! does not hold a durable commit that can prove, a log moved since, say, read them all).
//! The work is in proportion to the commits since the durable one, not to their fanout:
//! a branch rewritten since points at up to hundreds of unchanged children, and a leaf at
//! unchanged large values, which recovery read and checked until the forty-sixth session.
//!
//! The free set of an unlogged Eventual commit, which its slot leaves implied (every page
//! its trees and the commit log do not use: docs/design.md#freelist), is the durable
//! commit's free pages, its freelist's own run and the pages the file grew by since, with
//! the pages of its trees the newer commit no longer reaches, less the pages written
//! since. When that cannot be trusted (the other slot is not the durable commit, one of
//! its pages does not verify, the two commits' trees do not meet where the walk says),
//! the whole tree is walked instead.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use super::new_pages::{NewPage, Older, freelist_run};
use super::references::{Reference, references};
use crate::btree::MAX_DEPTH;
use crate::error::{Error, Result};
use crate::format::{ChildRef, Slot, decode_freelist};
use crate::freelist::FreeList;
use crate::page_set::PageSet;
use crate::pager::{FIRST_DATA_PAGE, Snapshot, VerifiedSet};

/// What a commit's pages since its durable commit say, noted during recovery's walk of
/// them (`new_pages::walk`, told to leave the older pages to the caller).
#[derive(Debug, Default)]
pub(super) struct Since {
    /// The runs written since the durable commit: tree pages, overflow runs, freelist.
    pub written: Vec<Range<u64>>,
    /// The older tree pages and overflow runs they point at, not checked: where the
    /// commit shares its trees and values with the durable one.
    older: Vec<Older>,
}

impl Since {
    /// Notes a page [`super::new_pages::walk`] hands over.
    pub(super) fn note(&mut self, page: u64, kind: NewPage, bytes: &[u8], page_size: usize) {
        match kind {
            NewPage::Tree | NewPage::Overflow | NewPage::Freelist => {
                let pages = bytes.len().div_ceil(page_size) as u64;
                self.written.push(page..page.saturating_add(pages));
            }
            NewPage::Older(older) => self.older.push(older),
        }
    }

    /// Checks each older page the commit points at against its reference.
    pub(super) fn check_older(&self, snap: &Snapshot) -> Result<()> {
        for older in &self.older {
            match *older {
                Older::Tree(r) => drop(snap.page(r)?),
                Older::Overflow(o) => drop(snap.overflow(o)?),
            }
        }
        Ok(())
    }

    /// Whether `durable`'s trees point at every older page the commit points at, under
    /// the same checksum: each is then that commit's page, unchanged.
    pub(super) fn proved_by(&self, durable: &Durable) -> bool {
        self.older
            .iter()
            .all(|o| durable.met.get(&o.page()) == Some(o))
    }

    /// Checks each older page the commit points at that `durable`'s trees do not point at
    /// under the same checksum (the others are proved).
    pub(super) fn check_unproved(&self, snap: &Snapshot, durable: &Durable) -> Result<()> {
        for older in &self.older {
            if durable.met.get(&older.page()) == Some(older) {
                continue;
            }
            match *older {
                Older::Tree(r) => drop(snap.page(r)?),
                Older::Overflow(o) => drop(snap.overflow(o)?),
            }
        }
        Ok(())
    }
}

/// The durable commit's side: the pages its trees do not use, as its freelist says; and
/// once walked down to what a newer commit shares with it, the pages of its trees the
/// newer one no longer reaches and its references to those it does.
#[derive(Debug)]
pub(super) struct Durable {
    slot: Slot,
    /// Its free pages, its freelist's run, its commit log: the pages below its end that
    /// its trees do not use.
    unused: PageSet,
    gone: PageSet,
    /// Its reference to each older page the newer commit points at, by page.
    met: HashMap<u64, Older>,
    /// Whether its walk read every page of its trees down to what the newer commit
    /// shares (else `gone` is not all of them).
    pub complete: bool,
}

impl Durable {
    /// `durable`, the commit `snap`'s slot names as its durable one, with its freelist
    /// read, in a file of `len` bytes. An error when it is not that commit, or its
    /// freelist does not verify or fit the file: nothing is proved by it then.
    pub(super) fn read(snap: &Snapshot, durable: Slot, len: u64) -> Result<Durable> {
        let s = snap.slot;
        let d = durable;
        let p = snap.page_size;
        let refuse = |what: &str| {
            Err(Error::corrupt(
                0,
                format!("durable commit {}: {what}", d.txid),
            ))
        };
        if d.txid != s.durable_txid || d.txid >= s.txid || !d.records_freelist() {
            return refuse("not the one the newer commit names");
        }
        // (Its file may be longer than the newer commit's, which freed pages at its end:
        // the file is cut only after a sync. Until the forty-seventh session that sent
        // about one verification in fifteen of the crash test to the fallback.)
        if d.page_count < FIRST_DATA_PAGE || d.page_count.saturating_mul(p as u64) > len {
            return refuse("a file longer than the one there is");
        }
        if (d.log_page, d.log_pages) != (s.log_page, s.log_pages) {
            return refuse("a commit log elsewhere");
        }
        let mut listed = vec![
            d.freelist_run(p),
            d.log_page..d.log_page.saturating_add(d.log_pages),
        ];
        let dsnap = Snapshot::new(
            d,
            p,
            snap.region.clone(),
            Arc::new(VerifiedSet::with_capacity(0)),
        );
        if let Some(bytes) = freelist_run(&dsnap, &d)? {
            let runs = decode_freelist(bytes)
                .ok_or_else(|| Error::corrupt(d.freelist_page, "freelist length mismatch"))?;
            listed.extend(
                runs.into_iter()
                    .map(|(first, count, _)| first..first.saturating_add(u64::from(count))),
            );
        }
        let mut unused = PageSet::new(d.page_count);
        for run in listed.iter().filter(|r| !r.is_empty()) {
            if run.start < FIRST_DATA_PAGE || run.end > d.page_count {
                return refuse("a freelist outside its file");
            }
            unused.set(run.clone());
        }
        Ok(Durable {
            slot: d,
            unused,
            gone: PageSet::new(d.page_count),
            met: HashMap::new(),
            complete: false,
        })
    }

    /// Whether the durable commit's trees use `page`, as its freelist says.
    pub(super) fn uses(&self, page: u64) -> bool {
        page >= FIRST_DATA_PAGE && page < self.slot.page_count && !self.unused.contains(page)
    }

    /// Walks its trees down to the pages `since` says the newer commit shares, each page
    /// on the way verified. A page that does not verify is not descended into (one the
    /// newer commit does not use, reused since the newer commit was made durable and a
    /// later commit failed: the pages the newer commit shares are in use, never reused,
    /// so what the rest of the walk meets still proves them); an error when one is
    /// reached twice.
    pub(super) fn walk(&mut self, snap: &Snapshot, since: &Since) -> Result<()> {
        let dsnap = Snapshot::new(
            self.slot,
            snap.page_size,
            snap.region.clone(),
            Arc::new(VerifiedSet::with_capacity(self.slot.page_count)),
        );
        let mut walk = Gone {
            snap: &dsnap,
            shared: since.older.iter().map(Older::page).collect(),
            met: HashMap::new(),
            gone: PageSet::new(self.slot.page_count),
            complete: true,
        };
        if self.slot.catalog.page != 0 {
            walk.tree(self.slot.catalog, true, 0)?;
        }
        self.gone = walk.gone;
        self.met = walk.met;
        self.complete = walk.complete;
        Ok(())
    }
}

/// The allocator state of a freshly opened file at a commit whose free set is implied
/// ([`Slot::free_set_implied`]), from its durable commit when `durable` has it. Which
/// commit freed each page is not known: all wait as if this one had, so that a reader
/// process's older snapshot keeps them (see `recovery::freelist`).
///
/// The walk of the whole tree, when the durable commit cannot be used, verifies every
/// page; a problem it meets is damage to older pages, which the durable commit holds too
/// (its pages since the durable commit verified already): going back to it would only
/// lose the later commits. The commit opens then with no page free (the pages a damaged
/// branch hides may be in use), so that nothing is overwritten; reads and `check` report
/// the damage, and `check` the pages nothing uses.
pub(super) fn implied_freelist(
    snap: &Snapshot,
    durable: Option<&Durable>,
    since: &Since,
) -> FreeList {
    let free = durable
        .and_then(|d| from_durable(snap, d, since).ok())
        .or_else(|| whole_walk(snap));
    let mut f = FreeList::with_pages(snap.slot.page_count);
    for page in free.iter().flat_map(PageSet::iter) {
        f.wait(page, snap.slot.txid);
    }
    f
}

/// The free pages, found by walking every tree of the commit; `None` on damage.
pub(super) fn whole_walk(snap: &Snapshot) -> Option<PageSet> {
    let used = crate::check::used_pages(snap)?;
    let mut free = PageSet::new(snap.slot.page_count);
    for page in (FIRST_DATA_PAGE..snap.slot.page_count).filter(|&page| !used.contains(page)) {
        free.set(page..page + 1);
    }
    Some(free)
}

/// The free pages of `snap`'s commit, from its durable commit's, walked (see the
/// module's comment).
pub(super) fn from_durable(snap: &Snapshot, durable: &Durable, since: &Since) -> Result<PageSet> {
    let s = snap.slot;
    let refuse = |what: &str| Err(Error::corrupt(0, format!("implied free set: {what}")));
    if !since.proved_by(durable) {
        return refuse("the durable commit does not hold every older page the commit uses");
    }
    if durable
        .unused
        .iter()
        .any(|page| durable.gone.contains(page))
    {
        return refuse("the durable commit's freelist lists a page of its trees");
    }
    let log = s.log_page..s.log_page.saturating_add(s.log_pages);
    let mut free = PageSet::new(s.page_count);
    free.union(&durable.unused);
    free.union(&durable.gone);
    free.set(durable.slot.page_count..s.page_count);
    for run in &since.written {
        if durable.gone.any(run.clone()) {
            return refuse("a page of the durable commit's trees written again");
        }
        free.clear(run.clone());
    }
    free.clear(log);
    Ok(free)
}

/// The pages of the durable commit's trees that the newer commit does not share.
struct Gone<'a> {
    snap: &'a Snapshot,
    /// The older pages the newer commit points at, and this commit's references to
    /// those of them its trees reach.
    shared: HashSet<u64>,
    met: HashMap<u64, Older>,
    gone: PageSet,
    /// Whether every page reached verified.
    complete: bool,
}

impl Gone<'_> {
    fn tree(&mut self, r: ChildRef, catalog: bool, depth: usize) -> Result<()> {
        if self.shared.contains(&r.page) {
            return self.meet(Older::Tree(r));
        }
        if depth > MAX_DEPTH {
            return Err(Error::corrupt(r.page, "tree too deep (a cycle?)"));
        }
        self.claim(r.page, 1)?;
        let snap = self.snap;
        let page = match snap.tree_page(r) {
            Ok(page) => page,
            Err(Error::Corruption { .. }) => {
                self.complete = false;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        references(page, r.page, catalog, &mut |to| match to {
            Reference::Child(child) => self.tree(child, catalog, depth + 1),
            Reference::Table(root) => self.tree(root, false, 0),
            Reference::Overflow(o) if self.shared.contains(&o.page) => {
                self.meet(Older::Overflow(o))
            }
            Reference::Overflow(o) => self.claim(o.page, o.pages(snap.page_size)),
        })
    }

    /// Notes this commit's reference to a page the newer commit shares.
    fn meet(&mut self, older: Older) -> Result<()> {
        match self.met.insert(older.page(), older) {
            None => Ok(()),
            Some(_) => Err(Error::corrupt(older.page(), "reached twice")),
        }
    }

    /// Marks `n` pages from `first` gone: inside the commit's file, and not reached before.
    fn claim(&mut self, first: u64, n: u64) -> Result<()> {
        let end = first.saturating_add(n);
        if first < FIRST_DATA_PAGE || end > self.snap.slot.page_count {
            return Err(Error::corrupt(first, "outside the durable commit's file"));
        }
        if self.gone.any(first..end) {
            return Err(Error::corrupt(first, "reached twice"));
        }
        self.gone.set(first..end);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::{read_header, read_slots, verify_commit};
    use super::*;
    use crate::Durability;
    use crate::format::{PageKind, page_kind};
    use crate::killed_writer::KilledWriter;
    use crate::storage::{MemoryStorage, Storage};

    /// A killed writer's file on 1 KiB pages without a commit log: a durable load of two
    /// tables (one of values past a page), then Eventual commits, which log nothing, that
    /// insert and remove keys, add and remove large values, create a table, drop one and
    /// make it again.
    fn killed_after_eventual_commits() -> Result<Vec<u8>> {
        let writer = KilledWriter::new(7, 0)?;
        let db = &writer.db;
        let mut w = db.begin_write()?;
        w.create_table("a")?;
        w.create_table("b")?;
        for i in 0u32..2000 {
            w.open_table("a")?.insert(&i.to_be_bytes(), &[1; 60])?;
        }
        for i in 0u32..50 {
            w.open_table("b")?.insert(&i.to_be_bytes(), &[2; 3000])?;
        }
        w.commit()?;
        for i in 0u32..60 {
            let mut w = db.begin_write()?;
            w.set_durability(Durability::Eventual);
            let mut a = w.open_table("a")?;
            a.insert(&(i * 7919 % 4000).to_be_bytes(), &[3; 60])?;
            a.remove(&(i * 4111 % 2000).to_be_bytes())?;
            match i {
                20 => w.create_table("c")?,
                40 => {
                    w.drop_table("b")?;
                    w.create_table("b")?;
                }
                _ => {}
            }
            if i % 10 == 5 {
                let mut b = w.open_table("b")?;
                b.insert(&(100 + i).to_be_bytes(), &[4; 5000])?;
                b.remove(&(i / 2).to_be_bytes())?;
            }
            w.commit()?;
        }
        Ok(writer.kill())
    }

    /// The newest commit of `image` (its free set implied) and the other slot's.
    fn newest_and_durable(storage: &dyn Storage) -> Result<(Snapshot, Slot)> {
        let p = read_header(storage)?.page_size as usize;
        let (mut slots, _) = read_slots(storage, p)?;
        slots.sort_by_key(|(s, _)| std::cmp::Reverse(s.txid));
        let [(newest, _), (durable, _)] = slots[..] else {
            return Err(Error::corrupt(0, "expected two slots"));
        };
        assert!(newest.free_set_implied() && durable.txid == newest.durable_txid);
        let verified = Arc::new(VerifiedSet::with_capacity(newest.page_count));
        Ok((
            Snapshot::new(newest, p, storage.region(), verified),
            durable,
        ))
    }

    /// The free set of `snap`'s commit from its durable one, which must prove it, checked
    /// against the whole walk's; and the durable commit's side.
    fn proved_free_set(
        storage: &dyn Storage,
        snap: &Snapshot,
        durable: Slot,
    ) -> Result<(PageSet, Durable)> {
        let (_, since, proof) =
            verify_commit(snap, Some(durable), snap.slot.durable_txid, storage.len())?;
        let Some(proof) = proof else {
            panic!("the durable commit proved nothing");
        };
        let free = from_durable(snap, &proof, &since)?;
        assert_eq!(Some(&free), whole_walk(snap).as_ref());
        Ok((free, proof))
    }

    #[test]
    fn the_free_set_from_the_durable_commit_is_the_whole_walks() -> Result<()> {
        let storage = MemoryStorage::from_bytes(&killed_after_eventual_commits()?)?;
        let (snap, durable) = newest_and_durable(&storage)?;
        let (free, proof) = proved_free_set(&storage, &snap, durable)?;
        // (Pages freed by the drop, and by the commits' copies, among them.)
        assert!(free.iter().count() > 20, "{}", free.iter().count());
        // (The durable commit's walk met pages the newer commit no longer uses.)
        assert!(proof.gone.iter().count() > 0);
        Ok(())
    }

    /// A durable commit whose file is longer than the newer commit's: it removed the
    /// large value at the file's end, whose pages it still counts (they wait for its
    /// sync), and the newer commit, an Eventual one, left them out. The durable commit
    /// proves the newer one all the same (until the forty-seventh session it proved
    /// nothing then), and the free set from it, clipped to the newer commit's file, is the
    /// whole walk's.
    #[test]
    fn a_durable_commit_with_a_longer_file_proves_the_newer_one() -> Result<()> {
        let writer = KilledWriter::new(9, 0)?;
        let db = &writer.db;
        let mut w = db.begin_write()?;
        w.create_table("t")?;
        let mut t = w.open_table("t")?;
        for i in 0u32..2000 {
            t.insert(&i.to_be_bytes(), &[1; 50])?;
        }
        w.commit()?;
        let mut w = db.begin_write()?;
        w.open_table("t")?.insert(b"large", &[2; 60 << 10])?;
        w.commit()?;
        let mut w = db.begin_write()?;
        w.open_table("t")?.remove(b"large")?;
        w.commit()?;
        for i in 0u32..20 {
            let mut w = db.begin_write()?;
            w.set_durability(Durability::Eventual);
            w.open_table("t")?
                .insert(&(i * 97).to_be_bytes(), &[3; 50])?;
            w.commit()?;
        }
        let storage = MemoryStorage::from_bytes(&writer.kill())?;
        let (snap, durable) = newest_and_durable(&storage)?;
        assert!(
            durable.page_count > snap.slot.page_count + 20,
            "{durable:?} {:?}",
            snap.slot
        );
        proved_free_set(&storage, &snap, durable)?;
        Ok(())
    }

    /// Zeroes in `image` (1 KiB pages) the last page the newer commit `snap` wrote since
    /// its durable one, other than its catalog root: a write a power cut lost.
    fn lose_a_new_page(image: &mut [u8], snap: &Snapshot, since: &Since) -> Result<()> {
        let lost = since
            .written
            .iter()
            .map(|r| r.start)
            .rfind(|&page| page != snap.slot.catalog.page)
            .ok_or_else(|| Error::corrupt(0, "nothing written"))?;
        image[lost as usize * 1024..][..1024].fill(0);
        Ok(())
    }

    #[test]
    fn a_new_page_whose_write_was_lost_is_found_though_the_durable_commit_proves_the_rest()
    -> Result<()> {
        let mut image = killed_after_eventual_commits()?;
        let storage = MemoryStorage::from_bytes(&image)?;
        let (snap, durable) = newest_and_durable(&storage)?;
        let (_, since, _) =
            verify_commit(&snap, Some(durable), snap.slot.durable_txid, storage.len())?;
        lose_a_new_page(&mut image, &snap, &since)?;
        let storage = MemoryStorage::from_bytes(&image)?;
        let (snap, durable) = newest_and_durable(&storage)?;
        assert!(
            verify_commit(&snap, Some(durable), snap.slot.durable_txid, storage.len()).is_err()
        );
        let opened = super::super::open(&storage, true, true)?;
        assert_eq!(opened.snapshot.slot.txid, durable.txid);
        Ok(())
    }

    #[test]
    fn a_damaged_page_of_the_durable_commit_leaves_the_whole_walk_to_find_the_free_set_and_the_rest_of_its_proof()
    -> Result<()> {
        let mut image = killed_after_eventual_commits()?;
        let storage = MemoryStorage::from_bytes(&image)?;
        let (snap, durable) = newest_and_durable(&storage)?;
        let Some(proof) =
            verify_commit(&snap, Some(durable), snap.slot.durable_txid, storage.len())?.2
        else {
            panic!("the durable commit proved nothing");
        };
        // A tree page of the durable commit that the newer one no longer uses (the runs
        // of the values it no longer holds are not read).
        let page = proof
            .gone
            .iter()
            .filter(|&p| {
                let page = &image[p as usize * 1024..][..1024];
                crate::format::looks_like_a_page(page)
                    && matches!(page_kind(page), Some(PageKind::Leaf | PageKind::Branch))
            })
            .last()
            .unwrap_or(0);
        image[page as usize * 1024 + 1020] ^= 1;
        let storage = MemoryStorage::from_bytes(&image)?;
        let (snap, durable) = newest_and_durable(&storage)?;
        let (_, since, proof) =
            verify_commit(&snap, Some(durable), snap.slot.durable_txid, storage.len())?;
        assert!(proof.is_none());
        let free = whole_walk(&snap);
        assert!(free.as_ref().is_some_and(|f| f.contains(page)));
        let opened = super::super::open(&storage, true, true)?;
        assert_eq!(opened.snapshot.slot.txid, snap.slot.txid);
        let mut waiting: Vec<u64> = opened.freelist.pending().iter().map(|w| w.0).collect();
        waiting.sort_unstable();
        assert_eq!(
            waiting,
            free.iter().flat_map(PageSet::iter).collect::<Vec<_>>()
        );
        assert!(since.written.len() > 1);
        // What the durable commit's walk met elsewhere still proves; the older pages it did
        // not meet are read and checked: a new page whose write was lost is found.
        lose_a_new_page(&mut image, &snap, &since)?;
        let storage = MemoryStorage::from_bytes(&image)?;
        let (snap, durable) = newest_and_durable(&storage)?;
        let verified = verify_commit(&snap, Some(durable), snap.slot.durable_txid, storage.len());
        assert!(verified.is_err(), "the lost page went unnoticed");
        Ok(())
    }
}
