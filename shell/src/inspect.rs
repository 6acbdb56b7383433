//! The dot-commands that inspect the database file: `.stats [TABLE]`, `.pages`, `.page N`
//! and `.check`.

use std::io::Write;

use crate::shell::cell;
use cairn_engine::PageInfo;

use crate::dot::print_rows;
use crate::render::Cell;
use crate::shell::Shell;

pub fn stats(shell: &mut Shell, table: Option<&str>) -> Result<String, String> {
    let s = shell
        .session
        .database()
        .stats()
        .map_err(|e| e.to_string())?;
    if let Some(name) = table {
        let t = s
            .by_table
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| format!("no table named {name:?}"))?;
        let rows = vec![
            ("entries", t.entries.to_string()),
            ("depth", t.depth.to_string()),
            ("branch pages", t.branch_pages.to_string()),
            ("leaf pages", t.leaf_pages.to_string()),
            ("overflow pages", t.overflow_pages.to_string()),
            ("fill factor", format!("{:.3}", t.fill_factor)),
        ];
        return print_statistics(shell, &rows);
    }
    let rows: Vec<(&str, String)> = vec![
        ("commit", s.txid.to_string()),
        ("page size", s.page_size.to_string()),
        ("file size", s.file_size.to_string()),
        ("pages", s.page_count.to_string()),
        ("tables", s.tables.to_string()),
        ("entries", s.entries.to_string()),
        ("depth", s.depth.to_string()),
        ("branch pages", s.branch_pages.to_string()),
        ("leaf pages", s.leaf_pages.to_string()),
        ("overflow pages", s.overflow_pages.to_string()),
        ("freelist pages", s.freelist_pages.to_string()),
        ("commit log pages", s.log_pages.to_string()),
        (
            "commit log limit",
            match (s.log_limit_pages, s.log_pages) {
                (Some(pages), _) => format!("{pages} pages, as asked"),
                // (In memory, or a file an earlier build made without one.)
                (None, 0) => "none: no commit log".into(),
                (None, _) => "the default, 2 MiB (up to 16 MiB for large records)".into(),
            },
        ),
        ("free pages", s.free_pages.to_string()),
        ("fill factor", format!("{:.3}", s.fill_factor)),
        (
            "oldest reader",
            match (s.oldest_reader_txid, s.oldest_reader_age) {
                (Some(txid), Some(age)) => format!("commit {txid}, for {:.1} s", age.as_secs_f64()),
                (Some(txid), None) => format!("commit {txid}, in another process"),
                (None, _) => "none".into(),
            },
        ),
        (
            "pages pinned by readers",
            s.pages_pinned_by_readers.to_string(),
        ),
        ("pages awaiting a sync", s.pages_awaiting_sync.to_string()),
        // Since the shell opened the database (`Builder::txn_memory`, `-txnmemory`).
        (
            "pages spilled",
            shell
                .session
                .database()
                .io_stats()
                .pages_spilled
                .to_string(),
        ),
    ];
    print_statistics(shell, &rows)
}

/// Prints `(statistic, value)` rows.
fn print_statistics(shell: &mut Shell, rows: &[(&str, String)]) -> Result<String, String> {
    crate::dot::print_pairs(shell, &["statistic", "value"], rows)
}

pub fn pages(shell: &mut Shell) -> Result<String, String> {
    let pages = shell
        .session
        .database()
        .pages()
        .map_err(|e| e.to_string())?;
    let rows = runs(&pages)
        .map(|p| {
            [
                Cell::Number(p.page),
                Cell::Text(p.kind.into()),
                Cell::Text(p.owner.as_str().into()),
                Cell::Number(p.items),
                Cell::Text(format!("{:.0}%", p.fill * 100.0).into()),
            ]
        })
        .collect();
    print_rows(shell, &["page", "kind", "tree", "items", "fill"], rows)
}

/// `pages` with each run of pages (the commit log, a large value's overflow run, the
/// freelist: each of their pages counts the run's pages as its items) given by its first
/// page alone: a 2 MiB log is one row, not 512.
fn runs(pages: &[PageInfo]) -> impl Iterator<Item = &PageInfo> {
    let mut run_end = None;
    pages.iter().filter(move |p| {
        let is_run = matches!(p.kind, "log" | "overflow" | "freelist");
        if let Some((kind, end)) = run_end
            && is_run
            && p.kind == kind
            && p.page < end
        {
            return false;
        }
        run_end = is_run.then(|| (p.kind, p.page.saturating_add(p.items.max(1))));
        true
    })
}

pub fn page(shell: &mut Shell, n: u64) -> Result<String, String> {
    let dump = shell
        .session
        .database()
        .page(n)
        .map_err(|e| e.to_string())?;
    writeln!(
        shell.out,
        "page {}: {}, written by commit {}",
        dump.page, dump.kind, dump.txid
    )
    .map_err(|e| e.to_string())?;
    let integers = shell.settings.integers;
    let rows = dump
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| match e {
            cairn_engine::PageEntry::Leaf {
                key,
                value,
                overflow,
            } => [
                Cell::Number(i as u64),
                cell(key, integers),
                match (value, overflow) {
                    (Some(v), _) => cell(v, integers),
                    (None, Some(p)) => Cell::Text(format!("(overflow run at page {p})").into()),
                    (None, None) => Cell::Text("".into()),
                },
            ],
            cairn_engine::PageEntry::Branch { key, child } => [
                Cell::Number(i as u64),
                key.as_deref()
                    .map_or_else(|| Cell::Text("(leftmost)".into()), |k| cell(k, integers)),
                Cell::Text(format!("child page {child}").into()),
            ],
        })
        .collect();
    print_rows(shell, &["entry", "key", "value"], rows)
}

pub fn check(shell: &mut Shell) -> Result<String, String> {
    let report = shell
        .session
        .database()
        .check()
        .map_err(|e| e.to_string())?;
    if report.is_ok() {
        return Ok(format!(
            "ok: {} pages, {} entries",
            report.pages_checked, report.entries
        ));
    }
    let problems: Vec<String> = report.problems.iter().map(ToString::to_string).collect();
    let hint = match shell.session.database().path() {
        Some(file) => format!("\n{}", crate::recover::hint(&file.display().to_string())),
        None => String::new(),
    };
    Err(format!(
        "{} problems found:\n{}{hint}",
        problems.len(),
        problems.join("\n")
    ))
}

#[cfg(test)]
mod tests {
    use super::runs;
    use cairn_engine::PageInfo;

    fn page(page: u64, kind: &'static str, owner: &str, items: u64) -> PageInfo {
        PageInfo {
            page,
            kind,
            owner: owner.into(),
            items,
            fill: 0.0,
        }
    }

    /// A run is one row at its first page, two adjacent runs of one length and tree two
    /// rows; pages that are not runs (free ones, leaves) each keep their row.
    #[test]
    fn each_run_of_pages_is_one_row_at_its_first_page() {
        let mut pages = vec![page(0, "header", "", 0), page(1, "header", "", 0)];
        pages.extend((2..6).map(|p| page(p, "log", "", 4)));
        pages.extend((6..10).map(|p| page(p, "overflow", "t", 2)));
        pages.extend([
            page(10, "free", "", 0),
            page(11, "free", "", 0),
            page(12, "leaf", "t", 3),
            page(13, "freelist", "", 1),
            page(14, "overflow", "t", 1),
            page(15, "overflow", "u", 1),
        ]);
        let rows: Vec<(u64, &str)> = runs(&pages).map(|p| (p.page, p.kind)).collect();
        assert_eq!(
            rows,
            [
                (0, "header"),
                (1, "header"),
                (2, "log"),
                (6, "overflow"),
                (8, "overflow"),
                (10, "free"),
                (11, "free"),
                (12, "leaf"),
                (13, "freelist"),
                (14, "overflow"),
                (15, "overflow"),
            ]
        );
    }
}
