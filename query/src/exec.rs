//! The executor: runs parsed statements against a database and returns what they
//! produced, as data. It never prints.
//!
//! Outside `BEGIN … COMMIT` each statement is its own transaction (reads take a read
//! snapshot, not the write lock). Inside, every statement works on the one write
//! transaction and sees its writes; a statement that fails leaves it open and unchanged.
//! Inside `BEGIN READ … COMMIT` every statement reads one snapshot, and statements that
//! write fail.

mod outcome;
mod rows;
mod session;
#[cfg(test)]
mod tests;

pub use outcome::{Outcome, Output};
pub use session::{DEFAULT_TABLE, Session};
