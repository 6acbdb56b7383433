//! Killed writers: a child process commits in a loop, printing each acknowledged commit
//! (Immediate or Eventual: a process that dies loses neither, its writes are in the
//! operating system's cache); the parent kills it (SIGKILL) at a random moment, reopens the
//! file (read-only, then for writing), and checks that the file passes `check()` and holds
//! every acknowledged commit. Kills alternate between a child of mostly Immediate commits
//! and one of mostly Eventual ones, most of them unlogged (since the forty-fifth session). Some kills land while the child is still opening, during recovery of the
//! previous kill; others while a child is creating the file. The child compacts online beside its commits (since the fortieth
//! session), so kills land in compaction steps too.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn_engine::{Database, Durability, Error};
use cairn_tests::{scale, seed};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const CHILD: &str = "CAIRN_KILLED_WRITER_CHILD";
const CREATOR: &str = "CAIRN_KILLED_CREATOR_CHILD";

/// The file whose child commits mostly Eventual: runs of 49 between Immediate ones, with a
/// 16 KiB commit log, whose cycle they fill, so that most go unlogged and leave their free
/// set implied until the next sync.
const EVENTUAL_FILE: &str = "eventual.cairn";

/// The child: commit `n` writes key `n` (and rewrites a few others), then prints `n`,
/// whatever its durability (a killed process loses no acknowledged commit: its writes are
/// in the operating system's cache); a thread compacts the database online all the while.
fn child(path: &str) -> Result<(), Error> {
    let eventual_runs = path.ends_with(EVENTUAL_FILE);
    let mut builder = Database::builder().page_size(1024);
    if eventual_runs {
        builder = builder.log_size(16 << 10);
        // In half the lives (by the process id's parity) the background sync every 10 ms,
        // put off to 40 while commits come, so that kills land in its steps too; in the
        // others every second, as by default, so that more land among unlogged commits.
        if std::process::id().is_multiple_of(2) {
            builder = builder.eventual_sync(Some(Duration::from_millis(10)));
        }
    }
    let db = builder.create(path)?;
    let mut w = db.begin_write()?;
    if !w.table_exists("t")? {
        w.create_table("t")?;
    }
    let start = w.open_table("t")?.len();
    w.commit()?;
    // Online compaction beside the commits, so that kills land in its steps too (the
    // rewritten keys free pages for it to fill). Not beside the Eventual runs: its durable
    // steps would sync them every few milliseconds.
    let compactor = db.clone();
    std::thread::spawn(move || {
        loop {
            if !eventual_runs && compactor.compact().is_ok_and(|r| r.steps > 0) {
                println!("compacted");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    for n in start.. {
        let mut w = db.begin_write()?;
        let eventual = if eventual_runs {
            n % 50 != 0
        } else {
            n % 3 == 0
        };
        w.set_durability(if eventual {
            Durability::Eventual
        } else {
            Durability::Immediate
        });
        let mut t = w.open_table("t")?;
        t.insert(&n.to_be_bytes(), &vec![n as u8; (n % 700) as usize])?;
        for k in 0..3u64 {
            t.insert(&(1_000_000 + (n + k) % 50).to_be_bytes(), &n.to_be_bytes())?;
        }
        w.commit()?;
        println!("{n}");
    }
    Ok(())
}

#[test]
fn killed_writers_lose_no_acknowledged_commit() -> Result<(), Box<dyn std::error::Error>> {
    if let Ok(path) = std::env::var(CHILD) {
        child(&path)?;
        return Ok(());
    }
    let mut rng = SmallRng::seed_from_u64(seed("killed_writer"));
    let dir = tempfile::tempdir()?;
    // Kills alternate between a child of mostly Immediate commits and one of mostly
    // Eventual ones, each on its own file.
    let paths = [
        dir.path().join("killed.cairn"),
        dir.path().join(EVENTUAL_FILE),
    ];
    let kills = scale("CAIRN_KILLS", 20);
    let mut newest: [Option<u64>; 2] = [None, None];
    let (mut compactions, mut read_only_copies) = (0, 0);
    for kill in 0..kills {
        let path = &paths[kill % 2];
        let acknowledged = &mut newest[kill % 2];
        let mut child = spawn("killed_writers_lose_no_acknowledged_commit", CHILD, path)?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let wait = Duration::from_millis(rng.random_range(0..300));
        let deadline = Instant::now() + wait;
        let reader = std::thread::spawn(move || {
            let (mut last, mut compacted) = (None, 0);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(n) = line.trim().parse::<u64>() {
                    last = Some(n);
                } else if line.trim() == "compacted" {
                    compacted += 1;
                }
            }
            (last, compacted)
        });
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill()?;
        child.wait()?;
        let (last, compacted) = reader.join().map_err(|_| "reader thread")?;
        if let Some(n) = last {
            *acknowledged = (*acknowledged).max(Some(n));
        }
        compactions += compacted;
        if !path.exists() {
            continue;
        }
        // Read-only first (it writes nothing: a private copy where the log holds commits
        // to apply): it holds every acknowledged commit too.
        if let Some(n) = *acknowledged {
            let ro = Database::builder().read_only(true).open(path)?;
            let r = ro.begin_read()?;
            assert!(
                r.open_table("t")?.get(&n.to_be_bytes())?.is_some(),
                "kill {kill}: acknowledged commit {n} missing read-only"
            );
            read_only_copies += usize::from(ro.is_private_copy());
        }
        let db = Database::open(path)?;
        let report = db.check()?;
        assert!(report.is_ok(), "kill {kill}: {:?}", report.problems);
        if let Some(n) = *acknowledged {
            let r = db.begin_read()?;
            let t = r.open_table("t")?;
            assert!(
                t.get(&n.to_be_bytes())?.is_some(),
                "kill {kill}: acknowledged commit {n} lost"
            );
        }
    }
    eprintln!(
        "{kills} kills; newest acknowledged commits {newest:?} (mostly Immediate, mostly \
         Eventual); {compactions} online compactions that moved pages; {read_only_copies} \
         read-only openings applied the log to a private copy; 0 lost, 0 failing check()"
    );
    assert!(
        newest.iter().all(|n| n.is_some_and(|n| n > 10)),
        "the writers got some work done"
    );
    Ok(())
}

/// Spawns this test binary running `test` as a child, with `var` set to `path`.
fn spawn(test: &str, var: &str, path: &std::path::Path) -> std::io::Result<std::process::Child> {
    Command::new(std::env::current_exe()?)
        .args(["--exact", test, "--nocapture"])
        .env(var, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
}

#[test]
fn a_creator_killed_leaves_no_file_or_a_whole_database() -> Result<(), Box<dyn std::error::Error>> {
    const TEST: &str = "a_creator_killed_leaves_no_file_or_a_whole_database";
    if let Ok(path) = std::env::var(CREATOR) {
        // Says when it starts creating, so that the parent's kill lands in the creation.
        println!("creating");
        std::io::Write::flush(&mut std::io::stdout())?;
        let db = Database::builder().page_size(1024).create(&path)?;
        println!("created");
        drop(db);
        std::thread::sleep(Duration::from_secs(60));
        return Ok(());
    }
    let mut rng = SmallRng::seed_from_u64(seed("killed_creator"));
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("created.cairn");
    let (mut absent, mut whole) = (0, 0);
    for kill in 0..scale("CAIRN_KILLS", 20) {
        if path.exists() {
            std::fs::remove_file(&path)?;
        }
        let mut child = spawn(TEST, CREATOR, &path)?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        // The test harness prints its own lines first.
        let mut lines = BufReader::new(stdout).lines();
        while lines
            .next()
            .transpose()?
            .ok_or("the child did not start creating")?
            != "creating"
        {}
        std::thread::sleep(Duration::from_micros(rng.random_range(0..15_000)));
        child.kill()?;
        child.wait()?;
        if !path.exists() {
            absent += 1;
            continue;
        }
        let db = Database::open(&path).map_err(|e| format!("kill {kill}: {e}"))?;
        let report = db.check()?;
        assert!(report.is_ok(), "kill {kill}: {:?}", report.problems);
        whole += 1;
    }
    eprintln!("killed creators: {absent} left no file, {whole} a whole database");
    let leftovers = std::fs::read_dir(dir.path())?.count() - usize::from(path.exists());
    eprintln!("{leftovers} new files left by killed creators");
    Ok(())
}
