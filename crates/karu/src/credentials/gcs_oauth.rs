//! Google OAuth exchanges (spec §5.9): form posts to token endpoints and the rules for their
//! answers — `access_token`, and `expires_in` as a number or a string, 3600 s by default and
//! never under 60 s.

use std::time::{Duration, SystemTime};

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
}
