//! A writer process and a read-only reader process on one file: the reader follows the
//! writer's commits and only ever sees committed states, including in snapshots it keeps
//! open while the writer reuses pages.
//!
//! The test runs this same test binary a second time as the writer (selected by an
//! environment variable), so that the two really are separate processes.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use cairn_engine::{Database, Durability, Error, ReadTxn};

const KEYS: u64 = 300;
const ROLE: &str = "CAIRN_TWO_PROCESSES_WRITER";

fn key(i: u64) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Every key holds the round that wrote it, padded so that each round rewrites many pages.
fn value(round: u64) -> Vec<u8> {
    let mut v = round.to_be_bytes().to_vec();
    v.resize(400, (round % 251) as u8);
    v
}

/// The writer's side: rounds of commits until `seconds` have passed; every round rewrites
/// every key, alternating durable and eventual commits, so that pages are freed and
/// reused all the time; every tenth round compacts online.
fn write_rounds(path: &Path, seconds: u64) -> Result<(), Error> {
    let db = Database::open(path)?;
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut round = 1;
    while Instant::now() < deadline {
        let mut txn = db.begin_write()?;
        if round % 2 == 0 {
            txn.set_durability(Durability::Eventual);
        }
        let mut t = txn.open_table("t")?;
        for i in 0..KEYS {
            t.insert(&key(i), &value(round))?;
        }
        txn.commit()?;
        if round % 10 == 0 {
            // Online compaction moves pages and shrinks the file under the reader's map:
            // only pages no pinned snapshot sees may go.
            db.compact()?;
        }
        round += 1;
    }
    Ok(())
}

#[test]
fn writer_child() -> Result<(), Error> {
    // Run only as the child of the test below.
    let Ok(path) = std::env::var(ROLE) else {
        return Ok(());
    };
    write_rounds(Path::new(&path), 3)
}

fn spawn_writer(path: &Path) -> std::io::Result<Child> {
    Command::new(std::env::current_exe()?)
        .args(["--exact", "writer_child", "--nocapture", "--test-threads=1"])
        .env(ROLE, path)
        .spawn()
}

/// The round every key of a new snapshot holds; an error if they differ.
fn snapshot_round(db: &Database) -> Result<u64, String> {
    round_of(&db.begin_read().map_err(|e| e.to_string())?)
}

/// The round every key of snapshot `read` holds; an error if they differ (a mixed state)
/// or a page is damaged (reused while the snapshot could see it).
fn round_of(read: &ReadTxn) -> Result<u64, String> {
    let table = read.open_table("t").map_err(|e| e.to_string())?;
    let mut round = None;
    for entry in table.iter().map_err(|e| e.to_string())? {
        let (k, v) = entry.map_err(|e| e.to_string())?;
        let r = v
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
            .ok_or("short value")?;
        if v != value(r) || *round.get_or_insert(r) != r {
            return Err(format!("mixed or damaged state at {k:?}"));
        }
    }
    round.ok_or_else(|| "empty table".into())
}

/// Creates the file with table `t` holding every key at round 0, with a commit log of
/// `log_size` bytes (the default when `None`), and closes it.
fn create_at_round_zero(path: &Path, log_size: Option<u64>) -> Result<(), Error> {
    let mut builder = Database::builder();
    if let Some(bytes) = log_size {
        builder = builder.log_size(bytes);
    }
    let db = builder.create(path)?;
    let mut txn = db.begin_write()?;
    txn.create_table("t")?;
    for i in 0..KEYS {
        txn.open_table("t")?.insert(&key(i), &value(0))?;
    }
    txn.commit()?;
    db.close()
}

#[test]
fn a_reader_process_sees_only_committed_states_of_a_writer_process() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("shared.cairn");
    create_at_round_zero(&path, None)?;
    let reader = Database::builder().read_only(true).open(&path)?;
    let mut writer = spawn_writer(&path)?;

    let (mut last, mut rounds_seen, mut snapshots, mut openings) = (0, 0, 0, 0);
    let started = Instant::now();
    let mut outcome = Ok(());
    let mut locked_out = false;
    while started.elapsed() < Duration::from_secs(4) {
        // Once the writer process has committed, it holds the file: a writable open here
        // waits out its timeout and names that process.
        if last > 0 && !locked_out {
            let tried = Instant::now();
            match Database::builder()
                .lock_timeout(Duration::from_millis(200))
                .open(&path)
            {
                Err(Error::Locked { path: p, pid }) => {
                    assert_eq!((p, pid), (path.clone(), Some(writer.id())));
                }
                other => panic!("expected Locked, got {other:?}"),
            }
            assert!(tried.elapsed() >= Duration::from_millis(200));
            locked_out = true;
        }
        // A long snapshot: read it, let the writer go on for a while, read it again. Its
        // pages must not be reused meanwhile.
        let long = reader.begin_read()?;
        let first = round_of(&long);
        for _ in 0..20 {
            match (snapshot_round(&reader), first.as_ref()) {
                (Ok(r), Ok(&f)) if r >= f && r >= last => {
                    if r > last {
                        rounds_seen += 1;
                        last = r;
                    }
                    snapshots += 1;
                }
                (r, f) => {
                    outcome = Err(format!("snapshot {r:?} after {f:?}, last {last}"));
                    break;
                }
            }
        }
        let again = round_of(&long);
        if again != first {
            outcome = Err(format!("a held snapshot changed: {first:?} then {again:?}"));
        }
        // A fresh read-only opening beside the busy writer: recovery verifies the newest
        // commit while the writer may reuse pages (it pins that commit first).
        match Database::builder().read_only(true).open(&path) {
            Ok(fresh) => match snapshot_round(&fresh) {
                Ok(r) if r >= last => openings += 1,
                other => outcome = Err(format!("a fresh opening read {other:?}, last {last}")),
            },
            Err(e) => outcome = Err(format!("a fresh opening failed: {e}")),
        }
        if outcome.is_err() {
            break;
        }
    }
    let status = writer.wait()?;
    assert!(status.success(), "the writer process failed: {status}");
    assert!(
        locked_out,
        "the writer process committed nothing while watched"
    );
    if let Err(e) = outcome {
        panic!("{e}");
    }
    assert!(snapshots > 100, "{snapshots} snapshots checked");
    assert!(openings > 10, "{openings} fresh openings");
    assert!(
        rounds_seen > 5,
        "the reader followed the writer's commits: saw {rounds_seen} rounds"
    );
    // After the writer is gone, the reader sees its last commit.
    let final_round = snapshot_round(&reader).map_err(std::io::Error::other)?;
    assert!(final_round >= last);
    Ok(())
}

const ROUNDS_ROLE: &str = "CAIRN_TWO_PROCESSES_ROUNDS";
const DIES_ROLE: &str = "CAIRN_TWO_PROCESSES_DIES";

/// The child of the test below: opens the file, rewrites every key in each of the rounds
/// `CAIRN_TWO_PROCESSES_ROUNDS` names (`first..last`), durably, and closes it; with
/// `CAIRN_TWO_PROCESSES_DIES`, with Eventual commits, and exits without closing it.
#[test]
fn rounds_child() -> Result<(), Error> {
    let (Ok(path), Ok(rounds)) = (std::env::var(ROLE), std::env::var(ROUNDS_ROLE)) else {
        return Ok(());
    };
    let dies = std::env::var(DIES_ROLE).is_ok();
    let (first, last) = rounds.split_once("..").unwrap_or(("0", "0"));
    let (first, last): (u64, u64) = (first.parse().unwrap_or(0), last.parse().unwrap_or(0));
    let db = Database::builder().eventual_sync(None).open(&path)?;
    for round in first..last {
        let mut txn = db.begin_write()?;
        if dies {
            txn.set_durability(Durability::Eventual);
        }
        let mut t = txn.open_table("t")?;
        for i in 0..KEYS {
            t.insert(&key(i), &value(round))?;
        }
        txn.commit()?;
    }
    if dies {
        std::process::exit(0);
    }
    db.close()
}

/// A reader process holds a snapshot while one writer process rewrites every key and
/// closes, and then another opens the file and does the same: neither may reuse a page of
/// the held snapshot, the second no more than the first (its opening finds the pages the
/// first freed listed as free). And the same where the first dies after Eventual commits
/// without a log (the second's opening walks the trees for the free pages).
#[test]
fn a_later_writer_process_reuses_no_page_an_older_snapshot_elsewhere_sees() -> Result<(), Error> {
    for dies in [false, true] {
        a_later_writer_keeps_an_older_snapshot(dies)?;
    }
    Ok(())
}

fn a_later_writer_keeps_an_older_snapshot(dies: bool) -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("held.cairn");
    create_at_round_zero(&path, dies.then_some(0))?;
    let reader = Database::builder().read_only(true).open(&path)?;
    let held = reader.begin_read()?;
    assert_eq!(round_of(&held), Ok(0));
    for (rounds, first) in [("1..6", true), ("6..11", false)] {
        let mut child = Command::new(std::env::current_exe()?);
        child
            .args(["--exact", "rounds_child", "--nocapture", "--test-threads=1"])
            .env(ROLE, &path)
            .env(ROUNDS_ROLE, rounds);
        if dies && first {
            child.env(DIES_ROLE, "1");
        }
        let status = child.status()?;
        assert!(status.success(), "the writer of rounds {rounds} failed");
        assert_eq!(round_of(&held), Ok(0), "dies {dies}: after rounds {rounds}");
    }
    assert_eq!(snapshot_round(&reader), Ok(10));
    Ok(())
}

const HOLDER_ROLE: &str = "CAIRN_TWO_PROCESSES_HOLDER";

/// The child of the test below: opens the file for writing, opens and drops a read-only
/// handle on it besides (closing its descriptors), says so, and holds the file until its
/// standard input closes.
#[test]
fn holder_child() -> Result<(), Error> {
    let Ok(path) = std::env::var(HOLDER_ROLE) else {
        return Ok(());
    };
    let db = Database::open(&path)?;
    drop(Database::builder().read_only(true).open(&path)?);
    println!("holding");
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
    db.close()
}

/// Closing any descriptor of a file drops its process's POSIX locks on it, so once the
/// writer's process had closed a read-only handle's, other processes asking for the
/// writer's POSIX byte found no writer (until the forty-eighth session): salvage read the
/// file beside the live writer. Whether a writer holds the file is now its `flock`.
#[test]
fn a_writer_that_closed_another_handle_is_still_seen() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("held.cairn");
    create_at_round_zero(&path, None)?;
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--exact", "holder_child", "--nocapture", "--test-threads=1"])
        .env(HOLDER_ROLE, &path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    // (The test harness prints the test's name and then its output on the same line.)
    let mut out = child.stdout.take().map(std::io::BufReader::new);
    let holding = out.as_mut().is_some_and(|out| {
        std::io::BufRead::lines(out)
            .map_while(Result::ok)
            .any(|line| line.ends_with("holding"))
    });
    let salvaged = cairn_engine::salvage(&path, &mut |_| Ok(()));
    let refused = matches!(salvaged, Err(Error::Locked { .. }));
    drop(child.stdin.take());
    if let Some(out) = out.as_mut() {
        std::io::Read::read_to_end(out, &mut Vec::new())?;
    }
    let status = child.wait()?;
    assert!(holding && status.success(), "the child held the file");
    assert!(refused, "salvage beside the writer: {salvaged:?}");
    Ok(())
}

const KILLED_ROLE: &str = "CAIRN_TWO_PROCESSES_KILLED";

/// The child of the test below: opens the file for writing, commits twenty durable
/// single puts (each in the commit log only), says so, and waits to be killed.
#[test]
fn killed_child() -> Result<(), Error> {
    let Ok(path) = std::env::var(KILLED_ROLE) else {
        return Ok(());
    };
    let db = Database::open(&path)?;
    for i in 0..20 {
        let mut txn = db.begin_write()?;
        txn.open_table("t")?.insert(&key(i * 13), &value(100 + i))?;
        txn.commit()?;
    }
    println!("committed");
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
    Ok(())
}

/// Keys and values.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Every entry of table `t` in snapshot `read`.
fn entries(read: &ReadTxn) -> Result<Entries, Error> {
    read.open_table("t")?
        .iter()?
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect()
}

/// A writer process is killed after commits that only its log holds; a reader process
/// holds a snapshot of the last of them. The next writer opens the file at the durable
/// commit before them and applies the log as a commit of its own, on pages of its own
/// choosing: until the forty-eighth session it took the pages free in the durable commit
/// and past its end, some of which the killed writer's commits had used, and the held
/// snapshot read the new writer's data (checksum errors, or wrong values where its pages
/// had verified before).
#[test]
fn a_writer_after_a_killed_one_keeps_the_snapshot_a_reader_holds_of_it()
-> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("killed.cairn");
    create_at_round_zero(&path, None)?;
    let reader = Database::builder().read_only(true).open(&path)?;
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--exact", "killed_child", "--nocapture", "--test-threads=1"])
        .env(KILLED_ROLE, &path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let mut out = child.stdout.take().map(std::io::BufReader::new);
    let committed = out.as_mut().is_some_and(|out| {
        std::io::BufRead::lines(out)
            .map_while(Result::ok)
            .any(|line| line.ends_with("committed"))
    });
    let held = reader.begin_read();
    let before = match &held {
        Ok(read) => entries(read).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    child.kill()?;
    child.wait()?;
    assert!(committed, "the child committed");
    let held = held?;
    let before = before?;
    assert_eq!(before.len() as u64, KEYS);
    // The next writer, in this process: it applies the log, then rewrites every key.
    let db = Database::open(&path)?;
    for round in 200..205 {
        let mut txn = db.begin_write()?;
        let mut t = txn.open_table("t")?;
        for i in 0..KEYS {
            t.insert(&key(i), &value(round))?;
        }
        txn.commit()?;
    }
    let after = entries(&held)?;
    let changed = before.iter().zip(&after).filter(|(b, a)| b != a).count();
    assert!(
        changed == 0 && after.len() == before.len(),
        "the held snapshot changed: {changed} entries of {}",
        before.len()
    );
    drop(held);
    assert_eq!(snapshot_round(&reader), Ok(204));
    Ok(())
}
