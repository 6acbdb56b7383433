//! Cairn against peer stores (issue 5).
