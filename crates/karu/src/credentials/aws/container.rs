//! Container credentials (spec §5.9 step 6): the ECS / EKS agent's endpoint, named by
//! `AWS_CONTAINER_CREDENTIALS_FULL_URI` or by a path on the ECS agent's fixed address.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use http::Method;
use serde_json::Value;
use url::{Host, Url};

use super::{LoadContext, future_expiry};
use crate::config::Credentials;
use crate::credentials::http::Call;
use crate::error::{Error, Result, Status};

/// The ECS agent, which `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` is relative to.
const ECS_AGENT: Ipv4Addr = Ipv4Addr::new(169, 254, 170, 2);

/// How long the endpoint may take.
const TIMEOUT: Duration = Duration::from_secs(2);

/// Fetches container credentials; `None` when neither URI option is set.
pub(super) fn load(ctx: &LoadContext) -> Result<Option<Credentials>> {
    let Some(url) = url(ctx)? else {
        return Ok(None);
    };
    let fail = |message: &str| {
        Error::new(
            Status::Credentials,
            format!("{}: AWS container credentials {message}", ctx.path),
        )
    };
    let mut call = Call::new(Method::GET, url.as_str());
    if let Some(token) = token(ctx)? {
        call = call.header("Authorization", token);
    }
    let answer = ctx.http.send(call, TIMEOUT, ctx.deadline)?;
    if !(200..300).contains(&answer.status) {
        return Err(fail(&format!("endpoint returned HTTP {}", answer.status)));
    }
    let json: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    let field = |name: &str| {
        json.get(name)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    match (
        field("AccessKeyId"),
        field("SecretAccessKey"),
        field("Token"),
        future_expiry(field("Expiration")),
    ) {
        (Some(id), Some(secret), Some(token), Some(expires_at)) => Ok(Some(Credentials {
            access_key_id: id.to_owned(),
            secret_access_key: secret.to_owned(),
            session_token: token.to_owned(),
            expires_at: Some(expires_at),
            ..Credentials::default()
        })),
        _ => Err(fail("are incomplete")),
    }
}

/// The endpoint: the full URI, else the ECS agent plus the relative URI. Plain http may
/// only go to a loopback host or the ECS agent.
pub(super) fn url(ctx: &LoadContext) -> Result<Option<Url>> {
    const FULL: &str = "AWS_CONTAINER_CREDENTIALS_FULL_URI";
    const RELATIVE: &str = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI";
    let (name, text) = match (ctx.option(FULL), ctx.option(RELATIVE)) {
        (Some(full), _) => (FULL, full.to_owned()),
        (None, Some(relative)) => {
            let slash = if relative.starts_with('/') { "" } else { "/" };
            (RELATIVE, format!("http://{ECS_AGENT}{slash}{relative}"))
        }
        (None, None) => return Ok(None),
    };
    let url = Url::parse(&text).map_err(|_| {
        Error::new(
            Status::Config,
            format!("{}: {name} is not a valid URL", ctx.path),
        )
    })?;
    let loopback_or_agent = match url.host() {
        Some(Host::Ipv4(ip)) => ip == Ipv4Addr::LOCALHOST || ip == ECS_AGENT,
        Some(Host::Ipv6(ip)) => ip == Ipv6Addr::LOCALHOST,
        Some(Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    let user_info = !url.username().is_empty() || url.password().is_some();
    let allowed = !user_info
        && url.host().is_some()
        && (url.scheme() == "https" || (url.scheme() == "http" && loopback_or_agent));
    if !allowed {
        return Err(Error::new(
            Status::Config,
            format!(
                "{}: AWS_CONTAINER_CREDENTIALS_FULL_URI must use HTTPS or a loopback/ECS host",
                ctx.path
            ),
        ));
    }
    Ok(Some(url))
}

/// The Authorization value: the token option, else the token file's trimmed contents.
fn token(ctx: &LoadContext) -> Result<Option<String>> {
    if let Some(token) = ctx.option("AWS_CONTAINER_AUTHORIZATION_TOKEN") {
        return Ok(Some(token.to_owned()));
    }
    let Some(file) = ctx.option("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") else {
        return Ok(None);
    };
    let path = ctx.settings.expand_home(file);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Error::new(
            Status::Credentials,
            format!(
                "{}: cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE '{}': {e}",
                ctx.path,
                path.display()
            ),
        )
    })?;
    Ok(Some(text.trim().to_owned()))
}
