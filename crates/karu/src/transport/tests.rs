//! Integration tests of the transport against small servers on 127.0.0.1 (plain, TLS, h2c),
//! a forward/CONNECT proxy, and raw sockets for broken peers.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// What the server saw of one request.
#[derive(Clone, Debug)]
struct Seen {
    target: String,
    headers: HeaderMap,
    version: Version,
    conn: usize,
}

type Handler = Arc<dyn Fn(&Seen) -> http::Response<Full<Bytes>> + Send + Sync>;

/// A tiny HTTP server: HTTP/1.1, or h2 by ALPN under TLS, or h2c when asked.
struct Server {
    addr: SocketAddr,
    conns: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    async fn start(
        tls: Option<Arc<rustls::ServerConfig>>,
        h2c: bool,
        handler: impl Fn(&Seen) -> http::Response<Full<Bytes>> + Send + Sync + 'static,
    ) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let conns = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler: Handler = Arc::new(handler);
        let (c, s) = (conns.clone(), seen.clone());
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let conn = c.fetch_add(1, Ordering::SeqCst) + 1;
                let (handler, seen, tls) = (handler.clone(), s.clone(), tls.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |req: http::Request<Incoming>| {
                        let record = Seen {
                            target: req.uri().to_string(),
                            headers: req.headers().clone(),
                            version: req.version(),
                            conn,
                        };
                        seen.lock().unwrap().push(record.clone());
                        let res = handler(&record);
                        async move { Ok::<_, Infallible>(res) }
                    });
                    match tls {
                        Some(cfg) => {
                            let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
                            let Ok(stream) = acceptor.accept(tcp).await else {
                                return;
                            };
                            let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                            serve(TokioIo::new(stream), h2, svc).await;
                        }
                        None => serve(TokioIo::new(tcp), h2c, svc).await,
                    }
                });
            }
        });
        Server { addr, conns, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn conns(&self) -> usize {
        self.conns.load(Ordering::SeqCst)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn serve<I, S>(io: I, h2: bool, svc: S)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::Service<
            http::Request<Incoming>,
            Response = http::Response<Full<Bytes>>,
            Error = Infallible,
        > + Send
        + 'static,
    S::Future: Send + 'static,
{
    if h2 {
        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .serve_connection(io, svc)
            .await;
    } else {
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(io, svc)
            .await;
    }
}

fn reply(status: u16, body: impl Into<Bytes>) -> http::Response<Full<Bytes>> {
    http::Response::builder()
        .status(status)
        .body(Full::new(body.into()))
        .unwrap()
}

fn redirect_to(status: u16, location: &str, body_len: usize) -> http::Response<Full<Bytes>> {
    http::Response::builder()
        .status(status)
        .header("location", location)
        .body(Full::new(Bytes::from(vec![b'r'; body_len])))
        .unwrap()
}

fn get(url: &str) -> Request {
    Request {
        uri: parse_url(url).unwrap(),
        headers: HeaderMap::new(),
    }
}

fn add(req: &mut Request, name: &'static str, value: &'static str) {
    req.headers
        .append(name, http::HeaderValue::from_static(value));
}

fn client_with(options: TransportOptions) -> HttpClient {
    HttpClient::new(&Transport::new(options).unwrap())
}

fn client() -> HttpClient {
    client_with(TransportOptions::default())
}

async fn body_of(res: Response) -> Bytes {
    res.body.collect().await.unwrap().to_bytes()
}

/// Lets the connection and pool tasks run (they are woken in-process, not by the network),
/// so a finished HTTP/1.1 connection is back in the pool before the next request.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(20)).await;
}

/// A body larger than both the drain limit and hyper's read buffer (~400 KB): hyper itself
/// keeps a connection whose dropped body was already entirely buffered, so only a body it
/// cannot have buffered proves the abort.
const BIG: usize = 4 << 20;

const FOLLOW: RedirectPolicy = RedirectPolicy::Follow {
    max: MAX_REDIRECTS,
    same_origin_only: false,
};

#[test]
fn debug_output_redacts_the_proxy_and_its_credentials() {
    let options = TransportOptions {
        proxy: Some("http://user:pr0xy-pass@127.0.0.1:3128".into()),
        proxy_credentials: Some("user:cr3d-pass".into()),
        ..TransportOptions::default()
    };
    let transport = Transport::new(options.clone()).unwrap();
    for shown in [format!("{options:?}"), format!("{transport:?}")] {
        assert!(!shown.contains("pr0xy-pass"), "{shown}");
        assert!(!shown.contains("cr3d-pass"), "{shown}");
        assert!(shown.contains("proxy: Some(<redacted>)"), "{shown}");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn keep_alive_reuses_and_close_opens_new_connection() {
    let server = Server::start(None, false, |s| {
        if s.target == "/close" {
            http::Response::builder()
                .header("connection", "close")
                .body(Full::new(Bytes::from_static(b"bye")))
                .unwrap()
        } else {
            reply(200, "hello")
        }
    })
    .await;
    let client = client();
    let start = std::time::Instant::now();
    let a = client
        .send(get(&server.url("/a")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    let id_a = a.connection;
    // Every response tells when its connection's setup completed (a round trip starts there).
    let ready = a.connected_at.expect("the setup's completion");
    assert!(start <= ready && ready <= std::time::Instant::now());
    assert_eq!(body_of(a).await, "hello");
    settle().await;
    let b = client
        .send(get(&server.url("/b")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    assert_eq!(b.connection, id_a, "keep-alive must reuse the connection");
    assert_eq!(b.connected_at, Some(ready));
    assert_eq!(body_of(b).await, "hello");
    settle().await;
    let c = client
        .send(get(&server.url("/close")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    assert_eq!(c.connection, id_a);
    assert_eq!(body_of(c).await, "bye");
    settle().await;
    let d = client
        .send(get(&server.url("/d")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    assert_ne!(d.connection, id_a, "the server closed: a new connection");
    assert_ne!(d.connection, 0);
    body_of(d).await;
    assert_eq!(client.transport().connections_opened(), 2);
    assert_eq!(server.conns(), 2);
}

#[tokio::test(flavor = "current_thread")]
async fn short_and_long_answers_keep_pools_of_their_own() {
    let server = Server::start(None, false, |_| reply(200, "hello")).await;
    let client = client();
    let mut ids = Vec::new();
    for pool in [Pool::Short, Pool::Long, Pool::Short, Pool::Long] {
        let res = client
            .send(get(&server.url("/x")), FOLLOW, pool)
            .await
            .unwrap();
        ids.push(res.connection);
        assert_eq!(body_of(res).await, "hello");
        settle().await;
    }
    // Each pool reuses its own connection, and neither takes the other's: a connection
    // that carried long bodies keeps its large buffers out of the short pool.
    assert_eq!(ids[0], ids[2], "{ids:?}");
    assert_eq!(ids[1], ids[3], "{ids:?}");
    assert_ne!(ids[0], ids[1], "{ids:?}");
    assert_eq!(server.conns(), 2);
}

/// Over TLS a host that answered in HTTP/2 gets its short answers on the long pool's
/// multiplexed connection (one connection after the first answer, not one per pool); a host
/// that answers in HTTP/1.1 keeps a connection in each pool.
#[tokio::test(flavor = "current_thread")]
async fn an_h2_host_carries_short_answers_on_its_one_connection() {
    let dir = tempfile::tempdir().unwrap();
    for (alpn, h2) in [
        (&[&b"h2"[..], b"http/1.1"][..], true),
        (&[&b"http/1.1"[..]][..], false),
    ] {
        let (server, client, url) = tls_echoing_version(dir.path(), alpn, HttpVersion::Auto).await;
        let mut ids = Vec::new();
        for pool in [Pool::Short, Pool::Long, Pool::Short, Pool::Short] {
            let res = client.send(get(&url), FOLLOW, pool).await.unwrap();
            ids.push(res.connection);
            let version = if h2 { "HTTP/2.0" } else { "HTTP/1.1" };
            assert_eq!(body_of(res).await, version);
            settle().await;
        }
        if h2 {
            // The first short answer taught the client; from then on one connection.
            assert_eq!((ids[1], ids[1]), (ids[2], ids[3]), "{ids:?}");
        } else {
            assert_eq!((ids[0], ids[0]), (ids[2], ids[3]), "{ids:?}");
            assert_ne!(ids[0], ids[1], "{ids:?}");
        }
        assert_eq!(server.conns(), 2);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn user_agent_and_headers() {
    let server = Server::start(None, false, |_| reply(200, "")).await;
    let default = client();
    let mut req = get(&server.url("/x"));
    add(&mut req, "range", "bytes=0-9");
    add(&mut req, "x-twice", "1");
    add(&mut req, "x-twice", "2");
    body_of(default.send(req, FOLLOW, Pool::Long).await.unwrap()).await;
    let mut req = get(&server.url("/y"));
    add(&mut req, "user-agent", "mine/1");
    body_of(default.send(req, FOLLOW, Pool::Long).await.unwrap()).await;
    let none = client_with(TransportOptions {
        user_agent: None,
        ..TransportOptions::default()
    });
    body_of(
        none.send(get(&server.url("/z")), FOLLOW, Pool::Long)
            .await
            .unwrap(),
    )
    .await;

    let seen = server.seen();
    let ua = |i: usize| {
        seen[i]
            .headers
            .get("user-agent")
            .map(|v| v.to_str().unwrap().to_owned())
    };
    assert_eq!(ua(0).unwrap(), concat!("karu/", env!("CARGO_PKG_VERSION")));
    assert_eq!(seen[0].headers["range"], "bytes=0-9");
    let twice: Vec<_> = seen[0].headers.get_all("x-twice").iter().collect();
    assert_eq!(twice, ["1", "2"]);
    assert!(seen[0].headers.get("accept-encoding").is_none());
    assert_eq!(ua(1).unwrap(), "mine/1");
    assert_eq!(ua(2), None);
}

#[tokio::test(flavor = "current_thread")]
async fn urls_are_sent_as_written() {
    let server = Server::start(None, false, |_| reply(200, "")).await;
    let client = client();
    let path = "/a%20b/../c/./d//e;p=1?q=%2F&r=a+b";
    let res = client
        .send(
            get(&format!("{}#frag", server.url(path))),
            FOLLOW,
            Pool::Long,
        )
        .await
        .unwrap();
    body_of(res).await;
    assert_eq!(server.seen()[0].target, path);

    // hyper's `Uri` takes these as they are (sent verbatim, raw UTF-8 included)...
    for ok in [
        "caf\u{e9}",
        "\"q\"",
        "a\\b",
        "{x}",
        "a|b",
        "a^b",
        "%zz",
        "a'b!$&()*+,;=:@",
    ] {
        let url = format!("http://127.0.0.1/{ok}");
        let uri = parse_url(&url).unwrap_or_else(|e| panic!("{ok}: {e}"));
        assert_eq!(uri.path(), format!("/{ok}"));
    }
    // ...and refuses these, before any connection.
    for bad in [
        "http://127.0.0.1/a b",
        "http://127.0.0.1/a<b",
        "http://127.0.0.1/a>b",
        "http://127.0.0.1/a`b",
        "http://127.0.0.1/a\tb",
        "http://127.0.0.1/a\x7fb",
        "ftp://127.0.0.1/x",
        "/relative",
        "http:///nohost",
    ] {
        let e = parse_url(bad).unwrap_err();
        assert_eq!(e.kind, TransportErrorKind::InvalidUrl, "{bad}: {e}");
    }
    // A SAS or presigned query never reaches the message.
    let e = parse_url("http://127.0.0.1/a b?sig=s3cr3t").unwrap_err();
    assert_eq!(
        e.message,
        "invalid URL \"http://127.0.0.1/a b?<redacted>\": invalid uri character"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn redirects() {
    let other = Server::start(None, false, |s| {
        let auth = s
            .headers
            .get("authorization")
            .map_or("none", |v| v.to_str().unwrap());
        reply(200, format!("other auth={auth}"))
    })
    .await;
    let other_url = other.url("/end");
    let server = Server::start(None, false, move |s| match s.target.as_str() {
        "/start" => redirect_to(302, "end", 10),
        "/abs" => redirect_to(301, &other_url, 0),
        "/see-other" => redirect_to(303, "/end?x=1", 0),
        "/temp" => redirect_to(307, "/perm", 0),
        "/perm" => redirect_to(308, "/end", 0),
        "/loop" => redirect_to(302, "/loop", 0),
        "/ftp" => redirect_to(302, "ftp://127.0.0.1/file", 0),
        "/no-location" => reply(302, "stay"),
        "/big" => redirect_to(302, "/end", 300 * 1024),
        "/small" => redirect_to(302, "/end", 1024),
        _ => {
            let auth = s
                .headers
                .get("authorization")
                .map_or("none", |v| v.to_str().unwrap());
            reply(200, format!("end {} auth={auth}", s.target))
        }
    })
    .await;
    let client = client();

    let res = client
        .send(get(&server.url("/start")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    assert_eq!(res.status, 200);
    assert_eq!(res.url.to_string(), server.url("/end"));
    assert_eq!(body_of(res).await, "end /end auth=none");

    let res = client
        .send(get(&server.url("/temp")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    assert_eq!(body_of(res).await, "end /end auth=none");
    let res = client
        .send(get(&server.url("/see-other")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    assert_eq!(body_of(res).await, "end /end?x=1 auth=none");

    let res = client
        .send(
            get(&server.url("/start")),
            RedirectPolicy::Never,
            Pool::Long,
        )
        .await
        .unwrap();
    assert_eq!(res.status, 302);
    assert_eq!(res.headers["location"], "end");
    body_of(res).await;

    let res = client
        .send(get(&server.url("/no-location")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    assert_eq!(res.status, 302);
    body_of(res).await;

    // Authorization stays on the same origin and is dropped across origins.
    let mut req = get(&server.url("/start"));
    add(&mut req, "authorization", "Bearer t");
    let res = client.send(req.clone(), FOLLOW, Pool::Long).await.unwrap();
    assert_eq!(body_of(res).await, "end /end auth=Bearer t");
    req.uri = parse_url(&server.url("/abs")).unwrap();
    let res = client.send(req.clone(), FOLLOW, Pool::Long).await.unwrap();
    assert_eq!(res.url.to_string(), other.url("/end"));
    assert_eq!(body_of(res).await, "other auth=none");

    // Same-origin only: same origin passes, another port is blocked.
    let strict = RedirectPolicy::Follow {
        max: MAX_REDIRECTS,
        same_origin_only: true,
    };
    let res = client
        .send(get(&server.url("/start")), strict, Pool::Long)
        .await
        .unwrap();
    assert_eq!(res.status, 200);
    body_of(res).await;
    let e = client
        .send(get(&server.url("/abs")), strict, Pool::Long)
        .await
        .unwrap_err();
    assert_eq!(e.kind, TransportErrorKind::RedirectBlocked);
    assert_eq!(
        e.message,
        "cross-origin redirect blocked because KARU_HTTP_HEADERS is set"
    );
    assert_eq!(other.seen().len(), 1, "the blocked target was never asked");

    let e = client
        .send(get(&server.url("/loop")), FOLLOW, Pool::Long)
        .await
        .unwrap_err();
    assert_eq!(e.kind, TransportErrorKind::TooManyRedirects);
    assert_eq!(e.message, "Maximum (10) redirects followed");
    let loops = server.seen().iter().filter(|s| s.target == "/loop").count();
    assert_eq!(loops, 11, "the first request and 10 redirects");
    let two = RedirectPolicy::Follow {
        max: 2,
        same_origin_only: false,
    };
    let e = client
        .send(get(&server.url("/perm")), two, Pool::Long)
        .await;
    assert_eq!(e.unwrap().status, 200);
    let e = client
        .send(get(&server.url("/loop")), two, Pool::Long)
        .await
        .unwrap_err();
    assert_eq!(e.kind, TransportErrorKind::TooManyRedirects);

    let e = client
        .send(get(&server.url("/ftp")), FOLLOW, Pool::Long)
        .await
        .unwrap_err();
    assert_eq!(e.kind, TransportErrorKind::RedirectProtocol);
    assert_eq!(e.message, "Protocol \"ftp\" disabled");
}

#[tokio::test(flavor = "current_thread")]
async fn redirect_bodies_are_drained_or_aborted() {
    let server = Server::start(None, false, |s| match s.target.as_str() {
        "/big" => redirect_to(302, "/end", BIG),
        "/small" => redirect_to(302, "/end", 200 * 1024),
        _ => reply(200, "end"),
    })
    .await;
    let client = client();
    let res = client
        .send(get(&server.url("/small")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    body_of(res).await;
    assert_eq!(
        server.conns(),
        1,
        "a small redirect body is drained and the connection reused"
    );
    settle().await;
    let res = client
        .send(get(&server.url("/big")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    body_of(res).await;
    assert_eq!(
        server.conns(),
        2,
        "a large redirect body aborts its connection"
    );
    let seen = server.seen();
    assert_eq!(seen[2].conn, 1, "/big went on the kept connection");
    assert_eq!(seen[3].conn, 2, "/end after /big needed a new one");
}

#[tokio::test(flavor = "current_thread")]
async fn drain_and_prefix() {
    let server = Server::start(None, false, |s| match s.target.as_str() {
        "/err-small" => reply(500, vec![b'e'; 10 * 1024]),
        "/err-big" => reply(500, vec![b'E'; BIG]),
        _ => reply(200, "ok"),
    })
    .await;
    let client = client();
    let res = client
        .send(get(&server.url("/err-small")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    let first = res.connection;
    let prefix = read_prefix(res.body, crate::validate::CAPTURE).await;
    assert_eq!(prefix.len(), crate::validate::CAPTURE);
    assert!(prefix.iter().all(|&b| b == b'e'));
    settle().await;
    let res = client
        .send(get(&server.url("/ok")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    assert_eq!(res.connection, first, "a drained body keeps the connection");
    assert!(drain_or_abort(res.body, DRAIN_LIMIT).await);
    settle().await;
    let res = client
        .send(get(&server.url("/err-big")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    assert_eq!(res.connection, first);
    let prefix = read_prefix(res.body, crate::validate::CAPTURE).await;
    assert_eq!(&prefix[..], &[b'E'; crate::validate::CAPTURE][..]);
    settle().await;
    let res = client
        .send(get(&server.url("/ok")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    assert_ne!(res.connection, first, "a large body aborted its connection");
    let res2 = client
        .send(get(&server.url("/err-big")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    assert!(!drain_or_abort(res2.body, DRAIN_LIMIT).await);
    body_of(res).await;

    // Bodies without a length: counted as they arrive.
    assert!(drain_or_abort(Full::new(Bytes::from_static(b"abc")), 3).await);
    assert!(!drain_or_abort(Full::new(Bytes::from_static(b"abcd")), 3).await);
    assert_eq!(
        read_prefix(Full::new(Bytes::from_static(b"abcdef")), 4).await,
        "abcd"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn h2_prior_knowledge() {
    let server = Server::start(None, true, |s| reply(200, format!("{:?}", s.version))).await;
    let client = client_with(TransportOptions {
        http_version: HttpVersion::Http2PriorKnowledge,
        ..TransportOptions::default()
    });
    let a = client
        .send(get(&server.url("/a")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    let b = client
        .send(get(&server.url("/b")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    assert_eq!(
        a.connection, b.connection,
        "streams share one h2 connection"
    );
    assert_eq!(body_of(a).await, "HTTP/2.0");
    assert_eq!(body_of(b).await, "HTTP/2.0");
    assert_eq!(server.conns(), 1);
}

// ---- failures -------------------------------------------------------------------------

/// A server that accepts and then does `then` with the raw socket.
async fn raw_server<F, Fut>(then: F) -> SocketAddr
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(then(tcp));
        }
    });
    addr
}

async fn read_head(tcp: &mut TcpStream) -> Vec<u8> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match tcp.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    head
}

#[tokio::test(flavor = "current_thread")]
async fn failure_kinds() {
    let client = client_with(TransportOptions {
        connect_timeout: Duration::from_millis(300),
        ..TransportOptions::default()
    });

    let refused = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
    };
    let e = client
        .send(get(&format!("http://{refused}/")), FOLLOW, Pool::Long)
        .await
        .unwrap_err();
    assert_eq!(e.kind, TransportErrorKind::Connect, "{e}");

    let e = client
        .send(get("http://no-such-host.invalid/x"), FOLLOW, Pool::Long)
        .await
        .unwrap_err();
    assert_eq!(e.kind, TransportErrorKind::Resolve, "{e}");
    assert!(e.message.contains("no-such-host.invalid"), "{e}");

    // Accepts and never speaks: the TLS handshake runs into the connect timeout.
    let silent = raw_server(|tcp| async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        drop(tcp);
    })
    .await;
    let e = client
        .send(get(&format!("https://{silent}/")), FOLLOW, Pool::Long)
        .await
        .unwrap_err();
    assert_eq!(e.kind, TransportErrorKind::Timeout, "{e}");

    let closes = raw_server(|mut tcp| async move {
        read_head(&mut tcp).await;
    })
    .await;
    let e = client
        .send(get(&format!("http://{closes}/")), FOLLOW, Pool::Long)
        .await
        .unwrap_err();
    assert_eq!(e.kind, TransportErrorKind::Io, "{e}");

    let garbage = raw_server(|mut tcp| async move {
        read_head(&mut tcp).await;
        let _ = tcp.write_all(b"HELLO THERE\r\n\r\n").await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    })
    .await;
    let e = client
        .send(get(&format!("http://{garbage}/")), FOLLOW, Pool::Long)
        .await
        .unwrap_err();
    assert_eq!(e.kind, TransportErrorKind::Protocol, "{e}");
}

// ---- TLS --------------------------------------------------------------------------------

struct Pki {
    ca_pem: String,
    server: Arc<rustls::ServerConfig>,
}

fn make_pki(alpn: &[&[u8]]) -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, SanType};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params
        .subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
    let leaf = params.signed_by(&key, &issuer).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let key_der = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone(), ca.der().clone()], key_der)
        .unwrap();
    server.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Pki {
        ca_pem: ca.pem(),
        server: Arc::new(server),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn tls_trust_and_alpn() {
    let pki = make_pki(&[b"h2", b"http/1.1"]);
    let server = Server::start(Some(pki.server.clone()), false, |s| {
        reply(200, format!("{:?}", s.version))
    })
    .await;
    let url = format!("https://127.0.0.1:{}/x", server.addr.port());
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("ca.pem");
    std::fs::write(&bundle, &pki.ca_pem).unwrap();

    // Untrusted: the hermetic default roots do not know this CA.
    let e = client()
        .send(get(&url), FOLLOW, Pool::Long)
        .await
        .unwrap_err();
    assert_eq!(e.kind, TransportErrorKind::Tls, "{e}");

    // Trusted through ca_bundle; HTTP/1.1 asked: http/1.1 by ALPN.
    let h1 = client_with(TransportOptions {
        ca_bundle: Some(bundle.clone()),
        ..TransportOptions::default()
    });
    let res = h1.send(get(&url), FOLLOW, Pool::Long).await.unwrap();
    assert_eq!(body_of(res).await, "HTTP/1.1");

    // Trusted through ca_path; HTTP/2 asked: h2 negotiated.
    let certs = dir.path().join("certs");
    std::fs::create_dir(&certs).unwrap();
    std::fs::write(certs.join("ca.pem"), &pki.ca_pem).unwrap();
    std::fs::write(certs.join("README"), "not a certificate").unwrap();
    let h2 = client_with(TransportOptions {
        ca_path: Some(certs),
        http_version: HttpVersion::Http2,
        ..TransportOptions::default()
    });
    let res = h2.send(get(&url), FOLLOW, Pool::Long).await.unwrap();
    assert_eq!(body_of(res).await, "HTTP/2.0");

    // A server without h2 falls back to HTTP/1.1 when HTTP/2 is asked.
    let (_server1, c, url1) =
        tls_echoing_version(dir.path(), &[b"http/1.1"], HttpVersion::Auto).await;
    let res = c.send(get(&url1), FOLLOW, Pool::Long).await.unwrap();
    assert_eq!(body_of(res).await, "HTTP/1.1");
}

#[tokio::test(flavor = "current_thread")]
async fn unreadable_ca_options_fail_tls_connections_only_and_as_config_errors() {
    let pki = make_pki(&[b"http/1.1"]);
    let tls = Server::start(Some(pki.server.clone()), false, |_| reply(200, "tls")).await;
    let plain = Server::start(None, false, |_| reply(200, "plain")).await;
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "no certificate here").unwrap();
    for bad in [dir.path().join("missing.pem"), empty] {
        // The transport builds: trust anchors are read at the first TLS connection.
        let c = client_with(TransportOptions {
            ca_bundle: Some(bad.clone()),
            ..TransportOptions::default()
        });
        let res = c
            .send(get(&plain.url("/p")), FOLLOW, Pool::Short)
            .await
            .unwrap();
        assert_eq!(body_of(res).await, "plain", "{}", bad.display());
        let url = format!("https://127.0.0.1:{}/x", tls.addr.port());
        for _ in 0..2 {
            let e = c.send(get(&url), FOLLOW, Pool::Long).await.unwrap_err();
            assert_eq!(e.kind, TransportErrorKind::Setup, "{e}");
            assert_eq!(e.kind.status(), crate::Status::Config);
            assert!(e.message.contains(&bad.display().to_string()), "{e}");
        }
    }
}

/// A TLS server offering `alpn` that answers with the request's HTTP version, a client
/// trusting it (its CA written into `dir`) that asks for `version`, and the server's URL.
async fn tls_echoing_version(
    dir: &std::path::Path,
    alpn: &[&[u8]],
    version: HttpVersion,
) -> (Server, HttpClient, String) {
    let pki = make_pki(alpn);
    let server = Server::start(Some(pki.server.clone()), false, |s| {
        reply(200, format!("{:?}", s.version))
    })
    .await;
    let bundle = dir.join(format!("ca-{}.pem", server.addr.port()));
    std::fs::write(&bundle, &pki.ca_pem).unwrap();
    let client = client_with(TransportOptions {
        ca_bundle: Some(bundle),
        http_version: version,
        ..TransportOptions::default()
    });
    let url = format!("https://127.0.0.1:{}/x", server.addr.port());
    (server, client, url)
}

// ---- proxy ------------------------------------------------------------------------------

/// A forward (absolute-form) and CONNECT proxy that records each request head it relays.
async fn proxy_server() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let l2 = log.clone();
    let addr = raw_server(move |mut tcp| {
        let log = l2.clone();
        async move {
            let head = read_head(&mut tcp).await;
            let text = String::from_utf8_lossy(&head).into_owned();
            log.lock().unwrap().push(text.clone());
            let target = text.split_whitespace().nth(1).unwrap_or("").to_owned();
            if text.starts_with("CONNECT ") {
                let Ok(mut up) = TcpStream::connect(&target).await else {
                    return;
                };
                let _ = tcp
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await;
                let _ = tokio::io::copy_bidirectional(&mut tcp, &mut up).await;
            } else {
                let authority = target
                    .strip_prefix("http://")
                    .and_then(|rest| rest.split('/').next())
                    .unwrap_or("")
                    .to_owned();
                let Ok(mut up) = TcpStream::connect(&authority).await else {
                    return;
                };
                let _ = up.write_all(&head).await;
                let _ = tokio::io::copy_bidirectional(&mut tcp, &mut up).await;
            }
        }
    })
    .await;
    (addr, log)
}

#[tokio::test(flavor = "current_thread")]
async fn proxy_forward_and_tunnel() {
    let (proxy, log) = proxy_server().await;
    let plain = Server::start(None, false, |s| reply(200, format!("plain {}", s.target))).await;
    let pki = make_pki(&[b"http/1.1"]);
    let secure = Server::start(Some(pki.server.clone()), false, |_| reply(200, "secure")).await;
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("ca.pem");
    std::fs::write(&bundle, &pki.ca_pem).unwrap();

    let client = client_with(TransportOptions {
        proxy: Some(format!("http://{proxy}")),
        proxy_credentials: Some("user:pass".into()),
        ca_bundle: Some(bundle),
        ..TransportOptions::default()
    });
    let res = client
        .send(get(&plain.url("/p?q=1")), FOLLOW, Pool::Long)
        .await
        .unwrap();
    // The origin sees the absolute form the proxy relayed.
    assert_eq!(body_of(res).await, format!("plain {}", plain.url("/p?q=1")));
    let secure_url = format!("https://127.0.0.1:{}/s", secure.addr.port());
    let res = client
        .send(get(&secure_url), FOLLOW, Pool::Long)
        .await
        .unwrap();
    assert_eq!(body_of(res).await, "secure");

    let log = log.lock().unwrap().clone();
    assert_eq!(log.len(), 2, "{log:?}");
    let forward = &log[0];
    assert!(
        forward.starts_with(&format!("GET http://{}/p?q=1 HTTP/1.1\r\n", plain.addr)),
        "{forward}"
    );
    // base64("user:pass")
    assert!(
        forward.contains("proxy-authorization: Basic dXNlcjpwYXNz\r\n"),
        "{forward}"
    );
    let connect = &log[1];
    let authority = format!("127.0.0.1:{}", secure.addr.port());
    assert!(
        connect.starts_with(&format!("CONNECT {authority} HTTP/1.1\r\n")),
        "{connect}"
    );
    assert!(
        connect.contains("Proxy-Authorization: Basic dXNlcjpwYXNz\r\n"),
        "{connect}"
    );
    // Inside the tunnel the origin server never sees proxy credentials.
    assert!(
        secure.seen()[0]
            .headers
            .get("proxy-authorization")
            .is_none()
    );
    assert_eq!(client.transport().connections_opened(), 2);
}

#[tokio::test(flavor = "current_thread")]
async fn silently_closed_idle_connection_is_replaced() {
    // Answers one request per connection with a keep-alive response, then hangs up without
    // saying so: the pooled connection is dead, and the next request must get a new one.
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let addr = raw_server(move |mut tcp| {
        count.fetch_add(1, Ordering::SeqCst);
        async move {
            read_head(&mut tcp).await;
            let _ = tcp
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .await;
            let _ = tcp.shutdown().await;
        }
    })
    .await;
    let client = client();
    let url = format!("http://{addr}/");
    let a = client.send(get(&url), FOLLOW, Pool::Long).await.unwrap();
    let first = a.connection;
    assert_eq!(body_of(a).await, "ok");
    settle().await;
    let b = client.send(get(&url), FOLLOW, Pool::Long).await.unwrap();
    assert_ne!(b.connection, first);
    assert_eq!(body_of(b).await, "ok");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    assert_eq!(client.transport().connections_opened(), 2);
}
