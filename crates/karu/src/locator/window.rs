//! Windows: `/vsisubfile/OFFSET[_LENGTH],<inner>` and `#bytes=FIRST-[LAST]`, and how they
//! compose.
//!
//! Invariant kept by every function here: a bounded window's end (`offset + length`) fits in
//! a `u64`, so later range arithmetic never has to guard against it.

use super::{Inner, Window, uri, uri_error};
use crate::error::Result;

/// How many `/vsisubfile/` levels may be nested.
pub(super) const MAX_SUBFILE_DEPTH: usize = 16;

const SUBFILE: &str = "/vsisubfile/";

/// Parses `s`, which sits inside `depth` levels of `/vsisubfile/`.
pub(super) fn parse_nested(s: &str, depth: usize) -> Result<Inner> {
    let Some(rest) = s.strip_prefix(SUBFILE) else {
        return uri::parse_terminal(s);
    };
    if depth == MAX_SUBFILE_DEPTH {
        return Err(uri_error(format!(
            "/vsisubfile/ nesting exceeds {MAX_SUBFILE_DEPTH} levels"
        )));
    }
    // The offset and length never contain a comma, so the first one ends them; the inner
    // URI may contain more.
    let Some((spec, inner)) = rest.split_once(',') else {
        return Err(uri_error("/vsisubfile/ wants OFFSET[_LENGTH],<uri>"));
    };
    if inner.is_empty() {
        return Err(uri_error("/vsisubfile/ has no inner URI"));
    }
    let (offset, length) = parse_subfile_spec(spec)?;
    let mut parsed = parse_nested(inner, depth + 1)?;
    parsed.window = apply_window(parsed.window, offset, length)?;
    Ok(parsed)
}

/// `OFFSET`, `OFFSET_LENGTH`, or GDAL's `OFFSET_-N` (to the end; N is checked, then ignored).
fn parse_subfile_spec(spec: &str) -> Result<(u64, Option<u64>)> {
    let Some((offset, length)) = spec.split_once('_') else {
        return Ok((byte_count(spec)?, None));
    };
    let offset = byte_count(offset)?;
    match length.strip_prefix('-') {
        Some(n) if digits(n).is_some() => Ok((offset, None)),
        Some(_) => Err(uri_error("negative subfile length is malformed")),
        None => Ok((offset, Some(byte_count(length)?))),
    }
}

/// Splits a `#bytes=` window off a terminal URI. Only the last `#` counts, and only when its
/// fragment starts with `bytes=`; any other fragment stays part of the URI.
pub(super) fn split_fragment(s: &str) -> Result<(&str, Window)> {
    let Some(hash) = s.rfind('#') else {
        return Ok((s, Window::default()));
    };
    let Some(range) = s[hash + 1..].strip_prefix("bytes=") else {
        return Ok((s, Window::default()));
    };
    let Some((first, last)) = range.split_once('-') else {
        return Err(uri_error("#bytes= wants FIRST-LAST"));
    };
    if first.is_empty() {
        // A suffix range (`-N`, "the last N bytes") needs the object size; not a window.
        return Err(uri_error("#bytes= wants FIRST-LAST"));
    }
    let first = byte_count(first)?;
    let length = if last.is_empty() {
        None
    } else {
        let last = byte_count(last)?;
        if last < first {
            return Err(uri_error("#bytes= ends before it starts"));
        }
        // LAST is inclusive: its end, LAST + 1, must fit in a u64.
        let end = last
            .checked_add(1)
            .ok_or_else(|| uri_error("#bytes= range is too large"))?;
        Some(end - first)
    };
    let window = apply_window(Window::default(), first, length)?;
    Ok((&s[..hash], window))
}

/// Selects `[offset, offset + length)` of `parent`, in the parent's coordinates: offsets add,
/// and the child is clipped to what the parent has left.
pub(super) fn apply_window(parent: Window, offset: u64, length: Option<u64>) -> Result<Window> {
    let length = match parent.length {
        None => length,
        Some(room) => {
            let left = room
                .checked_sub(offset)
                .ok_or_else(|| uri_error("window starts past the end of its parent"))?;
            Some(length.map_or(left, |l| l.min(left)))
        }
    };
    let overflow = || uri_error("window offset overflows");
    let offset = parent.offset.checked_add(offset).ok_or_else(overflow)?;
    let window = Window { offset, length };
    if length.is_some() && window.end().is_none() {
        return Err(overflow());
    }
    Ok(window)
}

/// A decimal byte count: ASCII digits only (no sign, no spaces) that fit in a `u64`.
fn byte_count(s: &str) -> Result<u64> {
    digits(s).ok_or_else(|| uri_error(format!("'{s}' is not a byte count")))
}

fn digits(s: &str) -> Option<u64> {
    // `u64::from_str` alone would also take a leading `+`.
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}
