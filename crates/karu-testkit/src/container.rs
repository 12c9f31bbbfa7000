//! `ContainerServer`: the ECS / EKS container credentials endpoint on loopback. `GET /creds`
//! with the expected `Authorization` value answers fresh numbered keys (prefix `ecs`) as
//! JSON; a wrong or missing token gets 401. An answer can be delayed, so concurrent callers
//! overlap.

use std::time::Duration;

use crate::endpoint::{Answer, Asked, Endpoint};
use crate::keys::{Issuer, Keys};

/// The path credentials are served at.
pub const CONTAINER_PATH: &str = "/creds";

/// A loopback container credentials endpoint; stops when dropped.
pub struct ContainerServer {
    endpoint: Endpoint<State>,
}

struct State {
    token: Option<String>,
    issuer: Issuer,
    delay: Duration,
}

impl ContainerServer {
    /// Requires `Authorization: <token>` when `token` is given; keys live `lifetime_secs`.
    pub fn start(token: Option<&str>, lifetime_secs: i64) -> ContainerServer {
        let state = State {
            token: token.map(str::to_owned),
            issuer: Issuer::new("ecs", lifetime_secs),
            delay: Duration::ZERO,
        };
        ContainerServer {
            endpoint: Endpoint::start("karu-testkit-container", state, answer),
        }
    }

    /// The full URI, `http://127.0.0.1:<port>/creds`.
    pub fn url(&self) -> String {
        self.endpoint.url(CONTAINER_PATH)
    }

    /// Requests received.
    pub fn requests(&self) -> u64 {
        self.endpoint.log().len() as u64
    }

    /// Keys handed out, oldest first.
    pub fn issued(&self) -> Vec<Keys> {
        self.endpoint.state().issuer.issued()
    }

    /// The `Authorization` header of every request, in order.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.endpoint
            .log()
            .iter()
            .map(|a| a.header("authorization").map(str::to_owned))
            .collect()
    }

    /// Lifetime of keys issued from now on (negative: already expired).
    pub fn set_lifetime(&self, secs: i64) {
        self.endpoint.state().issuer.set_lifetime(secs);
    }

    /// Leaves one JSON field out of later answers.
    pub fn set_omit(&self, field: Option<&str>) {
        self.endpoint.state().issuer.set_omit(field);
    }

    /// Delays later answers.
    pub fn set_delay(&self, delay: Duration) {
        self.endpoint.state().delay = delay;
    }
}

fn answer(state: &mut State, req: &Asked) -> Answer {
    if req.method != "GET" || req.path != CONTAINER_PATH {
        return Answer::text(404, "no such route");
    }
    if state.token.is_some() && req.header("authorization") != state.token.as_deref() {
        return Answer::text(401, "bad authorization token");
    }
    let keys = state.issuer.next();
    let json = state
        .issuer
        .json(&keys, &[("RoleArn", "arn:aws:iam::0:role/testkit")]);
    Answer::json(200, json).delayed(state.delay)
}
