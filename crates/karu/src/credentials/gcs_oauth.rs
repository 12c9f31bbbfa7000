//! Google OAuth exchanges (spec §5.9): form posts to token endpoints and the rules for their
//! answers — `access_token`, and `expires_in` as a number or a string, 3600 s by default and
//! never under 60 s.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::Method;
use serde_json::Value;
use url::form_urlencoded;

use super::http::{Answer, CONNECT_TIMEOUT, Call};
use super::{LoadContext, Resolved};
use crate::config::Credentials;
use crate::error::{Error, Result, Status};

/// Lifetime assumed when an answer gives none.
const DEFAULT_LIFETIME: u64 = 3600;
/// Shortest lifetime believed, so a token is never treated as expiring at once.
const MIN_LIFETIME: u64 = 60;

/// A `Credentials` error for `ctx.path`.
pub(super) fn failure(ctx: &LoadContext, why: impl std::fmt::Display) -> Error {
    Error::new(Status::Credentials, format!("{}: {why}", ctx.path))
}

/// POSTs `pairs` as `application/x-www-form-urlencoded` to `url`.
pub(super) fn post_form(ctx: &LoadContext, url: &str, pairs: &[(&str, &str)]) -> Result<Answer> {
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    let call = Call::new(Method::POST, url).body("application/x-www-form-urlencoded", body);
    ctx.http.send(call, CONNECT_TIMEOUT, ctx.deadline)
}

/// The JSON body of a 2xx answer; other statuses are "credential endpoint returned HTTP <n>".
/// A body that is not JSON reads as `null`, so the caller reports the missing field.
pub(super) fn json_body(ctx: &LoadContext, answer: &Answer) -> Result<Value> {
    if !(200..300).contains(&answer.status) {
        return Err(failure(
            ctx,
            format_args!("credential endpoint returned HTTP {}", answer.status),
        ));
    }
    Ok(serde_json::from_slice(&answer.body).unwrap_or(Value::Null))
}

/// A bearer token from an OAuth answer (`access_token`, `expires_in`).
pub(super) fn bearer(ctx: &LoadContext, answer: &Answer) -> Result<Resolved> {
    let body = json_body(ctx, answer)?;
    let token = non_empty(&body, "access_token")
        .ok_or_else(|| failure(ctx, "credential response has no access_token"))?;
    let lifetime = expires_in(&body["expires_in"]);
    Ok(with_bearer(token, SystemTime::now() + lifetime))
}

/// Credentials holding bearer `token` until `expires_at`.
pub(super) fn with_bearer(token: &str, expires_at: SystemTime) -> Resolved {
    Resolved::new(Credentials {
        bearer_token: token.to_owned(),
        expires_at: Some(expires_at),
        ..Credentials::default()
    })
}

/// The string field `name` of a JSON object, when present and not empty.
pub(super) fn non_empty<'a>(v: &'a Value, name: &str) -> Option<&'a str> {
    v[name].as_str().filter(|s| !s.is_empty())
}

/// `expires_in` as a JSON number or a decimal string; 3600 s when absent or unreadable, and
/// at least 60 s.
fn expires_in(v: &Value) -> Duration {
    let secs = match v {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().map(|f| f.max(0.0) as u64))
            .unwrap_or(0),
        Value::String(s) => s.trim().parse::<u64>().unwrap_or(DEFAULT_LIFETIME),
        _ => DEFAULT_LIFETIME,
    };
    Duration::from_secs(secs.max(MIN_LIFETIME))
}

/// Parses an RFC 3339 UTC time such as `2026-01-02T03:04:05Z` or with fractional seconds
/// and a numeric offset (`...05.123+01:00`), as impersonation answers' `expireTime`.
pub(super) fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let s = text.get(range)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    let mut rest = &text[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && (rest.starts_with('+') || rest.starts_with('-')) => {
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            let hh: i64 = rest.get(1..3)?.parse().ok()?;
            let mm: i64 = rest.get(4..6)?.parse().ok()?;
            sign * (hh * 3600 + mm * 60)
        }
        _ => return None,
    };
    // Days since 1970-01-01 of a proleptic Gregorian date.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset;
    u64::try_from(secs)
        .ok()
        .map(|s| UNIX_EPOCH + Duration::from_secs(s))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn lifetimes() {
        let secs = |v: Value| expires_in(&v).as_secs();
        assert_eq!(secs(json!(1234)), 1234);
        assert_eq!(secs(json!("1234")), 1234);
        assert_eq!(secs(json!(" 99 ")), 99);
        assert_eq!(secs(json!(12.7)), 60);
        assert_eq!(secs(json!(5)), 60);
        assert_eq!(secs(json!(-5)), 60);
        assert_eq!(secs(json!("soon")), 3600);
        assert_eq!(secs(Value::Null), 3600);
        assert_eq!(secs(json!(true)), 3600);
    }

    #[test]
    fn rfc3339_times() {
        let at =
            |s: &str| parse_rfc3339(s).map(|t| t.duration_since(UNIX_EPOCH).unwrap().as_secs());
        assert_eq!(at("2015-08-30T12:36:00Z"), Some(1_440_938_160));
        assert_eq!(at("2015-08-30T12:36:00.123456Z"), Some(1_440_938_160));
        assert_eq!(at("2015-08-30T14:36:00+02:00"), Some(1_440_938_160));
        assert_eq!(at("2015-08-30T11:06:00-01:30"), Some(1_440_938_160));
        assert_eq!(at("2000-02-29T00:00:00Z"), Some(951_782_400));
        assert_eq!(at("1970-01-01T00:00:00Z"), Some(0));
        for bad in [
            "",
            "2015-08-30",
            "2015-08-30 12:36:00Z",
            "2015-13-30T12:36:00Z",
            "2015-08-30T12:36:00",
            "2015-08-30T12:36:00+0200",
            "1969-12-31T23:59:59Z",
            "2015-0x-30T12:36:00Z",
        ] {
            assert_eq!(at(bad), None, "{bad}");
        }
    }
}
