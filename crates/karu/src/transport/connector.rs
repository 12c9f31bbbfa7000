//! The connector stack handed to hyper-util's legacy client, outermost first:
//!
//! 1. [`Connector`]: the connect timeout over the whole setup (DNS, TCP, proxy, TLS), as
//!    libcurl's connect timeout covers it.
//! 2. hyper-rustls's `HttpsConnector`: TLS for `https://`, with the shared `ClientConfig`
//!    (built at the first such connection: see `tls::Trust`).
//! 3. [`RouteConnector`]: direct, through the proxy in absolute form, or a CONNECT tunnel.
//! 4. [`TcpConnector`]: hyper-util's `HttpConnector` with our resolver; it numbers every new
//!    TCP connection and wraps it in [`CountedStream`], whose `Connected` info carries the
//!    [`ConnectionTag`] (its id and when its setup completed) that hyper-util then copies
//!    into every response served on it, with the socket's [`RecvLowat`].

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tower_service::Service;

use super::Transport;
use super::dns::Resolver;
use super::lowat::RecvLowat;
use super::proxy::ProxyConfig;

/// Errors as the connector stack passes them around.
pub(crate) type BoxError = Box<dyn StdError + Send + Sync>;
type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;

/// Source of connection ids: global so that ids never repeat across clients.
static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// The TCP connection that served a response (found in its extensions).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnectionTag {
    /// Its id, unique across clients.
    pub id: u64,
    /// When its setup (DNS, TCP, proxy, TLS) completed: the first request's round trip
    /// starts there, not when the request was handed over before the connection existed.
    pub ready: Instant,
}

/// The connect phase ran out of time; a type of its own so it is found by downcast.
#[derive(Debug)]
pub(crate) struct ConnectTimeout(pub Duration);

impl fmt::Display for ConnectTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Connection timed out after {} ms", self.0.as_millis())
    }
}

impl StdError for ConnectTimeout {}

/// A TCP stream with its connection id, its receive low-water mark and whether requests on
/// it go to a proxy in absolute form.
#[derive(Debug)]
pub(crate) struct CountedStream {
    io: TokioIo<TcpStream>,
    id: u64,
    lowat: RecvLowat,
    proxied: bool,
}

impl CountedStream {
    fn new(io: TokioIo<TcpStream>, id: u64, proxied: bool) -> CountedStream {
        #[cfg(unix)]
        let lowat = {
            use std::os::fd::AsRawFd;
            RecvLowat::new(Some(io.inner().as_raw_fd()))
        };
        #[cfg(not(unix))]
        let lowat = RecvLowat::new();
        CountedStream {
            io,
            id,
            lowat,
            proxied,
        }
    }
}

impl Drop for CountedStream {
    fn drop(&mut self) {
        // Before the socket closes (the fields drop after this): its number may be reused.
        self.lowat.close();
    }
}

impl Connection for CountedStream {
    fn connected(&self) -> Connected {
        // `extra` chains with the HttpInfo hyper-util already attached. hyper-util asks once,
        // as the whole stack's setup completes (TLS streams ask their TCP stream).
        self.io
            .connected()
            .extra(ConnectionTag {
                id: self.id,
                ready: Instant::now(),
            })
            .extra(self.lowat.clone())
            .proxy(self.proxied)
    }
}

impl Read for CountedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl Write for CountedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

/// Opens and numbers TCP connections.
#[derive(Clone, Debug)]
pub(crate) struct TcpConnector {
    http: HttpConnector<Resolver>,
    opened: Arc<AtomicU64>,
}

impl TcpConnector {
    /// A connector resolving with `resolver` and counting into `opened`.
    pub(crate) fn new(
        resolver: Resolver,
        connect_timeout: Option<Duration>,
        opened: Arc<AtomicU64>,
    ) -> TcpConnector {
        let mut http = HttpConnector::new_with_resolver(resolver);
        // The scheme is the TLS layer's business, not this one's.
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_keepalive(Some(Duration::from_secs(60)));
        // Split over a host's addresses by hyper-util, so one dead address cannot use up the
        // whole budget; the outer timeout still bounds the total.
        http.set_connect_timeout(connect_timeout);
        TcpConnector { http, opened }
    }

    fn connect(&mut self, dst: Uri, proxied: bool) -> BoxFuture<CountedStream> {
        let connecting = self.http.call(dst);
        let opened = self.opened.clone();
        Box::pin(async move {
            let io = connecting.await?;
            opened.fetch_add(1, Ordering::Relaxed);
            let id = NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed);
            Ok(CountedStream::new(io, id, proxied))
        })
    }
}

impl Service<Uri> for TcpConnector {
    type Response = CountedStream;
    type Error = BoxError;
    type Future = BoxFuture<CountedStream>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        self.connect(dst, false)
    }
}

/// Chooses the route: direct, proxy in absolute form (`http://`), or CONNECT tunnel
/// (`https://`).
#[derive(Clone, Debug)]
pub(crate) struct RouteConnector {
    tcp: TcpConnector,
    proxy: Option<(Uri, Tunnel<TcpConnector>)>,
}

impl RouteConnector {
    /// Routes through `proxy` when one is set.
    pub(crate) fn new(tcp: TcpConnector, proxy: Option<&ProxyConfig>) -> RouteConnector {
        let proxy = proxy.map(|p| {
            let mut tunnel = Tunnel::new(p.uri.clone(), tcp.clone());
            if let Some(auth) = &p.auth {
                tunnel = tunnel.with_auth(auth.clone());
            }
            (p.uri.clone(), tunnel)
        });
        RouteConnector { tcp, proxy }
    }
}

impl Service<Uri> for RouteConnector {
    type Response = CountedStream;
    type Error = BoxError;
    type Future = BoxFuture<CountedStream>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Every inner service is always ready (hyper-util's HttpConnector is).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        match &mut self.proxy {
            None => self.tcp.connect(dst, false),
            Some((_, tunnel)) if dst.scheme_str() == Some("https") => {
                let tunneling = tunnel.call(dst);
                Box::pin(async move { Ok(tunneling.await?) })
            }
            Some((proxy_uri, _)) => {
                let proxy_uri = proxy_uri.clone();
                self.tcp.connect(proxy_uri, true)
            }
        }
    }
}

/// The connector given to the legacy client: TLS over the route for `https://` (its
/// configuration built at the first such connection), under the connect timeout.
#[derive(Clone, Debug)]
pub(crate) struct Connector {
    route: RouteConnector,
    /// Where the TLS configuration comes from, once built.
    transport: Arc<Transport>,
    timeout: Option<Duration>,
}

impl Connector {
    /// Wraps `route` with TLS from `transport` and bounds it by `timeout` (`None`: no bound).
    pub(crate) fn new(
        route: RouteConnector,
        transport: Arc<Transport>,
        timeout: Option<Duration>,
    ) -> Connector {
        Connector {
            route,
            transport,
            timeout,
        }
    }

    /// The connection for `dst`: plain, or TLS over the route.
    fn open(&mut self, dst: Uri) -> BoxFuture<MaybeHttpsStream<CountedStream>> {
        if dst.scheme() != Some(&http::uri::Scheme::HTTPS) {
            let plain = self.route.call(dst);
            return Box::pin(async move { Ok(MaybeHttpsStream::Http(plain.await?)) });
        }
        match self.transport.tls_config() {
            Ok(config) => HttpsConnector::from((self.route.clone(), config)).call(dst),
            Err(e) => Box::pin(async move { Err(Box::new(e) as BoxError) }),
        }
    }
}

impl Service<Uri> for Connector {
    type Response = MaybeHttpsStream<CountedStream>;
    type Error = BoxError;
    type Future = BoxFuture<Self::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.route.poll_ready(cx)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let connecting = self.open(dst);
        let timeout = self.timeout;
        Box::pin(async move {
            match timeout {
                None => connecting.await,
                Some(t) => match tokio::time::timeout(t, connecting).await {
                    Ok(result) => result,
                    Err(_) => Err(Box::new(ConnectTimeout(t)) as BoxError),
                },
            }
        })
    }
}
