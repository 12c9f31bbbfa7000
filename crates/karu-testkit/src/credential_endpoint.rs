//! What the credential endpoint servers share: a small HTTP/1.1 server on 127.0.0.1 whose
//! handler sees each whole request ([`Seen`]) and answers a status and a JSON body, the
//! request log, and the knobs every token endpoint has ([`Knobs`]: lifetime, delay, forced
//! failure).

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::background::Background;

/// One request as a credential endpoint saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path, not decoded.
    pub path: String,
    /// Query parameters, decoded, in order.
    pub query: Vec<(String, String)>,
    /// Headers, names lower-case.
    pub headers: Vec<(String, String)>,
    /// The body's `application/x-www-form-urlencoded` fields, decoded (empty for others).
    pub form: Vec<(String, String)>,
    /// The status answered.
    pub status: u16,
}

fn first<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

impl Seen {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        first(&self.headers, name)
    }

    /// The first value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        first(&self.query, name)
    }

    /// The first value of form field `name`.
    pub fn field(&self, name: &str) -> Option<&str> {
        first(&self.form, name)
    }
}

/// How a token endpoint answers, changeable while it runs.
#[derive(Clone, Debug)]
pub struct Knobs {
    /// Lifetime of the tokens it issues (default one hour).
    pub lifetime: Duration,
    /// Wait before answering (to overlap concurrent lookups).
    pub delay: Duration,
    /// Answer every request with this status and an error body instead of a token.
    pub fail_with: Option<u16>,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            lifetime: Duration::from_secs(3600),
            delay: Duration::ZERO,
            fail_with: None,
        }
    }
}

impl Knobs {
    /// Unix seconds at which a token issued now expires.
    pub fn expires_on(&self) -> u64 {
        (SystemTime::now() + self.lifetime)
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

type Handler = dyn Fn(&Seen, u64, &Knobs) -> (u16, String) + Send + Sync;

struct State {
    log: Vec<Seen>,
    issued: u64,
    knobs: Knobs,
}

pub(crate) struct Shared {
    state: Mutex<State>,
    handler: Box<Handler>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The running server; stops when dropped.
pub(crate) struct EndpointServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    _background: Background,
}

impl EndpointServer {
    /// Starts serving on a free port of 127.0.0.1. `handler(request, n, knobs)` answers a
    /// request unless the knobs force a failure; `n` numbers the token it would issue (1 for
    /// the first), so each answer can carry a distinct token. 2xx answers count as issued.
    pub(crate) fn start(
        name: &str,
        handler: impl Fn(&Seen, u64, &Knobs) -> (u16, String) + Send + Sync + 'static,
    ) -> EndpointServer {
        let listener = StdListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("set_nonblocking");
        let addr = listener.local_addr().expect("local_addr");
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                log: Vec::new(),
                issued: 0,
                knobs: Knobs::default(),
            }),
            handler: Box::new(handler),
        });
        let sh = shared.clone();
        let background = Background::start(name, move || {
            let l = TcpListener::from_std(listener).expect("listener");
            tokio::spawn(accept_loop(l, sh));
        });
        EndpointServer {
            shared,
            addr,
            _background: background,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far.
    pub(crate) fn requests(&self) -> Vec<Seen> {
        self.shared.state().log.clone()
    }

    /// Tokens issued so far.
    pub(crate) fn issued(&self) -> u64 {
        self.shared.state().issued
    }

    /// Changes the knobs.
    pub(crate) fn set_knobs(&self, change: impl FnOnce(&mut Knobs)) {
        change(&mut self.shared.state().knobs);
    }
}

/// `application/x-www-form-urlencoded` pairs, decoded.
fn pairs(text: &[u8]) -> Vec<(String, String)> {
    url::form_urlencoded::parse(text).into_owned().collect()
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let mut seen = Seen {
        method: parts.method.as_str().to_owned(),
        path: parts.uri.path().to_owned(),
        query: pairs(parts.uri.query().unwrap_or_default().as_bytes()),
        form: Vec::new(),
        headers,
        status: 0,
    };
    if seen
        .header("content-type")
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"))
    {
        seen.form = pairs(&body);
    }
    let knobs = shared.state().knobs.clone();
    if !knobs.delay.is_zero() {
        tokio::time::sleep(knobs.delay).await;
    }
    let (status, json) = match knobs.fail_with {
        Some(code) => (code, r#"{"error":"forced_failure"}"#.to_owned()),
        None => {
            let next = shared.state().issued + 1;
            (shared.handler)(&seen, next, &knobs)
        }
    };
    seen.status = status;
    {
        let mut st = shared.state();
        if (200..300).contains(&status) {
            st.issued += 1;
        }
        st.log.push(seen);
    }
    let mut resp = Response::new(Full::new(Bytes::from(json)));
    *resp.status_mut() = hyper::StatusCode::from_u16(status).expect("valid status");
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(handle(shared, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// A JSON error body.
pub(crate) fn error_json(code: &str, why: &str) -> String {
    format!(r#"{{"error":"{code}","error_description":"{why}"}}"#)
}
