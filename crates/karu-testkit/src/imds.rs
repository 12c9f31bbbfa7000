//! `ImdsServer`: EC2's instance metadata service (IMDSv2) on loopback. `PUT
//! /latest/api/token` with `X-aws-ec2-metadata-token-ttl-seconds` (1 to 21600) issues a
//! session token that expires after that TTL (or sooner, see
//! [`ImdsServer::set_token_lifetime_cap`]). Every `GET` needs a live token in
//! `X-aws-ec2-metadata-token`, else 401. `GET
//! /latest/meta-data/iam/security-credentials/` lists the role; `GET .../<role>` answers fresh
//! numbered keys (prefix `imds`) as JSON.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::endpoint::{Endpoint, Reply, Request};
use crate::keys::{Issuer, Keys};

const TOKEN_PATH: &str = "/latest/api/token";
const ROLES_PATH: &str = "/latest/meta-data/iam/security-credentials/";

/// A loopback IMDSv2; stops when dropped.
pub struct ImdsServer {
    endpoint: Endpoint,
    state: Arc<Mutex<State>>,
}

struct State {
    role: String,
    issuer: Issuer,
    tokens: Vec<(String, Instant)>,
    token_cap: Option<Duration>,
    ttl_headers: Vec<String>,
    rejected: u64,
}

impl ImdsServer {
    /// Serves instance role `role`, whose keys live `lifetime_secs`.
    pub fn start(role: &str, lifetime_secs: i64) -> ImdsServer {
        let state = Arc::new(Mutex::new(State {
            role: role.to_owned(),
            issuer: Issuer::new("imds", lifetime_secs),
            tokens: Vec::new(),
            token_cap: None,
            ttl_headers: Vec::new(),
            rejected: 0,
        }));
        let shared = state.clone();
        let endpoint = Endpoint::start(
            "karu-testkit-imds",
            Arc::new(move |req: &Request| answer(&mut lock(&shared), req)),
        );
        ImdsServer { endpoint, state }
    }

    /// The service root, `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        self.endpoint.root()
    }

    /// Requests received.
    pub fn requests(&self) -> u64 {
        self.endpoint.requests()
    }

    /// Tokens issued so far.
    pub fn tokens_issued(&self) -> usize {
        self.state().tokens.len()
    }

    /// The TTL header of every token request, in order.
    pub fn ttl_headers(&self) -> Vec<String> {
        self.state().ttl_headers.clone()
    }

    /// `GET`s refused for want of a live token.
    pub fn rejected(&self) -> u64 {
        self.state().rejected
    }

    /// Keys handed out, oldest first.
    pub fn issued(&self) -> Vec<Keys> {
        self.state().issuer.issued()
    }

    /// Makes tokens issued from now on expire after at most `cap`, whatever TTL was asked.
    pub fn set_token_lifetime_cap(&self, cap: Option<Duration>) {
        self.state().token_cap = cap;
    }

    /// Lifetime of keys issued from now on (negative: already expired).
    pub fn set_lifetime(&self, secs: i64) {
        self.state().issuer.set_lifetime(secs);
    }

    /// Leaves one JSON field out of later answers.
    pub fn set_omit(&self, field: Option<&str>) {
        self.state().issuer.set_omit(field);
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn answer(state: &mut State, req: &Request) -> Reply {
    if req.path == TOKEN_PATH {
        if req.method != "PUT" {
            return Reply::text(405, "PUT only");
        }
        let ttl = req.header("x-aws-ec2-metadata-token-ttl-seconds");
        state.ttl_headers.push(ttl.unwrap_or_default().to_owned());
        let Some(secs) = ttl
            .and_then(|t| t.parse::<u64>().ok())
            .filter(|s| (1..=21_600).contains(s))
        else {
            return Reply::text(400, "bad or missing TTL");
        };
        let mut life = Duration::from_secs(secs);
        if let Some(cap) = state.token_cap {
            life = life.min(cap);
        }
        let token = format!("imds-session-{}", state.tokens.len() + 1);
        state.tokens.push((token.clone(), Instant::now() + life));
        return Reply::text(200, token);
    }
    if req.method != "GET" {
        return Reply::text(405, "GET only");
    }
    let now = Instant::now();
    let live = req
        .header("x-aws-ec2-metadata-token")
        .is_some_and(|t| state.tokens.iter().any(|(k, until)| k == t && *until > now));
    if !live {
        state.rejected += 1;
        return Reply::text(401, "");
    }
    match req.path.strip_prefix(ROLES_PATH) {
        Some("") => Reply::text(200, state.role.clone()),
        Some(role) if role == state.role => {
            let keys = state.issuer.next();
            let json = state.issuer.json(
                &keys,
                &[("Code", "Success"), ("LastUpdated", "2026-01-01T00:00:00Z")],
            );
            Reply::new(200, "text/plain", json)
        }
        _ => Reply::text(404, "not found"),
    }
}
