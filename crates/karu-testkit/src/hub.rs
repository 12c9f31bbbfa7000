//! `HubServer`: a Hugging Face-like hub on 127.0.0.1 whose resolve endpoint redirects to a
//! CDN on another origin, as the real hub does.
//!
//! * `GET` or `HEAD` of `/<repo path>/resolve/<revision>/<file>` for a file added with
//!   [`HubServer::add`] answers `302` with a `Location` on the CDN (a [`RangeServer`] on
//!   another port, [`HubServer::cdn`]): `/<route>/<name>?size=N`, where `<name>` is the
//!   request path without its leading `/`, percent-decoded (for example
//!   `datasets/org/repo/resolve/v 1/a b.bin`). The CDN serves `content::bytes(name, ..)`.
//! * Unknown files get 404 (`X-Error-Code: EntryNotFound`), other paths 404 too.
//! * With [`HubServer::require_tokens`], a request whose `Authorization` is not
//!   `Bearer <one of them>` gets 401.
//! * [`HubServer::fail_next`] makes the next requests fail with a status; a hook set with
//!   [`HubServer::on_request`] runs before each answer (to rotate a token file between
//!   attempts, say).
//!
//! The hub's log ([`HubServer::log`]) and the CDN's ([`RangeServer::log`]) show which
//! headers reached each origin.

use std::collections::HashMap;
use std::net::SocketAddr;

use crate::endpoint::{Answer, Asked, Endpoint};
use crate::server::{RangeServer, encode_name, percent_decode};

type Hook = Box<dyn Fn(usize) + Send + Sync>;

struct State {
    cdn: SocketAddr,
    files: HashMap<String, (u64, String)>,
    tokens: Option<Vec<String>>,
    fail: Option<(u32, u16)>,
    hook: Option<Hook>,
    seen: usize,
}

/// A fake hub with its CDN; see the [module docs](self).
pub struct HubServer {
    endpoint: Endpoint<State>,
    cdn: RangeServer,
}

impl HubServer {
    /// Starts the hub and its CDN on free ports of 127.0.0.1.
    pub fn start() -> HubServer {
        let cdn = RangeServer::start();
        let state = State {
            cdn: cdn.addr(),
            files: HashMap::new(),
            tokens: None,
            fail: None,
            hook: None,
            seen: 0,
        };
        let endpoint = Endpoint::start("karu-testkit-hub", state, |st, asked| {
            let index = st.seen;
            st.seen += 1;
            if let Some(hook) = &st.hook {
                hook(index);
            }
            answer(st, asked)
        });
        HubServer { endpoint, cdn }
    }

    /// The hub's root URL (`HF_ENDPOINT`), `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.endpoint.root()
    }

    /// The CDN the resolve endpoint redirects to.
    pub fn cdn(&self) -> &RangeServer {
        &self.cdn
    }

    /// Adds a file of `size` bytes at `path`, the decoded request path without its leading
    /// `/` (`org/repo/resolve/main/dir/f.bin`), served by the CDN's `ok` route.
    pub fn add(&self, path: &str, size: u64) {
        self.add_routed(path, size, "ok");
    }

    /// Like [`add`](Self::add), served by the CDN's fault route `route` (for example
    /// `wrong-content-range`).
    pub fn add_routed(&self, path: &str, size: u64, route: &str) {
        self.endpoint
            .state()
            .files
            .insert(path.to_owned(), (size, route.to_owned()));
    }

    /// Only requests with `Authorization: Bearer <token>` for one of `tokens` pass; the
    /// others get 401. An empty list turns the check off.
    pub fn require_tokens(&self, tokens: &[&str]) {
        self.endpoint.state().tokens =
            (!tokens.is_empty()).then(|| tokens.iter().map(|t| (*t).to_owned()).collect());
    }

    /// The next `times` requests get `status`.
    pub fn fail_next(&self, times: u32, status: u16) {
        self.endpoint.state().fail = Some((times, status));
    }

    /// Runs `hook` with each request's index (from 0) before it is answered. It runs with
    /// the hub's state locked, so it must not call the hub.
    pub fn on_request(&self, hook: impl Fn(usize) + Send + Sync + 'static) {
        self.endpoint.state().hook = Some(Box::new(hook));
    }

    /// Every request the hub (not the CDN) received.
    pub fn log(&self) -> Vec<Asked> {
        self.endpoint.log()
    }
}

fn answer(st: &mut State, asked: &Asked) -> Answer {
    if asked.method != "GET" && asked.method != "HEAD" {
        return Answer::text(405, "GET or HEAD only");
    }
    if let Some((times, status)) = st.fail {
        st.fail = (times > 1).then_some((times - 1, status));
        return Answer::text(status, "injected failure");
    }
    if let Some(tokens) = &st.tokens {
        let bearer = asked
            .header("authorization")
            .and_then(|v| v.strip_prefix("Bearer "));
        if !bearer.is_some_and(|b| tokens.iter().any(|t| t == b)) {
            return Answer::json(
                401,
                r#"{"error":"Invalid credentials in Authorization header"}"#,
            );
        }
    }
    let name = percent_decode(asked.path.trim_start_matches('/'));
    match st.files.get(&name) {
        Some((size, route)) if name.contains("/resolve/") => Answer::text(302, "Found")
            .with_header(
                "location",
                format!(
                    "http://{}/{route}/{}?size={size}",
                    st.cdn,
                    encode_name(&name)
                ),
            ),
        _ => Answer::json(404, r#"{"error":"Entry not found"}"#)
            .with_header("x-error-code", "EntryNotFound"),
    }
}
