//! IMDSv2 (spec §5.9 step 7): a session token, the instance role's name, then its
//! credentials. Only with discovery or an explicit `AWS_EC2_METADATA_DISABLED`; every
//! failure is silent.

use std::time::Duration;

use http::Method;
use serde_json::Value;

use super::{LoadContext, endpoint_url, future_expiry};
use crate::config::Credentials;
use crate::credentials::http::Call;
use crate::error::Result;

/// The instance metadata service when `AWS_EC2_METADATA_SERVICE_ENDPOINT` is unset.
const DEFAULT_ENDPOINT: &str = "http://169.254.169.254";

/// Lifetime asked for the session token, in seconds.
const TOKEN_TTL: &str = "21600";

/// Fetches the instance role's credentials; `None` when IMDS is off or any step fails.
/// Only a malformed endpoint option is an error.
pub(super) fn load(ctx: &LoadContext) -> Result<Option<Credentials>> {
    let disabled = ctx.settings.flag("AWS_EC2_METADATA_DISABLED", ctx.path);
    if disabled == Some(true) || (disabled.is_none() && !ctx.settings.discovery()) {
        return Ok(None);
    }
    let root = match ctx.option("AWS_EC2_METADATA_SERVICE_ENDPOINT") {
        Some(v) => endpoint_url(ctx, "AWS_EC2_METADATA_SERVICE_ENDPOINT", v)?
            .as_str()
            .trim_end_matches('/')
            .to_owned(),
        None => DEFAULT_ENDPOINT.to_owned(),
    };
    // Validated at freeze: 1 to 60.
    let step = ctx
        .option("AWS_METADATA_SERVICE_TIMEOUT")
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_secs(1), Duration::from_secs);
    Ok(fetch(ctx, &root, step))
}

/// The three requests, each sent with `step` as its credential-request timeout.
fn fetch(ctx: &LoadContext, root: &str, step: Duration) -> Option<Credentials> {
    let send = |call: Call| {
        let answer = ctx.http.send(call, step, ctx.deadline).ok()?;
        (answer.status == 200).then_some(answer.body)
    };
    let token = send(
        Call::new(Method::PUT, format!("{root}/latest/api/token"))
            .header("X-aws-ec2-metadata-token-ttl-seconds", TOKEN_TTL),
    )?;
    let token = std::str::from_utf8(&token).ok()?.trim();
    let roles_url = format!("{root}/latest/meta-data/iam/security-credentials/");
    let get =
        |url: String| send(Call::new(Method::GET, url).header("X-aws-ec2-metadata-token", token));
    let roles = get(roles_url.clone())?;
    let role = std::str::from_utf8(&roles)
        .ok()?
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())?
        .to_owned();
    let body = get(format!("{roles_url}{role}"))?;

    let json: Value = serde_json::from_slice(&body).ok()?;
    let field = |name: &str| {
        json.get(name)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    if field("Code").is_some_and(|c| c != "Success") {
        return None;
    }
    Some(Credentials {
        access_key_id: field("AccessKeyId")?.to_owned(),
        secret_access_key: field("SecretAccessKey")?.to_owned(),
        session_token: field("Token")?.to_owned(),
        expires_at: Some(future_expiry(field("Expiration"))?),
        ..Credentials::default()
    })
}
