//! A minimal HTTP/1.1 server on 127.0.0.1 for the small fakes (token endpoints, metadata
//! servers, the hub): each request is read whole and answered by a synchronous handler, and
//! every exchange is logged.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::background::Background;

/// One request as a fake server saw it, with the status it answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asked {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path as sent (still percent-encoded), without the query.
    pub path: String,
    /// The query as sent, without `?` (empty when absent).
    pub query: String,
    /// Headers in order, names lower-case.
    pub headers: Vec<(String, String)>,
    /// The body, lossily decoded.
    pub body: String,
    /// The status answered (0 until answered).
    pub status: u16,
}

impl Asked {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as `application/x-www-form-urlencoded` pairs (later repeats win).
    pub fn form(&self) -> HashMap<String, String> {
        decode_pairs(&self.body)
    }

    /// The query's pairs (later repeats win).
    pub fn query_pairs(&self) -> HashMap<String, String> {
        decode_pairs(&self.query)
    }
}

/// Decodes `a=b&c=d` (`application/x-www-form-urlencoded`).
fn decode_pairs(text: &str) -> HashMap<String, String> {
    form_urlencoded::parse(text.as_bytes())
        .into_owned()
        .collect()
}

/// What a handler answers.
#[derive(Clone, Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Bytes,
    /// Wait this long before answering.
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
}

type Handler = dyn Fn(&Asked) -> Answer + Send + Sync;

struct Shared {
    log: Mutex<Vec<Asked>>,
    handler: Box<Handler>,
}

/// A running fake: stops when dropped.
pub(crate) struct Plain {
    shared: Arc<Shared>,
    addr: SocketAddr,
    _background: Background,
}

impl Plain {
    /// Binds a free port of 127.0.0.1 and answers every request with `handler`.
    pub(crate) fn start(
        name: &str,
        handler: impl Fn(&Asked) -> Answer + Send + Sync + 'static,
    ) -> Plain {
        let listener = StdListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("set_nonblocking");
        let addr = listener.local_addr().expect("local_addr");
        let shared = Arc::new(Shared {
            log: Mutex::new(Vec::new()),
            handler: Box::new(handler),
        });
        let sh = Arc::clone(&shared);
        let background = Background::start(name, move || {
            let l = TcpListener::from_std(listener).expect("listener");
            tokio::spawn(accept_loop(l, sh));
        });
        Plain {
            shared,
            addr,
            _background: background,
        }
    }

    /// The listening address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// Every request so far, in arrival order.
    pub(crate) fn log(&self) -> Vec<Asked> {
        self.shared
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Forgets the log.
    pub(crate) fn clear_log(&self) {
        self.shared
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
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

async fn handle(shared: &Shared, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut asked = Asked {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().unwrap_or_default().to_owned(),
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
        status: 0,
    };
    let answer = (shared.handler)(&asked);
    asked.status = answer.status;
    shared
        .log
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(asked);
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
