//! An Azure App Service managed identity endpoint on loopback (`IDENTITY_ENDPOINT`). It
//! requires the `X-IDENTITY-HEADER` secret given at start, `api-version=2019-08-01` and a
//! resource, and issues `app-token-<n>` with `expires_on` (Unix seconds) from its
//! [`Knobs`].

use crate::credential_endpoint::{EndpointServer, Knobs, Seen, error_json};

/// The identity endpoint; stops when dropped.
pub struct AppServiceIdentity {
    server: EndpointServer,
}

impl AppServiceIdentity {
    /// Starts an endpoint that wants `identity_header` in `X-IDENTITY-HEADER`.
    pub fn start(identity_header: &str) -> AppServiceIdentity {
        let secret = identity_header.to_owned();
        let answer = move |req: &Seen, n: u64, knobs: &Knobs| {
            if req.method != "GET" || req.path != "/msi/token" {
                return (404, error_json("not_found", "unknown path"));
            }
            if req.header("x-identity-header") != Some(secret.as_str()) {
                return (
                    401,
                    error_json("unauthorized", "X-IDENTITY-HEADER missing or wrong"),
                );
            }
            if req.param("api-version") != Some("2019-08-01") {
                return (
                    400,
                    error_json("invalid_request", "unsupported api-version"),
                );
            }
            let Some(resource) = req.param("resource").filter(|r| !r.is_empty()) else {
                return (400, error_json("invalid_request", "resource missing"));
            };
            let body = format!(
                r#"{{"access_token":"app-token-{n}","expires_on":"{}","resource":"{resource}","token_type":"Bearer"}}"#,
                knobs.expires_on()
            );
            (200, body)
        };
        AppServiceIdentity {
            server: EndpointServer::start("karu-testkit-app-service-identity", answer),
        }
    }

    /// The endpoint URL to configure (`IDENTITY_ENDPOINT`).
    pub fn endpoint(&self) -> String {
        format!("{}/msi/token", self.server.base())
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
