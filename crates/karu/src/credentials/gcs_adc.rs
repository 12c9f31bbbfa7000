//! Application Default Credentials files (spec §5.9, GCS step 4): where the file is, and its
//! three supported types — `service_account` (JWT-bearer grant), `authorized_user` (refresh
//! grant) and `external_account` (token exchange, optionally followed by impersonation).

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use http::Method;
use serde_json::{Value, json};

use super::gcs::{jwt_grant, read_small, refresh_grant, scope, token_uri};
use super::gcs_oauth::{self, failure, non_empty, with_bearer};
use super::http::{CONNECT_TIMEOUT, Call};
use super::{LoadContext, Resolved, timestamp};
use crate::error::Result;

/// The name of the file inside gcloud's configuration directory.
const ADC_FILE: &str = "application_default_credentials.json";
/// The largest ADC or subject-token file read.
const FILE_LIMIT: u64 = 1 << 20;
/// `token_url`'s default for external accounts: Google's STS.
const DEFAULT_STS: &str = "https://sts.googleapis.com/v1/token";
/// Lifetime assumed when an impersonation answer has no readable `expireTime`.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(3600);

/// Credentials from the ADC file, `Ok(None)` when there is none.
pub(super) fn load(ctx: &LoadContext) -> Result<Option<Resolved>> {
    let Some(path) = locate(ctx) else {
        return Ok(None);
    };
    let shown = path.display();
    let text = read_small(&path, FILE_LIMIT).map_err(|e| {
        failure(
            ctx,
            format_args!("cannot read GOOGLE_APPLICATION_CREDENTIALS file '{shown}': {e}"),
        )
    })?;
    // The parse error is not shown: it may quote the file's secrets.
    let adc: Value = serde_json::from_str(&text).map_err(|_| {
        failure(
            ctx,
            format_args!("GOOGLE_APPLICATION_CREDENTIALS file '{shown}' is not valid JSON"),
        )
    })?;
    let field = |name: &str| non_empty(&adc, name);
    match field("type").unwrap_or_default() {
        "service_account" => {
            let (Some(email), Some(key)) = (field("client_email"), field("private_key")) else {
                return Err(failure(
                    ctx,
                    format_args!(
                        "service_account credentials in '{shown}' need client_email and \
                         private_key"
                    ),
                ));
            };
            let url = field("token_uri").map_or_else(|| token_uri(ctx), str::to_owned);
            let what = format!("private key of '{shown}'");
            jwt_grant(ctx, &what, key, field("private_key_id"), email, &url).map(Some)
        }
        "authorized_user" => {
            // The options win over the file's fields.
            let pick = |option: &str, name: &str| ctx.option(option).or_else(|| field(name));
            let (Some(id), Some(secret), Some(refresh)) = (
                pick("GCS_CLIENT_ID", "client_id"),
                pick("GCS_CLIENT_SECRET", "client_secret"),
                pick("GCS_REFRESH_TOKEN", "refresh_token"),
            ) else {
                return Err(failure(
                    ctx,
                    format_args!(
                        "authorized_user credentials in '{shown}' need client_id, \
                         client_secret and refresh_token"
                    ),
                ));
            };
            refresh_grant(ctx, &token_uri(ctx), id, secret, refresh).map(Some)
        }
        "external_account" => external_account(ctx, &adc, &shown.to_string()).map(Some),
        other => Err(failure(
            ctx,
            format_args!("GOOGLE_APPLICATION_CREDENTIALS has unsupported type '{other}'"),
        )),
    }
}

/// `GOOGLE_APPLICATION_CREDENTIALS` (which must exist), else the file in `CLOUDSDK_CONFIG`,
/// else with discovery gcloud's default directory; the last two only when the file exists.
fn locate(ctx: &LoadContext) -> Option<PathBuf> {
    if let Some(file) = ctx.option("GOOGLE_APPLICATION_CREDENTIALS") {
        return Some(ctx.settings.expand_home(file));
    }
    let dir = match ctx.option("CLOUDSDK_CONFIG") {
        Some(dir) => Some(ctx.settings.expand_home(dir)),
        None if !ctx.settings.discovery() => None,
        None if cfg!(windows) => ctx.settings.app_data_dir().map(|d| d.join("gcloud")),
        None => ctx.settings.home_dir().map(|h| h.join(".config/gcloud")),
    }?;
    Some(dir.join(ADC_FILE)).filter(|p| p.is_file())
}

/// Workload identity federation: a subject token from a file or a URL, exchanged at the STS,
/// then optionally traded for a service account's token.
fn external_account(ctx: &LoadContext, adc: &Value, shown: &str) -> Result<Resolved> {
    let field = |name: &str| non_empty(adc, name);
    let (Some(audience), Some(token_type)) = (field("audience"), field("subject_token_type"))
    else {
        return Err(failure(
            ctx,
            format_args!(
                "external_account credentials in '{shown}' need audience and subject_token_type"
            ),
        ));
    };
    let subject = subject_token(ctx, &adc["credential_source"], shown)?;
    let scope = scope(ctx);
    let answer = gcs_oauth::post_form(
        ctx,
        field("token_url").unwrap_or(DEFAULT_STS),
        &[
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:token-exchange",
            ),
            ("audience", audience),
            (
                "requested_token_type",
                "urn:ietf:params:oauth:token-type:access_token",
            ),
            ("scope", scope),
            ("subject_token_type", token_type),
            ("subject_token", &subject),
        ],
    )?;
    let federated = gcs_oauth::bearer(ctx, &answer)?;
    let Some(url) = field("service_account_impersonation_url") else {
        return Ok(federated);
    };
    let scopes: Vec<&str> = scope.split_whitespace().collect();
    let body = json!({"scope": scopes, "lifetime": "3600s"}).to_string();
    let call = Call::new(Method::POST, url)
        .header(
            "Authorization",
            format!("Bearer {}", federated.credentials.bearer_token),
        )
        .body("application/json", body);
    let answer = ctx.http.send(call, CONNECT_TIMEOUT, ctx.deadline)?;
    let body = gcs_oauth::json_body(ctx, &answer)?;
    let token = non_empty(&body, "accessToken")
        .ok_or_else(|| failure(ctx, "credential response has no access_token"))?;
    let expires_at = non_empty(&body, "expireTime")
        .and_then(timestamp::parse)
        .unwrap_or_else(|| SystemTime::now() + DEFAULT_LIFETIME);
    Ok(with_bearer(token, expires_at))
}

/// The subject token named by `credential_source`: the trimmed contents of its `file` or the
/// answer of its `url` (with its `headers`), or with `format.type` `json` the string field
/// `format.subject_token_field_name` of that text.
fn subject_token(ctx: &LoadContext, source: &Value, shown: &str) -> Result<String> {
    let text = if let Some(file) = non_empty(source, "file") {
        let path = ctx.settings.expand_home(file);
        read_small(&path, FILE_LIMIT).map_err(|e| {
            failure(
                ctx,
                format_args!(
                    "cannot read the subject token file '{}': {e}",
                    path.display()
                ),
            )
        })?
    } else if let Some(url) = non_empty(source, "url") {
        let mut call = Call::new(Method::GET, url);
        if let Some(headers) = source["headers"].as_object() {
            for (name, value) in headers {
                call = call.header(name, value.as_str().unwrap_or_default());
            }
        }
        let answer = ctx.http.send(call, CONNECT_TIMEOUT, ctx.deadline)?;
        if !(200..300).contains(&answer.status) {
            return Err(failure(
                ctx,
                format_args!("credential endpoint returned HTTP {}", answer.status),
            ));
        }
        String::from_utf8_lossy(&answer.body).into_owned()
    } else {
        return Err(failure(
            ctx,
            format_args!("external_account credentials in '{shown}' need a file or url source"),
        ));
    };
    let format = &source["format"];
    let token = if format["type"] == "json" {
        let name = non_empty(format, "subject_token_field_name").unwrap_or_default();
        let parsed: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        non_empty(&parsed, name)
            .ok_or_else(|| failure(ctx, format_args!("the subject token has no field '{name}'")))?
            .trim()
            .to_owned()
    } else {
        text.trim().to_owned()
    };
    if token.is_empty() {
        return Err(failure(ctx, "the subject token is empty"));
    }
    Ok(token)
}
