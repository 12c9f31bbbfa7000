//! An Azure App Service managed identity endpoint on loopback (`IDENTITY_ENDPOINT`). It
//! requires the `X-IDENTITY-HEADER` secret given at start, `api-version=2019-08-01` and a
//! resource, and issues `app-token-<n>` with `expires_on` (Unix seconds) from its
//! [`Knobs`](crate::microsoft_token::Knobs).

use std::ops::Deref;

use crate::microsoft_token::{IdentityEndpoint, ManagedIdentity, error_json};

const APP_SERVICE: ManagedIdentity = ManagedIdentity {
    path: "/msi/token",
    api_version: "2019-08-01",
    prefix: "app-token",
    expires_in: false,
};

/// The identity endpoint; stops when dropped. Its log, token count and knobs are those of
/// its [`IdentityEndpoint`].
pub struct AppServiceIdentity {
    server: IdentityEndpoint,
}

impl AppServiceIdentity {
    /// Starts an endpoint that wants `identity_header` in `X-IDENTITY-HEADER`.
    pub fn start(identity_header: &str) -> AppServiceIdentity {
        let secret = identity_header.to_owned();
        let server =
            IdentityEndpoint::start("karu-testkit-app-service-identity", move |req, n, knobs| {
                let authorized = if req.header("x-identity-header") == Some(secret.as_str()) {
                    Ok(())
                } else {
                    Err((
                        401,
                        error_json("unauthorized", "X-IDENTITY-HEADER missing or wrong"),
                    ))
                };
                APP_SERVICE.answer(req, authorized, n, knobs)
            });
        AppServiceIdentity { server }
    }

    /// The endpoint URL to configure (`IDENTITY_ENDPOINT`).
    pub fn endpoint(&self) -> String {
        format!("{}{}", self.server.root(), APP_SERVICE.path)
    }
}

impl Deref for AppServiceIdentity {
    type Target = IdentityEndpoint;

    fn deref(&self) -> &IdentityEndpoint {
        &self.server
    }
}
