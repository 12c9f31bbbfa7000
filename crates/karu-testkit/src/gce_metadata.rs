//! `MetadataServer`: a GCE metadata server's token endpoint on 127.0.0.1. Requests without
//! `Metadata-Flavor: Google` get 403, as on a real instance; the others get
//! `{"access_token": "metadata-<n>", "expires_in": E, "token_type": "Bearer"}` with `n`
//! counting issued tokens from 1, whatever the path.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::plain::{Answer, Asked, Plain};

struct State {
    expires_in: i64,
    status: Option<u16>,
    delay: Duration,
    issued: u64,
}

/// A fake metadata server; see the [module docs](self).
pub struct MetadataServer {
    plain: Plain,
    state: Arc<Mutex<State>>,
}

impl MetadataServer {
    /// Starts serving on a free port of 127.0.0.1.
    pub fn start() -> MetadataServer {
        let state = Arc::new(Mutex::new(State {
            expires_in: 3600,
            status: None,
            delay: Duration::ZERO,
            issued: 0,
        }));
        let st = Arc::clone(&state);
        let plain = Plain::start("karu-testkit-gce-metadata", move |asked| {
            answer(&mut st.lock().unwrap_or_else(|e| e.into_inner()), asked)
        });
        MetadataServer { plain, state }
    }

    /// The token URL of the default service account.
    pub fn token_url(&self) -> String {
        self.plain
            .url("/computeMetadata/v1/instance/service-accounts/default/token")
    }

    /// The `expires_in` of later tokens (default 3600).
    pub fn set_expires_in(&self, secs: i64) {
        self.lock().expires_in = secs;
    }

    /// Answers every request with this status and an error body, or normally again with
    /// `None`.
    pub fn set_status(&self, status: Option<u16>) {
        self.lock().status = status;
    }

    /// Waits this long before every answer.
    pub fn set_delay(&self, delay: Duration) {
        self.lock().delay = delay;
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Asked> {
        self.plain.log()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn answer(st: &mut State, asked: &Asked) -> Answer {
    let mut out = if asked.header("metadata-flavor") != Some("Google") {
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
    out.delay = st.delay;
    out
}
