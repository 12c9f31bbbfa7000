//! AWS Signature Version 4 with `UNSIGNED-PAYLOAD`, as S3 and Source Cooperative use it
//! (spec §5.8), signed by the `aws-sigv4` crate.
//!
//! The request's own headers (`Range`, `If-Match`, `x-amz-request-payer`) go in; the signer
//! adds `host` (the URL authority without a default port), `x-amz-content-sha256`,
//! `x-amz-date` and `x-amz-security-token` to the signed set and hands back those plus
//! `Authorization` to send. Host is not sent from here: the transport writes it from the URL.

use std::time::SystemTime;

use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;

use crate::config::Credentials;
use crate::error::{Error, Result, Status};

/// The service name in the credential scope.
const SERVICE: &str = "s3";

/// Signs a GET of `url` carrying `headers` for `region` at `now`, and appends the headers
/// the signature needs (`x-amz-*` and `Authorization`) to `headers`.
///
/// `what` names the object in error messages, which never include a secret.
pub(super) fn sign_get(
    what: &str,
    url: &str,
    headers: &mut Vec<(String, String)>,
    credentials: &Credentials,
    region: &str,
    now: SystemTime,
) -> Result<()> {
    let failed = |e: &dyn std::fmt::Display| {
        Error::new(
            Status::Credentials,
            format!("{what}: cannot sign the request: {e}"),
        )
    };
    let token = Some(credentials.session_token.clone()).filter(|t| !t.is_empty());
    let identity = aws_credential_types::Credentials::new(
        credentials.access_key_id.clone(),
        credentials.secret_access_key.clone(),
        token,
        None,
        "karu",
    )
    .into();
    let mut settings = SigningSettings::default();
    // S3 keys are already percent-encoded once and must not be normalized: `a//b` and `..`
    // are part of the key.
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
    let signable = SignableRequest::new(
        "GET",
        url,
        headers.iter().map(|(n, v)| (n.as_str(), v.as_str())),
        SignableBody::UnsignedPayload,
    )
    .map_err(|e| failed(&e))?;
    let (instructions, _signature) = sign(signable, &params)
        .map_err(|e| failed(&e))?
        .into_parts();
    let (added, _params) = instructions.into_parts();
    headers.extend(
        added
            .into_iter()
            .map(|h| (h.name().to_owned(), h.value().to_owned())),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
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
    fn authorization(headers: &[(String, String)]) -> (String, String, String) {
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
        let mut headers = vec![
            ("Range".to_owned(), "bytes=10-29".to_owned()),
            ("If-Match".to_owned(), "\"etag\"".to_owned()),
        ];
        sign_get(
            "/vsis3/examplebucket/test file",
            "https://examplebucket.s3.us-east-1.amazonaws.com/test%20file",
            &mut headers,
            &example(),
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
        let names: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
        assert!(
            !names.iter().any(|n| n.eq_ignore_ascii_case("host")),
            "{names:?}"
        );
        assert_eq!(names.len(), 6, "{names:?}");
    }

    #[test]
    fn a_default_port_signs_like_no_port_and_other_ports_sign_differently() {
        let sig = |url: &str| {
            let mut headers = vec![("Range".to_owned(), "bytes=0-0".to_owned())];
            sign_get(
                "x",
                url,
                &mut headers,
                &example(),
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
        let mut headers = vec![("Range".to_owned(), "bytes=0-0".to_owned())];
        let credentials = Credentials {
            session_token: String::new(),
            ..example()
        };
        sign_get(
            "x",
            "http://127.0.0.1:9000/b/k",
            &mut headers,
            &credentials,
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
        let mut headers = vec![("Range".to_owned(), "bytes=0-9".to_owned())];
        let url = format!("{base}{path}");
        sign_get("x", &url, &mut headers, credentials, "us-east-1", now).unwrap();
        let mut request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\n");
        for (name, value) in &headers {
            request.push_str(&format!("{name}: {value}\r\n"));
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
        let mut headers = Vec::new();
        let credentials = Credentials {
            session_token: "bad\ntoken".into(),
            ..example()
        };
        let e = sign_get(
            "/vsis3/b/k",
            "https://b.s3.us-east-1.amazonaws.com/k",
            &mut headers,
            &credentials,
            "us-east-1",
            at_1440938160(),
        )
        .unwrap_err();
        assert_eq!(e.status(), Status::Credentials);
        assert!(e.message().starts_with("/vsis3/b/k: cannot sign"), "{e}");
        assert!(!e.message().contains("wJalr") && !e.message().contains("bad\ntoken"));
    }
}
