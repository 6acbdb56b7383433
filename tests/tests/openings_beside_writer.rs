//! Read-only openings, over and over, beside a busy writer: threads of the writer's own
//! process and a second process open the file, read a few snapshots and check them, and
//! drop it, while the writer commits small transactions, puts and removes large values,
//! rolls back, syncs and compacts online.
//!
//! Every snapshot must hold the same total over table `t` (each transaction moves amounts
//! between keys), every large value must be whole, `check()` must pass, and no opening
//! may fail or open a private copy (the log is the live writer's). Until the forty-eighth
//! session, openings here opened private copies, died of a SIGBUS reading an older
//! commit's page the writer had cut from the file, and failed with `Truncated` when the
//! writer grew the file under them.
//!
//! And the same across writer processes killed and started again.
//!
//! `CAIRN_OPENING_SECONDS` sets how long the writers run (3 s by default); the other
//! processes are this test binary again, selected by an environment variable.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cairn_engine::{Database, Durability, Error, ReadTxn};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const KEYS: u64 = 200;
const EACH: u64 = 1_000;
const ROLE: &str = "CAIRN_OPENINGS_BESIDE_WRITER";
const WRITER_ROLE: &str = "CAIRN_OPENINGS_WRITER";

fn seconds() -> u64 {
    std::env::var("CAIRN_OPENING_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
}

fn seed() -> u64 {
    std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random)
}

/// A new database at `path`: table `t` with every key at the same amount, table `big`.
fn create(path: &Path) -> Result<Database, Error> {
    let db = Database::builder()
        .page_size(1024)
        .log_size(64 << 10)
        .create(path)?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.create_table("big")?;
    for i in 0..KEYS {
        w.open_table("t")?
            .insert(&i.to_be_bytes(), &with_padding(EACH, 0))?;
    }
    w.commit()?;
    Ok(db)
}

/// Two threads opening a file over and over ([`open_until`]) and one reading through a
/// handle it keeps ([`follow_until`]), until stopped.
struct Openers {
    stop: Arc<AtomicBool>,
    openings: Arc<AtomicU64>,
    reads: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<Result<(), String>>>,
}

impl Openers {
    fn start(path: &Path, copies: bool) -> Openers {
        let stop = Arc::new(AtomicBool::new(false));
        let openings = Arc::new(AtomicU64::new(0));
        let reads = Arc::new(AtomicU64::new(0));
        let mut threads: Vec<_> = (0..2)
            .map(|_| {
                let (stop, openings, path) = (stop.clone(), openings.clone(), path.to_owned());
                std::thread::spawn(move || {
                    let n = open_until(&path, &|| stop.load(Ordering::Relaxed), copies)?;
                    openings.fetch_add(n, Ordering::Relaxed);
                    Ok(())
                })
            })
            .collect();
        let (until, counted, path) = (stop.clone(), reads.clone(), path.to_owned());
        threads.push(std::thread::spawn(move || {
            let n = follow_until(&path, &|| until.load(Ordering::Relaxed), copies)?;
            counted.fetch_add(n, Ordering::Relaxed);
            Ok(())
        }));
        Openers {
            stop,
            openings,
            reads,
            threads,
        }
    }

    /// Stops them: how many openings they made, how many snapshots the kept handle read,
    /// and what failed.
    fn stop(self) -> (u64, u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let mut failures = Vec::new();
        for t in self.threads {
            match t.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failures.push(format!("a thread's opening: {e}")),
                Err(_) => failures.push("an opening thread panicked".into()),
            }
        }
        (
            self.openings.load(Ordering::Relaxed),
            self.reads.load(Ordering::Relaxed),
            failures,
        )
    }
}

/// An amount under a key: 8 bytes, then padding that changes with each write.
fn amount(value: &[u8]) -> Result<u64, String> {
    value
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| format!("short value: {} bytes", value.len()))
}

fn with_padding(amount: u64, pad: u8) -> Vec<u8> {
    let mut v = amount.to_be_bytes().to_vec();
    v.resize(48, pad);
    v
}

/// Checks the newest snapshot of `db` ([`check_read`]).
fn check_snapshot(db: &Database) -> Result<(), String> {
    let read = db.begin_read().map_err(|e| format!("begin_read: {e}"))?;
    check_read(&read)
}

/// Checks one snapshot: the total over `t`, and every large value whole.
fn check_read(read: &ReadTxn) -> Result<(), String> {
    let t = read.open_table("t").map_err(|e| e.to_string())?;
    let (mut total, mut keys) = (0, 0);
    for entry in t.iter().map_err(|e| e.to_string())? {
        let (_, v) = entry.map_err(|e| e.to_string())?;
        total += amount(v)?;
        keys += 1;
    }
    if (keys, total) != (KEYS, KEYS * EACH) {
        return Err(format!(
            "commit {}: {keys} keys holding {total}",
            read.txid()
        ));
    }
    let big = read.open_table("big").map_err(|e| e.to_string())?;
    for entry in big.iter().map_err(|e| e.to_string())? {
        let (k, v) = entry.map_err(|e| e.to_string())?;
        if v.iter().any(|b| Some(b) != k.first()) {
            return Err(format!("commit {}: large value {k:?} torn", read.txid()));
        }
    }
    Ok(())
}

/// Opens `path` read-only: `None` when a writer's opening kept it waiting past its lock
/// timeout, where a writer may have died (`copies`); else a private copy is an error.
fn open_read_only(path: &Path, copies: bool) -> Result<Option<Database>, String> {
    let db = match Database::builder().read_only(true).open(path) {
        Ok(db) => db,
        // (A writer's opening recovering the file for longer than the lock timeout.)
        Err(Error::Locked { .. }) if copies => return Ok(None),
        Err(e) => return Err(format!("opening: {e}")),
    };
    if db.is_private_copy() && !copies {
        return Err("a private copy beside the live writer".into());
    }
    Ok(Some(db))
}

/// Opens `path` read-only until `stop`, checking each opening; returns how many. A
/// private copy is an error unless `copies` (a writer may have died).
fn open_until(path: &Path, stop: &dyn Fn() -> bool, copies: bool) -> Result<u64, String> {
    let mut openings = 0;
    while !stop() {
        let Some(db) = open_read_only(path, copies)? else {
            continue;
        };
        for _ in 0..3 {
            check_snapshot(&db).map_err(|e| {
                let txid = db.begin_read().map(|r| r.txid());
                format!(
                    "{e} (private copy: {}, newest read: {txid:?})",
                    db.is_private_copy()
                )
            })?;
        }
        if openings % 8 == 0 {
            let report = db.check().map_err(|e| format!("check: {e}"))?;
            if !report.is_ok() {
                return Err(format!("check: {:?}", report.problems));
            }
        }
        openings += 1;
    }
    Ok(openings)
}

/// Reads `path` through a read-only handle it keeps until `stop` (opened again after a
/// few reads when it is a private copy, which does not follow), checking each snapshot;
/// now and then it keeps a read transaction open while later ones begin, for up to
/// 20 ms, and checks it again before letting it go. Returns how many snapshots it read.
/// A handle that opened a commit holds no pin between its read transactions: the writer
/// after a crash must not reuse its pages meanwhile (`db::after_crash`).
fn follow_until(path: &Path, stop: &dyn Fn() -> bool, copies: bool) -> Result<u64, String> {
    let mut rng = StdRng::seed_from_u64(rand::random());
    let mut reads = 0;
    while !stop() {
        let Some(db) = open_read_only(path, copies)? else {
            continue;
        };
        let mut held: Option<(ReadTxn, Instant)> = None;
        let follows = if db.is_private_copy() { 3 } else { 500 };
        for _ in 0..follows {
            if stop() {
                break;
            }
            let read = db.begin_read().map_err(|e| format!("following: {e}"))?;
            check_read(&read).map_err(|e| format!("following: {e}"))?;
            reads += 1;
            if let Some((old, since)) = held.take() {
                if since.elapsed() < Duration::from_millis(20) {
                    held = Some((old, since));
                } else {
                    check_read(&old).map_err(|e| format!("held while following: {e}"))?;
                }
            }
            if held.is_none() && rng.random_ratio(1, 8) {
                held = Some((read, Instant::now()));
            }
            if rng.random_ratio(1, 16) {
                std::thread::sleep(Duration::from_millis(rng.random_range(1..5)));
            }
        }
        if let Some((old, _)) = held {
            check_read(&old).map_err(|e| format!("held while following: {e}"))?;
        }
    }
    Ok(reads)
}

/// The second process: opens the file read-only for the seconds given, over and over.
#[test]
fn opener_child() -> Result<(), String> {
    let Ok(role) = std::env::var(ROLE) else {
        return Ok(());
    };
    let (path, secs) = role.split_once('|').ok_or("role: PATH|SECONDS")?;
    let until = Instant::now() + Duration::from_secs(secs.parse().map_err(|_| "seconds")?);
    let openings = open_until(Path::new(path), &|| Instant::now() >= until, false)?;
    println!("opener process: {openings} openings");
    Ok(())
}

/// A writer process of the test below: opens the file and commits until it is killed.
#[test]
fn writer_child() -> Result<(), Error> {
    let Ok(role) = std::env::var(WRITER_ROLE) else {
        return Ok(());
    };
    let (path, seed) = role.split_once('|').unwrap_or((&role, "0"));
    let db = Database::builder()
        .lock_timeout(Duration::from_secs(10))
        .open(path)?;
    let mut rng = StdRng::seed_from_u64(seed.parse().unwrap_or(0));
    loop {
        transaction(&db, &mut rng)?;
        if rng.random_ratio(1, 300) {
            db.compact()?;
        }
    }
}

/// One transaction of the writer's: amounts moved between keys of `t`, a large value put
/// or removed; one in fifty rolled back.
fn transaction(db: &Database, rng: &mut StdRng) -> Result<bool, Error> {
    let mut w = db.begin_write()?;
    if rng.random_bool(0.6) {
        w.set_durability(Durability::Eventual);
    }
    let mut t = w.open_table("t")?;
    for _ in 0..rng.random_range(1..5) {
        let (a, b) = (rng.random_range(0..KEYS), rng.random_range(0..KEYS));
        let from = t.get(&a.to_be_bytes())?.map(amount);
        let to = t.get(&b.to_be_bytes())?.map(amount);
        if let (Some(Ok(from)), Some(Ok(to)), true) = (from, to, a != b) {
            let moved = rng.random_range(0..=from.min(10));
            t.insert(&a.to_be_bytes(), &with_padding(from - moved, rng.random()))?;
            t.insert(&b.to_be_bytes(), &with_padding(to + moved, rng.random()))?;
        }
    }
    let mut big = w.open_table("big")?;
    let k: u8 = rng.random_range(0..16);
    if rng.random_bool(0.5) {
        big.insert(&[k], &vec![k; rng.random_range(100..12_000)])?;
    } else {
        big.remove(&[k])?;
    }
    if rng.random_ratio(1, 50) {
        w.rollback();
        return Ok(false);
    }
    w.commit()?;
    Ok(true)
}

#[test]
fn read_only_openings_beside_a_busy_writer_see_whole_commits()
-> Result<(), Box<dyn std::error::Error>> {
    let seed = seed();
    eprintln!("openings_beside_writer: CAIRN_SEED={seed}");
    let secs = seconds();
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("busy.cairn");
    let db = create(&path)?;

    let openers = Openers::start(&path, false);
    let child = Command::new(std::env::current_exe()?)
        .args(["--exact", "opener_child", "--nocapture", "--test-threads=1"])
        .env(ROLE, format!("{}|{secs}", path.display()))
        .stdout(std::process::Stdio::piped())
        .spawn();
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut commits, mut compactions) = (0, 0);
    let started = Instant::now();
    let mut writing = Ok(());
    while started.elapsed() < Duration::from_secs(secs) {
        let step = transaction(&db, &mut rng).and_then(|committed| {
            commits += u64::from(committed);
            if rng.random_ratio(1, 300) {
                db.compact()?;
                compactions += 1;
            }
            if rng.random_ratio(1, 100) {
                db.sync()?;
            }
            Ok(())
        });
        if let Err(e) = step {
            writing = Err(e);
            break;
        }
    }
    let (openings, reads, mut failures) = openers.stop();
    let child = child?.wait_with_output()?;
    let said = String::from_utf8_lossy(&child.stdout);
    if !child.status.success() {
        failures.push(format!("the opener process: {said}"));
    }
    writing?;
    assert!(failures.is_empty(), "seed {seed}: {failures:?}");
    let check = db.check()?;
    assert!(check.is_ok(), "{:?}", check.problems);
    eprintln!(
        "{commits} commits, {compactions} compactions; {openings} openings and {reads} reads \
         through a kept handle in the writer's process; {}",
        said.lines()
            .find(|l| l.contains("opener process"))
            .unwrap_or("")
    );
    assert!(commits > 100 && openings > 10 && reads > 10);
    Ok(())
}

/// Writer processes killed at random moments (20 to 320 ms after starting, one in three
/// 2 to 40 ms) and started again, while threads of this process open the file read-only over and over and check
/// what they read. A new writer that applies a killed one's log discards the commits after
/// the one it opens, which a reader may hold: until the forty-eighth session it overwrote
/// their pages under the reader, and a reader that opened one kept it after the new
/// writer committed under the same id (checksum errors and wrong values within seconds).
/// Until the forty-ninth session a writer killed while applying the log left its pages
/// under a reader that had opened the newest commit and held no pin when the writer
/// opened (test `db::after_crash`). That may have been the page of zeros a reader met
/// where a tree page was, once in thirty-two runs of 60 s, for which this ran only when
/// asked until then: the window, between the dying writer's page writes and its slot's,
/// is microseconds wide, and neither early kills nor a kept handle met it in twelve runs
/// of 60 s at the engine before the fix.
#[test]
fn read_only_openings_across_killed_writers_see_whole_commits()
-> Result<(), Box<dyn std::error::Error>> {
    let seed = seed();
    eprintln!("openings_across_killed_writers: CAIRN_SEED={seed}");
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("killed.cairn");
    let db = create(&path)?;
    db.close()?;
    let openers = Openers::start(&path, true);
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let mut kills = 0;
    while started.elapsed() < Duration::from_secs(seconds()) {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["--exact", "writer_child", "--nocapture", "--test-threads=1"])
            .env(
                WRITER_ROLE,
                format!("{}|{}", path.display(), rng.random::<u64>()),
            )
            .stdout(std::process::Stdio::null())
            .spawn()?;
        // One writer in three dies young: before, in or soon after its opening, which
        // applies the log of the one before.
        let life = if rng.random_ratio(1, 3) {
            rng.random_range(2..40)
        } else {
            rng.random_range(20..320)
        };
        std::thread::sleep(Duration::from_millis(life));
        child.kill()?;
        child.wait()?;
        kills += 1;
    }
    let (openings, reads, failures) = openers.stop();
    assert!(failures.is_empty(), "seed {seed}: {failures:?}");
    let db = Database::open(&path)?;
    check_snapshot(&db).map_err(std::io::Error::other)?;
    let check = db.check()?;
    assert!(check.is_ok(), "{:?}", check.problems);
    eprintln!("{kills} writers killed; {openings} openings; {reads} reads through kept handles");
    assert!(kills > 2 && openings > 10 && reads > 10);
    Ok(())
}
