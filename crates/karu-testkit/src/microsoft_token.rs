//! A Microsoft identity platform token endpoint on loopback
//! (`POST /<tenant>/oauth2/v2.0/token`, client credentials grant), for Azure's client secret
//! and workload identity (federated assertion) steps. It checks the tenant in the path, the
//! client id, the scope and the secret or assertion, and issues `ms-token-<n>` with
//! `expires_in` from its [`Knobs`].

use crate::credential_endpoint::{EndpointServer, Knobs, Seen, error_json};

/// The assertion type a federated client sends.
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

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

/// The token endpoint; stops when dropped.
pub struct MicrosoftTokenServer {
    server: EndpointServer,
}

fn answer(reg: &Registration, req: &Seen, n: u64, knobs: &Knobs) -> (u16, String) {
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
        let server = EndpointServer::start("karu-testkit-microsoft-token", move |req, n, k| {
            answer(&registration, req, n, k)
        });
        MicrosoftTokenServer { server }
    }

    /// The authority host to configure (`AZURE_AUTHORITY_HOST`): `http://127.0.0.1:PORT`.
    pub fn authority(&self) -> String {
        self.server.base()
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Seen> {
        self.server.requests()
    }

    /// Tokens issued so far.
    pub fn issued(&self) -> u64 {
        self.server.issued()
    }

    /// Changes how it answers (token lifetime, delay, forced failure).
    pub fn set_knobs(&self, change: impl FnOnce(&mut Knobs)) {
        self.server.set_knobs(change);
    }
}
