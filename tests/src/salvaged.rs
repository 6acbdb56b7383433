//! What `cairn_engine::salvage` hands over, collected: the tables it rebuilds (the commit
//! log's changes applied) and the parts it reports lost.

use std::collections::BTreeMap;
use std::path::Path;

use cairn_engine::{Error, Lost, SalvageReport, Salvaged};

/// Tables by name, each its entries.
pub type Tables = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

/// A salvage's result, collected.
#[derive(Debug)]
pub struct Collected {
    pub tables: Tables,
    /// The losses, in the order they were handed over.
    pub lost: Vec<Lost>,
    pub report: SalvageReport,
}

/// Salvages the file at `path` and collects what it hands over.
///
/// # Errors
/// The salvage's.
pub fn salvage(path: &Path) -> Result<Collected, Error> {
    let mut tables = Tables::new();
    let mut lost = Vec::new();
    let mut current = String::new();
    let report = cairn_engine::salvage(path, &mut |s| {
        match s {
            Salvaged::Table(name) => {
                name.clone_into(&mut current);
                tables.entry(current.clone()).or_default();
            }
            Salvaged::Entry(k, v) => {
                let table = tables.entry(current.clone()).or_default();
                table.insert(k.to_vec(), v.to_vec());
            }
            Salvaged::Lost(l) => lost.push(l.clone()),
            Salvaged::Put { table, key, value } => {
                let table = tables.entry(table.to_owned()).or_default();
                table.insert(key.to_vec(), value.to_vec());
            }
            Salvaged::Delete { table, key } => {
                tables.entry(table.to_owned()).or_default().remove(key);
            }
            Salvaged::Created(name) => {
                tables.entry(name.to_owned()).or_default();
            }
            Salvaged::Dropped(name) => {
                tables.remove(name);
            }
            _ => {}
        }
        Ok(())
    })?;
    Ok(Collected {
        tables,
        lost,
        report,
    })
}
