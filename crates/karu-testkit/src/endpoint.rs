//! A small HTTP/1.1 server on 127.0.0.1 for the credential endpoints: each request is read
//! whole and answered by a synchronous handler, and every request is counted.

use std::convert::Infallible;
use std::net::TcpListener as StdListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::background::Background;

/// A request as the handler sees it.
pub(crate) struct Request {
    /// `GET`, `PUT`, `POST`, ...
    pub(crate) method: String,
    /// The path, without the query.
    pub(crate) path: String,
    /// The headers.
    pub(crate) headers: hyper::HeaderMap,
    /// The whole body.
    pub(crate) body: Bytes,
}

impl Request {
    /// A header's value, when present and text.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The handler's answer, sent after `delay`.
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: String,
    pub(crate) delay: Duration,
}

impl Reply {
    /// An answer with no delay.
    pub(crate) fn new(status: u16, content_type: &'static str, body: impl Into<String>) -> Reply {
        Reply {
            status,
            content_type,
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    /// A `text/plain` answer.
    pub(crate) fn text(status: u16, body: impl Into<String>) -> Reply {
        Reply::new(status, "text/plain", body)
    }
}

/// The handler a server answers with.
pub(crate) type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

/// A running endpoint; stops when dropped.
pub(crate) struct Endpoint {
    port: u16,
    requests: Arc<AtomicU64>,
    _background: Background,
}

impl Endpoint {
    /// Binds a free port of 127.0.0.1 and serves `handler` on a thread named `name`.
    pub(crate) fn start(name: &str, handler: Arc<Handler>) -> Endpoint {
        let listener = StdListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("set_nonblocking");
        let port = listener.local_addr().expect("local_addr").port();
        let requests = Arc::new(AtomicU64::new(0));
        let counter = requests.clone();
        let background = Background::start(name, move || {
            let listener = TcpListener::from_std(listener).expect("listener");
            tokio::spawn(accept_loop(listener, handler, counter));
        });
        Endpoint {
            port,
            requests,
            _background: background,
        }
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub(crate) fn root(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Requests received so far.
    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

async fn accept_loop(listener: TcpListener, handler: Arc<Handler>, requests: Arc<AtomicU64>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        let handler = handler.clone();
        let requests = requests.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let handler = handler.clone();
                let requests = requests.clone();
                async move {
                    requests.fetch_add(1, Ordering::SeqCst);
                    let (parts, body) = req.into_parts();
                    let body = body
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    let request = Request {
                        method: parts.method.to_string(),
                        path: parts.uri.path().to_owned(),
                        headers: parts.headers,
                        body,
                    };
                    let reply = handler(&request);
                    if !reply.delay.is_zero() {
                        tokio::time::sleep(reply.delay).await;
                    }
                    let response = hyper::Response::builder()
                        .status(reply.status)
                        .header("Content-Type", reply.content_type)
                        .body(Full::new(Bytes::from(reply.body)))
                        .expect("valid response");
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
