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

use crate::content;
use crate::endpoint::{Answer, Asked, Endpoint};
use crate::server::{percent_decode, span};

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

impl From<&Asked> for S3Request {
    fn from(asked: &Asked) -> S3Request {
        let header = |name: &str| asked.header(name).map(str::to_owned);
        S3Request {
            target: asked.target(),
            range: header("range"),
            region: asked.header("authorization").and_then(signed_region),
            session_token: header("x-amz-security-token"),
            status: asked.status,
        }
    }
}

#[derive(Default)]
struct State {
    objects: HashMap<String, u64>,
    home: Option<(String, RegionHint)>,
    forbidden: HashSet<String>,
    expired: HashSet<String>,
}

/// A path-style S3 endpoint on 127.0.0.1; see the [module docs](self).
pub struct S3Responder {
    endpoint: Endpoint<State>,
}

impl S3Responder {
    /// Binds a free port on 127.0.0.1 and serves on a thread of its own until dropped.
    ///
    /// Panics if the port cannot be bound (this is a test kit).
    pub fn start() -> S3Responder {
        S3Responder {
            endpoint: Endpoint::start("karu-testkit-s3-responder", State::default(), answer),
        }
    }

    /// The endpoint, `http://127.0.0.1:PORT` (for `AWS_S3_ENDPOINT`).
    pub fn endpoint(&self) -> String {
        self.endpoint.root()
    }

    /// Serves object `key` of `bucket` with `size` bytes.
    pub fn put(&self, bucket: &str, key: &str, size: u64) {
        let name = format!("{bucket}/{key}");
        self.endpoint.state().objects.insert(name, size);
    }

    /// Makes every bucket live in `region`: signed requests for another region get `hint`.
    pub fn set_home_region(&self, region: &str, hint: RegionHint) {
        self.endpoint.state().home = Some((region.to_owned(), hint));
    }

    /// Every request for `bucket` gets 403 `AccessDenied` with `x-amz-bucket-region` naming
    /// the home region (`us-east-1` when none is set).
    pub fn forbid(&self, bucket: &str) {
        self.endpoint.state().forbidden.insert(bucket.to_owned());
    }

    /// Requests carrying session token `token` get 403 `ExpiredToken`.
    pub fn expire_token(&self, token: &str) {
        self.endpoint.state().expired.insert(token.to_owned());
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<S3Request> {
        self.endpoint.log().iter().map(S3Request::from).collect()
    }
}

impl std::fmt::Debug for S3Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Responder")
            .field("addr", &self.endpoint.addr())
            .finish()
    }
}

/// The credential scope's region: `Credential=AKID/date/REGION/s3/aws4_request`.
fn signed_region(authorization: &str) -> Option<String> {
    let scope = authorization.split("Credential=").nth(1)?;
    scope.split('/').nth(2).map(str::to_owned)
}

/// An S3 error answer with code `code` and `extra` elements.
fn xml_error(status: u16, code: &str, extra: &str) -> Answer {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
         <Message>{code}</Message>{extra}<RequestId>karu-testkit</RequestId></Error>"
    );
    Answer::new(status, "application/xml", body)
}

fn answer(st: &mut State, req: &Asked) -> Answer {
    let region = req.header("authorization").and_then(signed_region);
    let session_token = req.header("x-amz-security-token");
    let name = percent_decode(req.path.trim_start_matches('/'));
    let (bucket, key) = name.split_once('/').unwrap_or((&name, ""));
    let Some(&size) = st.objects.get(&name) else {
        return xml_error(404, "NoSuchKey", "");
    };
    if st.forbidden.contains(bucket) {
        let home = st.home.as_ref().map_or("us-east-1", |(r, _)| r.as_str());
        return xml_error(403, "AccessDenied", "").with_header("x-amz-bucket-region", home);
    }
    if let (Some((home, hint)), Some(used)) = (&st.home, &region)
        && home != used
    {
        return match hint {
            RegionHint::Redirect301 => {
                let extra = format!("<Endpoint>s3.{home}.amazonaws.com</Endpoint>");
                xml_error(301, "PermanentRedirect", &extra)
                    .with_header("x-amz-bucket-region", home.as_str())
            }
            RegionHint::Malformed400 => {
                let extra = format!("<Region>{home}</Region>");
                xml_error(400, "AuthorizationHeaderMalformed", &extra)
            }
        };
    }
    if session_token.is_some_and(|t| st.expired.contains(t)) {
        return xml_error(403, "ExpiredToken", "");
    }
    let object = |status: u16, first: u64, len: u64| {
        Answer::new(
            status,
            "application/octet-stream",
            content::bytes(key, first, len as usize),
        )
        .with_header("etag", format!("\"{:016x}\"", content::seed(key)))
    };
    match req.header("range").map(|r| span(r, size)) {
        None => object(200, 0, size),
        Some(None) => xml_error(416, "InvalidRange", "")
            .with_header("content-range", format!("bytes */{size}")),
        Some(Some((first, last))) => object(206, first, last - first + 1)
            .with_header("content-range", format!("bytes {first}-{last}/{size}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_come_from_the_credential_scope() {
        let auth = "AWS4-HMAC-SHA256 Credential=AK/20150830/eu-west-1/s3/aws4_request, \
                    SignedHeaders=host, Signature=00";
        assert_eq!(signed_region(auth).as_deref(), Some("eu-west-1"));
        assert_eq!(signed_region("Bearer x"), None);
        assert_eq!(percent_decode("b/a%20b%2Bc%"), "b/a b+c%");
        assert_eq!(percent_decode("b/%4"), "b/%4");
    }
}
