//! ISO 8601 instants as credential endpoints and helpers write them
//! (`2026-11-29T16:47:39Z`, with optional fractional seconds and a `±HH:MM` offset).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Parses `YYYY-MM-DDTHH:MM:SS[.fff][Z|±HH:MM|±HHMM]`; `None` for anything else. A missing
/// zone means UTC, as the AWS tools write it.
pub(crate) fn parse(text: &str) -> Option<SystemTime> {
    let s = text.trim().as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let digits = s.get(from..from + len)?;
        digits.iter().try_fold(0i64, |acc, &b| {
            b.is_ascii_digit().then(|| acc * 10 + i64::from(b - b'0'))
        })
    };
    let sep = |at: usize, want: &[u8]| s.get(at).is_some_and(|b| want.contains(b));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }

    let mut at = 19;
    let mut nanos = 0u32;
    if sep(at, b".,") {
        at += 1;
        let start = at;
        while s.get(at).is_some_and(u8::is_ascii_digit) {
            if at - start < 9 {
                nanos = nanos * 10 + u32::from(s[at] - b'0');
            }
            at += 1;
        }
        if at == start {
            return None;
        }
        nanos *= 10u32.pow(9u32.saturating_sub((at - start) as u32));
    }
    let offset = match s.get(at..) {
        Some([] | [b'Z' | b'z']) => 0,
        Some([sign @ (b'+' | b'-'), rest @ ..]) => {
            let (h, m) = match rest {
                [_, _, b':', _, _] => (num(at + 1, 2)?, num(at + 4, 2)?),
                [_, _, _, _] => (num(at + 1, 2)?, num(at + 3, 2)?),
                [_, _] => (num(at + 1, 2)?, 0),
                _ => return None,
            };
            if h > 23 || m > 59 {
                return None;
            }
            let secs = h * 3600 + m * 60;
            if *sign == b'+' { secs } else { -secs }
        }
        _ => return None,
    };

    let secs =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
    let whole = Duration::from_secs(secs.unsigned_abs());
    let base = if secs >= 0 {
        UNIX_EPOCH.checked_add(whole)?
    } else {
        UNIX_EPOCH.checked_sub(whole)?
    };
    base.checked_add(Duration::from_nanos(nanos.into()))
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> Option<SystemTime> {
        Some(UNIX_EPOCH + Duration::from_secs(secs))
    }

    #[test]
    fn utc_forms() {
        assert_eq!(parse("1970-01-01T00:00:00Z"), at(0));
        assert_eq!(parse("2026-11-29T16:47:39Z"), at(1_795_970_859));
        assert_eq!(parse(" 2026-11-29t16:47:39z "), at(1_795_970_859));
        assert_eq!(parse("2026-11-29 16:47:39"), at(1_795_970_859));
        assert_eq!(parse("2000-02-29T00:00:00Z"), at(951_782_400));
    }

    #[test]
    fn fractions_and_offsets() {
        assert_eq!(
            parse("2026-11-29T16:47:39.250Z"),
            at(1_795_970_859).map(|t| t + Duration::from_millis(250))
        );
        assert_eq!(
            parse("2026-11-29T16:47:39.1234567891Z"),
            at(1_795_970_859).map(|t| t + Duration::from_nanos(123_456_789))
        );
        assert_eq!(parse("2026-11-29T18:47:39+02:00"), at(1_795_970_859));
        assert_eq!(parse("2026-11-29T15:17:39-0130"), at(1_795_970_859));
        assert_eq!(parse("2026-11-29T17:47:39+01"), at(1_795_970_859));
        assert_eq!(
            parse("1969-12-31T23:59:59Z"),
            UNIX_EPOCH.checked_sub(Duration::from_secs(1))
        );
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "soon",
            "2026-11-29",
            "2026-11-29T16:47Z",
            "2026-13-01T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-11-31T00:00:00Z",
            "2026-11-29T24:00:00Z",
            "2026-11-29T16:47:39.Z",
            "2026-11-29T16:47:39+2",
            "2026-11-29T16:47:39 UTC",
            "2026-11-29T16:47:39+25:00",
            "+026-11-29T16:47:39Z",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
