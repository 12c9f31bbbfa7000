//! `RangeServer`: an HTTP/1.1 range server on loopback that serves deterministic objects and
//! injects one fault per route.
//!
//! The server runs on its own thread with its own tokio runtime, so plain synchronous `#[test]`s
//! can use it. It listens on two ports of 127.0.0.1: the primary one ([`RangeServer::addr`]) and a
//! secondary one ([`RangeServer::alt_addr`]) that serves exactly the same routes and objects and
//! exists so that redirects can cross hosts. It stops when the `RangeServer` is dropped.
//!
//! # URL scheme
//!
//! ```text
//! http://127.0.0.1:PORT/<fault>/<name>?size=<N>[&<param>=<value>...]
//! ```
//!
//! * `<name>` is the rest of the path after the fault segment (it may contain `/`), percent-decoded.
//!   The object's bytes are [`content::bytes`]`(name, ..)`; after a version
//!   change they are those of [`versioned_name`]`(name, version)`.
//! * `size=N` gives the object's size in bytes. Without it the object must have been registered
//!   with [`RangeServer::register`]; otherwise the answer is 404.
//! * The strong ETag is [`etag`]`(name, size, version)`, e.g. `"6c1a2b3c4d5e6f70-400-0"`.
//! * Query values are percent-decoded (`+` stays `+`); unknown parameters are ignored; an
//!   unknown fault or a non-numeric number is a 400.
//!
//! Parameters accepted by every route:
//!
//! | parameter | meaning |
//! |---|---|
//! | `size=N` | object size |
//! | `delay_ms=D` | wait D ms before answering (overrides [`RangeServer::set_delay`]) |
//! | `if_match=ignore` | do not evaluate `If-Match` |
//! | `if_unmodified_since=ignore` | do not evaluate `If-Unmodified-Since` |
//! | `etag=none` | send no `ETag` |
//! | `last_modified=1` | send `Last-Modified`: 2026-01-01 00:00:00 GMT plus the version in hours |
//!
//! # Normal semantics (route `ok`, and every fault route where the fault does not apply)
//!
//! * `GET` and `HEAD` only (others: 405). Every 200/206 carries `Accept-Ranges: bytes`, the
//!   `ETag`, `Content-Length` and `Content-Type: application/octet-stream`; 412 and 416 carry the
//!   current `ETag` too. Error answers have a short `text/plain` body.
//! * No `Range` header: 200 with the whole object.
//! * One range `bytes=F-L`, `bytes=F-` or `bytes=-N`: 206 with `Content-Range: bytes F-L/T` (the end
//!   clamped to `T-1`, a suffix longer than the object giving the whole object).
//! * An unsatisfiable range (start at or past the end, `bytes=-0`, any range of an empty object):
//!   416 with `Content-Range: bytes */T`.
//! * A `Range` header that is not one well-formed byte range (another unit, a syntax error,
//!   `F > L`, or several ranges such as `bytes=0-1,5-6`) is ignored: 200 with the whole object.
//! * `If-Match`: `*` or a list of strong tags; when none matches the current ETag: 412 (weak tags
//!   never match). It is evaluated before the range.
//! * `If-Unmodified-Since` (with `last_modified=1`): when the object's `Last-Modified` is later
//!   than the date: 412 (an unparseable date is ignored). It is evaluated after `If-Match`.
//! * Connections are kept alive (HTTP/1.1 persistent connections).
//!
//! # Fault routes
//!
//! | route | behaviour | parameters |
//! |---|---|---|
//! | `ok` | normal semantics | |
//! | `ignore-range` | 200 with the whole object, whatever the `Range` | |
//! | `ignore-suffix` | suffix ranges (`bytes=-N`) get 200 with the whole object; other ranges are served normally | |
//! | `truncate` | correct headers, the body is cut after K bytes, then the connection is closed (FIN) | `k=K` (default 0) |
//! | `reset` | correct headers, the connection is reset (RST, `SO_LINGER` 0) after K body bytes | `k=K` (default 0) |
//! | `no-content-range` | 206 with the right body but no `Content-Range` | |
//! | `garbled-content-range` | 206 with the right body and an unparseable `Content-Range` | `value=V` (default `bytes garbled`) |
//! | `wrong-content-range` | 206 for another range: the requested one shifted by S bytes (backwards if the shifted start would pass the end); header and body agree with each other, not with the request | `shift=S` (default 1) |
//! | `416` | always 416 with `Content-Range: bytes */T` | |
//! | `status` | the first `times` requests for this route and name get `code`, then normal semantics | `code` (default 503), `times` (default 1), `retry_after=S` (`Retry-After` in seconds), `retry_after_date=S` (`Retry-After` as an HTTP date S seconds from now), `body=TEXT` (error body, e.g. `<Code>RequestTimeout</Code>` with `code=400`) |
//! | `etag-change` | the object's version (ETag and content) changes between requests: request i (counting from 0 for this route and name) sees version `i / every`, or, with `at=J`, version 0 for the first J requests and 1 afterwards; with `k=K` every body is also cut after K bytes, as `truncate` does | `every` (default 1), `at`, `k` |
//! | `trickle` | normal headers; the body is sent in small chunks no faster than R bytes/s | `rate=R` (default 1000) |
//! | `redirect` | answers `code` with a `Location` to `redirect` again with `hops - 1`, and when `hops` is 1 to `/<to>/<name>` with the other query parameters kept (the redirect's own `hops`, `code`, `to`, `cross`, `relative` removed); `cross=1` points each hop at the other listener (primary ↔ secondary); `relative=1` sends a path-only `Location` | `hops` (default 1), `code` (default 302), `to` (default `ok`), `cross`, `relative` |
//! | `gzip` | normal status and `Content-Range`, plus `Content-Encoding: gzip`; the body is the gzip of the range's bytes, or with `raw=1` the plain bytes | `raw=1` |
//! | `warning-214` | normal semantics plus `Warning: 214 - "Transformation Applied"` | |
//! | `short-object` | normal semantics (a range passing the end gets `bytes F-(T-1)/T`, the object ending inside the request); with `star=1` the total is sent as `*` | `star=1` |
//! | `throttle` | answers `code` to a request that arrives while more than `n` requests are in flight on the server (itself included), or, with `after=J`, to every request of this route and name after the first J; other requests get normal semantics, their body sent at `rate` bytes/s when given | `n` (default 3, or [`RangeServer::set_throttle_above`]), `after`, `code` (default 503), `retry_after=S`, `rate=R` |
//! | `multipart` | a satisfiable range gets a 206 whose body is a `multipart/byteranges` document holding that range, sent chunked (no `Content-Length`) with the range's own `Content-Range` on top as well | |
//! | `unproven` | the first `proven` requests (for this route and name) are served normally, their bodies cut after K bytes as `truncate` does when `k` is given; later ones see the next version, ignore `If-Match` and prove nothing: no `ETag`, or with `etag=weak` the weak `W/` form of the first version's tag | `proven` (default 1), `k`, `etag=weak` |
//! | `chaos` | each request served by a fault route drawn from a seeded sequence ([`chaos`]) | `seed`, `per_mille`, `kinds` |
//!
//! Counters for `status` and `etag-change` are kept per route and name (the path without the
//! query), so a test that says "fail twice then succeed" uses a fresh name or calls
//! [`RangeServer::reset_counters`].
//!
//! # Observation
//!
//! Every request is logged ([`RangeServer::log`]) with its method, target, `Range`, headers,
//! connection id (a counter over accepted TCP connections of both listeners, from 1), the listener
//! port and the status sent. [`RangeServer::max_in_flight`] is the largest number of requests
//! handled at once (from the request's arrival until its body was sent or dropped).

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener as StdListener};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::background::Background;
use crate::content;

pub mod chaos;

/// The strong ETag (with its quotes) of object `name` of `size` bytes at `version`.
pub fn etag(name: &str, size: u64, version: u64) -> String {
    format!("\"{:016x}-{size:x}-{version}\"", content::seed(name))
}

/// The content name of `name` at `version`: `name` itself for version 0, `name#vN` after that.
/// The bytes served for that version are `content::bytes(&versioned_name(name, version), ..)`.
pub fn versioned_name(name: &str, version: u64) -> String {
    if version == 0 {
        name.to_string()
    } else {
        format!("{name}#v{version}")
    }
}

/// One request as the server saw it, with the status it answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Logged {
    /// Id of the TCP connection the request came on (1 for the first accepted connection).
    pub conn: u64,
    /// Local port of the listener that accepted the connection.
    pub port: u16,
    /// Request method, e.g. `GET`.
    pub method: String,
    /// Request target as sent: path and query.
    pub target: String,
    /// The fault segment of the path (e.g. `ok`, `truncate`); for `chaos`, the route drawn.
    pub fault: String,
    /// The object name (percent-decoded).
    pub name: String,
    /// The `Range` header, if any.
    pub range: Option<String>,
    /// All request headers in order, names lower-case, values lossily decoded.
    pub headers: Vec<(String, String)>,
    /// Status code sent.
    pub status: u16,
    /// When the request's head had been read: with [`RangeServer::set_delay`], it tells
    /// whether a request came while another was still waiting for its answer.
    pub arrived: std::time::Instant,
}

impl Logged {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone, Copy)]
struct Registered {
    size: u64,
    version: u64,
}

#[derive(Default)]
struct State {
    log: Vec<Logged>,
    objects: HashMap<String, Registered>,
    counters: HashMap<String, u64>,
    delay: Duration,
    throttle_above: Option<u64>,
}

struct Shared {
    state: Mutex<State>,
    chaos: chaos::Chaos,
    next_conn: AtomicU64,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// Response body bytes handed to the connections (what a client that stops reading
    /// early did not take is not counted, beyond what the socket buffers held).
    body_bytes: AtomicU64,
    primary_port: u16,
    secondary_port: u16,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A fault-injecting HTTP/1.1 range server on 127.0.0.1; see the [module docs](self) for routes.
pub struct RangeServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    alt_addr: SocketAddr,
    _background: Background,
}

impl RangeServer {
    /// Binds two free ports on 127.0.0.1 and starts serving on a thread of its own.
    ///
    /// Panics if the ports cannot be bound or the runtime cannot start (this is a test kit).
    pub fn start() -> RangeServer {
        let primary = StdListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let secondary = StdListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        for l in [&primary, &secondary] {
            l.set_nonblocking(true).expect("set_nonblocking");
        }
        let addr = primary.local_addr().expect("local_addr");
        let alt_addr = secondary.local_addr().expect("local_addr");
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            chaos: chaos::Chaos::default(),
            next_conn: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            body_bytes: AtomicU64::new(0),
            primary_port: addr.port(),
            secondary_port: alt_addr.port(),
        });
        let sh = shared.clone();
        let background = Background::start("karu-testkit-range-server", move || {
            for l in [primary, secondary] {
                let l = TcpListener::from_std(l).expect("listener");
                tokio::spawn(accept_loop(l, sh.clone()));
            }
        });
        RangeServer {
            shared,
            addr,
            alt_addr,
            _background: background,
        }
    }

    /// Address of the primary listener.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Address of the secondary listener (same routes and objects, another port).
    pub fn alt_addr(&self) -> SocketAddr {
        self.alt_addr
    }

    /// `http://127.0.0.1:PORT/` followed by `path` (a leading `/` is optional),
    /// e.g. `server.url("truncate/a.bin?size=1000&k=10")`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// Like [`url`](Self::url), on the secondary listener.
    pub fn alt_url(&self, path: &str) -> String {
        format!("http://{}/{}", self.alt_addr, path.trim_start_matches('/'))
    }

    /// Registers object `name` with `size` bytes, so URLs may omit `size=`.
    pub fn register(&self, name: &str, size: u64) {
        let mut st = self.shared.state();
        let e = st
            .objects
            .entry(name.to_string())
            .or_insert(Registered { size, version: 0 });
        e.size = size;
    }

    /// Sets the version of object `name` (registering it with size 0 if unknown), which changes
    /// its ETag and content for every route.
    pub fn set_version(&self, name: &str, version: u64) {
        let mut st = self.shared.state();
        st.objects
            .entry(name.to_string())
            .or_insert(Registered {
                size: 0,
                version: 0,
            })
            .version = version;
    }

    /// Default delay before every response (0 at start); the `delay_ms` parameter overrides it.
    pub fn set_delay(&self, delay: Duration) {
        self.shared.state().delay = delay;
    }

    /// The `throttle` route's `n` for requests that do not give one (default 3).
    pub fn set_throttle_above(&self, n: u64) {
        self.shared.state().throttle_above = Some(n);
    }

    /// Every request so far, in the order the responses were decided.
    pub fn log(&self) -> Vec<Logged> {
        self.shared.state().log.clone()
    }

    /// Forgets the log.
    pub fn clear_log(&self) {
        self.shared.state().log.clear();
    }

    /// The log so far, emptied at once (no entry lost between reading and clearing), for a
    /// long run that tallies it as it goes.
    pub fn take_log(&self) -> Vec<Logged> {
        std::mem::take(&mut self.shared.state().log)
    }

    /// Resets the per-route request counters used by `status` and `etag-change`.
    pub fn reset_counters(&self) {
        self.shared.state().counters.clear();
    }

    /// Number of TCP connections accepted so far on both listeners.
    pub fn connections_accepted(&self) -> u64 {
        self.shared.next_conn.load(Ordering::SeqCst)
    }

    /// Response body bytes sent so far, as handed to the connections: an open-ended range
    /// that the client stops reading counts what was sent, not what its range named.
    pub fn body_bytes_sent(&self) -> u64 {
        self.shared.body_bytes.load(Ordering::SeqCst)
    }

    /// Number of requests being handled right now.
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::SeqCst)
    }

    /// The largest number of requests handled at once since start or the last
    /// [`reset_max_in_flight`](Self::reset_max_in_flight).
    pub fn max_in_flight(&self) -> usize {
        self.shared.max_in_flight.load(Ordering::SeqCst)
    }

    /// Restarts the [`max_in_flight`](Self::max_in_flight) watermark from the current value.
    pub fn reset_max_in_flight(&self) {
        let now = self.shared.in_flight.load(Ordering::SeqCst);
        self.shared.max_in_flight.store(now, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for RangeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeServer")
            .field("addr", &self.addr)
            .field("alt_addr", &self.alt_addr)
            .finish()
    }
}

// ---------------------------------------------------------------------------------------------
// Connections

/// Per-connection control shared between the IO wrapper and response bodies.
#[derive(Default)]
struct ConnCtl {
    reset: AtomicBool,
}

/// The TCP stream of one connection; resets it (RST) instead of closing when asked to.
struct ConnIo {
    stream: TcpStream,
    ctl: Arc<ConnCtl>,
}

impl ConnIo {
    fn resetting(&self) -> bool {
        if self.ctl.reset.load(Ordering::SeqCst) {
            let _ = self.stream.set_zero_linger();
            true
        } else {
            false
        }
    }
}

impl AsyncRead for ConnIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for ConnIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.resetting() {
            // No FIN: the drop that follows sends the RST.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

impl Drop for ConnIo {
    fn drop(&mut self) {
        self.resetting();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        };
        let conn = shared.next_conn.fetch_add(1, Ordering::SeqCst) + 1;
        let _ = stream.set_nodelay(true);
        let ctl = Arc::new(ConnCtl::default());
        let io = TokioIo::new(ConnIo {
            stream,
            ctl: ctl.clone(),
        });
        let shared = shared.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                let ctl = ctl.clone();
                async move {
                    Ok::<_, Infallible>(
                        handle(
                            shared,
                            Conn {
                                id: conn,
                                port,
                                ctl,
                            },
                            req,
                        )
                        .await,
                    )
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .serve_connection(io, svc)
                .await;
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Bodies

/// Keeps a request counted as in flight until its response body is done or dropped.
struct InFlight(Arc<Shared>);

impl InFlight {
    fn new(shared: Arc<Shared>) -> InFlight {
        let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        shared.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(shared)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

const CHUNK: u64 = 64 * 1024;

enum Inner {
    Full(Option<Bytes>),
    /// Content of `name` in `[pos, end)`, generated chunk by chunk.
    Gen {
        name: String,
        pos: u64,
        end: u64,
    },
    /// Chunks from a producer task (trickle, truncate, reset).
    Chan(mpsc::Receiver<io::Result<Bytes>>),
}

struct ServerBody {
    inner: Inner,
    /// Holds the request in flight until the body ends; counts the bytes sent.
    in_flight: InFlight,
}

impl Body for ServerBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let frame = match &mut self.inner {
            Inner::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Inner::Gen { name, pos, end } => {
                if *pos >= *end {
                    return Poll::Ready(None);
                }
                let n = (*end - *pos).min(CHUNK) as usize;
                let mut buf = vec![0u8; n];
                content::fill(name, *pos, &mut buf);
                *pos += n as u64;
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(buf)))))
            }
            Inner::Chan(rx) => rx.poll_recv(cx).map(|o| o.map(|r| r.map(Frame::data))),
        };
        if let Poll::Ready(Some(Ok(f))) = &frame
            && let Some(data) = f.data_ref()
        {
            let n = data.len() as u64;
            self.in_flight.0.body_bytes.fetch_add(n, Ordering::SeqCst);
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Full(b) => b.as_ref().is_none_or(|b| b.is_empty()),
            Inner::Gen { pos, end, .. } => pos >= end,
            Inner::Chan(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Inner::Gen { pos, end, .. } => SizeHint::with_exact(end.saturating_sub(*pos)),
            Inner::Chan(_) => SizeHint::default(),
        }
    }
}

/// How the body of a successful response is sent.
enum Delivery {
    Normal,
    Gzip { raw: bool },
    Trickle { rate: u64 },
    Cut { k: u64, reset: bool },
}

async fn produce(
    tx: mpsc::Sender<io::Result<Bytes>>,
    name: String,
    start: u64,
    len: u64,
    delivery: Delivery,
    ctl: Arc<ConnCtl>,
) {
    match delivery {
        Delivery::Trickle { rate } => {
            let rate = rate.max(1);
            let chunk = (rate / 20).clamp(1, 16 * 1024);
            let t0 = tokio::time::Instant::now();
            let mut sent = 0;
            while sent < len {
                let n = chunk.min(len - sent);
                let b = Bytes::from(content::bytes(&name, start + sent, n as usize));
                if tx.send(Ok(b)).await.is_err() {
                    return;
                }
                sent += n;
                let due = t0 + Duration::from_secs_f64(sent as f64 / rate as f64);
                tokio::time::sleep_until(due).await;
            }
        }
        Delivery::Cut { k, reset } => {
            let k = k.min(len);
            let mut sent = 0;
            while sent < k {
                let n = CHUNK.min(k - sent);
                let b = Bytes::from(content::bytes(&name, start + sent, n as usize));
                if tx.send(Ok(b)).await.is_err() {
                    return;
                }
                sent += n;
            }
            if k == len {
                return;
            }
            // Let the connection flush what was sent before failing it.
            tokio::time::sleep(Duration::from_millis(30)).await;
            if reset {
                ctl.reset.store(true, Ordering::SeqCst);
            }
            let what = if reset { "reset" } else { "truncate" };
            let _ = tx
                .send(Err(io::Error::other(format!("injected {what}"))))
                .await;
        }
        Delivery::Normal | Delivery::Gzip { .. } => unreachable!("not produced by a task"),
    }
}

// ---------------------------------------------------------------------------------------------
// Requests

struct Conn {
    id: u64,
    port: u16,
    ctl: Arc<ConnCtl>,
}

/// A parsed single byte range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spec {
    FromTo(u64, u64),
    From(u64),
    Suffix(u64),
}

/// Parses a `Range` header; `None` when it must be ignored (not one well-formed byte range).
fn parse_range(h: &str) -> Option<Spec> {
    let (unit, set) = h.trim().split_once('=')?;
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return None;
    }
    let set = set.trim();
    if set.contains(',') {
        return None;
    }
    let (a, b) = set.split_once('-')?;
    let (a, b) = (a.trim(), b.trim());
    let num = |s: &str| -> Option<u64> {
        if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
            None
        } else {
            s.parse().ok()
        }
    };
    match (a.is_empty(), b.is_empty()) {
        (true, true) => None,
        (true, false) => Some(Spec::Suffix(num(b)?)),
        (false, true) => Some(Spec::From(num(a)?)),
        (false, false) => {
            let (f, l) = (num(a)?, num(b)?);
            (f <= l).then_some(Spec::FromTo(f, l))
        }
    }
}

/// The inclusive range `[first, last]` served for `spec` on an object of `total` bytes, or `None`
/// when unsatisfiable.
fn resolve(spec: Spec, total: u64) -> Option<(u64, u64)> {
    if total == 0 {
        return None;
    }
    match spec {
        Spec::FromTo(f, l) => (f < total).then(|| (f, l.min(total - 1))),
        Spec::From(f) => (f < total).then(|| (f, total - 1)),
        Spec::Suffix(0) => None,
        Spec::Suffix(n) => Some((total - n.min(total), total - 1)),
    }
}

/// The inclusive span one `Range` header selects of `total` bytes, for the fakes that serve
/// single ranges: `None` when it cannot be satisfied (a malformed header counts as
/// unsatisfiable there: karu sends none).
pub(crate) fn span(header: &str, total: u64) -> Option<(u64, u64)> {
    resolve(parse_range(header)?, total)
}

/// Percent-decodes a URL path; invalid escapes stay as written.
pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(v) = hex {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

struct Query<'a> {
    raw: &'a str,
    pairs: Vec<(String, String)>,
}

impl<'a> Query<'a> {
    fn parse(raw: &'a str) -> Query<'a> {
        let pairs = raw
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (percent_decode(k), percent_decode(v)),
                None => (percent_decode(p), String::new()),
            })
            .collect();
        Query { raw, pairs }
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn num(&self, key: &str) -> Result<Option<u64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| format!("bad value for {key}: {v:?}")),
        }
    }

    fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("1" | "true" | "yes" | ""))
    }

    /// The raw query without the pairs whose key is in `drop`, and with `set` appended.
    fn rewrite(&self, drop: &[&str], set: Option<(&str, String)>) -> String {
        let mut parts: Vec<String> = self
            .raw
            .split('&')
            .filter(|p| !p.is_empty())
            .filter(|p| {
                let k = p.split_once('=').map_or(*p, |(k, _)| k);
                !drop.contains(&percent_decode(k).as_str())
            })
            .map(str::to_string)
            .collect();
        if let Some((k, v)) = set {
            parts.push(format!("{k}={v}"));
        }
        parts.join("&")
    }
}

const FAULTS: &[&str] = &[
    "ok",
    "ignore-range",
    "ignore-suffix",
    "truncate",
    "reset",
    "no-content-range",
    "garbled-content-range",
    "wrong-content-range",
    "416",
    "status",
    "etag-change",
    "trickle",
    "redirect",
    "gzip",
    "warning-214",
    "short-object",
    "throttle",
    "unproven",
    "multipart",
];

type Resp = Response<ServerBody>;

fn simple(status: u16, text: String, guard: InFlight) -> Resp {
    let body = Bytes::from(text);
    let mut r = Response::new(ServerBody {
        inner: Inner::Full(Some(body.clone())),
        in_flight: guard,
    });
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    set(&mut r, "content-type", "text/plain".into());
    set(&mut r, "content-length", body.len().to_string());
    r
}

fn set(r: &mut Resp, name: &'static str, value: String) {
    if let Ok(v) = HeaderValue::from_str(&value) {
        r.headers_mut().insert(HeaderName::from_static(name), v);
    }
}

async fn handle(shared: Arc<Shared>, conn: Conn, req: Request<Incoming>) -> Resp {
    let guard = InFlight::new(shared.clone());
    let method = req.method().clone();
    let target = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().path().to_string(), |p| p.as_str().to_string());
    let path = req.uri().path().to_string();
    let query_raw = req.uri().query().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    drop(req);
    let (fault, name) = match path.trim_start_matches('/').split_once('/') {
        Some((f, n)) => (f.to_string(), percent_decode(n)),
        None => (path.trim_start_matches('/').to_string(), String::new()),
    };
    let mut logged = Logged {
        conn: conn.id,
        port: conn.port,
        method: method.to_string(),
        target,
        fault: fault.clone(),
        name: name.clone(),
        range: headers
            .iter()
            .find(|(k, _)| k == "range")
            .map(|(_, v)| v.clone()),
        headers,
        status: 0,
        arrived: std::time::Instant::now(),
    };
    // The chaos route serves each request as the fault route it draws.
    let (fault, query_raw) = if fault == chaos::ROUTE {
        match shared
            .chaos
            .rewrite(&shared, &name, &query_raw, logged.range.as_deref())
        {
            Ok((route, query)) => {
                logged.fault = route.to_string();
                (logged.fault.clone(), query)
            }
            Err(e) => {
                let resp = simple(400, e, guard);
                logged.status = 400;
                shared.state().log.push(logged);
                return resp;
            }
        }
    } else {
        (fault, query_raw)
    };
    let query = Query::parse(&query_raw);
    let resp = respond(
        &shared, &conn, &method, &fault, &name, &query, &logged, guard,
    )
    .await;
    logged.status = resp.status().as_u16();
    shared.state().log.push(logged);
    resp
}

#[allow(clippy::too_many_arguments)]
async fn respond(
    shared: &Arc<Shared>,
    conn: &Conn,
    method: &Method,
    fault: &str,
    name: &str,
    q: &Query<'_>,
    req: &Logged,
    guard: InFlight,
) -> Resp {
    // Delay first, so that concurrency builds up whatever the answer.
    let delay = match q.num("delay_ms") {
        Ok(Some(ms)) => Duration::from_millis(ms),
        Ok(None) => shared.state().delay,
        Err(e) => return simple(400, e, guard),
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    if !FAULTS.contains(&fault) {
        return simple(400, format!("unknown fault route {fault:?}\n"), guard);
    }
    if name.is_empty() {
        return simple(400, "missing object name\n".into(), guard);
    }
    if method != Method::GET && method != Method::HEAD {
        let mut r = simple(405, "only GET and HEAD\n".into(), guard);
        set(&mut r, "allow", "GET, HEAD".into());
        return r;
    }
    let params = (|| -> Result<_, String> {
        Ok((
            q.num("size")?,
            q.num("k")?.unwrap_or(0),
            q.num("times")?.unwrap_or(1),
            q.num("every")?.unwrap_or(1).max(1),
            q.num("at")?,
            q.num("rate")?.unwrap_or(1000),
            q.num("shift")?.unwrap_or(1),
            q.num("hops")?.unwrap_or(1),
        ))
    })();
    let (size, k, times, every, at, rate, shift, hops) = match params {
        Ok(p) => p,
        Err(e) => return simple(400, e, guard),
    };

    // Per route-and-name request counter.
    let (count, registered) = {
        let mut st = shared.state();
        let c = st.counters.entry(format!("{fault}/{name}")).or_insert(0);
        let count = *c;
        *c += 1;
        (count, st.objects.get(name).copied())
    };
    let total = match (size, registered) {
        (Some(s), _) => s,
        (None, Some(r)) => r.size,
        (None, None) => return simple(404, format!("no such object {name:?}\n"), guard),
    };
    let mut version = registered.map_or(0, |r| r.version);

    let throttled = fault == "throttle" && {
        let over = |name: &str, default: u64| match q.num(name) {
            Ok(v) => v.unwrap_or(default),
            Err(_) => default,
        };
        match q.num("after") {
            Ok(Some(j)) => count >= j,
            _ => {
                let default = shared.state().throttle_above.unwrap_or(3);
                shared.in_flight.load(Ordering::SeqCst) as u64 > over("n", default)
            }
        }
    };
    match fault {
        "status" | "throttle" if (fault == "status" && count < times) || throttled => {
            let code = match q.num("code") {
                Ok(c) => c.unwrap_or(503) as u16,
                Err(e) => return simple(400, e, guard),
            };
            let text = match q.get("body") {
                Some(b) => b.to_string(),
                None => format!("injected {code} ({} of {times})\n", count + 1),
            };
            let mut r = simple(code, text, guard);
            match (q.num("retry_after"), q.num("retry_after_date")) {
                (Ok(Some(s)), _) => set(&mut r, "retry-after", s.to_string()),
                (_, Ok(Some(s))) => set(
                    &mut r,
                    "retry-after",
                    httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(s)),
                ),
                _ => {}
            }
            return r;
        }
        "redirect" => {
            let code = match q.num("code") {
                Ok(c) => c.unwrap_or(302) as u16,
                Err(e) => return simple(400, e, guard),
            };
            let location_path = if hops > 1 {
                let rest = q.rewrite(&["hops"], Some(("hops", (hops - 1).to_string())));
                format!("/redirect/{}?{rest}", encode_name(name))
            } else {
                let to = q.get("to").unwrap_or("ok");
                let rest = q.rewrite(&["hops", "code", "to", "cross", "relative"], None);
                let sep = if rest.is_empty() { "" } else { "?" };
                format!("/{to}/{}{sep}{rest}", encode_name(name))
            };
            let location = if q.flag("relative") {
                location_path
            } else {
                let port = if !q.flag("cross") {
                    conn.port
                } else if conn.port == shared.primary_port {
                    shared.secondary_port
                } else {
                    shared.primary_port
                };
                format!("http://127.0.0.1:{port}{location_path}")
            };
            let mut r = simple(code, format!("redirect to {location}\n"), guard);
            set(&mut r, "location", location);
            return r;
        }
        "etag-change" => {
            version += match at {
                Some(j) => u64::from(count >= j),
                None => count / every,
            };
        }
        _ => {}
    }
    // `unproven`: past the proven requests, the next version answers without a strong tag.
    let proven = match q.num("proven") {
        Ok(p) => p.unwrap_or(1),
        Err(e) => return simple(400, e, guard),
    };
    let unproven = fault == "unproven" && count >= proven;
    let weak = format!("W/{}", etag(name, total, version));
    version += u64::from(unproven);

    let tag = etag(name, total, version);
    let content_name = versioned_name(name, version);
    if q.get("if_match") != Some("ignore")
        && !unproven
        && let Some(im) = req.header("if-match")
        && !if_match_ok(im, &tag)
    {
        let mut r = simple(412, "precondition failed\n".into(), guard);
        set(&mut r, "etag", tag);
        return r;
    }

    if q.flag("last_modified")
        && q.get("if_unmodified_since") != Some("ignore")
        && let Some(since) = req.header("if-unmodified-since")
        && let Ok(since) = httpdate::parse_http_date(since)
        && last_modified(version) > since
    {
        let mut r = simple(412, "precondition failed\n".into(), guard);
        set(&mut r, "etag", tag);
        return r;
    }

    let spec = req.range.as_deref().and_then(parse_range);
    let spec = match (fault, spec) {
        ("ignore-range", _) | ("ignore-suffix", Some(Spec::Suffix(_))) => None,
        (_, s) => s,
    };

    if fault == "416" || spec.is_some_and(|s| resolve(s, total).is_none()) {
        let mut r = simple(416, "range not satisfiable\n".into(), guard);
        set(&mut r, "content-range", format!("bytes */{total}"));
        set(&mut r, "etag", tag);
        set(&mut r, "accept-ranges", "bytes".into());
        return r;
    }

    // What is served: `(first, last)` of the body, and the Content-Range header if any.
    let (status, first, last) = match spec.and_then(|s| resolve(s, total)) {
        Some((f, l)) => (206u16, f, l),
        None if total == 0 => (200, 0, 0),
        None => (200, 0, total - 1),
    };
    let (first, last) = if fault == "wrong-content-range" && status == 206 {
        let len = last - first;
        if first + shift < total {
            (first + shift, (last + shift).min(total - 1))
        } else {
            let f = first.saturating_sub(shift);
            (f, f + len)
        }
    } else {
        (first, last)
    };
    let len = if total == 0 { 0 } else { last - first + 1 };
    let content_range = (status == 206).then(|| match fault {
        "no-content-range" => None,
        "garbled-content-range" => Some(q.get("value").unwrap_or("bytes garbled").to_string()),
        "short-object" if q.flag("star") => Some(format!("bytes {first}-{last}/*")),
        _ => Some(format!("bytes {first}-{last}/{total}")),
    });

    let delivery = match fault {
        "gzip" => Delivery::Gzip { raw: q.flag("raw") },
        "trickle" => Delivery::Trickle { rate },
        "throttle" if q.get("rate").is_some() => Delivery::Trickle { rate },
        "truncate" => Delivery::Cut { k, reset: false },
        // A version change with an interrupted body: what resuming must survive.
        "etag-change" if q.get("k").is_some() => Delivery::Cut { k, reset: false },
        "unproven" if !unproven && q.get("k").is_some() => Delivery::Cut { k, reset: false },
        "reset" => Delivery::Cut { k, reset: true },
        _ => Delivery::Normal,
    };
    let head = method == Method::HEAD;
    if fault == "multipart" && status == 206 && !head {
        let range = format!("bytes {first}-{last}/{total}");
        return multipart(&content_name, first, len, range, tag, guard);
    }
    let (inner, body_len) = match delivery {
        _ if head => (Inner::Full(None), len),
        Delivery::Normal => (
            Inner::Gen {
                name: content_name,
                pos: first,
                end: first + len,
            },
            len,
        ),
        Delivery::Gzip { raw } => {
            let plain = content::bytes(&content_name, first, len as usize);
            let data = if raw { plain } else { gzip(&plain) };
            let n = data.len() as u64;
            (Inner::Full(Some(Bytes::from(data))), n)
        }
        d => {
            let (tx, rx) = mpsc::channel(4);
            tokio::spawn(produce(tx, content_name, first, len, d, conn.ctl.clone()));
            (Inner::Chan(rx), len)
        }
    };
    let mut r = Response::new(ServerBody {
        inner,
        in_flight: guard,
    });
    *r.status_mut() = StatusCode::from_u16(status).expect("valid status");
    set(&mut r, "content-length", body_len.to_string());
    set(&mut r, "content-type", "application/octet-stream".into());
    set(&mut r, "accept-ranges", "bytes".into());
    match (unproven, q.get("etag")) {
        (false, Some("none")) => {}
        (false, _) => set(&mut r, "etag", tag),
        (true, Some("weak")) => set(&mut r, "etag", weak),
        (true, _) => {}
    }
    if q.flag("last_modified") {
        set(
            &mut r,
            "last-modified",
            httpdate::fmt_http_date(last_modified(version)),
        );
    }
    if let Some(Some(cr)) = content_range {
        set(&mut r, "content-range", cr);
    }
    match fault {
        "gzip" => set(&mut r, "content-encoding", "gzip".into()),
        "warning-214" => set(&mut r, "warning", "214 - \"Transformation Applied\"".into()),
        _ => {}
    }
    r
}

/// The `Last-Modified` of `version`: 2026-01-01 00:00:00 GMT plus the version in hours.
fn last_modified(version: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600 + 3600 * version)
}

/// The `multipart` route's answer: one part holding `[first, first + len)`, chunked, with the
/// part's `Content-Range` repeated at the top.
fn multipart(
    name: &str,
    first: u64,
    len: u64,
    range: String,
    tag: String,
    guard: InFlight,
) -> Resp {
    const BOUNDARY: &str = "karu-testkit-boundary";
    let mut body = format!(
        "--{BOUNDARY}\r\nContent-Type: application/octet-stream\r\nContent-Range: {range}\r\n\r\n"
    )
    .into_bytes();
    body.extend(content::bytes(name, first, len as usize));
    body.extend(format!("\r\n--{BOUNDARY}--\r\n").into_bytes());
    // A channel body has no exact size, so hyper sends it chunked.
    let (tx, rx) = mpsc::channel(1);
    let _ = tx.try_send(Ok(Bytes::from(body)));
    let mut r = Response::new(ServerBody {
        inner: Inner::Chan(rx),
        in_flight: guard,
    });
    *r.status_mut() = StatusCode::PARTIAL_CONTENT;
    set(
        &mut r,
        "content-type",
        format!("multipart/byteranges; boundary={BOUNDARY}"),
    );
    set(&mut r, "content-range", range);
    set(&mut r, "etag", tag);
    r
}

/// `If-Match` evaluation with strong comparison.
fn if_match_ok(header: &str, tag: &str) -> bool {
    header
        .split(',')
        .map(str::trim)
        .any(|t| t == "*" || t == tag)
}

/// Percent-encodes what cannot stay verbatim in a path (keeps `/`).
pub(crate) fn encode_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).expect("gzip into memory");
    enc.finish().expect("gzip into memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_parsing() {
        assert_eq!(parse_range("bytes=0-9"), Some(Spec::FromTo(0, 9)));
        assert_eq!(parse_range("bytes=5-"), Some(Spec::From(5)));
        assert_eq!(parse_range("bytes=-7"), Some(Spec::Suffix(7)));
        assert_eq!(parse_range("Bytes = 1 - 2"), Some(Spec::FromTo(1, 2)));
        for bad in [
            "bytes=5-2",
            "bytes=0-1,5-6",
            "items=0-1",
            "bytes=-",
            "bytes=a-b",
            "bytes=+1-2",
            "bytes",
        ] {
            assert_eq!(parse_range(bad), None, "{bad}");
        }
    }

    #[test]
    fn range_resolution() {
        assert_eq!(resolve(Spec::FromTo(0, 9), 100), Some((0, 9)));
        assert_eq!(resolve(Spec::FromTo(90, 200), 100), Some((90, 99)));
        assert_eq!(resolve(Spec::FromTo(100, 200), 100), None);
        assert_eq!(resolve(Spec::From(99), 100), Some((99, 99)));
        assert_eq!(resolve(Spec::Suffix(10), 100), Some((90, 99)));
        assert_eq!(resolve(Spec::Suffix(1000), 100), Some((0, 99)));
        assert_eq!(resolve(Spec::Suffix(0), 100), None);
        assert_eq!(resolve(Spec::FromTo(0, 0), 0), None);
    }

    #[test]
    fn single_spans() {
        assert_eq!(span("bytes=0-9", 100), Some((0, 9)));
        assert_eq!(span("bytes=90-200", 100), Some((90, 99)));
        assert_eq!(span("bytes=90-", 100), Some((90, 99)));
        assert_eq!(span("bytes=-10", 100), Some((90, 99)));
        assert_eq!(span("bytes=-1000", 100), Some((0, 99)));
        assert_eq!(span("bytes=100-", 100), None);
        assert_eq!(span("bytes=-0", 100), None);
        assert_eq!(span("bytes=0-0", 0), None);
        assert_eq!(span("bytes=5-2", 100), None);
    }

    #[test]
    fn query_helpers() {
        let q = Query::parse("size=10&hops=3&name=a%20b&cross");
        assert_eq!(q.num("size"), Ok(Some(10)));
        assert_eq!(q.get("name"), Some("a b"));
        assert!(q.flag("cross"));
        assert!(q.num("name").is_err());
        assert_eq!(
            q.rewrite(&["hops"], Some(("hops", "2".into()))),
            "size=10&name=a%20b&cross&hops=2"
        );
        assert_eq!(percent_decode("a%2Fb%zz%4"), "a/b%zz%4");
        assert!(if_match_ok("\"x\", \"y\"", "\"y\""));
        assert!(if_match_ok("*", "\"y\""));
        assert!(!if_match_ok("W/\"y\"", "\"y\""));
    }
}
