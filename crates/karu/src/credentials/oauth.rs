//! Token exchanges of the GCS and Azure chains (spec §5.9): calls to token endpoints and the
//! rules for their answers — a 2xx JSON body with `access_token`, and `expires_in` as a
//! number or a string, 3600 s by default and never under 60 s.

use std::time::{Duration, SystemTime};

use http::Method;
use serde_json::Value;
use url::form_urlencoded;

use super::http::{Answer, CONNECT_TIMEOUT, Call};
use super::{LoadContext, Resolved};
use crate::config::Credentials;
use crate::error::Result;

/// Lifetime assumed when an answer gives none.
pub(super) const DEFAULT_LIFETIME: Duration = Duration::from_secs(3600);
/// Shortest lifetime believed, so a token is never treated as expiring at once.
const MIN_LIFETIME: Duration = Duration::from_secs(60);

/// Sends `call` within `timeout` (connect) and the read's deadline; transport failures name
/// the path.
pub(super) fn send(ctx: &LoadContext, call: Call, timeout: Duration) -> Result<Answer> {
    ctx.http
        .send(call, timeout, ctx.deadline)
        .map_err(|e| e.context(ctx.path))
}

/// POSTs `pairs` as `application/x-www-form-urlencoded` to `url`, asking for JSON.
pub(super) fn post_form(ctx: &LoadContext, url: &str, pairs: &[(&str, &str)]) -> Result<Answer> {
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    let call = Call::new(Method::POST, url)
        .header("Accept", "application/json")
        .body("application/x-www-form-urlencoded", body);
    send(ctx, call, CONNECT_TIMEOUT)
}

/// Fails with "credential endpoint returned HTTP <n>" unless the answer is 2xx.
pub(super) fn success(ctx: &LoadContext, answer: &Answer) -> Result<()> {
    if (200..300).contains(&answer.status) {
        Ok(())
    } else {
        Err(ctx.failure(format_args!(
            "credential endpoint returned HTTP {}",
            answer.status
        )))
    }
}

/// The JSON body of a 2xx answer. A body that is not JSON reads as `null`, so the caller
/// reports the missing field.
pub(super) fn json_body(ctx: &LoadContext, answer: &Answer) -> Result<Value> {
    success(ctx, answer)?;
    Ok(serde_json::from_slice(&answer.body).unwrap_or(Value::Null))
}

/// The token in field `name` of an answer's body, or "credential response has no
/// access_token".
pub(super) fn token<'a>(ctx: &LoadContext, body: &'a Value, name: &str) -> Result<&'a str> {
    non_empty(body, name).ok_or_else(|| ctx.failure("credential response has no access_token"))
}

/// A bearer token from an OAuth answer (`access_token`, `expires_in`).
pub(super) fn bearer(ctx: &LoadContext, answer: &Answer) -> Result<Resolved> {
    let body = json_body(ctx, answer)?;
    let token = token(ctx, &body, "access_token")?;
    Ok(with_bearer(
        token,
        SystemTime::now() + expires_in(&body["expires_in"]),
    ))
}

/// `expires_in`: 3600 s when absent or unreadable, and at least 60 s.
fn expires_in(v: &Value) -> Duration {
    seconds(v)
        .map_or(DEFAULT_LIFETIME, Duration::from_secs)
        .max(MIN_LIFETIME)
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

/// A whole number of seconds given as a JSON number (negative ones read as 0, fractions
/// are dropped) or a decimal string; `None` when absent or unreadable.
pub(super) fn seconds(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
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
