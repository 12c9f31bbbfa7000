//! `S3Responder`: a path-style S3 endpoint on loopback for the answers emulators do not give:
//! a bucket that lives in another region (301 with `x-amz-bucket-region`, or 400
//! `AuthorizationHeaderMalformed` naming the region in its body), a bucket that refuses
//! every request while naming its region (403 `AccessDenied` with `x-amz-bucket-region`), and
//! session tokens that have expired (403 `ExpiredToken`).
//!
//! It does not verify signatures (moto and s3s-fs do that); it reads the region from the
//! `Authorization` header's credential scope and the token from `x-amz-security-token`.
//! Objects are `GET /<bucket>/<key>` with the deterministic bytes of
//! [`content::bytes`]`(key, ..)`; one byte range per request (`bytes=F-L`, `bytes=F-`,
//! `bytes=-N`) gets 206, no `Range` 200, an unsatisfiable range 416, an unknown object 404
//! `NoSuchKey`. Each answer is decided in this order: unknown object, forbidden bucket, wrong
//! region (signed requests only, when a home region is set), expired token, then the range.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::background::Background;
use crate::content;

/// How a request signed for the wrong region is told the bucket's region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionHint {
    /// `301 PermanentRedirect` with an `x-amz-bucket-region` header.
    Redirect301,
    /// `400 AuthorizationHeaderMalformed` with `<Region>…</Region>` in the body only.
    Malformed400,
}

/// One request as the responder saw it, with the status it answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Request {
    /// Path and query as sent.
    pub target: String,
    /// The `Range` header.
    pub range: Option<String>,
    /// The region of the `Authorization` credential scope (`None` for unsigned requests).
    pub region: Option<String>,
    /// The `x-amz-security-token` header.
    pub session_token: Option<String>,
    /// Status sent.
    pub status: u16,
}

#[derive(Default)]
struct State {
    objects: HashMap<String, u64>,
    home: Option<(String, RegionHint)>,
    forbidden: HashSet<String>,
    expired: HashSet<String>,
    log: Vec<S3Request>,
}

type Shared = Arc<Mutex<State>>;

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// A path-style S3 endpoint on 127.0.0.1; see the [module docs](self).
pub struct S3Responder {
    shared: Shared,
    addr: SocketAddr,
    _background: Background,
}

impl S3Responder {
    /// Binds a free port on 127.0.0.1 and serves on a thread of its own until dropped.
    ///
    /// Panics if the port cannot be bound (this is a test kit).
    pub fn start() -> S3Responder {
        let listener = StdListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("set_nonblocking");
        let addr = listener.local_addr().expect("local_addr");
        let shared = Shared::default();
        let sh = shared.clone();
        let background = Background::start("karu-testkit-s3-responder", move || {
            let listener = TcpListener::from_std(listener).expect("listener");
            tokio::spawn(accept_loop(listener, sh));
        });
        S3Responder {
            shared,
            addr,
            _background: background,
        }
    }

    /// The endpoint, `http://127.0.0.1:PORT` (for `AWS_S3_ENDPOINT`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serves object `key` of `bucket` with `size` bytes.
    pub fn put(&self, bucket: &str, key: &str, size: u64) {
        lock(&self.shared)
            .objects
            .insert(format!("{bucket}/{key}"), size);
    }

    /// Makes every bucket live in `region`: signed requests for another region get `hint`.
    pub fn set_home_region(&self, region: &str, hint: RegionHint) {
        lock(&self.shared).home = Some((region.to_owned(), hint));
    }

    /// Every request for `bucket` gets 403 `AccessDenied` with `x-amz-bucket-region` naming
    /// the home region (`us-east-1` when none is set).
    pub fn forbid(&self, bucket: &str) {
        lock(&self.shared).forbidden.insert(bucket.to_owned());
    }

    /// Requests carrying session token `token` get 403 `ExpiredToken`.
    pub fn expire_token(&self, token: &str) {
        lock(&self.shared).expired.insert(token.to_owned());
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<S3Request> {
        lock(&self.shared).log.clone()
    }
}

impl std::fmt::Debug for S3Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Responder")
            .field("addr", &self.addr)
            .finish()
    }
}

async fn accept_loop(listener: TcpListener, shared: Shared) {
    while let Ok((stream, _)) = listener.accept().await {
        let shared = shared.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(answer(&shared, &req)) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// The credential scope's region: `Credential=AKID/date/REGION/s3/aws4_request`.
fn signed_region(authorization: &str) -> Option<String> {
    let scope = authorization.split("Credential=").nth(1)?;
    scope.split('/').nth(2).map(str::to_owned)
}

fn xml_error(code: &str, extra: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
         <Message>{code}</Message>{extra}<RequestId>karu-testkit</RequestId></Error>"
    )
}

fn answer(shared: &Shared, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let region = header("authorization").and_then(|a| signed_region(&a));
    let session_token = header("x-amz-security-token");
    let range = header("range");
    let path = req.uri().path().trim_start_matches('/');
    let name = percent_decode(path);
    let mut st = lock(shared);
    let (bucket, key) = name.split_once('/').unwrap_or((&name, ""));
    let (bucket, key) = (bucket.to_owned(), key.to_owned());
    let mut extra_headers: Vec<(&str, String)> = Vec::new();
    let (status, body) = match st.objects.get(&name).copied() {
        None => (404, Bytes::from(xml_error("NoSuchKey", ""))),
        Some(_) if st.forbidden.contains(&bucket) => {
            let home = st.home.as_ref().map_or("us-east-1", |(r, _)| r.as_str());
            extra_headers.push(("x-amz-bucket-region", home.to_owned()));
            (403, Bytes::from(xml_error("AccessDenied", "")))
        }
        Some(size) => match (&st.home, &region) {
            (Some((home, hint)), Some(used)) if home != used => match hint {
                RegionHint::Redirect301 => {
                    extra_headers.push(("x-amz-bucket-region", home.clone()));
                    let extra = format!("<Endpoint>s3.{home}.amazonaws.com</Endpoint>");
                    (301, Bytes::from(xml_error("PermanentRedirect", &extra)))
                }
                RegionHint::Malformed400 => {
                    let extra = format!("<Region>{home}</Region>");
                    let code = "AuthorizationHeaderMalformed";
                    (400, Bytes::from(xml_error(code, &extra)))
                }
            },
            _ if session_token
                .as_ref()
                .is_some_and(|t| st.expired.contains(t)) =>
            {
                (403, Bytes::from(xml_error("ExpiredToken", "")))
            }
            _ => match range.as_deref().map(|r| span(r, size)) {
                None => (200, Bytes::from(content::bytes(&key, 0, size as usize))),
                Some(None) => {
                    extra_headers.push(("content-range", format!("bytes */{size}")));
                    (416, Bytes::from(xml_error("InvalidRange", "")))
                }
                Some(Some((first, last))) => {
                    extra_headers.push(("content-range", format!("bytes {first}-{last}/{size}")));
                    let len = (last - first + 1) as usize;
                    (206, Bytes::from(content::bytes(&key, first, len)))
                }
            },
        },
    };
    st.log.push(S3Request {
        target: req
            .uri()
            .path_and_query()
            .map_or_else(String::new, |p| p.as_str().to_owned()),
        range,
        region,
        session_token,
        status,
    });
    let mut response = Response::builder().status(status);
    if status == 200 || status == 206 {
        let etag = format!("\"{:016x}\"", content::seed(&key));
        response = response
            .header("etag", etag)
            .header("content-type", "application/octet-stream");
    } else {
        response = response.header("content-type", "application/xml");
    }
    for (name, value) in extra_headers {
        response = response.header(name, value);
    }
    response.body(Full::new(body)).expect("valid response")
}

/// The inclusive span a single `bytes=` range selects of `size` bytes; `None` when it
/// cannot be satisfied (malformed ranges are treated as unsatisfiable: karu sends none).
fn span(range: &str, size: u64) -> Option<(u64, u64)> {
    let (first, last) = range.strip_prefix("bytes=")?.split_once('-')?;
    let last_byte = size.checked_sub(1)?;
    match (first.parse::<u64>().ok(), last.parse::<u64>().ok()) {
        (None, Some(n)) if first.is_empty() && n > 0 => Some((size - n.min(size), last_byte)),
        (Some(f), None) if last.is_empty() && f < size => Some((f, last_byte)),
        (Some(f), Some(l)) if f <= l && f < size => Some((f, l.min(last_byte))),
        _ => None,
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = (b[i] == b'%')
            .then(|| b.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(v) => {
                out.push(v);
                i += 3;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_follow_single_range_semantics() {
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
    fn regions_come_from_the_credential_scope_and_keys_are_decoded() {
        let auth = "AWS4-HMAC-SHA256 Credential=AK/20150830/eu-west-1/s3/aws4_request, \
                    SignedHeaders=host, Signature=00";
        assert_eq!(signed_region(auth).as_deref(), Some("eu-west-1"));
        assert_eq!(signed_region("Bearer x"), None);
        assert_eq!(percent_decode("b/a%20b%2Bc%"), "b/a b+c%");
        assert_eq!(percent_decode("b/%4"), "b/%4");
    }
}
