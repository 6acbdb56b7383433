//! Lexical state carried across a script: whether the text so far ends inside a quoted
//! string or a comment, and where statements end. Used by the parser to skip a broken
//! statement, and by the shell to tell an unfinished statement and a dot-command line.

/// What the bytes fed so far leave open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LexState {
    quote: Option<u8>,
    escaped: bool,
    comment: bool,
    dash: bool,
}

impl LexState {
    /// Takes one byte; returns whether it ends a statement (a `;` or new line outside
    /// quotes; a new line also ends a comment).
    pub fn step(&mut self, b: u8) -> bool {
        if self.comment {
            self.comment = b != b'\n';
            return b == b'\n';
        }
        if let Some(q) = self.quote {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == q {
                self.quote = None;
            }
            return false;
        }
        let dash = self.dash;
        self.dash = b == b'-';
        match b {
            b'\'' | b'"' => self.quote = Some(b),
            b'-' if dash => {
                self.comment = true;
                self.dash = false;
            }
            b';' | b'\n' => return true,
            _ => {}
        }
        false
    }

    /// Takes several bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.step(b);
        }
    }

    /// Whether the text so far ends inside a quoted string: the statement is unfinished.
    pub fn in_quote(&self) -> bool {
        self.quote.is_some()
    }
}

/// Whether `src` ends inside a quoted string.
pub fn unclosed_quote(src: &str) -> bool {
    let mut s = LexState::default();
    s.feed(src.as_bytes());
    s.in_quote()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_escapes_and_comments() {
        assert!(!unclosed_quote("PUT 'a' 'b'"));
        assert!(unclosed_quote("PUT 'a"));
        assert!(!unclosed_quote("PUT 'it''s'"));
        assert!(unclosed_quote("PUT 'a\\'"));
        assert!(!unclosed_quote("PUT 'a\\\\'"));
        assert!(!unclosed_quote("GET 1 -- it's a comment"));
        assert!(unclosed_quote("GET 'x -- not a comment"));
        assert!(!unclosed_quote("PUT \"a'b\" x'00'"));
        let mut s = LexState::default();
        let ends: Vec<bool> = b"a;'b;'\n-- c;\nd".iter().map(|&b| s.step(b)).collect();
        let at: Vec<usize> = ends
            .iter()
            .enumerate()
            .filter(|(_, e)| **e)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(at, vec![1, 6, 12]);
    }
}
