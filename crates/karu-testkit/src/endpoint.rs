//! The small HTTP/1.1 server on 127.0.0.1 behind every fake endpoint of the kit (credential
//! endpoints, metadata servers, the hub, the S3 responder, the bearer store): each request is
//! read whole and answered by a synchronous handler that holds the server's state, and every
//! exchange is logged.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::background::Background;

/// One request as a fake endpoint saw it, with the status it answered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Asked {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path as sent (still percent-encoded), without the query.
    pub path: String,
    /// The query as sent, without `?` (empty when absent).
    pub query: String,
    /// The query's parameters, decoded, in order.
    pub params: Vec<(String, String)>,
    /// Headers in order, names lower-case.
    pub headers: Vec<(String, String)>,
    /// The body, lossily decoded.
    pub body: String,
    /// The body's `application/x-www-form-urlencoded` fields, decoded, in order (empty for
    /// other content types).
    pub form: Vec<(String, String)>,
    /// The status answered.
    pub status: u16,
}

/// The first value named `name` (case-insensitive) of `pairs`.
fn first<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

impl Asked {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        first(&self.headers, name)
    }

    /// The first value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        first(&self.params, name)
    }

    /// The first value of form field `name`.
    pub fn field(&self, name: &str) -> Option<&str> {
        first(&self.form, name)
    }

    /// The path and query as sent.
    pub fn target(&self) -> String {
        if self.query.is_empty() {
            self.path.clone()
        } else {
            format!("{}?{}", self.path, self.query)
        }
    }
}

/// Decodes `a=b&c=d` (`application/x-www-form-urlencoded`).
fn decode_pairs(text: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(text).into_owned().collect()
}

/// What a handler answers.
#[derive(Clone, Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Bytes,
    /// Wait this long before answering (so concurrent callers overlap).
    pub(crate) delay: Duration,
}

impl Answer {
    /// An answer with a `Content-Type`.
    pub(crate) fn new(status: u16, content_type: &str, body: impl Into<Bytes>) -> Answer {
        Answer {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    /// A JSON answer.
    pub(crate) fn json(status: u16, body: impl Into<String>) -> Answer {
        Answer::new(status, "application/json", body.into())
    }

    /// A plain-text answer.
    pub(crate) fn text(status: u16, body: impl Into<String>) -> Answer {
        Answer::new(status, "text/plain", body.into())
    }

    /// Adds a header.
    pub(crate) fn with_header(mut self, name: &str, value: impl Into<String>) -> Answer {
        self.headers.push((name.to_owned(), value.into()));
        self
    }

    /// Sets the delay before answering.
    pub(crate) fn delayed(mut self, delay: Duration) -> Answer {
        self.delay = delay;
        self
    }
}

/// Locks `m`, ignoring poisoning (a panicking test must not hide the server's state).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

type Handler<S> = dyn Fn(&mut S, &Asked) -> Answer + Send + Sync;

struct Shared<S> {
    state: Mutex<S>,
    log: Mutex<Vec<Asked>>,
    handler: Box<Handler<S>>,
}

/// A running fake with state `S`: stops when dropped.
pub(crate) struct Endpoint<S> {
    shared: Arc<Shared<S>>,
    addr: SocketAddr,
    _background: Background,
}

impl<S: Send + 'static> Endpoint<S> {
    /// Binds a free port of 127.0.0.1 and answers every request with `handler`, called with
    /// the state locked, on a thread named `name`.
    pub(crate) fn start(
        name: &str,
        state: S,
        handler: impl Fn(&mut S, &Asked) -> Answer + Send + Sync + 'static,
    ) -> Endpoint<S> {
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            log: Mutex::new(Vec::new()),
            handler: Box::new(handler),
        });
        let sh = Arc::clone(&shared);
        let (addr, background) = Background::listen(name, move |l| accept_loop(l, sh));
        Endpoint {
            shared,
            addr,
            _background: background,
        }
    }

    /// The server's state, locked.
    pub(crate) fn state(&self) -> MutexGuard<'_, S> {
        lock(&self.shared.state)
    }

    /// The listening address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub(crate) fn root(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}/{}", self.root(), path.trim_start_matches('/'))
    }

    /// Every request so far, in arrival order.
    pub(crate) fn log(&self) -> Vec<Asked> {
        lock(&self.shared.log).clone()
    }

    /// Forgets the log.
    pub(crate) fn clear_log(&self) {
        lock(&self.shared.log).clear();
    }
}

async fn accept_loop<S: Send + 'static>(listener: TcpListener, shared: Arc<Shared<S>>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let shared = Arc::clone(&shared);
                async move { Ok::<_, Infallible>(handle(&shared, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

async fn handle<S>(shared: &Shared<S>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let query = parts.uri.query().unwrap_or_default().to_owned();
    let mut asked = Asked {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        params: decode_pairs(query.as_bytes()),
        query,
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
        form: Vec::new(),
        status: 0,
    };
    if asked
        .header("content-type")
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"))
    {
        asked.form = decode_pairs(&body);
    }
    let answer = (shared.handler)(&mut lock(&shared.state), &asked);
    asked.status = answer.status;
    lock(&shared.log).push(asked);
    if !answer.delay.is_zero() {
        tokio::time::sleep(answer.delay).await;
    }
    let mut resp = Response::new(Full::new(answer.body));
    *resp.status_mut() =
        hyper::StatusCode::from_u16(answer.status).unwrap_or(hyper::StatusCode::BAD_GATEWAY);
    for (n, v) in answer.headers {
        if let (Ok(n), Ok(v)) = (
            hyper::header::HeaderName::from_bytes(n.as_bytes()),
            hyper::header::HeaderValue::from_str(&v),
        ) {
            resp.headers_mut().append(n, v);
        }
    }
    resp
}
