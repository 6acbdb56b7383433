//! Cairn's query language: a script of statements (`PUT`, `GET`, `DELETE`, `SCAN`,
//! `COUNT`, `BEGIN`/`COMMIT`/`ROLLBACK`, tables), parsed with positioned errors and run
//! against a [`cairn_engine::Database`].
//!
//! The executor returns data and never prints. The grammar: `docs/language.md`.
//!
//! ```
//! use cairn_engine::Database;
//! use cairn_query::{Session, parse_script};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut session = Session::new(Database::in_memory()?)?;
//! let script = parse_script("PUT 'a' 'apple'; PUT 'b' x'00ff'\nSCAN");
//! assert!(script.errors.is_empty());
//! let mut rows = Vec::new();
//! for stmt in &script.statements {
//!     rows = session.execute(&stmt.statement)?.rows;
//! }
//! assert_eq!(rows[0], (b"a".to_vec(), b"apple".to_vec()));
//! # Ok(())
//! # }
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod ast;
mod error;
mod exec;
mod lexer;
mod parser;
mod print;

pub use ast::{KeyRange, Literal, LiteralBytes, Located, Span, Statement};
pub use error::{ExecError, ParseError, Position, render, render_from_line};
pub use exec::{DEFAULT_TABLE, Outcome, Output, Session};
pub use lexer::{LexState, unclosed_quote};
pub use parser::{
    KEYWORDS, Limits, Script, parse_bytes, parse_bytes_with, parse_literal, parse_script,
    parse_script_with,
};
pub use print::{as_integer, display_bytes, is_printable};

/// The README's examples (engine and language), compiled and run as doc tests.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
