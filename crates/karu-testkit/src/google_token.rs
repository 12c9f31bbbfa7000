//! `GoogleTokenServer`: a Google OAuth token endpoint on 127.0.0.1 for credential-chain tests.
//!
//! Routes:
//!
//! | route | answers |
//! |---|---|
//! | `POST /token`, `grant_type=refresh_token` | a token when `client_id`, `client_secret` and `refresh_token` match [`GoogleTokenServer::expect_refresh`] (any non-empty values before that) |
//! | `POST /token`, `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` | a token when the `assertion` is an RS256 JWT whose signature verifies with the server's public key, `aud` is this token URL, `iss` and `scope` are set, `iat` is within 5 minutes of now and `exp` is `iat + 3600` |
//! | `POST /v1/token`, `grant_type=urn:ietf:params:oauth:grant-type:token-exchange` | a token when `audience`, `scope` and `subject_token_type` are set, `requested_token_type` asks for an access token and `subject_token` matches [`GoogleTokenServer::expect_subject_token`] |
//! | `POST /v1/projects/-/serviceAccounts/<account>:generateAccessToken` | `{"accessToken", "expireTime"}` when the bearer is a token this server issued by token exchange and the JSON body has a `scope` list and a `lifetime` |
//! | `GET /subject` | the body set with [`GoogleTokenServer::set_subject`] (an external account's URL-sourced subject token) |
//!
//! Issued tokens are `<kind>-<n>`: `refreshed-`, `jwt-`, `sts-` or `impersonated-`, with `n`
//! counting issued tokens from 1. A refused grant gets 400 with an OAuth error body. The RSA
//! key pair is generated at start ([`GoogleTokenServer::private_key_pem`]).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der};
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::{self, KeyPair as _, UnparsedPublicKey};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::keys::iso8601;
use crate::plain::{Answer, Asked, Plain};

/// How token answers carry `expires_in`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExpiresIn {
    /// A JSON number.
    Number(i64),
    /// A JSON string.
    Text(String),
    /// No `expires_in` at all.
    Absent,
}

struct State {
    expires_in: ExpiresIn,
    delay: Duration,
    failure: Option<(u16, String)>,
    subject: String,
    refresh: Option<[String; 3]>,
    subject_token: Option<String>,
    issued: u64,
    claims: Vec<Value>,
}

struct Shared {
    state: Mutex<State>,
    public_key: Vec<u8>,
    port: Mutex<u16>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A fake Google token endpoint; see the [module docs](self).
pub struct GoogleTokenServer {
    plain: Plain,
    shared: Arc<Shared>,
    private_key_pem: String,
}

impl GoogleTokenServer {
    /// Generates an RSA-2048 key pair and starts serving on a free port of 127.0.0.1.
    pub fn start() -> GoogleTokenServer {
        let key = KeyPair::generate(KeySize::Rsa2048).expect("RSA key generation");
        let pkcs8: Pkcs8V1Der = key.as_der().expect("PKCS#8 encoding");
        let private_key_pem = pem("PRIVATE KEY", pkcs8.as_ref());
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                expires_in: ExpiresIn::Number(3600),
                delay: Duration::ZERO,
                failure: None,
                subject: String::new(),
                refresh: None,
                subject_token: None,
                issued: 0,
                claims: Vec::new(),
            }),
            public_key: key.public_key().as_ref().to_vec(),
            port: Mutex::new(0),
        });
        let sh = Arc::clone(&shared);
        let plain = Plain::start("karu-testkit-google-token", move |asked| {
            let mut out = answer(&sh, asked);
            out.delay = sh.state().delay;
            out
        });
        *shared.port.lock().unwrap_or_else(|e| e.into_inner()) = plain.addr().port();
        GoogleTokenServer {
            plain,
            shared,
            private_key_pem,
        }
    }

    /// The OAuth token URL (`/token`): refresh-token and JWT-bearer grants.
    pub fn token_url(&self) -> String {
        self.plain.url("/token")
    }

    /// The STS URL (`/v1/token`): token-exchange grants.
    pub fn sts_url(&self) -> String {
        self.plain.url("/v1/token")
    }

    /// The impersonation URL for service account `account`.
    pub fn impersonation_url(&self, account: &str) -> String {
        self.plain.url(&format!(
            "/v1/projects/-/serviceAccounts/{account}:generateAccessToken"
        ))
    }

    /// The URL that serves the subject token set with [`set_subject`](Self::set_subject).
    pub fn subject_url(&self) -> String {
        self.plain.url("/subject")
    }

    /// The private key (PKCS#8 PEM) whose signatures the JWT-bearer grant accepts.
    pub fn private_key_pem(&self) -> &str {
        &self.private_key_pem
    }

    /// How later answers carry `expires_in` (default: the number 3600). Impersonation answers
    /// derive `expireTime` from it (3600 s when it is not a number; omitted when absent).
    pub fn set_expires_in(&self, expires_in: ExpiresIn) {
        self.shared.state().expires_in = expires_in;
    }

    /// Answers every token request (not `/subject`) with this status and body, or normally
    /// again with `None`.
    pub fn set_failure(&self, failure: Option<(u16, &str)>) {
        self.shared.state().failure = failure.map(|(s, b)| (s, b.to_owned()));
    }

    /// Waits this long before every answer (so concurrent lookups overlap).
    pub fn set_delay(&self, delay: Duration) {
        self.shared.state().delay = delay;
    }

    /// The body `GET /subject` answers.
    pub fn set_subject(&self, body: &str) {
        self.shared.state().subject = body.to_owned();
    }

    /// Refresh-token grants must carry exactly these values.
    pub fn expect_refresh(&self, client_id: &str, client_secret: &str, refresh_token: &str) {
        self.shared.state().refresh = Some([
            client_id.to_owned(),
            client_secret.to_owned(),
            refresh_token.to_owned(),
        ]);
    }

    /// Token-exchange grants must carry this subject token.
    pub fn expect_subject_token(&self, token: &str) {
        self.shared.state().subject_token = Some(token.to_owned());
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Asked> {
        self.plain.log()
    }

    /// The number of token requests (every route but `/subject`) so far.
    pub fn token_requests(&self) -> usize {
        self.plain
            .log()
            .iter()
            .filter(|a| a.path != "/subject")
            .count()
    }

    /// The claims of every JWT assertion that verified, in order.
    pub fn verified_claims(&self) -> Vec<Value> {
        self.shared.state().claims.clone()
    }

    /// Forgets the request log and the verified claims (the token counter goes on).
    pub fn clear(&self) {
        self.plain.clear_log();
        self.shared.state().claims.clear();
    }
}

/// PEM armour around DER bytes.
fn pem(label: &str, der: &[u8]) -> String {
    let b64 = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn refuse(why: &str) -> Answer {
    Answer::json(
        400,
        json!({"error": "invalid_grant", "error_description": why}).to_string(),
    )
}

const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

fn answer(shared: &Shared, asked: &Asked) -> Answer {
    if asked.method == "GET" && asked.path == "/subject" {
        return Answer::text(200, shared.state().subject.clone());
    }
    if asked.method != "POST" {
        return Answer::text(405, "POST only");
    }
    if let Some((status, body)) = shared.state().failure.clone() {
        return Answer::json(status, body);
    }
    if asked.path.ends_with(":generateAccessToken") {
        return impersonate(shared, asked);
    }
    let form = asked.form();
    let field = |name: &str| form.get(name).map(String::as_str).unwrap_or("");
    let grant = field("grant_type");
    let kind = match (asked.path.as_str(), grant) {
        ("/token", "refresh_token") => {
            let got = [
                field("client_id"),
                field("client_secret"),
                field("refresh_token"),
            ];
            let ok = match &shared.state().refresh {
                Some(want) => want.iter().zip(got).all(|(w, g)| w == g),
                None => got.iter().all(|g| !g.is_empty()),
            };
            if !ok {
                return refuse("refresh token, client id or secret does not match");
            }
            "refreshed"
        }
        ("/token", JWT_BEARER) => {
            let port = *shared.port.lock().unwrap_or_else(|e| e.into_inner());
            let audience = format!("http://127.0.0.1:{port}/token");
            match verify_jwt(&shared.public_key, field("assertion"), &audience) {
                Ok(claims) => shared.state().claims.push(claims),
                Err(why) => return refuse(&why),
            }
            "jwt"
        }
        ("/v1/token", TOKEN_EXCHANGE) => {
            let expected = shared.state().subject_token.clone();
            if field("audience").is_empty()
                || field("scope").is_empty()
                || field("subject_token_type").is_empty()
                || field("requested_token_type") != ACCESS_TOKEN_TYPE
                || expected.is_some_and(|t| t != field("subject_token"))
            {
                return refuse("token exchange parameters do not match");
            }
            "sts"
        }
        _ => return refuse("unsupported grant_type for this URL"),
    };
    let mut st = shared.state();
    st.issued += 1;
    let mut body = json!({"access_token": format!("{kind}-{}", st.issued), "token_type": "Bearer"});
    match &st.expires_in {
        ExpiresIn::Number(n) => body["expires_in"] = json!(n),
        ExpiresIn::Text(t) => body["expires_in"] = json!(t),
        ExpiresIn::Absent => {}
    }
    Answer::json(200, body.to_string())
}

fn impersonate(shared: &Shared, asked: &Asked) -> Answer {
    let bearer = asked
        .header("authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if !bearer.starts_with("sts-") {
        return Answer::json(401, r#"{"error":{"code":401,"message":"no STS token"}}"#);
    }
    let body: Value = serde_json::from_str(&asked.body).unwrap_or(Value::Null);
    if !body["scope"].is_array() || !body["lifetime"].is_string() {
        return Answer::json(
            400,
            r#"{"error":{"code":400,"message":"bad request body"}}"#,
        );
    }
    let mut st = shared.state();
    st.issued += 1;
    let mut out = json!({"accessToken": format!("impersonated-{}", st.issued)});
    let lifetime = match &st.expires_in {
        ExpiresIn::Number(n) => Some(*n),
        ExpiresIn::Text(t) => Some(t.parse().unwrap_or(3600)),
        ExpiresIn::Absent => None,
    };
    if let Some(secs) = lifetime {
        out["expireTime"] = json!(iso8601(
            SystemTime::now() + Duration::from_secs(secs.max(0) as u64)
        ));
    }
    Answer::json(200, out.to_string())
}

/// Checks an RS256 JWT against `public_key` (RSAPublicKey DER) and the claim rules above.
fn verify_jwt(public_key: &[u8], jwt: &str, audience: &str) -> Result<Value, String> {
    let parts: Vec<&str> = jwt.split('.').collect();
    let [header, claims, sig] = parts.as_slice() else {
        return Err("assertion is not a JWT".into());
    };
    let decode = |part: &str| {
        URL_SAFE_NO_PAD
            .decode(part)
            .map_err(|_| "assertion is not base64url".to_owned())
    };
    let header: Value = serde_json::from_slice(&decode(header)?).map_err(|e| e.to_string())?;
    if header["alg"] != "RS256" || header["typ"] != "JWT" {
        return Err(format!("unexpected JWT header {header}"));
    }
    let signed = &jwt[..jwt.rfind('.').expect("three parts")];
    UnparsedPublicKey::new(&signature::RSA_PKCS1_2048_8192_SHA256, public_key)
        .verify(signed.as_bytes(), &decode(sig)?)
        .map_err(|_| "invalid JWT signature".to_owned())?;
    let claims: Value = serde_json::from_slice(&decode(claims)?).map_err(|e| e.to_string())?;
    let text = |name: &str| claims[name].as_str().unwrap_or("").to_owned();
    if text("aud") != audience {
        return Err(format!("aud {} is not {audience}", claims["aud"]));
    }
    if text("iss").is_empty() || text("scope").is_empty() {
        return Err("iss and scope are required".into());
    }
    let (Some(iat), Some(exp)) = (claims["iat"].as_i64(), claims["exp"].as_i64()) else {
        return Err("iat and exp must be numbers".into());
    };
    if (iat - unix_now()).abs() > 300 || exp != iat + 3600 {
        return Err(format!("iat {iat} / exp {exp} out of bounds"));
    }
    Ok(claims)
}
