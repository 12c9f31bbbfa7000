//! The native Azure credential chain (spec §5.9), first match wins:
//!
//! 1. a connection string, or 2. a SAS, access token or account key: the direct options are
//!    returned as they are (the backend merges them with the connection string);
//! 3. tenant + client + a secret or a federated token file: the client credentials grant
//!    against `<AZURE_AUTHORITY_HOST>/<tenant>/oauth2/v2.0/token`;
//! 4. App Service managed identity (`IDENTITY_ENDPOINT`, `IDENTITY_HEADER`);
//! 5. IMDS, only with discovery or an explicit `IMDS_ENDPOINT`; its failures surface only
//!    when the endpoint was set.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::Method;
use serde_json::Value;

use super::http::{Answer, CONNECT_TIMEOUT, Call};
use super::{LoadContext, Resolved};
use crate::config::Credentials;
use crate::error::{Error, Result, Status};
use crate::locator::encode_key;

const DEFAULT_AUTHORITY: &str = "https://login.microsoftonline.com";
const DEFAULT_SCOPE: &str = "https://storage.azure.com/.default";
const DEFAULT_RESOURCE: &str = "https://storage.azure.com/";
const DEFAULT_IMDS: &str = "http://169.254.169.254/metadata/identity/oauth2/token";
const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// Timeouts of the managed-identity endpoints (connect; the total is twice that).
const APP_SERVICE_TIMEOUT: Duration = Duration::from_secs(2);
const IMDS_TIMEOUT: Duration = Duration::from_secs(1);
/// Lifetime assumed when an answer does not say.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(3600);
/// Shortest lifetime an OAuth `expires_in` may claim.
const MIN_LIFETIME: Duration = Duration::from_secs(60);

/// Loads credentials for `ctx.path`; `Ok(None)` when no source has any.
pub(super) fn load(ctx: &LoadContext) -> Result<Option<Resolved>> {
    let text = |name: &str| ctx.option(name).unwrap_or_default().to_owned();
    let direct = Credentials {
        account_name: text("AZURE_STORAGE_ACCOUNT"),
        secret_access_key: text("AZURE_STORAGE_ACCESS_KEY"),
        sas_token: text("AZURE_STORAGE_SAS_TOKEN"),
        bearer_token: text("AZURE_STORAGE_ACCESS_TOKEN"),
        ..Credentials::default()
    };
    let has_secret = !direct.sas_token.is_empty()
        || !direct.bearer_token.is_empty()
        || !direct.secret_access_key.is_empty();
    if ctx.option("AZURE_STORAGE_CONNECTION_STRING").is_some() || has_secret {
        return Ok(Some(Resolved::new(direct)));
    }
    if let Some(token) = client_credentials(ctx)? {
        return Ok(Some(token));
    }
    if let Some(endpoint) = ctx.option("IDENTITY_ENDPOINT") {
        return app_service(ctx, endpoint).map(Some);
    }
    let explicit = ctx.option("IMDS_ENDPOINT");
    if explicit.is_some() || ctx.settings.discovery() {
        return imds(ctx, explicit);
    }
    Ok(None)
}

fn fail(ctx: &LoadContext, why: impl std::fmt::Display) -> Error {
    Error::new(Status::Credentials, format!("{}: {why}", ctx.path))
}

/// Step 3: a service principal (secret) or workload identity (federated token file).
fn client_credentials(ctx: &LoadContext) -> Result<Option<Resolved>> {
    let (Some(tenant), Some(client)) =
        (ctx.option("AZURE_TENANT_ID"), ctx.option("AZURE_CLIENT_ID"))
    else {
        return Ok(None);
    };
    let proof: Vec<(&str, String)> = if let Some(secret) = ctx.option("AZURE_CLIENT_SECRET") {
        vec![("client_secret", secret.to_owned())]
    } else if let Some(file) = ctx.option("AZURE_FEDERATED_TOKEN_FILE") {
        let path = ctx.settings.expand_home(file);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            fail(
                ctx,
                format_args!(
                    "cannot read AZURE_FEDERATED_TOKEN_FILE '{}': {e}",
                    path.display()
                ),
            )
        })?;
        let assertion = text.trim();
        if assertion.is_empty() {
            return Err(fail(
                ctx,
                format_args!("AZURE_FEDERATED_TOKEN_FILE '{}' is empty", path.display()),
            ));
        }
        vec![
            ("client_assertion_type", JWT_BEARER.to_owned()),
            ("client_assertion", assertion.to_owned()),
        ]
    } else {
        return Ok(None);
    };
    let authority = ctx
        .option("AZURE_AUTHORITY_HOST")
        .unwrap_or(DEFAULT_AUTHORITY);
    let authority = if authority.contains("://") {
        authority.to_owned()
    } else {
        format!("https://{authority}")
    };
    let url = format!(
        "{}/{}/oauth2/v2.0/token",
        authority.trim_end_matches('/'),
        encode_key(tenant)
    );
    let form = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "client_credentials")
        .append_pair("client_id", client)
        .append_pair(
            "scope",
            ctx.option("AZURE_STORAGE_SCOPE").unwrap_or(DEFAULT_SCOPE),
        )
        .extend_pairs(proof)
        .finish();
    let call = Call::new(Method::POST, url)
        .header("Accept", "application/json")
        .body("application/x-www-form-urlencoded", form);
    let answer = send(ctx, call, CONNECT_TIMEOUT)?;
    token(ctx, &answer, Expiry::ExpiresIn).map(Some)
}

/// Step 4: the App Service identity endpoint.
fn app_service(ctx: &LoadContext, endpoint: &str) -> Result<Resolved> {
    let secret = ctx
        .option("IDENTITY_HEADER")
        .ok_or_else(|| fail(ctx, "IDENTITY_ENDPOINT is set but IDENTITY_HEADER is not"))?;
    let url = managed_identity_url(ctx, endpoint, "2019-08-01")?;
    let call = Call::new(Method::GET, url).header("X-IDENTITY-HEADER", secret);
    let answer = send(ctx, call, APP_SERVICE_TIMEOUT)?;
    token(ctx, &answer, Expiry::ExpiresOn)
}

/// Step 5: the instance metadata service. Without an explicit endpoint a failure means
/// "not on Azure": no credentials, no error.
fn imds(ctx: &LoadContext, explicit: Option<&str>) -> Result<Option<Resolved>> {
    let url = managed_identity_url(ctx, explicit.unwrap_or(DEFAULT_IMDS), "2018-02-01")?;
    let call = Call::new(Method::GET, url).header("Metadata", "true");
    match send(ctx, call, IMDS_TIMEOUT).and_then(|a| token(ctx, &a, Expiry::ExpiresOn)) {
        Ok(r) => Ok(Some(r)),
        Err(e) if explicit.is_some() => Err(e),
        Err(_) => Ok(None),
    }
}

/// `<endpoint>?api-version=<v>&resource=<res>` plus the identity selector, if any.
fn managed_identity_url(ctx: &LoadContext, endpoint: &str, version: &str) -> Result<String> {
    let selector = ctx
        .settings
        .azure_imds_selector(ctx.path)
        .map_err(|e| e.context(ctx.path))?;
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    query.append_pair("api-version", version).append_pair(
        "resource",
        ctx.option("AZURE_STORAGE_RESOURCE")
            .unwrap_or(DEFAULT_RESOURCE),
    );
    if let Some((name, value)) = selector {
        let param = match name {
            "AZURE_IMDS_OBJECT_ID" => "object_id",
            "AZURE_IMDS_MSI_RES_ID" => "msi_res_id",
            _ => "client_id",
        };
        query.append_pair(param, value);
    }
    let joiner = if endpoint.contains('?') { '&' } else { '?' };
    Ok(format!("{endpoint}{joiner}{}", query.finish()))
}

fn send(ctx: &LoadContext, call: Call, timeout: Duration) -> Result<Answer> {
    ctx.http
        .send(call, timeout, ctx.deadline)
        .map_err(|e| e.context(ctx.path))
}

/// Where a token answer says when it expires.
#[derive(Clone, Copy)]
enum Expiry {
    /// OAuth's `expires_in` (seconds from now; default one hour, at least a minute).
    ExpiresIn,
    /// Managed identity's `expires_on` (Unix seconds; default one hour from now).
    ExpiresOn,
}

/// A whole number given as a JSON number or a quoted string.
fn seconds(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The bearer token of a token endpoint's answer, with its expiry.
fn token(ctx: &LoadContext, answer: &Answer, expiry: Expiry) -> Result<Resolved> {
    if !(200..300).contains(&answer.status) {
        return Err(fail(
            ctx,
            format_args!("credential endpoint returned HTTP {}", answer.status),
        ));
    }
    let json: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    let token = json
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| fail(ctx, "credential response has no access_token"))?;
    let now = SystemTime::now();
    let expires_at = match expiry {
        Expiry::ExpiresIn => {
            let life =
                seconds(json.get("expires_in")).map_or(DEFAULT_LIFETIME, Duration::from_secs);
            now + life.max(MIN_LIFETIME)
        }
        Expiry::ExpiresOn => seconds(json.get("expires_on")).map_or(now + DEFAULT_LIFETIME, |s| {
            UNIX_EPOCH + Duration::from_secs(s)
        }),
    };
    Ok(Resolved::new(Credentials {
        bearer_token: token.to_owned(),
        expires_at: Some(expires_at),
        ..Credentials::default()
    }))
}

#[cfg(test)]
mod tests;
