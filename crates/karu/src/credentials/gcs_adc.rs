//! Application Default Credentials files (spec §5.9, GCS step 4): where the file is, and its
//! three supported types — `service_account` (JWT-bearer grant), `authorized_user` (refresh
//! grant) and `external_account` (token exchange, optionally followed by impersonation).

use std::path::PathBuf;
use std::time::SystemTime;

use http::Method;
use serde_json::{Value, json};

use super::gcs::{jwt_grant, refresh_grant, scope, token_uri as token_uri_option};
use super::http::{CONNECT_TIMEOUT, Call};
use super::oauth::{self, non_empty, with_bearer};
use super::{LoadContext, Resolved, timestamp};
use crate::error::Result;

/// The name of the file inside gcloud's configuration directory.
const ADC_FILE: &str = "application_default_credentials.json";
/// `token_url`'s default for external accounts: Google's STS.
const DEFAULT_STS: &str = "https://sts.googleapis.com/v1/token";

/// What an ADC file asks for, read from its JSON before any file or network use.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Adc<'a> {
    /// A service account key: a signed JWT exchanged at `token_uri`.
    ServiceAccount {
        email: &'a str,
        key: &'a str,
        key_id: Option<&'a str>,
        token_uri: Option<&'a str>,
    },
    /// A user's refresh token; the options may supply or replace each field.
    AuthorizedUser {
        client_id: Option<&'a str>,
        client_secret: Option<&'a str>,
        refresh_token: Option<&'a str>,
    },
    /// Workload identity federation.
    ExternalAccount(External<'a>),
}

/// The fields of an `external_account` file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct External<'a> {
    pub(crate) audience: &'a str,
    pub(crate) token_type: &'a str,
    pub(crate) token_url: Option<&'a str>,
    pub(crate) impersonation_url: Option<&'a str>,
    pub(crate) source: Source<'a>,
    /// With `format.type` `json`: the field of the source's text that holds the token.
    pub(crate) json_field: Option<&'a str>,
}

/// Where an external account's subject token comes from.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Source<'a> {
    File(&'a str),
    Url {
        url: &'a str,
        /// Header names and values (a value that is not a string is sent empty).
        headers: Vec<(&'a str, &'a str)>,
    },
}

/// The JSON of an ADC file; the error is the message after "<path>: ". `shown` names the
/// file. The parse error is not shown: it may quote the file's secrets.
pub(crate) fn json(text: &str, shown: &str) -> std::result::Result<Value, String> {
    serde_json::from_str(text)
        .map_err(|_| format!("GOOGLE_APPLICATION_CREDENTIALS file '{shown}' is not valid JSON"))
}

/// Reads an ADC file's JSON into what it asks for; errors are the message after
/// "<path>: ".
pub(crate) fn parse<'a>(adc: &'a Value, shown: &str) -> std::result::Result<Adc<'a>, String> {
    let field = |name: &str| non_empty(adc, name);
    match field("type").unwrap_or_default() {
        "service_account" => {
            let (Some(email), Some(key)) = (field("client_email"), field("private_key")) else {
                return Err(format!(
                    "service_account credentials in '{shown}' need client_email and private_key"
                ));
            };
            Ok(Adc::ServiceAccount {
                email,
                key,
                key_id: field("private_key_id"),
                token_uri: field("token_uri"),
            })
        }
        "authorized_user" => Ok(Adc::AuthorizedUser {
            client_id: field("client_id"),
            client_secret: field("client_secret"),
            refresh_token: field("refresh_token"),
        }),
        "external_account" => {
            let (Some(audience), Some(token_type)) =
                (field("audience"), field("subject_token_type"))
            else {
                return Err(format!(
                    "external_account credentials in '{shown}' need audience and \
                     subject_token_type"
                ));
            };
            let source = &adc["credential_source"];
            let from = if let Some(file) = non_empty(source, "file") {
                Source::File(file)
            } else if let Some(url) = non_empty(source, "url") {
                let headers = source["headers"].as_object().map_or_else(Vec::new, |h| {
                    h.iter()
                        .map(|(name, value)| (name.as_str(), value.as_str().unwrap_or_default()))
                        .collect()
                });
                Source::Url { url, headers }
            } else {
                return Err(format!(
                    "external_account credentials in '{shown}' need a file or url source"
                ));
            };
            let format = &source["format"];
            Ok(Adc::ExternalAccount(External {
                audience,
                token_type,
                token_url: field("token_url"),
                impersonation_url: field("service_account_impersonation_url"),
                source: from,
                json_field: (format["type"] == "json")
                    .then(|| non_empty(format, "subject_token_field_name").unwrap_or_default()),
            }))
        }
        other => Err(format!(
            "GOOGLE_APPLICATION_CREDENTIALS has unsupported type '{other}'"
        )),
    }
}

/// Credentials from the ADC file, `Ok(None)` when there is none.
pub(super) fn load(ctx: &LoadContext) -> Result<Option<Resolved>> {
    let Some(path) = locate(ctx) else {
        return Ok(None);
    };
    let shown = path.display().to_string();
    let text = ctx.read_file("GOOGLE_APPLICATION_CREDENTIALS file", &path)?;
    let adc = json(&text, &shown).map_err(|why| ctx.failure(why))?;
    match parse(&adc, &shown).map_err(|why| ctx.failure(why))? {
        Adc::ServiceAccount {
            email,
            key,
            key_id,
            token_uri,
        } => {
            let url = token_uri.map_or_else(|| token_uri_option(ctx), str::to_owned);
            let what = format!("private key of '{shown}'");
            jwt_grant(ctx, &what, key, key_id, email, &url).map(Some)
        }
        Adc::AuthorizedUser {
            client_id,
            client_secret,
            refresh_token,
        } => {
            // The options win over the file's fields.
            let (Some(id), Some(secret), Some(refresh)) = (
                ctx.option("GCS_CLIENT_ID").or(client_id),
                ctx.option("GCS_CLIENT_SECRET").or(client_secret),
                ctx.option("GCS_REFRESH_TOKEN").or(refresh_token),
            ) else {
                return Err(ctx.failure(format_args!(
                    "authorized_user credentials in '{shown}' need client_id, \
                         client_secret and refresh_token"
                )));
            };
            refresh_grant(ctx, &token_uri_option(ctx), id, secret, refresh).map(Some)
        }
        Adc::ExternalAccount(external) => external_account(ctx, &external).map(Some),
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
fn external_account(ctx: &LoadContext, external: &External) -> Result<Resolved> {
    let subject = subject_token(ctx, external)?;
    let scope = scope(ctx);
    let answer = oauth::post_form(
        ctx,
        external.token_url.unwrap_or(DEFAULT_STS),
        &[
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:token-exchange",
            ),
            ("audience", external.audience),
            (
                "requested_token_type",
                "urn:ietf:params:oauth:token-type:access_token",
            ),
            ("scope", scope),
            ("subject_token_type", external.token_type),
            ("subject_token", &subject),
        ],
    )?;
    let federated = oauth::bearer(ctx, &answer)?;
    let Some(url) = external.impersonation_url else {
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
    let answer = oauth::send(ctx, call, CONNECT_TIMEOUT)?;
    let body = oauth::json_body(ctx, &answer)?;
    let token = oauth::token(ctx, &body, "accessToken")?;
    let expires_at = non_empty(&body, "expireTime")
        .and_then(timestamp::parse)
        .unwrap_or_else(|| SystemTime::now() + oauth::DEFAULT_LIFETIME);
    Ok(with_bearer(token, expires_at))
}

/// The subject token an external account names: the trimmed contents of its file or the
/// answer of its URL (with its headers).
fn subject_token(ctx: &LoadContext, external: &External) -> Result<String> {
    let text = match &external.source {
        Source::File(file) => {
            let path = ctx.settings.expand_home(file);
            ctx.read_file("the subject token file", &path)?
        }
        Source::Url { url, headers } => {
            let mut call = Call::new(Method::GET, *url);
            for &(name, value) in headers {
                call = call.header(name, value);
            }
            let answer = oauth::send(ctx, call, CONNECT_TIMEOUT)?;
            oauth::success(ctx, &answer)?;
            String::from_utf8_lossy(&answer.body).into_owned()
        }
    };
    subject_token_in(&text, external.json_field).map_err(|why| ctx.failure(why))
}

/// The token in a subject token source's text: the trimmed text, or with `json_field` that
/// string field of the text's JSON, trimmed. Errors are the message after "<path>: ".
pub(crate) fn subject_token_in(
    text: &str,
    json_field: Option<&str>,
) -> std::result::Result<String, String> {
    let token = match json_field {
        Some(name) => {
            let parsed: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            non_empty(&parsed, name)
                .ok_or_else(|| format!("the subject token has no field '{name}'"))?
                .trim()
                .to_owned()
        }
        None => text.trim().to_owned(),
    };
    if token.is_empty() {
        return Err("the subject token is empty".to_owned());
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> std::result::Result<String, String> {
        let adc = json(text, "f.json")?;
        parse(&adc, "f.json").map(|a| format!("{a:?}"))
    }

    #[test]
    fn files_are_read_without_io() {
        let sa =
            r#"{"type":"service_account","client_email":"e","private_key":"k","token_uri":"u"}"#;
        assert_eq!(
            read(sa).unwrap(),
            r#"ServiceAccount { email: "e", key: "k", key_id: None, token_uri: Some("u") }"#
        );
        let user = r#"{"type":"authorized_user","client_id":"i","refresh_token":""}"#;
        assert_eq!(
            read(user).unwrap(),
            r#"AuthorizedUser { client_id: Some("i"), client_secret: None, refresh_token: None }"#
        );
        let adc = json(
            r#"{"type":"external_account","audience":"a","subject_token_type":"t",
                "credential_source":{"url":"http://x","headers":{"H":"v","N":1},
                "format":{"type":"json","subject_token_field_name":"id"}}}"#,
            "f.json",
        )
        .unwrap();
        let Adc::ExternalAccount(e) = parse(&adc, "f.json").unwrap() else {
            panic!("not an external account");
        };
        assert_eq!(
            (e.audience, e.token_type, e.json_field),
            ("a", "t", Some("id"))
        );
        assert_eq!(
            e.source,
            Source::Url {
                url: "http://x",
                headers: vec![("H", "v"), ("N", "")]
            }
        );
    }

    #[test]
    fn refusals_do_not_quote_the_file() {
        for (text, want) in [
            ("{\"private_key\":\"SECRET\"", "'f.json' is not valid JSON"),
            (
                r#"{"type":"x","private_key":"SECRET"}"#,
                "unsupported type 'x'",
            ),
            (
                r#"{"type":"service_account","private_key":"SECRET"}"#,
                "need client_email",
            ),
            (
                r#"{"type":"external_account","audience":"a"}"#,
                "need audience",
            ),
            (
                r#"{"type":"external_account","audience":"a","subject_token_type":"t"}"#,
                "need a file or url source",
            ),
        ] {
            let why = read(text).unwrap_err();
            assert!(why.contains(want) && !why.contains("SECRET"), "{why}");
        }
    }

    #[test]
    fn subject_tokens_are_trimmed_text_or_a_json_field() {
        assert_eq!(subject_token_in(" tok \n", None).unwrap(), "tok");
        assert_eq!(
            subject_token_in(r#"{"id":" tok "}"#, Some("id")).unwrap(),
            "tok"
        );
        assert_eq!(
            subject_token_in(r#"{"id":1}"#, Some("id")).unwrap_err(),
            "the subject token has no field 'id'"
        );
        assert_eq!(
            subject_token_in(" \n", None).unwrap_err(),
            "the subject token is empty"
        );
    }
}
