//! An Azure Instance Metadata Service token endpoint on loopback
//! (`GET /metadata/identity/oauth2/token`). It requires `Metadata: true`,
//! `api-version=2018-02-01` and a resource, records the identity selector (`object_id`,
//! `client_id` or `msi_res_id`) and issues `imds-token-<n>` with `expires_on` (Unix seconds,
//! as a string, the way IMDS sends it) from its [`Knobs`].

use crate::credential_endpoint::{EndpointServer, Knobs, Seen, error_json};

/// The IMDS endpoint; stops when dropped.
pub struct AzureImds {
    server: EndpointServer,
}

fn answer(req: &Seen, n: u64, knobs: &Knobs) -> (u16, String) {
    if req.method != "GET" || req.path != "/metadata/identity/oauth2/token" {
        return (404, error_json("not_found", "unknown path"));
    }
    if req.header("metadata") != Some("true") {
        return (
            400,
            error_json("invalid_request", "Required metadata header not specified"),
        );
    }
    if req.param("api-version") != Some("2018-02-01") {
        return (
            400,
            error_json("invalid_request", "unsupported api-version"),
        );
    }
    let Some(resource) = req.param("resource").filter(|r| !r.is_empty()) else {
        return (400, error_json("invalid_request", "resource missing"));
    };
    let body = format!(
        r#"{{"access_token":"imds-token-{n}","expires_in":"{}","expires_on":"{}","resource":"{resource}","token_type":"Bearer"}}"#,
        knobs.lifetime.as_secs(),
        knobs.expires_on()
    );
    (200, body)
}

impl AzureImds {
    /// Starts the endpoint.
    pub fn start() -> AzureImds {
        AzureImds {
            server: EndpointServer::start("karu-testkit-azure-imds", answer),
        }
    }

    /// The full endpoint URL to configure (`IMDS_ENDPOINT`).
    pub fn endpoint(&self) -> String {
        format!("{}/metadata/identity/oauth2/token", self.server.base())
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Seen> {
        self.server.requests()
    }

    /// The selector of each request: `(parameter, value)` for the first of `object_id`,
    /// `client_id` and `msi_res_id` present, in request order.
    pub fn selectors(&self) -> Vec<Option<(String, String)>> {
        self.requests()
            .iter()
            .map(|r| {
                ["object_id", "client_id", "msi_res_id"]
                    .iter()
                    .find_map(|p| r.param(p).map(|v| ((*p).to_owned(), v.to_owned())))
            })
            .collect()
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
