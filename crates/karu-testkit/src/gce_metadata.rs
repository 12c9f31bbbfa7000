//! `MetadataServer`: a GCE metadata server's token endpoint on 127.0.0.1. Requests without
//! `Metadata-Flavor: Google` get 403, as on a real instance; the others get
//! `{"access_token": "metadata-<n>", "expires_in": E, "token_type": "Bearer"}` with `n`
//! counting issued tokens from 1, whatever the path.

use std::time::Duration;

use serde_json::json;

use crate::endpoint::{Answer, Asked, Endpoint};

struct State {
    expires_in: i64,
    status: Option<u16>,
    delay: Duration,
    issued: u64,
}

/// A fake metadata server; see the [module docs](self).
pub struct MetadataServer {
    endpoint: Endpoint<State>,
}

impl MetadataServer {
    /// Starts serving on a free port of 127.0.0.1.
    pub fn start() -> MetadataServer {
        let state = State {
            expires_in: 3600,
            status: None,
            delay: Duration::ZERO,
            issued: 0,
        };
        MetadataServer {
            endpoint: Endpoint::start("karu-testkit-gce-metadata", state, answer),
        }
    }

    /// The token URL of the default service account.
    pub fn token_url(&self) -> String {
        self.endpoint
            .url("/computeMetadata/v1/instance/service-accounts/default/token")
    }

    /// The `expires_in` of later tokens (default 3600).
    pub fn set_expires_in(&self, secs: i64) {
        self.endpoint.state().expires_in = secs;
    }

    /// Answers every request with this status and an error body, or normally again with
    /// `None`.
    pub fn set_status(&self, status: Option<u16>) {
        self.endpoint.state().status = status;
    }

    /// Waits this long before every answer.
    pub fn set_delay(&self, delay: Duration) {
        self.endpoint.state().delay = delay;
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Asked> {
        self.endpoint.log()
    }
}

fn answer(st: &mut State, asked: &Asked) -> Answer {
    let out = if asked.header("metadata-flavor") != Some("Google") {
        Answer::text(403, "Missing Metadata-Flavor: Google header")
    } else if let Some(status) = st.status {
        Answer::text(status, "metadata server error")
    } else {
        st.issued += 1;
        let body = json!({
            "access_token": format!("metadata-{}", st.issued),
            "expires_in": st.expires_in,
            "token_type": "Bearer",
        });
        Answer::json(200, body.to_string()).with_header("metadata-flavor", "Google")
    };
    out.delayed(st.delay)
}
