//! AWS Signature Version 4 with `UNSIGNED-PAYLOAD`, as S3 and Source Cooperative use it
//! (spec §5.8), computed from borrowed credentials (no secret is copied per request) over
//! the request's parsed URL and header map.
//!
//! The request's own headers (`Range`, `If-Match`, `x-amz-request-payer`) go in; the signer
//! adds `host` (the URL authority without a default port), `x-amz-content-sha256`,
//! `x-amz-date` and `x-amz-security-token` to the signed set and adds those plus
//! `Authorization` to the headers to send. Host is not sent from here: the transport writes it
//! from the URL. The canonical URI is the path as sent (keys are percent-encoded once and
//! never normalised: `a//b` and `..` are part of the key).

use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::{digest, hmac};
use http::Uri;
use http::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};

use crate::credentials::Resolved;
use crate::error::{Error, Result, Status};

/// The service name in the credential scope.
const SERVICE: &str = "s3";

/// The payload hash of a request whose body is not signed.
const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";

/// The signing region when nothing names one.
pub(super) const DEFAULT_REGION: &str = "us-east-1";

/// Region names are alphanumerics and `-` (they become part of a host name and the scope).
pub(super) fn valid_region(region: &str) -> bool {
    !region.is_empty()
        && region
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Signing keys derived on one IO loop. A key depends only on the secret, the day and the
/// region, so one derivation (four HMACs) serves a day of requests.
#[derive(Debug, Default)]
pub(crate) struct SigningKeys(RefCell<Vec<Derived>>);

/// One derived key, for the credentials it came from (held, so the pointer stays theirs).
struct Derived {
    from: Arc<Resolved>,
    date: String,
    region: String,
    key: hmac::Key,
}

impl std::fmt::Debug for Derived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Derived(<redacted>)")
    }
}

/// Keys kept per loop (a few credentials and regions in use at once).
const MAX_KEYS: usize = 16;

impl SigningKeys {
    /// The key for `from`'s secret on `date` (`YYYYMMDD`) in `region`.
    fn key(&self, from: &Arc<Resolved>, date: &str, region: &str) -> hmac::Key {
        let mut keys = self.0.borrow_mut();
        if let Some(d) = keys
            .iter()
            .find(|d| Arc::ptr_eq(&d.from, from) && d.date == date && d.region == region)
        {
            return d.key.clone();
        }
        // Derived from the secret through the scope, without copying the credentials.
        let mut key = hmac_sha256(
            &[
                b"AWS4".as_slice(),
                from.credentials.secret_access_key.as_bytes(),
            ],
            date.as_bytes(),
        );
        for part in [region, SERVICE, "aws4_request"] {
            key = hmac_sha256(&[key.as_ref()], part.as_bytes());
        }
        let key = hmac::Key::new(hmac::HMAC_SHA256, key.as_ref());
        if keys.len() >= MAX_KEYS {
            keys.remove(0);
        }
        keys.push(Derived {
            from: Arc::clone(from),
            date: date.to_owned(),
            region: region.to_owned(),
            key: key.clone(),
        });
        key
    }
}

/// Signs a GET of `uri` carrying `headers` with `resolved`'s credentials for `region` at
/// `now`, and adds the headers the signature needs (`x-amz-*` and `Authorization`) to
/// `headers`; `keys` keeps the derived signing keys.
///
/// `what` names the object in error messages, which never include a secret.
pub(super) fn sign_get(
    what: &str,
    uri: &Uri,
    headers: &mut HeaderMap,
    resolved: &Arc<Resolved>,
    keys: &SigningKeys,
    region: &str,
    now: SystemTime,
) -> Result<()> {
    let credentials = &resolved.credentials;
    let failed = |why: &str| {
        Error::new(
            Status::Credentials,
            format!("{what}: cannot sign the request: {why}"),
        )
    };
    let (date, stamp) = amz_date(now).ok_or_else(|| failed("the clock is before 1970"))?;
    let value = |v: &str, field: &str| {
        HeaderValue::from_str(v)
            .map_err(|_| failed(&format!("the {field} is not a valid header value")))
    };
    headers.insert(
        HeaderName::from_static("x-amz-content-sha256"),
        HeaderValue::from_static(UNSIGNED_PAYLOAD),
    );
    headers.insert(
        HeaderName::from_static("x-amz-date"),
        value(&stamp, "date")?,
    );
    if !credentials.session_token.is_empty() {
        headers.insert(
            HeaderName::from_static("x-amz-security-token"),
            value(&credentials.session_token, "session token")?,
        );
    }
    let host = host(uri).ok_or_else(|| failed("the URL has no host"))?;

    // The canonical request: every header sent so far plus host, sorted by name (header map
    // names are lower case), values trimmed with inner runs of spaces folded.
    let mut names: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
    names.push("host");
    names.sort_unstable();
    names.dedup();
    let mut canonical = String::with_capacity(512);
    canonical.push_str("GET\n");
    canonical.push_str(uri.path());
    canonical.push('\n');
    canonical_query(&mut canonical, uri.query().unwrap_or(""));
    canonical.push('\n');
    for name in &names {
        canonical.push_str(name);
        canonical.push(':');
        if *name == "host" {
            canonical.push_str(&host);
        } else {
            let mut first = true;
            for v in headers.get_all(*name) {
                if !first {
                    canonical.push(',');
                }
                first = false;
                let v = v
                    .to_str()
                    .map_err(|_| failed(&format!("header {name} is not text")))?;
                fold_spaces(&mut canonical, v.trim());
            }
        }
        canonical.push('\n');
    }
    canonical.push('\n');
    let signed = names.join(";");
    canonical.push_str(&signed);
    canonical.push('\n');
    canonical.push_str(UNSIGNED_PAYLOAD);

    let scope = format!("{date}/{region}/{SERVICE}/aws4_request");
    let mut to_sign = String::with_capacity(160);
    to_sign.push_str("AWS4-HMAC-SHA256\n");
    to_sign.push_str(&stamp);
    to_sign.push('\n');
    to_sign.push_str(&scope);
    to_sign.push('\n');
    hex(
        &mut to_sign,
        digest::digest(&digest::SHA256, canonical.as_bytes()).as_ref(),
    );

    let signature = hmac::sign(&keys.key(resolved, &date, region), to_sign.as_bytes());
    let mut authorization = String::with_capacity(256);
    let _ = write!(
        authorization,
        "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed}, Signature=",
        credentials.access_key_id
    );
    hex(&mut authorization, signature.as_ref());
    headers.insert(AUTHORIZATION, value(&authorization, "access key id")?);
    Ok(())
}

/// HMAC-SHA256 of `data` under the key made of `key_parts` joined.
fn hmac_sha256(key_parts: &[&[u8]], data: &[u8]) -> hmac::Tag {
    let key = match key_parts {
        [one] => hmac::Key::new(hmac::HMAC_SHA256, one),
        parts => hmac::Key::new(hmac::HMAC_SHA256, &parts.concat()),
    };
    hmac::sign(&key, data)
}

/// The `Host` the signature covers: the URL's host, with its port unless it is the scheme's
/// default.
fn host(uri: &Uri) -> Option<String> {
    let host = uri.host()?;
    let default = match uri.scheme_str() {
        Some("http") => Some(80),
        Some("https") => Some(443),
        _ => None,
    };
    Some(match uri.port_u16() {
        Some(port) if Some(port) != default => format!("{host}:{port}"),
        _ => host.to_owned(),
    })
}

/// The canonical query string: its `name=value` pairs sorted (they are already encoded).
fn canonical_query(out: &mut String, query: &str) {
    if query.is_empty() {
        return;
    }
    let mut pairs: Vec<(&str, &str)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    pairs.sort_unstable();
    for (i, (name, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        out.push_str(name);
        out.push('=');
        out.push_str(value);
    }
}

/// Appends `value` with every run of spaces folded to one.
fn fold_spaces(out: &mut String, value: &str) {
    let mut space = false;
    for c in value.chars() {
        if c == ' ' {
            if !space {
                out.push(' ');
            }
            space = true;
        } else {
            out.push(c);
            space = false;
        }
    }
}

/// Appends the lower-case hex of `bytes`.
fn hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
}

/// The scope date (`YYYYMMDD`) and the `x-amz-date` stamp (`YYYYMMDDTHHMMSSZ`) of `now`.
fn amz_date(now: SystemTime) -> Option<(String, String)> {
    let secs = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(i64::try_from(days).ok()?);
    let date = format!("{year:04}{month:02}{day:02}");
    let stamp = format!(
        "{date}T{:02}{:02}{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    );
    Some((date, stamp))
}

/// The proleptic Gregorian date of a count of days since 1970-01-01 (Howard Hinnant's
/// algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
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

    fn uri(url: &str) -> Uri {
        url.parse().unwrap()
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
            &uri("https://examplebucket.s3.us-east-1.amazonaws.com/test%20file"),
            &mut headers,
            &resolved(example()),
            &SigningKeys::default(),
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

    /// A kept key signs exactly as a fresh derivation, and a new day, region or credential
    /// derives its own.
    #[test]
    fn kept_signing_keys_sign_like_fresh_ones() {
        let keys = SigningKeys::default();
        let (a, b) = (
            resolved(example()),
            resolved(Credentials {
                secret_access_key: "another-secret".into(),
                ..example()
            }),
        );
        let sig = |from: &Arc<Resolved>, keys: &SigningKeys, region: &str, at: SystemTime| {
            let mut headers = map(&[("range", "bytes=0-0")]);
            let url = uri("http://127.0.0.1:9000/b/k");
            sign_get("x", &url, &mut headers, from, keys, region, at).unwrap();
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
            (&a, "us-east-1", day),
        ] {
            let fresh = sig(from, &SigningKeys::default(), region, at);
            assert_eq!(sig(from, &keys, region, at), fresh, "{region} {at:?}");
        }
        assert_eq!(keys.0.borrow().len(), 4);
        assert_ne!(
            sig(&a, &keys, "us-east-1", day),
            sig(&b, &keys, "us-east-1", day)
        );
    }

    #[test]
    fn dates_are_utc_calendar_days() {
        let at = |secs: u64| amz_date(UNIX_EPOCH + Duration::from_secs(secs)).unwrap();
        assert_eq!(at(0), ("19700101".into(), "19700101T000000Z".into()));
        assert_eq!(at(1_440_938_160).1, "20150830T123600Z");
        // 2024-02-29 23:59:59 and the next second.
        assert_eq!(at(1_709_251_199).1, "20240229T235959Z");
        assert_eq!(at(1_709_251_200).1, "20240301T000000Z");
        assert_eq!(at(4_102_444_800).1, "21000101T000000Z");
    }

    #[test]
    fn a_default_port_signs_like_no_port_and_other_ports_sign_differently() {
        let sig = |url: &str| {
            let mut headers = map(&[("range", "bytes=0-0")]);
            sign_get(
                "x",
                &uri(url),
                &mut headers,
                &resolved(example()),
                &SigningKeys::default(),
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
            &uri("http://127.0.0.1:9000/b/k"),
            &mut headers,
            &resolved(credentials),
            &SigningKeys::default(),
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
        let keys = SigningKeys::default();
        let from = resolved(credentials.clone());
        sign_get(
            "x",
            &uri(&url),
            &mut headers,
            &from,
            &keys,
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
            &uri("https://b.s3.us-east-1.amazonaws.com/k"),
            &mut headers,
            &resolved(credentials),
            &SigningKeys::default(),
            "us-east-1",
            at_1440938160(),
        )
        .unwrap_err();
        assert_eq!(e.status(), Status::Credentials);
        assert!(e.message().starts_with("/vsis3/b/k: cannot sign"), "{e}");
        assert!(!e.message().contains("wJalr") && !e.message().contains("bad\ntoken"));
    }
}
