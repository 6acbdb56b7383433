//! `cairn info FILE`: the header and both commit slots, without opening the database.

use anyhow::{Context, bail};
use cairn_engine::SlotInfo;

/// Runs `cairn info` with `args` (after `info`).
///
/// # Errors
/// Bad arguments, or a file whose header cannot be read.
pub fn main(args: &[String]) -> anyhow::Result<()> {
    let [file] = args else {
        bail!("usage: cairn info FILE");
    };
    let info = cairn_engine::inspect(file).with_context(|| format!("cannot read {file}"))?;
    println!("file            {file} ({} bytes)", info.len);
    println!("format version  {}", info.format_version);
    println!("page size       {}", info.page_size);
    for (i, slot) in info.slots.iter().enumerate() {
        match slot {
            SlotInfo::Valid {
                txid,
                durable_txid,
                page_count,
                catalog_page,
                freelist_page,
                freelist_len,
                log_page,
                log_pages,
                log_limit,
                logged,
            } => {
                let freelist = match (freelist_page, logged) {
                    (Some(page), _) => format!("freelist page {page} ({freelist_len} bytes)"),
                    (None, true) => "freelist in the writer's memory (a logged commit)".to_owned(),
                    (None, false) => "freelist in the writer's memory (an unlogged Eventual \
                                      commit: every page its trees do not use is free)"
                        .to_owned(),
                };
                let limit = match log_limit {
                    Some(pages) => format!(" (at most {pages}, as asked)"),
                    None => String::new(),
                };
                println!(
                    "slot {i}          commit {txid} (durable as of commit {durable_txid}), {page_count} pages, \
                     catalog root page {catalog_page}, {freelist}, commit log pages {log_page}+{log_pages}{limit}"
                )
            }
            SlotInfo::Invalid => {
                println!("slot {i}          empty, torn or damaged (checksum mismatch)")
            }
        }
    }
    match info.unapplied_commits {
        Some(0) => {}
        Some(n) => println!(
            "commit log      {n} commits not yet in the tree (its writer stopped before \
             applying them): opening the file applies them, read-only in memory"
        ),
        None => println!(
            "opening         fails: `cairn check` says why, `cairn recover` saves what it can"
        ),
    }
    Ok(())
}
