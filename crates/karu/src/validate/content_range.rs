//! A strict parser for the `Content-Range` response header (RFC 9110 §14.4), bytes unit only.
//!
//! Strict because a range answer is how Karu proves it got the bytes it asked for: anything
//! that is not exactly `bytes F-L/T`, `bytes F-L/*` or `bytes */T` is refused rather than
//! guessed at.

use std::fmt;

/// A satisfied byte range: `bytes first-last/total`, `total` being `None` for `*`.
///
/// Invariants of a parsed value: `first <= last`, the length `last - first + 1` fits in a
/// `u64`, and a known total is above `last` (so never 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ContentRange {
    /// Object offset of the first byte sent.
    pub(crate) first: u64,
    /// Object offset of the last byte sent (inclusive).
    pub(crate) last: u64,
    /// Size of the whole object, when the server knows it.
    pub(crate) total: Option<u64>,
}

impl ContentRange {
    /// Number of bytes the range holds.
    pub(crate) fn len(&self) -> u64 {
        // Cannot overflow for parsed values: `parse` refuses `0-18446744073709551615`.
        self.last - self.first + 1
    }
}

impl fmt::Display for ContentRange {
    /// Formats the value as the header would carry it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.total {
            Some(t) => write!(f, "bytes {}-{}/{}", self.first, self.last, t),
            None => write!(f, "bytes {}-{}/*", self.first, self.last),
        }
    }
}

/// Parses `bytes F-L/T` or `bytes F-L/*`; `None` for anything else, including the unsatisfied
/// form `bytes */T` (see [`parse_unsatisfied`]), numbers with signs, spaces or overflow,
/// `L < F`, a total of 0, `L >= T`, and a range whose length does not fit in a `u64`.
pub(crate) fn parse(value: &str) -> Option<ContentRange> {
    let rest = strip_unit(value)?;
    let (range, total) = rest.split_once('/')?;
    let (first, last) = range.split_once('-')?;
    let first = number(first)?;
    let last = number(last)?;
    let total = if total == "*" {
        None
    } else {
        Some(number(total)?)
    };
    if last < first || (first == 0 && last == u64::MAX) {
        return None;
    }
    if let Some(t) = total
        && last >= t
    {
        return None;
    }
    Some(ContentRange { first, last, total })
}

/// Parses the unsatisfied form `bytes */T` (sent with a 416) and returns `T`, which may be 0.
pub(crate) fn parse_unsatisfied(value: &str) -> Option<u64> {
    number(strip_unit(value)?.strip_prefix("*/")?)
}

/// Drops optional surrounding whitespace and the `bytes ` unit (case-insensitive, as range
/// units are), returning what follows the single space.
fn strip_unit(value: &str) -> Option<&str> {
    let value = value.trim_matches([' ', '\t']);
    let unit = value.get(..6)?;
    if !unit.eq_ignore_ascii_case("bytes ") {
        return None;
    }
    Some(&value[6..])
}

/// A non-empty run of ASCII digits that fits in a `u64`; `str::parse` alone would accept `+`.
fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cr(first: u64, last: u64, total: Option<u64>) -> Option<ContentRange> {
        Some(ContentRange { first, last, total })
    }

    #[test]
    fn accepts_the_two_satisfied_forms() {
        assert_eq!(parse("bytes 0-0/1"), cr(0, 0, Some(1)));
        assert_eq!(parse("bytes 10-19/100"), cr(10, 19, Some(100)));
        assert_eq!(parse("bytes 10-19/*"), cr(10, 19, None));
        assert_eq!(parse("Bytes 1-2/3"), cr(1, 2, Some(3)));
        assert_eq!(parse(" bytes 1-2/3\t"), cr(1, 2, Some(3)));
        assert_eq!(parse("bytes 007-8/9"), cr(7, 8, Some(9)));
        let max = u64::MAX;
        assert_eq!(
            parse(&format!("bytes 1-{}/{max}", max - 1)),
            cr(1, max - 1, Some(max))
        );
        assert_eq!(parse(&format!("bytes 1-{max}/*")), cr(1, max, None));
    }

    #[test]
    fn rejects_everything_else() {
        for bad in [
            "",
            "bytes",
            "bytes ",
            "bytes 0-0",
            "bytes 0-0/",
            "bytes -0/1",
            "bytes 0-/1",
            "bytes +0-1/2",
            "bytes 0-+1/2",
            "bytes 0-1/+2",
            "bytes -1-1/2",
            "bytes 0 -1/2",
            "bytes 0- 1/2",
            "bytes 0-1 /2",
            "bytes 0-1/ 2",
            "bytes  0-1/2",
            "bytes0-1/2",
            "bits 0-1/2",
            "bytes=0-1/2",
            "bytes 0-1/2/3",
            "bytes 0-1-2/3",
            "bytes 0x1-2/3",
            "bytes 2-1/3",
            "bytes 0-0/0",
            "bytes 0-5/5",
            "bytes 0-6/5",
            "bytes */5",
            "bytes 0-1/**",
            "bytes 0-18446744073709551616/*",
            "bytes 0-1/18446744073709551616",
            "bytes 0-18446744073709551615/*",
            "bytes 1-2/3, bytes 4-5/6",
            "bytes ١-٢/٣",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn unsatisfied_form() {
        assert_eq!(parse_unsatisfied("bytes */0"), Some(0));
        assert_eq!(parse_unsatisfied("bytes */1234"), Some(1234));
        assert_eq!(parse_unsatisfied("BYTES */7 "), Some(7));
        for bad in [
            "bytes */",
            "bytes */*",
            "bytes * /5",
            "bytes */+5",
            "bytes */-5",
            "bytes 0-0/5",
            "bytes */18446744073709551616",
            "*/5",
        ] {
            assert_eq!(parse_unsatisfied(bad), None, "{bad:?}");
        }
    }

    fn valid() -> impl Strategy<Value = ContentRange> {
        (any::<u64>(), any::<u64>(), any::<Option<u64>>()).prop_filter_map(
            "not a valid range",
            |(a, b, t)| {
                let (first, last) = (a.min(b), a.max(b));
                if first == 0 && last == u64::MAX {
                    return None;
                }
                let total = match t {
                    None => None,
                    Some(t) => Some(t.max(last.checked_add(1)?)),
                };
                Some(ContentRange { first, last, total })
            },
        )
    }

    proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = parse(&s);
            let _ = parse_unsatisfied(&s);
        }

        #[test]
        fn round_trips(v in valid()) {
            prop_assert_eq!(parse(&v.to_string()), Some(v));
            prop_assert_eq!(v.len(), v.last - v.first + 1);
        }

        #[test]
        fn unsatisfied_round_trips(t in any::<u64>()) {
            prop_assert_eq!(parse_unsatisfied(&format!("bytes */{t}")), Some(t));
        }

        #[test]
        fn garbage_is_rejected(s in "[^0-9]*") {
            // Without a digit there is no number, so nothing may be accepted.
            prop_assert_eq!(parse(&s), None);
            prop_assert_eq!(parse_unsatisfied(&s), None);
        }

        #[test]
        fn damaged_values_are_rejected(v in valid(), junk in "[ +\\-a-z/,]", at in any::<prop::sample::Index>()) {
            // Inserting a separator, sign or letter anywhere after the unit breaks the value.
            let mut s = v.to_string();
            let pos = 6 + at.index(s.len() - 6);
            s.insert_str(pos, &junk);
            let inner_space_at_end = junk == " " && pos == s.len() - 1;
            if !inner_space_at_end {
                prop_assert_eq!(parse(&s), None, "{}", s);
            }
        }
    }
}
