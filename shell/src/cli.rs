//! Command-line arguments: `cairn [OPTIONS] [FILE]`.
//!
//! Long options take one or two dashes (`-bail` as in sqlite3, or `--bail`).

use std::path::PathBuf;

use cairn_engine::Durability;

use crate::render::Mode;

/// Printed by `--help`.
pub const USAGE: &str = "\
Usage: cairn [OPTIONS] [FILE] [STATEMENTS...]
       cairn gen WORKLOAD... [OPTIONS]     write workload scripts (cairn gen --help)
       cairn bench RUN.cq... [OPTIONS]     run and measure them (cairn bench --help)
       cairn info FILE                     the file's header and commit slots
       cairn check FILE                    check every page of FILE, read-only (exit 1: problems)
       cairn recover FILE > SCRIPT         a script of what a damaged FILE still holds (exit 1: losses)
       cairn recover FILE NEW_FILE         the same, written into a new database
       cairn compact FILE                  compact FILE in place (readers may go on)
       cairn compact SRC DST               write a dense copy of SRC to DST

Opens FILE (created if missing), or an in-memory database when no FILE is given.
Reads statements from the terminal interactively, or from standard input as a batch,
running each as soon as its line has come. STATEMENTS after FILE run instead, as -c
runs them (cairn fruit.cairn \"GET 'apple'\"), as in sqlite3.

Options:
  -f, -file SCRIPT      run the statements in SCRIPT (may be repeated)
  -c, -cmd TEXT         run the statements in TEXT (may be repeated)
  -bail                 stop at the first statement that fails
  -echo                 print each line of input before running it
  -integers             print 8-byte keys and values that are not text as integers
  -readonly             open FILE read-only
  -txnmemory SIZE       memory a write transaction's changed pages may take before it
                        writes some to the file (bytes, or with K, M or G; default 512M)
  -logsize SIZE         the commit log's size (default: a new file's starts at 64K and
                        grows to 2M as durable commits fill it; 0: none for a new file,
                        every durable commit syncs it), which the file keeps for later
                        openings: a smaller log makes a smaller file and slower durable
                        commits
  -durability D         immediate (the default: a commit returns once it is on stable
                        storage) or eventual (a commit is atomic and visible at once,
                        and durable at the next sync: .sync, the background one within
                        seconds, or the end of the session; a crash may lose the last
                        ones, never part of one)
  -param NAME VALUE     bind the parameter :NAME to VALUE, a literal ('text', x'00ff',
                        42) as .param set takes it (may be repeated)
  -mode MODE            output mode: table, plain, csv, json or line
  -header, -noheader    print column names, or not
  -h, -help             print this help
  -V, -version          print the version

Ctrl-C stops the running statement (a SCAN, a COUNT, a .dump) and skips the rest of the
input; pressed again before the shell notices, it ends the shell.

Exit status: 0 when every statement succeeded, 1 when one failed, 2 on bad usage or a
file that cannot be opened, 130 when a batch was interrupted.";

/// Where statements come from, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    /// `-c TEXT`.
    Text(String),
    /// Statements given after FILE, without an option.
    Argument(String),
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Options {
    pub file: Option<PathBuf>,
    pub sources: Vec<Source>,
    pub bail: bool,
    /// `-echo`: print each line of input before running it.
    pub echo: bool,
    /// `-integers`: print 8-byte keys and values that are not text as integers.
    pub integers: bool,
    pub read_only: bool,
    /// `Builder::txn_memory`, when given.
    pub txn_memory: Option<usize>,
    /// `Builder::log_size`, when given.
    pub log_size: Option<u64>,
    /// `Builder::durability`, when given.
    pub durability: Option<Durability>,
    pub mode: Option<Mode>,
    pub headers: Option<bool>,
    /// `-param NAME VALUE`, in order: names and values as given.
    pub params: Vec<(String, String)>,
    pub help: bool,
    pub version: bool,
}

/// `immediate` or `eventual`, in any case.
pub fn parse_durability(text: &str) -> Option<Durability> {
    match text.to_ascii_lowercase().as_str() {
        "immediate" => Some(Durability::Immediate),
        "eventual" => Some(Durability::Eventual),
        _ => None,
    }
}

/// Parses the arguments after the program name.
///
/// # Errors
/// A message saying what is wrong with them.
pub fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let flag = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'));
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("option {name} needs a value"))
        };
        match flag {
            Some("f" | "file") => o.sources.push(Source::File(value(arg)?.into())),
            Some("c" | "cmd" | "command") => o.sources.push(Source::Text(value(arg)?)),
            Some("bail") => o.bail = true,
            Some("echo") => o.echo = true,
            Some("integers") => o.integers = true,
            Some("readonly" | "read-only") => o.read_only = true,
            Some("txnmemory" | "txn-memory") => {
                let size = value(arg)?;
                o.txn_memory = Some(parse_size(&size).ok_or_else(|| format!("bad size {size:?}"))?);
            }
            Some("logsize" | "log-size") => {
                let size = value(arg)?;
                let bytes = parse_size(&size).ok_or_else(|| format!("bad size {size:?}"))?;
                o.log_size = Some(bytes as u64);
            }
            Some("durability") => {
                let d = value(arg)?;
                o.durability =
                    Some(parse_durability(&d).ok_or_else(|| {
                        format!("unknown durability {d:?}: immediate or eventual")
                    })?);
            }
            Some("param" | "parameter") => {
                let name = value(arg)?;
                let literal = value(arg)?;
                o.params.push((name, literal));
            }
            Some("mode") => {
                let m = value(arg)?;
                o.mode = Some(Mode::parse(&m).ok_or_else(|| format!("unknown mode {m:?}"))?);
            }
            Some("header" | "headers") => o.headers = Some(true),
            Some("noheader" | "noheaders") => o.headers = Some(false),
            Some("h" | "help") => o.help = true,
            Some("V" | "version") => o.version = true,
            Some("") => o.sources.push(Source::File("/dev/stdin".into())),
            Some(_) => return Err(format!("unknown option {arg}")),
            None if o.file.is_none() => o.file = Some(arg.into()),
            // Statements after the file, as sqlite3 takes SQL there.
            None => o.sources.push(Source::Argument(arg.clone())),
        }
    }
    Ok(o)
}

/// A size in bytes: digits, then optionally K, M or G (powers of 1024; `KiB`, `MB` and the
/// like are read the same).
pub fn parse_size(text: &str) -> Option<usize> {
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let number: usize = text[..digits].parse().ok()?;
    let shift = match text[digits..].to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => return None,
    };
    number.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn options_in_both_spellings_and_sources_in_order() {
        let o = parse(&args(&[
            "db.cairn",
            "-bail",
            "--readonly",
            "-c",
            "GET 1",
            "-f",
            "x.cq",
            "-mode",
            "csv",
        ]));
        assert_eq!(
            o,
            Ok(Options {
                file: Some("db.cairn".into()),
                sources: vec![Source::Text("GET 1".into()), Source::File("x.cq".into())],
                bail: true,
                read_only: true,
                mode: Some(Mode::Csv),
                ..Options::default()
            })
        );
    }

    #[test]
    fn statements_after_the_file_run_as_with_c() {
        assert_eq!(
            parse(&args(&[
                "db.cairn", "PUT 1 2", "-f", "x.cq", "SCAN", "-bail"
            ])),
            Ok(Options {
                file: Some("db.cairn".into()),
                sources: vec![
                    Source::Argument("PUT 1 2".into()),
                    Source::File("x.cq".into()),
                    Source::Argument("SCAN".into()),
                ],
                bail: true,
                ..Options::default()
            })
        );
    }

    #[test]
    fn bad_usage_is_explained() {
        assert!(parse(&args(&["-x"])).is_err_and(|e| e.contains("unknown option -x")));
        assert!(parse(&args(&["-c"])).is_err_and(|e| e.contains("needs a value")));
        assert!(parse(&args(&["-mode", "fancy"])).is_err_and(|e| e.contains("unknown mode")));
        for bad in ["", "M", "12X", "-1", "99999999999999999999G", "1.5G"] {
            assert!(
                parse(&args(&["-txnmemory", bad])).is_err_and(|e| e.contains("bad size")),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn sizes_take_binary_suffixes() {
        for (text, bytes) in [
            ("4096", 4096),
            ("64K", 64 << 10),
            ("64kib", 64 << 10),
            ("512M", 512 << 20),
            ("2GB", 2 << 30),
            ("7b", 7),
        ] {
            let o = parse(&args(&["--txn-memory", text]));
            assert_eq!(o.map(|o| o.txn_memory), Ok(Some(bytes)), "{text}");
            let o = parse(&args(&["-logsize", text]));
            assert_eq!(o.map(|o| o.log_size), Ok(Some(bytes as u64)), "{text}");
        }
    }
}
