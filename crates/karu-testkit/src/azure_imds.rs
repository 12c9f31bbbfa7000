//! An Azure Instance Metadata Service token endpoint on loopback
//! (`GET /metadata/identity/oauth2/token`). It requires `Metadata: true`,
//! `api-version=2018-02-01` and a resource, records the identity selector (`object_id`,
//! `client_id` or `msi_res_id`) and issues `imds-token-<n>` with `expires_on` (Unix seconds,
//! as a string, the way IMDS sends it) from its [`Knobs`](crate::microsoft_token::Knobs).

use std::ops::Deref;

use crate::microsoft_token::{IdentityEndpoint, ManagedIdentity, error_json};

const IMDS: ManagedIdentity = ManagedIdentity {
    path: "/metadata/identity/oauth2/token",
    api_version: "2018-02-01",
    prefix: "imds-token",
    expires_in: true,
};

/// The IMDS endpoint; stops when dropped. Its log, token count and knobs are those of its
/// [`IdentityEndpoint`].
pub struct AzureImds {
    server: IdentityEndpoint,
}

impl AzureImds {
    /// Starts the endpoint.
    pub fn start() -> AzureImds {
        let server = IdentityEndpoint::start("karu-testkit-azure-imds", |req, n, knobs| {
            let authorized = match req.header("metadata") {
                Some("true") => Ok(()),
                _ => Err((
                    400,
                    error_json("invalid_request", "Required metadata header not specified"),
                )),
            };
            IMDS.answer(req, authorized, n, knobs)
        });
        AzureImds { server }
    }

    /// The full endpoint URL to configure (`IMDS_ENDPOINT`).
    pub fn endpoint(&self) -> String {
        format!("{}{}", self.server.root(), IMDS.path)
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
}

impl Deref for AzureImds {
    type Target = IdentityEndpoint;

    fn deref(&self) -> &IdentityEndpoint {
        &self.server
    }
}
