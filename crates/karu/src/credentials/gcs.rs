//! The native GCS credential chain (spec §5.9), first match wins: `GCS_ACCESS_TOKEN`, HMAC
//! keys, a refresh token, an ADC file (see `gcs_adc`), a service-account private key, then the
//! metadata server.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::Method;

use super::gcs_oauth::{self, failure};
use super::http::Call;
use super::jwt::SigningKey;
use super::{LoadContext, Resolved, gcs_adc};
use crate::config::Credentials;
use crate::error::{Error, Result, Status};

/// `GCS_SCOPE`'s default.
const DEFAULT_SCOPE: &str = "https://www.googleapis.com/auth/devstorage.read_only";
/// `GCS_OAUTH_TOKEN_URI`'s default: Google's OAuth token endpoint.
const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// `GCS_METADATA_ENDPOINT`'s default.
const DEFAULT_METADATA: &str =
    "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token";
/// Connect timeout of the metadata request (the total is twice that).
const METADATA_TIMEOUT: Duration = Duration::from_secs(1);
/// The largest private key file read.
const KEY_FILE_LIMIT: u64 = 1 << 20;

/// Loads credentials for `ctx.path`; `Ok(None)` when no source has any.
pub(super) fn load(ctx: &LoadContext) -> Result<Option<Resolved>> {
    if let Some(token) = ctx.option("GCS_ACCESS_TOKEN") {
        return Ok(Some(Resolved::new(Credentials {
            bearer_token: token.to_owned(),
            ..Credentials::default()
        })));
    }
    match (
        ctx.option("GCS_HMAC_ACCESS_KEY_ID"),
        ctx.option("GCS_HMAC_SECRET_ACCESS_KEY"),
    ) {
        (Some(id), Some(secret)) => {
            return Ok(Some(Resolved::new(Credentials {
                access_key_id: id.to_owned(),
                secret_access_key: secret.to_owned(),
                ..Credentials::default()
            })));
        }
        (None, None) => {}
        _ => {
            return Err(failure(
                ctx,
                "GCS_HMAC_ACCESS_KEY_ID and GCS_HMAC_SECRET_ACCESS_KEY must be set together",
            ));
        }
    }
    if let (Some(refresh), Some(id), Some(secret)) = (
        ctx.option("GCS_REFRESH_TOKEN"),
        ctx.option("GCS_CLIENT_ID"),
        ctx.option("GCS_CLIENT_SECRET"),
    ) {
        return refresh_grant(ctx, &token_uri(ctx), id, secret, refresh).map(Some);
    }
    if let Some(found) = gcs_adc::load(ctx)? {
        return Ok(Some(found));
    }
    if let Some(found) = private_key(ctx)? {
        return Ok(Some(found));
    }
    metadata(ctx)
}

/// `GCS_SCOPE`, or read-only storage access.
pub(super) fn scope<'a>(ctx: &'a LoadContext) -> &'a str {
    ctx.option("GCS_SCOPE").unwrap_or(DEFAULT_SCOPE)
}

/// Where the refresh-token and private-key flows ask for tokens: `GCS_OAUTH_TOKEN_URI`, or
/// Google's endpoint.
pub(super) fn token_uri(ctx: &LoadContext) -> String {
    ctx.option("GCS_OAUTH_TOKEN_URI")
        .unwrap_or(DEFAULT_TOKEN_URI)
        .to_owned()
}

/// The refresh-token grant of an authorized user.
pub(super) fn refresh_grant(
    ctx: &LoadContext,
    url: &str,
    client_id: &str,
    client_secret: &str,
    refresh_token: &str,
) -> Result<Resolved> {
    let answer = gcs_oauth::post_form(
        ctx,
        url,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", client_id),
            ("client_secret", client_secret),
            ("refresh_token", refresh_token),
        ],
    )?;
    gcs_oauth::bearer(ctx, &answer)
}

/// The JWT-bearer grant of a service account: an RS256 assertion signed with `key_pem`
/// (described as `what` in errors) for `email`, sent to `url`, which is also its audience.
pub(super) fn jwt_grant(
    ctx: &LoadContext,
    what: &str,
    key_pem: &str,
    key_id: Option<&str>,
    email: &str,
    url: &str,
) -> Result<Resolved> {
    let key = SigningKey::from_pem(key_pem).map_err(|why| failure(ctx, format!("{what} {why}")))?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let assertion = key
        .assertion(key_id, email, scope(ctx), url, now)
        .map_err(|why| failure(ctx, format!("{what} {why}")))?;
    let answer = gcs_oauth::post_form(
        ctx,
        url,
        &[
            ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
            ("assertion", &assertion),
        ],
    )?;
    gcs_oauth::bearer(ctx, &answer)
}

/// `GCS_PRIVATE_KEY` or `GCS_PRIVATE_KEY_FILE` (exactly one) with `GCS_CLIENT_EMAIL`.
fn private_key(ctx: &LoadContext) -> Result<Option<Resolved>> {
    let pem = match (
        ctx.option("GCS_PRIVATE_KEY"),
        ctx.option("GCS_PRIVATE_KEY_FILE"),
    ) {
        (None, None) => return Ok(None),
        (Some(_), Some(_)) => {
            return Err(Error::new(
                Status::Config,
                format!(
                    "{}: set GCS_PRIVATE_KEY or GCS_PRIVATE_KEY_FILE, not both",
                    ctx.path
                ),
            ));
        }
        (Some(pem), None) => pem.to_owned(),
        (None, Some(file)) => {
            let path = ctx.settings.expand_home(file);
            read_small(&path, KEY_FILE_LIMIT).map_err(|e| {
                failure(
                    ctx,
                    format_args!("cannot read GCS_PRIVATE_KEY_FILE '{}': {e}", path.display()),
                )
            })?
        }
    };
    let email = ctx
        .option("GCS_CLIENT_EMAIL")
        .ok_or_else(|| failure(ctx, "a GCS private key needs GCS_CLIENT_EMAIL"))?;
    jwt_grant(ctx, "GCS private key", &pem, None, email, &token_uri(ctx)).map(Some)
}

/// Reads a text file of at most `limit` bytes.
pub(super) fn read_small(path: &Path, limit: u64) -> std::io::Result<String> {
    let len = std::fs::metadata(path)?.len();
    if len > limit {
        return Err(std::io::Error::other(format!(
            "the file is larger than {limit} bytes"
        )));
    }
    std::fs::read_to_string(path)
}

/// The metadata server, with discovery or when a metadata option is set; skipped when
/// `GCS_METADATA_DISABLED` is true. Failures count as "nothing found" unless
/// `GCS_METADATA_ENDPOINT` was set.
fn metadata(ctx: &LoadContext) -> Result<Option<Resolved>> {
    let disabled = ctx.settings.flag("GCS_METADATA_DISABLED", ctx.path);
    let endpoint = ctx.option("GCS_METADATA_ENDPOINT");
    if disabled == Some(true)
        || !(ctx.settings.discovery() || endpoint.is_some() || disabled.is_some())
    {
        return Ok(None);
    }
    let call = Call::new(Method::GET, endpoint.unwrap_or(DEFAULT_METADATA))
        .header("Metadata-Flavor", "Google");
    let fetched = ctx
        .http
        .send(call, METADATA_TIMEOUT, ctx.deadline)
        .and_then(|answer| gcs_oauth::bearer(ctx, &answer));
    match fetched {
        Ok(found) => Ok(Some(found)),
        Err(e) if endpoint.is_some() => Err(e),
        Err(_) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use karu_testkit::{ExpiresIn, GoogleTokenServer, MetadataServer};
    use serde_json::{Value, json};

    use super::*;
    use crate::config::{Config, Settings};
    use crate::credentials::CredentialHttp;
    use crate::transport::{Transport, TransportOptions};

    const PATH: &str = "/vsigs/bucket/key";

    fn settings(options: &[(&str, &str)]) -> Settings {
        let mut config = Config::empty();
        for (name, value) in options {
            config.set(name, Some(value)).unwrap();
        }
        config.freeze().unwrap()
    }

    fn run_with(settings: &Settings) -> Result<Option<Resolved>> {
        let http = CredentialHttp::new(Transport::new(TransportOptions::default()).unwrap());
        let ctx = LoadContext {
            settings,
            path: PATH,
            deadline: Some(Instant::now() + Duration::from_secs(30)),
            http: &http,
        };
        load(&ctx)
    }

    fn run(options: &[(&str, &str)]) -> Result<Option<Resolved>> {
        run_with(&settings(options))
    }

    fn bearer(options: &[(&str, &str)]) -> Credentials {
        let c = run(options).unwrap().expect("credentials").credentials;
        assert!(!c.bearer_token.is_empty(), "{c:?}");
        c
    }

    /// Seconds from now until `c` expires.
    fn lifetime(c: &Credentials) -> u64 {
        c.expires_at
            .expect("an expiry")
            .duration_since(SystemTime::now())
            .unwrap()
            .as_secs()
    }

    fn fails(options: &[(&str, &str)], status: Status, message: &str) {
        let e = run(options).unwrap_err();
        assert_eq!((e.status(), e.message()), (status, message));
    }

    fn write_json(dir: &Path, name: &str, v: &Value) -> String {
        let p = dir.join(name);
        std::fs::write(&p, v.to_string()).unwrap();
        p.to_str().unwrap().to_owned()
    }

    #[test]
    fn nothing_configured_finds_nothing() {
        assert_eq!(run(&[]).unwrap(), None);
    }

    #[test]
    fn access_token_and_hmac_keys() {
        let c = bearer(&[
            ("GCS_ACCESS_TOKEN", "ya29.x"),
            ("GCS_HMAC_ACCESS_KEY_ID", "G"),
        ]);
        assert_eq!(c.bearer_token, "ya29.x");
        assert_eq!(c.expires_at, None);
        let c = run(&[
            ("GCS_HMAC_ACCESS_KEY_ID", "GOOG1"),
            ("GCS_HMAC_SECRET_ACCESS_KEY", "s"),
            ("GCS_REFRESH_TOKEN", "r"),
        ])
        .unwrap()
        .unwrap()
        .credentials;
        assert_eq!(
            (c.access_key_id.as_str(), c.secret_access_key.as_str()),
            ("GOOG1", "s")
        );
        assert_eq!((c.bearer_token.as_str(), c.expires_at), ("", None));
        for half in [
            ("GCS_HMAC_ACCESS_KEY_ID", "GOOG1"),
            ("GCS_HMAC_SECRET_ACCESS_KEY", "s"),
        ] {
            fails(
                &[half],
                Status::Credentials,
                "/vsigs/bucket/key: GCS_HMAC_ACCESS_KEY_ID and GCS_HMAC_SECRET_ACCESS_KEY must \
                 be set together",
            );
        }
    }

    #[test]
    fn refresh_token_grant() {
        let server = GoogleTokenServer::start();
        server.expect_refresh("id", "sec", "rt");
        server.set_expires_in(ExpiresIn::Number(1234));
        let url = server.token_url();
        let options = [
            ("GCS_OAUTH_TOKEN_URI", url.as_str()),
            ("GCS_REFRESH_TOKEN", "rt"),
            ("GCS_CLIENT_ID", "id"),
            ("GCS_CLIENT_SECRET", "sec"),
        ];
        let c = bearer(&options);
        assert_eq!(c.bearer_token, "refreshed-1");
        assert!((1230..=1234).contains(&lifetime(&c)), "{}", lifetime(&c));
        let asked = &server.requests()[0];
        assert_eq!(asked.method, "POST");
        assert_eq!(
            asked.header("content-type"),
            Some("application/x-www-form-urlencoded")
        );
        assert_eq!(asked.form()["grant_type"], "refresh_token");
        // A wrong secret is refused by the endpoint: its status is the error.
        let mut wrong = options;
        wrong[3].1 = "other";
        fails(
            &wrong,
            Status::Credentials,
            "/vsigs/bucket/key: credential endpoint returned HTTP 400",
        );
    }

    #[test]
    fn oauth_answer_rules() {
        let server = GoogleTokenServer::start();
        let url = server.token_url();
        let options = [
            ("GCS_OAUTH_TOKEN_URI", url.as_str()),
            ("GCS_REFRESH_TOKEN", "rt"),
            ("GCS_CLIENT_ID", "id"),
            ("GCS_CLIENT_SECRET", "sec"),
        ];
        server.set_expires_in(ExpiresIn::Text("700".into()));
        assert!((695..=700).contains(&lifetime(&bearer(&options))));
        server.set_expires_in(ExpiresIn::Absent);
        assert!((3595..=3600).contains(&lifetime(&bearer(&options))));
        server.set_expires_in(ExpiresIn::Number(3));
        assert!((55..=60).contains(&lifetime(&bearer(&options))));
        server.set_failure(Some((200, r#"{"access_token":"","expires_in":10}"#)));
        fails(
            &options,
            Status::Credentials,
            "/vsigs/bucket/key: credential response has no access_token",
        );
        server.set_failure(Some((200, "not json")));
        fails(
            &options,
            Status::Credentials,
            "/vsigs/bucket/key: credential response has no access_token",
        );
        server.set_failure(Some((503, r#"{"error":"busy"}"#)));
        fails(
            &options,
            Status::Credentials,
            "/vsigs/bucket/key: credential endpoint returned HTTP 503",
        );
    }

    #[test]
    fn private_key_options_sign_a_verified_jwt() {
        let server = GoogleTokenServer::start();
        let url = server.token_url();
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("key.pem");
        std::fs::write(&key_file, server.private_key_pem()).unwrap();
        let key_file = key_file.to_str().unwrap();
        let c = bearer(&[
            ("GCS_OAUTH_TOKEN_URI", &url),
            ("GCS_PRIVATE_KEY", server.private_key_pem()),
            ("GCS_CLIENT_EMAIL", "sa@project.iam.gserviceaccount.com"),
            ("GCS_SCOPE", "https://scope.example/a"),
        ]);
        assert_eq!(c.bearer_token, "jwt-1");
        let c = bearer(&[
            ("GCS_OAUTH_TOKEN_URI", &url),
            ("GCS_PRIVATE_KEY_FILE", key_file),
            ("GCS_CLIENT_EMAIL", "other@p.iam"),
        ]);
        assert_eq!(c.bearer_token, "jwt-2");
        let claims = server.verified_claims();
        assert_eq!(claims.len(), 2);
        assert_eq!(claims[0]["iss"], "sa@project.iam.gserviceaccount.com");
        assert_eq!(claims[0]["scope"], "https://scope.example/a");
        assert_eq!(claims[0]["aud"], url.as_str());
        assert_eq!(claims[1]["iss"], "other@p.iam");
        assert_eq!(claims[1]["scope"], DEFAULT_SCOPE);
        assert_eq!(
            server.requests()[0].form()["grant_type"],
            "urn:ietf:params:oauth:grant-type:jwt-bearer"
        );
        // A key the server does not know fails its signature check.
        let stranger = GoogleTokenServer::start();
        fails(
            &[
                ("GCS_OAUTH_TOKEN_URI", &url),
                ("GCS_PRIVATE_KEY", stranger.private_key_pem()),
                ("GCS_CLIENT_EMAIL", "sa@p.iam"),
            ],
            Status::Credentials,
            "/vsigs/bucket/key: credential endpoint returned HTTP 400",
        );
    }

    #[test]
    fn private_key_bad_input() {
        fails(
            &[
                ("GCS_PRIVATE_KEY", "pem"),
                ("GCS_PRIVATE_KEY_FILE", "/k.pem"),
                ("GCS_CLIENT_EMAIL", "sa@p.iam"),
            ],
            Status::Config,
            "/vsigs/bucket/key: set GCS_PRIVATE_KEY or GCS_PRIVATE_KEY_FILE, not both",
        );
        fails(
            &[("GCS_PRIVATE_KEY", "pem")],
            Status::Credentials,
            "/vsigs/bucket/key: a GCS private key needs GCS_CLIENT_EMAIL",
        );
        fails(
            &[("GCS_PRIVATE_KEY", "secret-ish"), ("GCS_CLIENT_EMAIL", "e")],
            Status::Credentials,
            "/vsigs/bucket/key: GCS private key is not a PEM RSA private key",
        );
        let e = run(&[
            ("GCS_PRIVATE_KEY_FILE", "/nonexistent/k.pem"),
            ("GCS_CLIENT_EMAIL", "e"),
        ])
        .unwrap_err();
        assert_eq!(e.status(), Status::Credentials);
        assert!(
            e.message().starts_with(
                "/vsigs/bucket/key: cannot read GCS_PRIVATE_KEY_FILE '/nonexistent/k.pem': "
            ),
            "{e}"
        );
    }

    #[test]
    fn adc_service_account_and_authorized_user() {
        let server = GoogleTokenServer::start();
        let url = server.token_url();
        let dir = tempfile::tempdir().unwrap();
        let sa = write_json(
            dir.path(),
            "sa.json",
            &json!({
                "type": "service_account",
                "client_email": "adc@p.iam",
                "private_key": server.private_key_pem(),
                "private_key_id": "k1",
                "token_uri": url,
            }),
        );
        let c = bearer(&[("GOOGLE_APPLICATION_CREDENTIALS", &sa)]);
        assert_eq!(c.bearer_token, "jwt-1");
        assert_eq!(server.verified_claims()[0]["iss"], "adc@p.iam");

        let user = write_json(
            dir.path(),
            "user.json",
            &json!({
                "type": "authorized_user",
                "client_id": "file-id",
                "client_secret": "file-secret",
                "refresh_token": "file-rt",
            }),
        );
        server.expect_refresh("file-id", "file-secret", "file-rt");
        let c = bearer(&[
            ("GOOGLE_APPLICATION_CREDENTIALS", &user),
            ("GCS_OAUTH_TOKEN_URI", &url),
        ]);
        assert_eq!(c.bearer_token, "refreshed-2");
        // Options override the file's fields (a refresh token alone does not make step 3).
        server.expect_refresh("file-id", "file-secret", "option-rt");
        let c = bearer(&[
            ("GOOGLE_APPLICATION_CREDENTIALS", &user),
            ("GCS_OAUTH_TOKEN_URI", &url),
            ("GCS_REFRESH_TOKEN", "option-rt"),
        ]);
        assert_eq!(c.bearer_token, "refreshed-3");
    }

    #[test]
    fn adc_external_account_with_file_url_and_impersonation() {
        let server = GoogleTokenServer::start();
        let dir = tempfile::tempdir().unwrap();
        let subject = dir.path().join("subject.jwt");
        std::fs::write(&subject, "  subject-from-file\n").unwrap();
        server.expect_subject_token("subject-from-file");
        let base = json!({
            "type": "external_account",
            "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/q",
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "token_url": server.sts_url(),
            "credential_source": {"file": subject.to_str().unwrap()},
        });
        let file = write_json(dir.path(), "ext.json", &base);
        let c = bearer(&[("GOOGLE_APPLICATION_CREDENTIALS", &file)]);
        assert_eq!(c.bearer_token, "sts-1");
        let form = server.requests()[0].form();
        assert_eq!(form["audience"], base["audience"].as_str().unwrap());
        assert_eq!(
            form["subject_token_type"],
            "urn:ietf:params:oauth:token-type:jwt"
        );
        assert_eq!(form["scope"], DEFAULT_SCOPE);

        // A URL source with a JSON answer, then impersonation.
        server.clear();
        server.set_subject(r#"{"id_token": " subject-from-url "}"#);
        server.expect_subject_token("subject-from-url");
        server.set_expires_in(ExpiresIn::Number(900));
        let mut ext = base.clone();
        ext["credential_source"] = json!({
            "url": server.subject_url(),
            "headers": {"Metadata": "True"},
            "format": {"type": "json", "subject_token_field_name": "id_token"},
        });
        ext["service_account_impersonation_url"] = json!(server.impersonation_url("sa@p.iam"));
        let file = write_json(dir.path(), "ext2.json", &ext);
        let c = bearer(&[
            ("GOOGLE_APPLICATION_CREDENTIALS", &file),
            ("GCS_SCOPE", "s1 s2"),
        ]);
        assert_eq!(c.bearer_token, "impersonated-3");
        assert!((895..=900).contains(&lifetime(&c)), "{}", lifetime(&c));
        let log = server.requests();
        assert_eq!(log.len(), 3, "{log:?}");
        assert_eq!(log[0].path, "/subject");
        assert_eq!(log[0].header("metadata"), Some("True"));
        assert_eq!(log[1].form()["scope"], "s1 s2");
        assert_eq!(log[2].header("authorization"), Some("Bearer sts-2"));
        let body: Value = serde_json::from_str(&log[2].body).unwrap();
        assert_eq!(body, json!({"scope": ["s1", "s2"], "lifetime": "3600s"}));

        // A JSON subject without the named field.
        server.set_subject(r#"{"other": "x"}"#);
        fails(
            &[("GOOGLE_APPLICATION_CREDENTIALS", &file)],
            Status::Credentials,
            "/vsigs/bucket/key: the subject token has no field 'id_token'",
        );
    }

    #[test]
    fn adc_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let odd = write_json(
            dir.path(),
            "odd.json",
            &json!({"type": "impersonated_service_account"}),
        );
        fails(
            &[("GOOGLE_APPLICATION_CREDENTIALS", &odd)],
            Status::Credentials,
            "/vsigs/bucket/key: GOOGLE_APPLICATION_CREDENTIALS has unsupported type \
             'impersonated_service_account'",
        );
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{\"private_key\": \"-----BEGIN").unwrap();
        let bad = bad.to_str().unwrap();
        fails(
            &[("GOOGLE_APPLICATION_CREDENTIALS", bad)],
            Status::Credentials,
            &format!(
                "/vsigs/bucket/key: GOOGLE_APPLICATION_CREDENTIALS file '{bad}' is not valid JSON"
            ),
        );
        let e = run(&[("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/adc.json")]).unwrap_err();
        assert!(
            e.message().starts_with(
                "/vsigs/bucket/key: cannot read GOOGLE_APPLICATION_CREDENTIALS file \
                 '/nonexistent/adc.json': "
            ),
            "{e}"
        );
        let sa = write_json(dir.path(), "sa.json", &json!({"type": "service_account"}));
        fails(
            &[("GOOGLE_APPLICATION_CREDENTIALS", &sa)],
            Status::Credentials,
            &format!(
                "/vsigs/bucket/key: service_account credentials in '{sa}' need client_email \
                 and private_key"
            ),
        );
    }

    #[test]
    fn adc_default_locations() {
        let server = GoogleTokenServer::start();
        server.expect_refresh("i", "s", "r");
        let url = server.token_url();
        let adc = json!({
            "type": "authorized_user",
            "client_id": "i",
            "client_secret": "s",
            "refresh_token": "r",
        });
        let dir = tempfile::tempdir().unwrap();
        let gcloud = dir.path().join("home/.config/gcloud");
        std::fs::create_dir_all(&gcloud).unwrap();
        write_json(&gcloud, ADC_FILE_NAME, &adc);
        let sdk = dir.path().join("sdk");
        std::fs::create_dir_all(&sdk).unwrap();

        // CLOUDSDK_CONFIG without the file: nothing (the home default is not consulted).
        let sdk_s = sdk.to_str().unwrap();
        assert_eq!(run(&[("CLOUDSDK_CONFIG", sdk_s)]).unwrap(), None);
        write_json(&sdk, ADC_FILE_NAME, &adc);
        let c = bearer(&[("CLOUDSDK_CONFIG", sdk_s), ("GCS_OAUTH_TOKEN_URI", &url)]);
        assert_eq!(c.bearer_token, "refreshed-1");

        // The home default needs discovery; the hermetic builder never reads it.
        let home = dir.path().join("home");
        let discovering = |extra: &[(&str, &str)]| {
            let mut vars = vec![
                ("HOME".to_owned(), home.to_str().unwrap().to_owned()),
                ("GCS_OAUTH_TOKEN_URI".to_owned(), url.clone()),
                ("GCS_METADATA_DISABLED".to_owned(), "YES".to_owned()),
            ];
            vars.extend(extra.iter().map(|(n, v)| (n.to_string(), v.to_string())));
            Config::from_vars(vars).freeze().unwrap()
        };
        let c = run_with(&discovering(&[])).unwrap().unwrap().credentials;
        assert_eq!(c.bearer_token, "refreshed-2");
        assert_eq!(server.token_requests(), 2);
        let no_home = settings(&[("GCS_OAUTH_TOKEN_URI", &url)]);
        assert_eq!(run_with(&no_home).unwrap(), None);
        assert_eq!(server.token_requests(), 2);
    }

    const ADC_FILE_NAME: &str = "application_default_credentials.json";

    #[test]
    fn metadata_server() {
        let meta = MetadataServer::start();
        meta.set_expires_in(600);
        let url = meta.token_url();
        let c = bearer(&[("GCS_METADATA_ENDPOINT", &url)]);
        assert_eq!(c.bearer_token, "metadata-1");
        assert!((595..=600).contains(&lifetime(&c)));
        assert_eq!(meta.requests()[0].header("metadata-flavor"), Some("Google"));
        assert_eq!(meta.requests()[0].method, "GET");

        // Disabled wins over an explicit endpoint.
        let before = meta.requests().len();
        let off = [
            ("GCS_METADATA_ENDPOINT", url.as_str()),
            ("GCS_METADATA_DISABLED", "YES"),
        ];
        assert_eq!(run(&off).unwrap(), None);
        assert_eq!(meta.requests().len(), before);

        // Errors surface only with an explicit endpoint.
        meta.set_status(Some(500));
        fails(
            &[("GCS_METADATA_ENDPOINT", &url)],
            Status::Credentials,
            "/vsigs/bucket/key: credential endpoint returned HTTP 500",
        );
        // The hermetic builder without a metadata option never asks.
        meta.set_status(None);
        let before = meta.requests().len();
        assert_eq!(run(&[("GCS_SCOPE", "s")]).unwrap(), None);
        assert_eq!(meta.requests().len(), before);
    }

    #[test]
    fn chain_order() {
        let server = GoogleTokenServer::start();
        let meta = MetadataServer::start();
        let url = server.token_url();
        let murl = meta.token_url();
        let dir = tempfile::tempdir().unwrap();
        let user = write_json(
            dir.path(),
            "user.json",
            &json!({"type": "authorized_user", "client_id": "a", "client_secret": "b", "refresh_token": "c"}),
        );
        let all = [
            ("GCS_OAUTH_TOKEN_URI", url.as_str()),
            ("GCS_METADATA_ENDPOINT", murl.as_str()),
            ("GCS_PRIVATE_KEY", server.private_key_pem()),
            ("GCS_CLIENT_EMAIL", "sa@p.iam"),
            ("GOOGLE_APPLICATION_CREDENTIALS", user.as_str()),
            ("GCS_REFRESH_TOKEN", "r"),
            ("GCS_CLIENT_ID", "i"),
            ("GCS_CLIENT_SECRET", "s"),
        ];
        // Each step shadows the ones after it; drop the winner to reach the next.
        assert_eq!(bearer(&all).bearer_token, "refreshed-1");
        assert_eq!(bearer(&all[..6]).bearer_token, "refreshed-2"); // ADC, the option's token
        assert_eq!(bearer(&all[..4]).bearer_token, "jwt-3");
        assert_eq!(bearer(&all[..2]).bearer_token, "metadata-1");
        let mut with_token = all.to_vec();
        with_token.push(("GCS_ACCESS_TOKEN", "t"));
        assert_eq!(bearer(&with_token).bearer_token, "t");
        assert_eq!(server.token_requests(), 3);
    }
}
