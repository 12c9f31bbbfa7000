//! `ContainerServer`: the ECS / EKS container credentials endpoint on loopback. `GET /creds`
//! with the expected `Authorization` value answers fresh numbered keys (prefix `ecs`) as
//! JSON; a wrong or missing token gets 401. An answer can be delayed, so concurrent callers
//! overlap.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::endpoint::{Endpoint, Reply, Request};
use crate::keys::{Issuer, Keys};

/// The path credentials are served at.
pub const CONTAINER_PATH: &str = "/creds";

/// A loopback container credentials endpoint; stops when dropped.
pub struct ContainerServer {
    endpoint: Endpoint,
    state: Arc<Mutex<State>>,
}

struct State {
    token: Option<String>,
    issuer: Issuer,
    delay: Duration,
    authorizations: Vec<Option<String>>,
}

impl ContainerServer {
    /// Requires `Authorization: <token>` when `token` is given; keys live `lifetime_secs`.
    pub fn start(token: Option<&str>, lifetime_secs: i64) -> ContainerServer {
        let state = Arc::new(Mutex::new(State {
            token: token.map(str::to_owned),
            issuer: Issuer::new("ecs", lifetime_secs),
            delay: Duration::ZERO,
            authorizations: Vec::new(),
        }));
        let shared = state.clone();
        let endpoint = Endpoint::start(
            "karu-testkit-container",
            Arc::new(move |req: &Request| answer(&mut lock(&shared), req)),
        );
        ContainerServer { endpoint, state }
    }

    /// The full URI, `http://127.0.0.1:<port>/creds`.
    pub fn url(&self) -> String {
        format!("{}{CONTAINER_PATH}", self.endpoint.root())
    }

    /// Requests received.
    pub fn requests(&self) -> u64 {
        self.endpoint.requests()
    }

    /// Keys handed out, oldest first.
    pub fn issued(&self) -> Vec<Keys> {
        self.state().issuer.issued()
    }

    /// The `Authorization` header of every request, in order.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.state().authorizations.clone()
    }

    /// Lifetime of keys issued from now on (negative: already expired).
    pub fn set_lifetime(&self, secs: i64) {
        self.state().issuer.set_lifetime(secs);
    }

    /// Leaves one JSON field out of later answers.
    pub fn set_omit(&self, field: Option<&str>) {
        self.state().issuer.set_omit(field);
    }

    /// Delays later answers.
    pub fn set_delay(&self, delay: Duration) {
        self.state().delay = delay;
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn answer(state: &mut State, req: &Request) -> Reply {
    let authorization = req.header("authorization").map(str::to_owned);
    state.authorizations.push(authorization.clone());
    if req.method != "GET" || req.path != CONTAINER_PATH {
        return Reply::text(404, "no such route");
    }
    if state.token.is_some() && authorization != state.token {
        return Reply::text(401, "bad authorization token");
    }
    let keys = state.issuer.next();
    let mut reply = Reply::new(
        200,
        "application/json",
        state
            .issuer
            .json(&keys, &[("RoleArn", "arn:aws:iam::0:role/testkit")]),
    );
    reply.delay = state.delay;
    reply
}
