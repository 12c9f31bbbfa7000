//! AWS Signature Version 4 with `UNSIGNED-PAYLOAD`, as S3 and Source Cooperative use it
//! (spec §5.8), signed by the `aws-sigv4` crate over the request's parsed URL and header map.
//!
//! The request's own headers (`Range`, `If-Match`, `x-amz-request-payer`) go in; the signer
//! adds `host` (the URL authority without a default port), `x-amz-content-sha256`,
//! `x-amz-date` and `x-amz-security-token` to the signed set and karu adds those plus
//! `Authorization` to the headers to send. Host is not sent from here: the transport writes it
//! from the URL. Keys are percent-encoded once and never normalised: `a//b` and `..` are part
//! of the key.
//!
//! No secret is copied per request: each loop keeps one `aws_credential_types::Credentials`
//! per resolved credential set (reference-counted inside, so a request clones a pointer).

use std::cell::RefCell;
use std::sync::Arc;
use std::time::SystemTime;

use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use http::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};

use crate::credentials::Resolved;
use crate::error::{Error, Result, Status};

/// The service name in the credential scope.
const SERVICE: &str = "s3";

/// The signing region when nothing names one.
pub(super) const DEFAULT_REGION: &str = "us-east-1";

/// Region names are alphanumerics and `-` (they become part of a host name and the scope).
pub(super) fn valid_region(region: &str) -> bool {
    !region.is_empty()
        && region
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// The signer's credentials built on one IO loop, one per resolved credential set, so
/// requests share them instead of copying the secrets.
#[derive(Debug, Default)]
pub(crate) struct Signers(RefCell<Vec<Signer>>);

/// The signer's credentials for one resolved set (held, so the pointer stays theirs).
struct Signer {
    from: Arc<Resolved>,
    credentials: aws_credential_types::Credentials,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer(<redacted>)")
    }
}

/// Credential sets kept per loop (a few are in use at once; an evicted one is rebuilt).
const MAX_SIGNERS: usize = 16;

impl Signers {
    /// The signer's credentials for `from`, built the first time this loop signs with them.
    fn credentials(&self, from: &Arc<Resolved>) -> aws_credential_types::Credentials {
        let mut signers = self.0.borrow_mut();
        if let Some(s) = signers.iter().find(|s| Arc::ptr_eq(&s.from, from)) {
            return s.credentials.clone();
        }
        let c = &from.credentials;
        let credentials = aws_credential_types::Credentials::new(
            c.access_key_id.as_str(),
            c.secret_access_key.as_str(),
            Some(c.session_token.clone()).filter(|t| !t.is_empty()),
            None,
            "karu",
        );
        if signers.len() >= MAX_SIGNERS {
            signers.remove(0);
        }
        signers.push(Signer {
            from: Arc::clone(from),
            credentials: credentials.clone(),
        });
        credentials
    }
}

/// Signs a GET of `url` (as the request's `Uri` was parsed from it: the signer parses it
/// itself, so it is lent, not formatted again) carrying `headers` with `resolved`'s
/// credentials for `region` at `now`, and adds the headers the signature needs (`x-amz-*`
/// and `Authorization`) to `headers`; `signers` keeps the credentials the signer uses.
///
/// `what` names the object in error messages, which never include a secret.
pub(super) fn sign_get(
    what: &str,
    url: &str,
    headers: &mut HeaderMap,
    resolved: &Arc<Resolved>,
    signers: &Signers,
    region: &str,
    now: SystemTime,
) -> Result<()> {
    let failed = |e: &dyn std::fmt::Display| {
        Error::new(
            Status::Credentials,
            format!("{what}: cannot sign the request: {e}"),
        )
    };
    let identity = signers.credentials(resolved).into();
    let mut settings = SigningSettings::default();
    // Keys are already percent-encoded once and must not be normalised.
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SERVICE)
        .time(now)
        .settings(settings)
        .build()
        .map_err(|e| failed(&e))?
        .into();
    let mut pairs = Vec::with_capacity(headers.len());
    for (name, value) in headers.iter() {
        let value = value
            .to_str()
            .map_err(|_| failed(&format_args!("header {name} is not text")))?;
        pairs.push((name.as_str(), value));
    }
    let signable =
        SignableRequest::new("GET", url, pairs.into_iter(), SignableBody::UnsignedPayload)
            .map_err(|e| failed(&e))?;
    let (instructions, _signature) = sign(signable, &params)
        .map_err(|e| failed(&e))?
        .into_parts();
    let (added, _params) = instructions.into_parts();
    for header in added {
        let value = HeaderValue::from_str(header.value()).map_err(|_| {
            failed(&format_args!(
                "the {} is not a valid header value",
                header.name()
            ))
        })?;
        headers.insert(header_name(header.name()).map_err(|e| failed(&e))?, value);
    }
    Ok(())
}

/// The name of a header the signer adds: the four it is known to add without parsing, any
/// other (a newer signer's) parsed.
fn header_name(name: &str) -> std::result::Result<HeaderName, String> {
    const X_AMZ_DATE: HeaderName = HeaderName::from_static("x-amz-date");
    const X_AMZ_CONTENT_SHA256: HeaderName = HeaderName::from_static("x-amz-content-sha256");
    const X_AMZ_SECURITY_TOKEN: HeaderName = HeaderName::from_static("x-amz-security-token");
    Ok(match name {
        "authorization" => AUTHORIZATION,
        "x-amz-date" => X_AMZ_DATE,
        "x-amz-content-sha256" => X_AMZ_CONTENT_SHA256,
        "x-amz-security-token" => X_AMZ_SECURITY_TOKEN,
        other => HeaderName::from_bytes(other.as_bytes())
            .map_err(|_| format!("{other} is not a header name"))?,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::Credentials;

    fn resolved(credentials: Credentials) -> Arc<Resolved> {
        Arc::new(Resolved::new(credentials))
    }

    fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
        headers.get(name).map(|v| v.to_str().unwrap())
    }

    /// Headers from (name, value) pairs.
    fn map(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(n, v)| {
                (
                    HeaderName::from_static(n),
                    HeaderValue::from_str(v).unwrap(),
                )
            })
            .collect()
    }

    /// A URL as the backends lend it (parsed once, so it is a valid `Uri`).
    fn uri(url: &str) -> &str {
        url.parse::<http::Uri>().unwrap();
        url
    }

    fn example() -> Credentials {
        Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: "session".into(),
            ..Credentials::default()
        }
    }

    /// The `Authorization` header split into credential, signed headers and signature.
    fn authorization(headers: &HeaderMap) -> (String, String, String) {
        let auth = header(headers, "authorization").expect("Authorization");
        let rest = auth
            .strip_prefix("AWS4-HMAC-SHA256 ")
            .expect("SigV4 algorithm");
        let mut parts = rest.split(", ");
        let mut field = |name: &str| {
            parts
                .next()
                .and_then(|p| p.strip_prefix(name))
                .unwrap_or_else(|| panic!("{name} in {auth}"))
                .to_owned()
        };
        (
            field("Credential="),
            field("SignedHeaders="),
            field("Signature="),
        )
    }

    fn at_1440938160() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_440_938_160)
    }

    /// The exact vector of spec §5.8.
    #[test]
    fn reproduces_the_reference_vector() {
        let mut headers = map(&[("range", "bytes=10-29"), ("if-match", "\"etag\"")]);
        sign_get(
            "/vsis3/examplebucket/test file",
            uri("https://examplebucket.s3.us-east-1.amazonaws.com/test%20file"),
            &mut headers,
            &resolved(example()),
            &Signers::default(),
            "us-east-1",
            at_1440938160(),
        )
        .unwrap();
        assert_eq!(header(&headers, "x-amz-date"), Some("20150830T123600Z"));
        assert_eq!(
            header(&headers, "x-amz-content-sha256"),
            Some("UNSIGNED-PAYLOAD")
        );
        assert_eq!(header(&headers, "x-amz-security-token"), Some("session"));
        let (credential, signed, signature) = authorization(&headers);
        assert_eq!(credential, "AKIDEXAMPLE/20150830/us-east-1/s3/aws4_request");
        assert_eq!(
            signed,
            "host;if-match;range;x-amz-content-sha256;x-amz-date;x-amz-security-token"
        );
        assert_eq!(
            signature,
            "a47ce3c9bbb62233c87e37d9e4265301fa0a5d5d0ab60ad9ab9d8baebd8165bc"
        );
        // Host is the transport's to send; the signer adds exactly these.
        let names: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        assert!(!names.contains(&"host"), "{names:?}");
        assert_eq!(names.len(), 6, "{names:?}");
    }

    /// Credentials kept for a set sign exactly as freshly built ones, and another set gets
    /// its own.
    #[test]
    fn kept_signers_sign_like_fresh_ones() {
        let signers = Signers::default();
        let (a, b) = (
            resolved(example()),
            resolved(Credentials {
                secret_access_key: "another-secret".into(),
                ..example()
            }),
        );
        let sig = |from: &Arc<Resolved>, signers: &Signers, region: &str, at: SystemTime| {
            let mut headers = map(&[("range", "bytes=0-0")]);
            let url = uri("http://127.0.0.1:9000/b/k");
            sign_get("x", url, &mut headers, from, signers, region, at).unwrap();
            authorization(&headers).2
        };
        let day = at_1440938160();
        let next_day = day + Duration::from_secs(86_400);
        for (from, region, at) in [
            (&a, "us-east-1", day),
            (&a, "us-east-1", day + Duration::from_secs(60)),
            (&a, "eu-west-1", day),
            (&b, "us-east-1", day),
            (&a, "us-east-1", next_day),
        ] {
            let fresh = sig(from, &Signers::default(), region, at);
            assert_eq!(sig(from, &signers, region, at), fresh, "{region} {at:?}");
        }
        assert_eq!(signers.0.borrow().len(), 2);
        assert_ne!(
            sig(&a, &signers, "us-east-1", day),
            sig(&b, &signers, "us-east-1", day)
        );
    }

    #[test]
    fn a_default_port_signs_like_no_port_and_other_ports_sign_differently() {
        let sig = |url: &str| {
            let mut headers = map(&[("range", "bytes=0-0")]);
            sign_get(
                "x",
                uri(url),
                &mut headers,
                &resolved(example()),
                &Signers::default(),
                "us-east-1",
                at_1440938160(),
            )
            .unwrap();
            authorization(&headers).2
        };
        assert_eq!(
            sig("https://h.example/b/k"),
            sig("https://h.example:443/b/k")
        );
        assert_eq!(sig("http://h.example/b/k"), sig("http://h.example:80/b/k"));
        assert_ne!(
            sig("https://h.example/b/k"),
            sig("https://h.example:8443/b/k")
        );
    }

    #[test]
    fn without_a_session_token_none_is_signed_or_sent() {
        let mut headers = map(&[("range", "bytes=0-0")]);
        let credentials = Credentials {
            session_token: String::new(),
            ..example()
        };
        sign_get(
            "x",
            uri("http://127.0.0.1:9000/b/k"),
            &mut headers,
            &resolved(credentials),
            &Signers::default(),
            "eu-west-1",
            at_1440938160(),
        )
        .unwrap();
        assert_eq!(header(&headers, "x-amz-security-token"), None);
        let (credential, signed, _) = authorization(&headers);
        assert_eq!(credential, "AKIDEXAMPLE/20150830/eu-west-1/s3/aws4_request");
        assert_eq!(signed, "host;range;x-amz-content-sha256;x-amz-date");
    }

    /// Sends a signed GET of `bytes=0-9` over a plain socket and returns the status line and
    /// the body's start.
    fn strict_get(base: &str, path: &str, credentials: &Credentials, now: SystemTime) -> String {
        use std::io::{Read, Write};
        let authority = base.strip_prefix("http://").expect("http endpoint");
        let mut headers = map(&[("range", "bytes=0-9")]);
        let url = format!("{base}{path}");
        let signers = Signers::default();
        let from = resolved(credentials.clone());
        sign_get(
            "x",
            uri(&url),
            &mut headers,
            &from,
            &signers,
            "us-east-1",
            now,
        )
        .unwrap();
        let mut request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\n");
        for (name, value) in &headers {
            request.push_str(&format!("{name}: {}\r\n", value.to_str().unwrap()));
        }
        request.push_str("Connection: close\r\n\r\n");
        let mut socket = std::net::TcpStream::connect(authority).unwrap();
        socket.write_all(request.as_bytes()).unwrap();
        let mut answer = Vec::new();
        socket.read_to_end(&mut answer).unwrap();
        String::from_utf8_lossy(&answer).into_owned()
    }

    /// s3s-fs checks signatures strictly, the signing time included (15 minutes of skew at
    /// most): the headers this module produces verify there, and an old `x-amz-date` is
    /// refused. Runs when `scripts/s3.sh` started the emulators (`KARU_TEST_S3S_URL`); under
    /// CI a missing emulator fails the test.
    #[test]
    fn a_strict_server_verifies_the_signature_and_its_time() {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let Some(base) = var("KARU_TEST_S3S_URL") else {
            assert!(
                var("CI").is_none(),
                "KARU_TEST_S3S_URL is not set but CI is"
            );
            eprintln!("skipped: KARU_TEST_S3S_URL is not set (run `bash scripts/test.sh`)");
            return;
        };
        let require = |name: &str| var(name).unwrap_or_else(|| panic!("{name} is not set"));
        let credentials = Credentials {
            access_key_id: require("KARU_TEST_S3S_ACCESS_KEY_ID"),
            secret_access_key: require("KARU_TEST_S3S_SECRET_ACCESS_KEY"),
            ..Credentials::default()
        };
        let path = format!("/{}/small.bin", require("KARU_TEST_S3_BUCKET"));
        let now = SystemTime::now();
        let fresh = strict_get(&base, &path, &credentials, now);
        assert!(fresh.starts_with("HTTP/1.1 206"), "{fresh}");
        let skewed = strict_get(&base, &path, &credentials, now - Duration::from_secs(7200));
        assert!(skewed.starts_with("HTTP/1.1 403"), "{skewed}");
        assert!(skewed.contains("RequestTimeTooSkewed"), "{skewed}");
        let wrong = Credentials {
            secret_access_key: "not-the-secret".into(),
            ..credentials
        };
        let refused = strict_get(&base, &path, &wrong, now);
        assert!(refused.contains("SignatureDoesNotMatch"), "{refused}");
    }

    #[test]
    fn signing_errors_name_the_object_and_no_secret() {
        let mut headers = HeaderMap::new();
        let credentials = Credentials {
            session_token: "bad\ntoken".into(),
            ..example()
        };
        let e = sign_get(
            "/vsis3/b/k",
            uri("https://b.s3.us-east-1.amazonaws.com/k"),
            &mut headers,
            &resolved(credentials),
            &Signers::default(),
            "us-east-1",
            at_1440938160(),
        )
        .unwrap_err();
        assert_eq!(e.status(), Status::Credentials);
        assert!(e.message().starts_with("/vsis3/b/k: cannot sign"), "{e}");
        assert!(!e.message().contains("wJalr") && !e.message().contains("bad\ntoken"));
    }
}
