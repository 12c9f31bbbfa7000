//! `BearerStore`: a path-style object store on 127.0.0.1 that, unlike the emulators, checks
//! bearer tokens, so tests can see credential refreshes end to end.
//!
//! * `GET`/`HEAD /<bucket>/<key>` of an object added with [`BearerStore::add`] needs
//!   `Authorization: Bearer <token>` with a token not refused by [`BearerStore::refuse`];
//!   otherwise 401.
//! * The object `<bucket>/<key>` (percent-decoded) holds `content::bytes("<bucket>/<key>", ..)`
//!   and has the strong ETag `"<size>"`.
//! * `Range: bytes=F-L`, `bytes=F-` and `bytes=-N` get 206 with `Content-Range` (the end
//!   clamped); a start at or past the end gets 416 with `bytes */T`; no `Range` gets 200.
//! * Unknown objects get 404.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::content;
use crate::plain::{Answer, Asked, Plain};
use crate::server::percent_decode;

#[derive(Default)]
struct State {
    objects: HashMap<String, u64>,
    refused: HashSet<String>,
}

/// A token-checking object store; see the [module docs](self).
pub struct BearerStore {
    plain: Plain,
    state: Arc<Mutex<State>>,
}

impl BearerStore {
    /// Starts serving on a free port of 127.0.0.1.
    pub fn start() -> BearerStore {
        let state = Arc::new(Mutex::new(State::default()));
        let st = Arc::clone(&state);
        let plain = Plain::start("karu-testkit-bearer-store", move |asked| {
            answer(&st.lock().unwrap_or_else(|e| e.into_inner()), asked)
        });
        BearerStore { plain, state }
    }

    /// The store's root URL (a `GCS_ENDPOINT`), `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.plain.addr())
    }

    /// Adds object `path` (`bucket/key`, unencoded) of `size` bytes.
    pub fn add(&self, path: &str, size: u64) {
        self.lock().objects.insert(path.to_owned(), size);
    }

    /// Answers 401 to `token` from now on (as a server does once a token expired early).
    pub fn refuse(&self, token: &str) {
        self.lock().refused.insert(token.to_owned());
    }

    /// Every request so far.
    pub fn log(&self) -> Vec<Asked> {
        self.plain.log()
    }

    /// The `Authorization` header of every request so far (empty when absent).
    pub fn authorizations(&self) -> Vec<String> {
        self.log()
            .iter()
            .map(|a| a.header("authorization").unwrap_or("").to_owned())
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn answer(st: &State, asked: &Asked) -> Answer {
    if asked.method != "GET" && asked.method != "HEAD" {
        return Answer::text(405, "GET or HEAD only");
    }
    let token = asked
        .header("authorization")
        .and_then(|v| v.strip_prefix("Bearer "));
    if !token.is_some_and(|t| !t.is_empty() && !st.refused.contains(t)) {
        return Answer::text(401, "<Error><Code>AuthenticationRequired</Code></Error>");
    }
    let name = percent_decode(asked.path.trim_start_matches('/'));
    let Some(&size) = st.objects.get(&name) else {
        return Answer::text(404, "<Error><Code>NoSuchKey</Code></Error>");
    };
    let etag = format!("\"{size}\"");
    let range = asked.header("range").and_then(|r| r.strip_prefix("bytes="));
    let (status, first, last) = match range.and_then(|r| r.split_once('-')) {
        None => (200, 0, size.saturating_sub(1)),
        Some(("", n)) => {
            let n: u64 = n.parse().unwrap_or(0);
            (206, size.saturating_sub(n), size.saturating_sub(1))
        }
        Some((f, l)) => {
            let f: u64 = f.parse().unwrap_or(u64::MAX);
            let l: u64 = l.parse().unwrap_or(u64::MAX);
            (206, f, l.min(size.saturating_sub(1)))
        }
    };
    if size == 0 || first >= size || first > last {
        return Answer::text(416, "")
            .with_header("content-range", format!("bytes */{size}"))
            .with_header("etag", etag);
    }
    let len = (last - first + 1) as usize;
    let body = content::bytes(&name, first, len);
    let out = Answer::new(status, "application/octet-stream", body)
        .with_header("etag", etag)
        .with_header("accept-ranges", "bytes");
    if status == 206 {
        out.with_header("content-range", format!("bytes {first}-{last}/{size}"))
    } else {
        out
    }
}
