//! The Cairn query language: parser and executor over `cairn-engine`.
//!
//! Not built yet (issue 3); the crate exists so that the workspace layout is fixed.
