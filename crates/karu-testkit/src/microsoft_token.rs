//! A Microsoft identity platform token endpoint on loopback
//! (`POST /<tenant>/oauth2/v2.0/token`, client credentials grant), for Azure's client secret
//! and workload identity (federated assertion) steps. It checks the tenant in the path, the
//! client id, the scope and the secret or assertion, and issues `ms-token-<n>` with
//! `expires_in` from its [`Knobs`].
//!
//! Also what the Azure identity endpoints share ([`IdentityEndpoint`]: knobs, numbered
//! tokens, the request log) and the checks of the two managed-identity endpoints
//! ([`crate::azure_imds`], [`crate::app_service_identity`]).

use std::ops::Deref;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::endpoint::{Answer, Asked, Endpoint};

/// The assertion type a federated client sends.
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// How an identity endpoint answers, changeable while it runs.
#[derive(Clone, Debug)]
pub struct Knobs {
    /// Lifetime of the tokens it issues (default one hour).
    pub lifetime: Duration,
    /// Wait before answering (to overlap concurrent lookups).
    pub delay: Duration,
    /// Answer every request with this status and an error body instead of a token.
    pub fail_with: Option<u16>,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            lifetime: Duration::from_secs(3600),
            delay: Duration::ZERO,
            fail_with: None,
        }
    }
}

impl Knobs {
    /// Unix seconds at which a token issued now expires.
    pub fn expires_on(&self) -> u64 {
        (SystemTime::now() + self.lifetime)
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

/// An identity endpoint's state: its knobs and the tokens it issued.
#[derive(Default)]
pub(crate) struct Tokens {
    knobs: Knobs,
    issued: u64,
}

/// An Azure identity endpoint on loopback; stops when dropped. Its handler answers a
/// status and a JSON body unless the knobs force a failure; 2xx answers count as issued.
pub struct IdentityEndpoint {
    endpoint: Endpoint<Tokens>,
}

impl IdentityEndpoint {
    /// Starts serving. `answer(request, n, knobs)` answers a request; `n` numbers the token
    /// it would issue (1 for the first), so each answer can carry a distinct token.
    pub(crate) fn start(
        name: &str,
        answer: impl Fn(&Asked, u64, &Knobs) -> (u16, String) + Send + Sync + 'static,
    ) -> IdentityEndpoint {
        let endpoint = Endpoint::start(name, Tokens::default(), move |t: &mut Tokens, req| {
            let (status, body) = match t.knobs.fail_with {
                Some(code) => (
                    code,
                    error_json("forced_failure", "failure forced by a test"),
                ),
                None => answer(req, t.issued + 1, &t.knobs),
            };
            if (200..300).contains(&status) {
                t.issued += 1;
            }
            Answer::json(status, body).delayed(t.knobs.delay)
        });
        IdentityEndpoint { endpoint }
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn root(&self) -> String {
        self.endpoint.root()
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Asked> {
        self.endpoint.log()
    }

    /// Tokens issued so far.
    pub fn issued(&self) -> u64 {
        self.endpoint.state().issued
    }

    /// Changes how it answers (token lifetime, delay, forced failure).
    pub fn set_knobs(&self, change: impl FnOnce(&mut Knobs)) {
        change(&mut self.endpoint.state().knobs);
    }
}

/// A JSON error body.
pub(crate) fn error_json(code: &str, why: &str) -> String {
    format!(r#"{{"error":"{code}","error_description":"{why}"}}"#)
}

/// What a managed-identity endpoint requires besides its own secret header.
pub(crate) struct ManagedIdentity {
    /// The token path.
    pub(crate) path: &'static str,
    /// The `api-version` it accepts.
    pub(crate) api_version: &'static str,
    /// The issued tokens' prefix (`<prefix>-<n>`).
    pub(crate) prefix: &'static str,
    /// Whether answers also carry `expires_in` (IMDS does, App Service does not).
    pub(crate) expires_in: bool,
}

impl ManagedIdentity {
    /// Answers `req` once `authorized` (the endpoint's header check) passed: `GET` of the
    /// path with the API version and a resource gets a token whose `expires_on` is Unix
    /// seconds as a string, the way the services send it.
    pub(crate) fn answer(
        &self,
        req: &Asked,
        authorized: Result<(), (u16, String)>,
        n: u64,
        knobs: &Knobs,
    ) -> (u16, String) {
        if req.method != "GET" || req.path != self.path {
            return (404, error_json("not_found", "unknown path"));
        }
        if let Err(refusal) = authorized {
            return refusal;
        }
        if req.param("api-version") != Some(self.api_version) {
            return (
                400,
                error_json("invalid_request", "unsupported api-version"),
            );
        }
        let Some(resource) = req.param("resource").filter(|r| !r.is_empty()) else {
            return (400, error_json("invalid_request", "resource missing"));
        };
        let expires_in = if self.expires_in {
            format!(r#""expires_in":"{}","#, knobs.lifetime.as_secs())
        } else {
            String::new()
        };
        let body = format!(
            r#"{{"access_token":"{}-{n}",{expires_in}"expires_on":"{}","resource":"{resource}","token_type":"Bearer"}}"#,
            self.prefix,
            knobs.expires_on()
        );
        (200, body)
    }
}

/// What the endpoint accepts.
#[derive(Clone, Debug)]
pub struct Registration {
    /// The tenant (first path segment).
    pub tenant: String,
    /// The client id.
    pub client_id: String,
    /// The scope the client must ask for.
    pub scope: String,
    /// The client secret accepted, if any.
    pub secret: Option<String>,
    /// The client assertion accepted (the federated token), if any.
    pub assertion: Option<String>,
}

/// The token endpoint; stops when dropped. Its log, token count and knobs are those of
/// its [`IdentityEndpoint`].
pub struct MicrosoftTokenServer {
    server: IdentityEndpoint,
}

fn answer(reg: &Registration, req: &Asked, n: u64, knobs: &Knobs) -> (u16, String) {
    if req.method != "POST" {
        return (405, error_json("invalid_request", "POST only"));
    }
    if req.path != format!("/{}/oauth2/v2.0/token", reg.tenant) {
        return (400, error_json("invalid_tenant", "unknown tenant or path"));
    }
    if req.field("grant_type") != Some("client_credentials") {
        return (
            400,
            error_json("unsupported_grant_type", "client_credentials only"),
        );
    }
    if req.field("client_id") != Some(reg.client_id.as_str()) {
        return (400, error_json("unauthorized_client", "unknown client"));
    }
    if req.field("scope") != Some(reg.scope.as_str()) {
        return (400, error_json("invalid_scope", "wrong scope"));
    }
    let by_secret = reg.secret.is_some() && req.field("client_secret") == reg.secret.as_deref();
    let by_assertion = reg.assertion.is_some()
        && req.field("client_assertion_type") == Some(JWT_BEARER)
        && req.field("client_assertion") == reg.assertion.as_deref();
    if !by_secret && !by_assertion {
        return (401, error_json("invalid_client", "bad secret or assertion"));
    }
    let body = format!(
        r#"{{"token_type":"Bearer","expires_in":{},"ext_expires_in":{0},"access_token":"ms-token-{n}"}}"#,
        knobs.lifetime.as_secs()
    );
    (200, body)
}

impl MicrosoftTokenServer {
    /// Starts an endpoint that accepts `registration`.
    pub fn start(registration: Registration) -> MicrosoftTokenServer {
        let server = IdentityEndpoint::start("karu-testkit-microsoft-token", move |req, n, k| {
            answer(&registration, req, n, k)
        });
        MicrosoftTokenServer { server }
    }

    /// The authority host to configure (`AZURE_AUTHORITY_HOST`): `http://127.0.0.1:PORT`.
    pub fn authority(&self) -> String {
        self.server.root()
    }
}

impl Deref for MicrosoftTokenServer {
    type Target = IdentityEndpoint;

    fn deref(&self) -> &IdentityEndpoint {
        &self.server
    }
}
