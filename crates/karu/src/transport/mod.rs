//! The transport room: opens connections and moves bytes (hyper + rustls).
//!
//! One [`Transport`] per client holds what the IO loops share: the rustls `ClientConfig`
//! (built at the first `https://` connection, then one `Arc`, so TLS sessions resume across
//! loops), the DNS cache and the options. Each IO
//! loop makes its own [`HttpClient`] (its own connection pool) inside its single-threaded
//! runtime. Retries, deadlines and response validation are decided elsewhere: this room
//! reports what happened, with a [`TransportErrorKind`] found from the error's structure.
//!
//! URLs are sent as written: hyper's `Uri` keeps the path and query bytes verbatim
//! (`a%20b`, `..`, `//`, `;`, `%zz` stay; no dot-segment removal, no re-encoding). It
//! refuses spaces, control characters, DEL, `<`, `>` and `` ` ``: such URLs fail with
//! [`TransportErrorKind::InvalidUrl`] before any connection. It accepts, and hyper then sends
//! raw, non-ASCII bytes (as UTF-8), `"`, `\`, `^`, `{`, `|`, `}` (callers that want them
//! percent-encoded encode them first, as the locator does). A `#fragment` is never sent.

pub(crate) mod call;
mod connector;
mod dns;
mod error;
mod lowat;
mod proxy;
mod redirect;
mod tls;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use http::header::{AUTHORIZATION, HeaderValue, LOCATION, PROXY_AUTHORIZATION, USER_AGENT};
use http::uri::Authority;
use http::{HeaderMap, Method, Uri};
use http_body::Body;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

pub(crate) use call::{Answer, Call};
pub(crate) use connector::ConnectionTag;
pub(crate) use error::{TransportError, TransportErrorKind};
pub(crate) use lowat::{BodyWakes, RecvLowat};

use crate::config::Redacted;
use connector::{Connector, RouteConnector, TcpConnector};
use dns::{DnsCache, Resolver};
use proxy::ProxyConfig;

/// Largest unwanted body drained to keep its connection; larger ones abort it (spec §5.3).
pub(crate) const DRAIN_LIMIT: u64 = 256 * 1024;

/// Most bytes read at once from a connection carrying long bodies (spec §5.3 allows 64 or
/// 256 KiB); reads start smaller and grow. 64 KiB: with 64 connections carrying long
/// coalesced bodies, 256 KiB buffers cost 36-40 MiB of peak RSS on workload R against 21 MiB,
/// while one stream on loopback is as fast (BENCHMARKS.md, "Peak RSS on R").
const RECEIVE_BUFFER: usize = 64 * 1024;

/// Most bytes read at once from a connection carrying short bodies. hyper keeps up to two
/// buffers per busy connection (one being filled while the body holds the last), so 64
/// connections at [`RECEIVE_BUFFER`] hold up to 8 MiB where their bodies gain nothing from it.
const SHORT_RECEIVE_BUFFER: usize = 32 * 1024;

/// Which connection pool a request goes to, by how long its answer is expected to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pool {
    /// A body whose time is mostly its round trip.
    Short,
    /// A body whose time is mostly one stream's speed (or of unknown length).
    Long,
}

/// Most redirects followed by default (spec §5.3).
pub(crate) const MAX_REDIRECTS: u32 = 10;

/// How long an idle pooled connection is kept.
pub(crate) const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

pub(crate) use crate::config::HttpVersion;

/// Everything the transport needs, as plain values (the config module maps its options here).
/// Its `Debug` redacts the proxy and its credentials, like the options they come from.
#[derive(Clone)]
pub(crate) struct TransportOptions {
    /// HTTP version choice.
    pub http_version: HttpVersion,
    /// A PEM bundle replacing the system roots.
    pub ca_bundle: Option<PathBuf>,
    /// A directory of PEM certificates replacing the system roots.
    pub ca_path: Option<PathBuf>,
    /// Use the platform's roots (environment included); `false` for hermetic configurations,
    /// which use the first file of a fixed list of system bundle paths instead (see `tls`).
    pub system_ca: bool,
    /// `http://host:port` of an HTTP proxy.
    pub proxy: Option<String>,
    /// `user:password` for the proxy.
    pub proxy_credentials: Option<String>,
    /// Bound on connection setup (DNS, TCP, proxy, TLS); zero means none.
    pub connect_timeout: Duration,
    /// `User-Agent` added to requests that have none; `None` or empty sends none.
    pub user_agent: Option<String>,
    /// Idle connections kept per host in each loop's pool.
    pub pool_max_idle_per_host: usize,
}

impl fmt::Debug for TransportOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn secret(v: &Option<String>) -> Option<Redacted<'_>> {
            v.as_deref().map(Redacted)
        }
        f.debug_struct("TransportOptions")
            .field("http_version", &self.http_version)
            .field("ca_bundle", &self.ca_bundle)
            .field("ca_path", &self.ca_path)
            .field("system_ca", &self.system_ca)
            .field("proxy", &secret(&self.proxy))
            .field("proxy_credentials", &secret(&self.proxy_credentials))
            .field("connect_timeout", &self.connect_timeout)
            .field("user_agent", &self.user_agent)
            .field("pool_max_idle_per_host", &self.pool_max_idle_per_host)
            .finish()
    }
}

impl Default for TransportOptions {
    fn default() -> Self {
        TransportOptions {
            http_version: HttpVersion::Http1_1,
            ca_bundle: None,
            ca_path: None,
            system_ca: false,
            proxy: None,
            proxy_credentials: None,
            connect_timeout: Duration::from_secs(30),
            user_agent: Some(concat!("karu/", env!("CARGO_PKG_VERSION")).to_owned()),
            pool_max_idle_per_host: 64,
        }
    }
}

/// What every IO loop of one client shares.
#[derive(Debug)]
pub(crate) struct Transport {
    options: TransportOptions,
    tls: tls::Trust,
    dns: Arc<DnsCache>,
    proxy: Option<ProxyConfig>,
    opened: Arc<AtomicU64>,
}

impl Transport {
    /// Builds the shared state; `Config` errors for a bad proxy (unreadable CA options fail
    /// the first `https://` connection instead: see [`tls::Trust`]).
    pub(crate) fn new(options: TransportOptions) -> Result<Arc<Transport>, crate::Error> {
        let proxy = proxy::parse(
            options.proxy.as_deref(),
            options.proxy_credentials.as_deref(),
        )?;
        Ok(Arc::new(Transport {
            options,
            tls: tls::Trust::default(),
            dns: Arc::new(DnsCache::new()),
            proxy,
            opened: Arc::new(AtomicU64::new(0)),
        }))
    }

    /// A connector with this transport's DNS cache, proxy, TLS and connect timeout.
    fn connector(self: &Arc<Self>) -> Connector {
        let timeout =
            (!self.options.connect_timeout.is_zero()).then_some(self.options.connect_timeout);
        let tcp = TcpConnector::new(
            Resolver::new(self.dns.clone()),
            timeout,
            self.opened.clone(),
        );
        let route = RouteConnector::new(tcp, self.proxy.as_ref());
        Connector::new(route, Arc::clone(self), timeout)
    }

    /// The TLS configuration, built at the first call (see [`tls::Trust`]).
    fn tls_config(&self) -> Result<Arc<rustls::ClientConfig>, tls::UntrustedSetup> {
        self.tls.config(&self.options)
    }

    /// New TCP connections opened so far by every loop of this transport.
    #[cfg(test)]
    pub(crate) fn connections_opened(&self) -> u64 {
        self.opened.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// One request: always a GET (karu only reads), built by a backend straight into its parsed
/// URL and header map, which the transport sends as they are.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    /// The absolute `http://` or `https://` URL (see [`parse_url`]), sent as written.
    pub uri: Uri,
    /// Headers as built by the backend (Range, If-Match, auth, user headers).
    pub headers: HeaderMap,
}

/// Whether and how redirects are followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RedirectPolicy {
    /// Follow up to `max` redirects; with `same_origin_only` (while `KARU_HTTP_HEADERS` is
    /// set), a redirect to another scheme, host or port fails instead.
    Follow {
        /// Most redirects followed.
        max: u32,
        /// Refuse cross-origin redirects.
        same_origin_only: bool,
    },
    /// Return 3xx responses as they are (signed S3 and Source requests).
    Never,
}

impl Default for RedirectPolicy {
    fn default() -> Self {
        RedirectPolicy::Follow {
            max: MAX_REDIRECTS,
            same_origin_only: false,
        }
    }
}

/// A response whose body has not been read.
#[derive(Debug)]
pub(crate) struct Response {
    /// The status code.
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// The body, to stream (or to [`drain_or_abort`]).
    pub body: hyper::body::Incoming,
    /// The URL that answered (after redirects).
    #[cfg_attr(not(test), allow(dead_code))]
    pub url: Uri,
    /// Id of the TCP connection that served it (`0` if unknown, which should not happen).
    pub connection: u64,
    /// When that connection's setup completed (unknown: `None`).
    pub connected_at: Option<Instant>,
    /// The receive low-water mark of its connection, when the body has the socket to itself
    /// (HTTP/1).
    pub lowat: Option<RecvLowat>,
}

/// The legacy client type each loop owns.
type LegacyClient = Client<Connector, Empty<Bytes>>;

/// The HTTP client of one IO loop, with its own connection pool.
///
/// Create and use it inside the loop's runtime: connection tasks are spawned on it.
#[derive(Debug)]
pub(crate) struct HttpClient {
    transport: Arc<Transport>,
    /// Requests for [`Pool::Long`] answers.
    client: LegacyClient,
    /// Requests for [`Pool::Short`] answers: a pool of its own, whose buffers stay small.
    short: LegacyClient,
    /// `https` authorities that answered in HTTP/2: their short answers go to `client`, so
    /// one multiplexed connection carries both (the receive ceiling is HTTP/1's alone).
    h2_hosts: std::sync::Mutex<std::collections::HashSet<Authority>>,
    /// Clear-text HTTP/2 client for `http://` under `Http2PriorKnowledge`; a separate pool
    /// because hyper-util's `http2_only` applies to every connection of a client, and
    /// `https://` must still be able to fall back to http/1.1.
    h2c: Option<LegacyClient>,
}

impl HttpClient {
    /// A client for one IO loop.
    pub(crate) fn new(transport: &Arc<Transport>) -> HttpClient {
        let options = &transport.options;
        let connector = transport.connector();
        let build = |h2_only: bool, receive: usize| {
            let mut b = Client::builder(TokioExecutor::new());
            b.timer(TokioTimer::new())
                .pool_timer(TokioTimer::new())
                .pool_idle_timeout(POOL_IDLE_TIMEOUT)
                .pool_max_idle_per_host(options.pool_max_idle_per_host)
                // Let windows grow with the bandwidth-delay product instead of 64 KiB.
                .http2_adaptive_window(true)
                // Adaptive reads (hyper starts small and doubles while reads fill the
                // buffer, halving again when they do not), up to `receive`.
                .http1_max_buf_size(receive)
                .http2_only(h2_only);
            b.build(connector.clone())
        };
        HttpClient {
            transport: transport.clone(),
            client: build(false, RECEIVE_BUFFER),
            short: build(false, SHORT_RECEIVE_BUFFER),
            h2_hosts: std::sync::Mutex::default(),
            h2c: (options.http_version == HttpVersion::Http2PriorKnowledge)
                .then(|| build(true, RECEIVE_BUFFER)),
        }
    }

    /// The transport this client belongs to.
    #[cfg(test)]
    pub(crate) fn transport(&self) -> &Arc<Transport> {
        &self.transport
    }

    /// Sends a GET, following redirects per `policy`.
    ///
    /// The body of each followed redirect is drained (or the connection aborted) per the
    /// 256 KiB rule. `Authorization` is dropped for good once a redirect leaves the original
    /// scheme, host and port.
    pub(crate) async fn send(
        &self,
        req: Request,
        policy: RedirectPolicy,
        pool: Pool,
    ) -> Result<Response, TransportError> {
        let mut headers = self.with_user_agent(req.headers)?;
        let first_origin = redirect::origin(&req.uri);
        let mut uri = req.uri;
        let mut hops = 0u32;
        loop {
            let res = self.send_once(uri.clone(), &headers, pool).await?;
            let (parts, body) = res.into_parts();
            let status = parts.status.as_u16();
            let location = parts
                .headers
                .get(LOCATION)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
            let (
                RedirectPolicy::Follow {
                    max,
                    same_origin_only,
                },
                true,
                Some(location),
            ) = (policy, redirect::is_redirect(status), location)
            else {
                let tag = parts.extensions.get::<ConnectionTag>();
                return Ok(Response {
                    status,
                    connection: tag.map_or(0, |t| t.id),
                    connected_at: tag.map(|t| t.ready),
                    // HTTP/2 multiplexes bodies over one socket: no mark of one body's.
                    lowat: (parts.version <= http::Version::HTTP_11)
                        .then(|| parts.extensions.get::<RecvLowat>().cloned())
                        .flatten(),
                    headers: parts.headers,
                    body,
                    url: uri,
                });
            };
            // Whatever happens next, this body is unwanted: keep the connection if cheap.
            drain_or_abort(body, DRAIN_LIMIT).await;
            if hops >= max {
                return Err(TransportError::new(
                    TransportErrorKind::TooManyRedirects,
                    format!("Maximum ({max}) redirects followed"),
                ));
            }
            let next = redirect::resolve_location(&uri.to_string(), &location)?;
            let next_uri = parse_url(&next)?;
            let next_origin = redirect::origin(&next_uri);
            if same_origin_only && next_origin != first_origin {
                return Err(TransportError::new(
                    TransportErrorKind::RedirectBlocked,
                    "cross-origin redirect blocked because KARU_HTTP_HEADERS is set",
                ));
            }
            if next_origin != first_origin {
                headers.remove(AUTHORIZATION);
            }
            hops += 1;
            uri = next_uri;
        }
    }

    /// The request headers: the caller's plus User-Agent, unless the caller set one.
    fn with_user_agent(&self, mut headers: HeaderMap) -> Result<HeaderMap, TransportError> {
        if let Some(agent) = self.transport.options.user_agent.as_deref()
            && !agent.is_empty()
            && !headers.contains_key(USER_AGENT)
        {
            let v = HeaderValue::from_str(agent).map_err(|_| {
                TransportError::new(TransportErrorKind::InvalidUrl, "invalid User-Agent")
            })?;
            headers.insert(USER_AGENT, v);
        }
        Ok(headers)
    }

    /// One exchange on the right client, without redirects.
    async fn send_once(
        &self,
        uri: Uri,
        headers: &HeaderMap,
        pool: Pool,
    ) -> Result<http::Response<hyper::body::Incoming>, TransportError> {
        let plain = uri.scheme_str() == Some("http");
        // Whose short answers may be learnt to come over HTTP/2 (TLS with h2 allowed).
        let learn = (!plain
            && pool == Pool::Short
            && self.transport.options.http_version != HttpVersion::Http1_1)
            .then(|| uri.authority().cloned())
            .flatten();
        let hosts = || self.h2_hosts.lock().unwrap_or_else(|e| e.into_inner());
        let h2_known = learn.as_ref().is_some_and(|a| hosts().contains(a));
        let mut req = http::Request::new(Empty::<Bytes>::new());
        *req.method_mut() = Method::GET;
        *req.uri_mut() = uri;
        *req.headers_mut() = headers.clone();
        // Plain HTTP through the proxy is a request to the proxy itself: it carries the
        // proxy's credentials (a tunnel sends them in CONNECT instead).
        if plain && let Some(auth) = self.transport.proxy.as_ref().and_then(|p| p.auth.clone()) {
            req.headers_mut().insert(PROXY_AUTHORIZATION, auth);
        }
        let client = match (&self.h2c, pool) {
            // One multiplexed h2c connection carries both: the ceiling is HTTP/1's.
            (Some(h2c), _) if plain => h2c,
            (_, Pool::Short) if !h2_known => &self.short,
            _ => &self.client,
        };
        let res = client
            .request(req)
            .await
            .map_err(|e| TransportError::classify(&e))?;
        if let Some(authority) = learn.filter(|_| !h2_known)
            && res.version() == http::Version::HTTP_2
        {
            hosts().insert(authority);
        }
        Ok(res)
    }
}

/// Parses an absolute http(s) URL without changing it.
pub(crate) fn parse_url(url: &str) -> Result<Uri, TransportError> {
    let invalid = |why: &str| {
        TransportError::new(
            TransportErrorKind::InvalidUrl,
            format!("invalid URL {:?}: {why}", crate::locator::redact_url(url)),
        )
    };
    let uri: Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| invalid(&e.to_string()))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => return Err(invalid(&format!("scheme {other:?} is not http or https"))),
        None => return Err(invalid("not absolute")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(invalid("no host"));
    }
    Ok(uri)
}

/// Reads and discards an unwanted body of at most `limit` bytes so its connection can be
/// reused; a larger (or failing) body is dropped, which closes an HTTP/1.1 connection
/// (HTTP/2 resets only the stream). Returns whether the body was read to its end.
pub(crate) async fn drain_or_abort<B>(mut body: B, limit: u64) -> bool
where
    B: Body + Unpin,
{
    if body.is_end_stream() {
        return true;
    }
    // A Content-Length past the limit is known to be too large: do not read any of it.
    if body.size_hint().lower() > limit {
        return false;
    }
    let mut seen = 0u64;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { return false };
        if let Some(data) = frame.data_ref() {
            seen += data.remaining() as u64;
            if seen > limit {
                return false;
            }
        }
    }
    true
}

/// The first `max` bytes of an error body (for classification and messages); the rest is
/// drained or aborted like [`drain_or_abort`] with [`DRAIN_LIMIT`] counted over the whole
/// body. A read error ends the prefix early: error bodies are best effort.
pub(crate) async fn read_prefix<B>(mut body: B, max: usize) -> Bytes
where
    B: Body + Unpin,
{
    let mut kept = BytesMut::new();
    let mut seen = 0u64;
    while kept.len() < max {
        let Some(Ok(frame)) = body.frame().await else {
            return kept.freeze();
        };
        if let Ok(mut data) = frame.into_data() {
            seen += data.remaining() as u64;
            while data.has_remaining() {
                let chunk = data.chunk();
                let take = chunk.len().min(max - kept.len());
                kept.extend_from_slice(&chunk[..take]);
                data.advance(chunk.len());
            }
        }
    }
    let rest = DRAIN_LIMIT.saturating_sub(seen);
    drain_or_abort(body, rest).await;
    kept.freeze()
}
