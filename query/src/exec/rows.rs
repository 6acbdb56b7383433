//! Reading rows for a statement: from a read snapshot or from the write transaction,
//! over a range whose bounds come from the statement's literals and the session's
//! parameters, watching the session's interrupt flag.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};

use cairn_engine::{Range, Table, TableMut, prefix_end};

use crate::ast::{KeyRange, Literal, LiteralBytes};
use crate::error::ExecError;

type Result<T> = std::result::Result<T, ExecError>;

/// The reads a statement needs, from a read snapshot or from the write transaction.
pub(super) trait Reader {
    fn get(&self, key: &[u8]) -> cairn_engine::Result<Option<&[u8]>>;
    fn range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> cairn_engine::Result<Range<'_>>;
    fn len(&self) -> u64;
}

impl Reader for Table<'_> {
    fn get(&self, key: &[u8]) -> cairn_engine::Result<Option<&[u8]>> {
        Table::get(self, key)
    }
    fn range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> cairn_engine::Result<Range<'_>> {
        Table::range::<[u8], _>(self, (lo, hi))
    }
    fn len(&self) -> u64 {
        Table::len(self)
    }
}

impl Reader for TableMut<'_> {
    fn get(&self, key: &[u8]) -> cairn_engine::Result<Option<&[u8]>> {
        TableMut::get(self, key)
    }
    fn range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> cairn_engine::Result<Range<'_>> {
        TableMut::range::<[u8], _>(self, (lo, hi))
    }
    fn len(&self) -> u64 {
        TableMut::len(self)
    }
}

/// How many rows a statement produces between looks at its session's interrupt flag.
pub(super) const ROWS_PER_LOOK: u64 = 256;

/// A range's lower and upper bounds.
type KeyBounds<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

/// The bytes of a [`KeyRange`]'s literals, from which its bounds are borrowed.
pub(super) struct RangeKeys<'a> {
    start: Option<LiteralBytes<'a>>,
    end: Option<LiteralBytes<'a>>,
    prefix: Option<LiteralBytes<'a>>,
    prefix_end: Option<Vec<u8>>,
}

/// A session's parameters: name (without the colon) to bytes.
pub(super) type Params = BTreeMap<String, Vec<u8>>;

/// The bytes of `literal`, a parameter's from `params`.
pub(super) fn bytes<'a>(literal: &'a Literal, params: &'a Params) -> Result<LiteralBytes<'a>> {
    literal
        .bytes_with(params)
        .map_err(|name| ExecError::UnboundParameter(name.to_owned()))
}

/// The number of rows `LIMIT` stands for: an integer, or bytes bound to a parameter that
/// are one (8, big-endian, as an integer literal stores them).
pub(super) fn rows_limit(literal: &Literal, params: &Params) -> Result<u64> {
    if let Literal::Int(n) = literal {
        return Ok(*n);
    }
    let bytes = bytes(literal, params)?;
    let eight: [u8; 8] = (*bytes)
        .try_into()
        .map_err(|_| ExecError::LimitNotAnInteger(literal.to_string(), bytes.len()))?;
    Ok(u64::from_be_bytes(eight))
}

impl<'a> RangeKeys<'a> {
    pub(super) fn of(range: &'a KeyRange, params: &'a Params) -> Result<RangeKeys<'a>> {
        let one = |l: &'a Option<Literal>| l.as_ref().map(|l| bytes(l, params)).transpose();
        // (In the order they are written: an error names the first unbound parameter.)
        let (start, end, prefix) = (one(&range.start)?, one(&range.end)?, one(&range.prefix)?);
        Ok(RangeKeys {
            start,
            end,
            prefix_end: prefix.as_deref().and_then(prefix_end),
            prefix,
        })
    }

    /// `[start, end)` intersected with `[prefix, prefix_end)`; `None` when that is empty.
    pub(super) fn bounds(&self) -> Option<KeyBounds<'_>> {
        let lo = match (self.start.as_deref(), self.prefix.as_deref()) {
            (Some(s), Some(p)) => Bound::Included(s.max(p)),
            (Some(b), None) | (None, Some(b)) => Bound::Included(b),
            (None, None) => Bound::Unbounded,
        };
        let hi = match (self.end.as_deref(), self.prefix_end.as_deref()) {
            (Some(e), Some(p)) => Bound::Excluded(e.min(p)),
            (Some(b), None) | (None, Some(b)) => Bound::Excluded(b),
            (None, None) => Bound::Unbounded,
        };
        match (lo, hi) {
            (Bound::Included(l), Bound::Excluded(h)) if l >= h => None,
            bounds => Some(bounds),
        }
    }
}

/// Runs `f` over the rows of `range` in `t`, forward or reverse, at most `limit` of them;
/// stops with [`ExecError::Interrupted`] when `interrupt` is raised (looked at before the
/// first row and every [`ROWS_PER_LOOK`] rows).
pub(super) fn for_each_row(
    t: &dyn Reader,
    keys: &RangeKeys<'_>,
    reverse: bool,
    limit: Option<u64>,
    interrupt: &AtomicBool,
    f: &mut dyn FnMut(&[u8], &[u8]),
) -> Result<u64> {
    let Some((lo, hi)) = keys.bounds() else {
        return Ok(0);
    };
    let rows = t.range(lo, hi)?;
    let rows: Box<dyn Iterator<Item = _>> = if reverse {
        Box::new(rows.rev())
    } else {
        Box::new(rows)
    };
    let mut n = 0;
    for row in rows.take(usize::try_from(limit.unwrap_or(u64::MAX)).unwrap_or(usize::MAX)) {
        if n % ROWS_PER_LOOK == 0 && interrupt.load(Ordering::Relaxed) {
            return Err(ExecError::Interrupted);
        }
        let (k, v) = row?;
        f(k, v);
        n += 1;
    }
    Ok(n)
}
