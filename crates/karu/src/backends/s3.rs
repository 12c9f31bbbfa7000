//! Amazon S3 and the stores that speak its protocol (spec §3.6, §5.8): region, endpoint,
//! virtual-hosted or path-style URLs, SigV4 per attempt, and the region and expired-token
//! hints of error responses (spec §5.5).

use ::http::HeaderMap;
use ::http::header::{HeaderName, HeaderValue};

use super::attempt::Attempt;
use super::sigv4::{self, DEFAULT_REGION, valid_region};
use super::{Prepared, profile};
use crate::credentials::Auth;
use crate::error::{Error, Result, Status};
use crate::locator::encode_key;
use crate::transport::RedirectPolicy;

/// Error codes of a 403 that mean "these credentials expired": refresh them once.
const EXPIRED_CODES: [&str; 3] = [
    "<Code>ExpiredToken</Code>",
    "<Code>InvalidToken</Code>",
    "<Code>RequestExpired</Code>",
];

pub(super) fn prepare(a: &Attempt, options: &profile::S3) -> Result<Prepared> {
    let id = a.path();
    let resolved = match a.signing.auth {
        Auth::Signed(r) => Some(r),
        Auth::Anonymous => None,
        Auth::Missing => return Err(no_credentials(id)),
    };
    let region = a
        .signing
        .region
        .or(options.region.as_deref())
        .or_else(|| resolved.and_then(|r| r.region.as_deref()))
        .unwrap_or(DEFAULT_REGION);
    if !valid_region(region) {
        return Err(Error::new(
            Status::Config,
            format!("{id}: AWS region contains invalid characters"),
        ));
    }
    let url = url(a, options, region)?;
    let uri = a.uri(&url)?;

    let mut headers = a.read_headers()?;
    let redirect = match resolved {
        None => a.follow_redirects(),
        Some(resolved) => {
            let c = &resolved.credentials;
            if c.access_key_id.is_empty() && c.secret_access_key.is_empty() {
                return Err(no_credentials(id));
            }
            if c.access_key_id.is_empty() || c.secret_access_key.is_empty() {
                return Err(Error::new(
                    Status::Credentials,
                    format!("{id}: AWS access key and secret must be set together"),
                ));
            }
            // Validated at config freeze: the only accepted value is "requester".
            if options.request_payer {
                headers.insert(
                    HeaderName::from_static("x-amz-request-payer"),
                    HeaderValue::from_static("requester"),
                );
            }
            sigv4::sign_get(
                id,
                &url,
                &mut headers,
                resolved,
                a.signers,
                region,
                a.signing.now,
            )?;
            // A signature is bound to its host: following a redirect would only fail.
            RedirectPolicy::Never
        }
    };
    Ok(Prepared {
        region: Some(region.to_owned()),
        ..a.finish(uri, headers, redirect, true)?
    })
}

/// The CREDENTIALS error when signing is wanted and no source had credentials.
fn no_credentials(id: &str) -> Error {
    Error::new(
        Status::Credentials,
        format!(
            "{id}: no AWS credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, install \
             a custom provider, or set AWS_NO_SIGN_REQUEST=YES for a public object"
        ),
    )
}

/// The object URL: virtual-hosted `scheme://bucket.<authority><path>/<key>` or path-style
/// `<endpoint>/<bucket>/<key>`.
fn url(a: &Attempt, options: &profile::S3, region: &str) -> Result<String> {
    let id = a.path();
    let bucket = a.locator.container();
    let key = encode_key(a.locator.key());
    let (scheme, authority, path) = match &options.endpoint {
        Some(checked) => {
            let e = a.endpoint(checked)?;
            (e.scheme, e.authority.as_str(), e.path.as_str())
        }
        None => (options.scheme, "", ""),
    };
    // Dotted bucket names break the wildcard certificate of `*.s3.<region>.amazonaws.com`,
    // and other stores rarely resolve bucket subdomains: path style unless asked.
    let virtual_hosting = options
        .virtual_hosting
        .unwrap_or(options.endpoint.is_none() && !bucket.contains('.'));
    if virtual_hosting && !host_safe(bucket) {
        return Err(Error::new(
            Status::Config,
            format!(
                "{id}: the bucket name cannot be part of a host name; set \
                 AWS_VIRTUAL_HOSTING=NO for path-style requests"
            ),
        ));
    }
    // The default endpoint is the region's.
    let regional;
    let authority = if options.endpoint.is_none() {
        regional = format!("s3.{region}.amazonaws.com");
        regional.as_str()
    } else {
        authority
    };
    // Built by pushing, not formatted: this runs for every attempt.
    let mut url = String::with_capacity(
        scheme.len() + bucket.len() * 2 + authority.len() + path.len() + key.len() + 8,
    );
    url.push_str(scheme);
    url.push_str("://");
    if virtual_hosting {
        url.push_str(bucket);
        url.push('.');
        url.push_str(authority);
        url.push_str(path);
    } else {
        url.push_str(authority);
        url.push_str(path);
        url.push('/');
        url.push_str(&encode_key(bucket));
    }
    url.push('/');
    url.push_str(&key);
    Ok(url)
}

/// Whether `bucket` can lead a host name: letters, digits, `-`, `.` and the `_` of legacy
/// bucket names.
fn host_safe(bucket: &str) -> bool {
    bucket
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
}

/// The region an error response names: `x-amz-bucket-region`, then `<Region>` in the body,
/// when it is a valid name.
pub(super) fn region_hint<'a>(headers: &'a HeaderMap, body: &'a [u8]) -> Option<&'a str> {
    headers
        .get("x-amz-bucket-region")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|r| valid_region(r))
        .or_else(|| body_region(body))
}

/// The region named by `<Region>…</Region>` in an error body, when it is a valid name.
fn body_region(body: &[u8]) -> Option<&str> {
    let text = match std::str::from_utf8(body) {
        Ok(text) => text,
        // A 4 KiB prefix may end inside a UTF-8 sequence: keep the valid part.
        Err(e) => std::str::from_utf8(&body[..e.valid_up_to()]).ok()?,
    };
    let start = text.find("<Region>")? + "<Region>".len();
    let len = text[start..].find("</Region>")?;
    Some(text[start..start + len].trim()).filter(|r| valid_region(r))
}

/// True when an error body carries one of the expired-credential codes.
pub(super) fn expired(body: &[u8]) -> bool {
    EXPIRED_CODES
        .iter()
        .any(|code| body.windows(code.len()).any(|w| w == code.as_bytes()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    use super::super::test_support::{header, prepare, settings, signed as signed_with};
    use super::super::{ByteRange, Correction, Signing};
    use super::*;
    use crate::config::Credentials;
    use crate::credentials::Resolved;
    use crate::locator::Locator;
    use crate::transport::MAX_REDIRECTS;

    fn signed(region: Option<&str>) -> Auth {
        Auth::Signed(Arc::new(Resolved {
            credentials: Credentials {
                access_key_id: "AKIDEXAMPLE".into(),
                secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
                session_token: "session".into(),
                ..Credentials::default()
            },
            region: region.map(str::to_owned),
        }))
    }

    fn at_1440938160() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_440_938_160)
    }

    fn prepare_with(
        options: &[(&str, &str)],
        uri: &str,
        auth: &Auth,
        region: Option<&str>,
    ) -> Result<Prepared> {
        let signing = Signing {
            auth,
            region,
            now: at_1440938160(),
        };
        prepare(
            &settings(options),
            &Locator::parse(uri).unwrap(),
            ByteRange::Span {
                first: 10,
                last: 29,
            },
            Some("\"etag\""),
            signing,
        )
    }

    fn anonymous_url(options: &[(&str, &str)], uri: &str) -> String {
        prepare_with(options, uri, &Auth::Anonymous, None)
            .unwrap()
            .request
            .uri
            .to_string()
    }

    #[test]
    fn urls_follow_the_reference_expectations() {
        // (options, object, URL)
        type Case = (
            &'static [(&'static str, &'static str)],
            &'static str,
            &'static str,
        );
        let cases: [Case; 8] = [
            (
                &[("AWS_REGION", "us-west-2")],
                "/vsis3/my-bucket/a b//c",
                "https://my-bucket.s3.us-west-2.amazonaws.com/a%20b//c",
            ),
            (
                &[("AWS_REGION", "us-west-2")],
                "s3://bucket.with.dots/key",
                "https://s3.us-west-2.amazonaws.com/bucket.with.dots/key",
            ),
            (
                &[("AWS_VIRTUAL_HOSTING", "YES")],
                "s3://bucket.with.dots/key",
                "https://bucket.with.dots.s3.us-east-1.amazonaws.com/key",
            ),
            (
                &[("AWS_S3_ENDPOINT", "http://127.0.0.1:9000")],
                "/vsis3/my-bucket/a b//c",
                "http://127.0.0.1:9000/my-bucket/a%20b//c",
            ),
            // A host-only endpoint takes its scheme from AWS_HTTPS; aliases fold.
            (
                &[
                    ("AWS_ENDPOINT_URL", "minio.local:9000/"),
                    ("AWS_HTTPS", "NO"),
                ],
                "s3://b/k",
                "http://minio.local:9000/b/k",
            ),
            (
                &[("AWS_ENDPOINT_URL_S3", "minio.local:9000")],
                "s3://b/k",
                "https://minio.local:9000/b/k",
            ),
            // Explicit virtual hosting wins on a custom endpoint too, path prefix kept.
            (
                &[
                    ("AWS_S3_ENDPOINT", "http://localhost:9000/root/"),
                    ("AWS_VIRTUAL_HOSTING", "TRUE"),
                ],
                "s3://b/dir/%41",
                "http://b.localhost:9000/root/dir/%2541",
            ),
            (
                &[("AWS_VIRTUAL_HOSTING", "off"), ("AWS_HTTPS", "off")],
                "s3://b/k",
                "http://s3.us-east-1.amazonaws.com/b/k",
            ),
        ];
        for (options, uri, url) in cases {
            assert_eq!(anonymous_url(options, uri), url, "{uri} {options:?}");
        }
    }

    #[test]
    fn the_region_comes_from_the_correction_then_the_option_then_the_profile() {
        let uri = "s3://b/k";
        let region = |options: &[(&str, &str)], auth: &Auth, learnt: Option<&str>| {
            prepare_with(options, uri, auth, learnt)
                .unwrap()
                .region
                .unwrap()
        };
        assert_eq!(region(&[], &Auth::Anonymous, None), "us-east-1");
        assert_eq!(region(&[], &signed(Some("eu-west-3")), None), "eu-west-3");
        let option = [("AWS_DEFAULT_REGION", "ap-south-1")];
        assert_eq!(
            region(&option, &signed(Some("eu-west-3")), None),
            "ap-south-1"
        );
        assert_eq!(
            region(&option, &signed(Some("eu-west-3")), Some("ca-central-1")),
            "ca-central-1"
        );
        let p = prepare_with(&option, uri, &signed(None), Some("ca-central-1")).unwrap();
        assert_eq!(p.request.uri, "https://b.s3.ca-central-1.amazonaws.com/k");
        assert!(
            header(&p, "authorization")
                .unwrap()
                .contains("/ca-central-1/s3/")
        );
    }

    #[test]
    fn bad_regions_are_config_errors() {
        for bad in ["us east", "eu/west", "x.y"] {
            let e = prepare_with(&[("AWS_REGION", bad)], "s3://b/k", &Auth::Anonymous, None)
                .unwrap_err();
            assert_eq!(e.status(), Status::Config);
            assert_eq!(
                e.message(),
                "/vsis3/b/k: AWS region contains invalid characters"
            );
        }
    }

    #[test]
    fn endpoint_errors_fail_the_read_with_config() {
        let e = prepare_with(
            &[("AWS_S3_ENDPOINT", "http://127.0.0.1:9000/?x=1")],
            "s3://b/k",
            &signed(None),
            None,
        )
        .unwrap_err();
        assert_eq!(e.status(), Status::Config);
        assert_eq!(
            e.message(),
            "/vsis3/b/k: AWS_S3_ENDPOINT cannot contain a query"
        );
        let e = prepare_with(&[], "s3://bad_bucket!/k", &Auth::Anonymous, None).unwrap_err();
        assert_eq!(e.status(), Status::Config);
        assert!(e.message().contains("AWS_VIRTUAL_HOSTING=NO"), "{e}");
    }

    #[test]
    fn anonymous_requests_carry_range_and_if_match_only_and_follow_redirects() {
        let p = prepare_with(
            &[("AWS_REQUEST_PAYER", "requester")],
            "s3://b/k",
            &Auth::Anonymous,
            None,
        )
        .unwrap();
        let names: Vec<&str> = p.request.headers.keys().map(|n| n.as_str()).collect();
        assert_eq!(names, ["range", "if-match"]);
        assert_eq!(header(&p, "range"), Some("bytes=10-29"));
        assert_eq!(
            p.redirect,
            RedirectPolicy::Follow {
                max: MAX_REDIRECTS,
                same_origin_only: false
            }
        );
    }

    /// The reference vector through the whole backend: default endpoint, virtual hosting.
    #[test]
    fn signed_requests_reproduce_the_vector_and_never_follow_redirects() {
        let p = prepare_with(&[], "s3://examplebucket/test file", &signed(None), None).unwrap();
        assert_eq!(
            p.request.uri,
            "https://examplebucket.s3.us-east-1.amazonaws.com/test%20file"
        );
        assert_eq!(p.redirect, RedirectPolicy::Never);
        assert_eq!(p.region.as_deref(), Some("us-east-1"));
        assert_eq!(header(&p, "x-amz-date"), Some("20150830T123600Z"));
        assert_eq!(
            header(&p, "authorization"),
            Some(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/s3/aws4_request, \
                 SignedHeaders=host;if-match;range;x-amz-content-sha256;x-amz-date;\
                 x-amz-security-token, \
                 Signature=a47ce3c9bbb62233c87e37d9e4265301fa0a5d5d0ab60ad9ab9d8baebd8165bc"
            )
        );
    }

    #[test]
    fn requester_pays_is_signed_on_signed_requests() {
        let p = prepare_with(
            &[("AWS_REQUEST_PAYER", "Requester")],
            "s3://b/k",
            &signed(None),
            None,
        )
        .unwrap();
        assert_eq!(header(&p, "x-amz-request-payer"), Some("requester"));
        assert!(
            header(&p, "authorization")
                .unwrap()
                .contains("x-amz-date;x-amz-request-payer;x-amz-security-token")
        );
    }

    #[test]
    fn missing_or_partial_credentials_are_credentials_errors() {
        let e = prepare_with(&[], "s3://b/k", &Auth::Missing, None).unwrap_err();
        assert_eq!(e.status(), Status::Credentials);
        assert_eq!(
            e.message(),
            "/vsis3/b/k: no AWS credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, \
             install a custom provider, or set AWS_NO_SIGN_REQUEST=YES for a public object"
        );
        let partial = signed_with(Credentials {
            access_key_id: "AKID".into(),
            ..Credentials::default()
        });
        let e = prepare_with(&[], "s3://b/k", &partial, None).unwrap_err();
        assert_eq!(e.status(), Status::Credentials);
        assert!(e.message().ends_with("must be set together"), "{e}");
    }

    #[test]
    fn configured_headers_are_added_but_cannot_touch_signing_headers() {
        let p = prepare_with(
            &[("KARU_HTTP_HEADERS", "X-Trace: 7")],
            "s3://b/k",
            &signed(None),
            None,
        )
        .unwrap();
        assert_eq!(header(&p, "x-trace"), Some("7"));
        for managed in [
            "Authorization: x",
            "x-amz-date: y",
            "X-Amz-Meta-A: z",
            "If-Match: *",
        ] {
            for auth in [Auth::Anonymous, signed(None)] {
                let e = prepare_with(&[("KARU_HTTP_HEADERS", managed)], "s3://b/k", &auth, None)
                    .unwrap_err();
                assert_eq!(e.status(), Status::Config, "{managed}");
                assert!(e.message().contains("cannot override Karu-managed header"));
            }
        }
    }

    /// The dispatcher's answer for an S3 object.
    fn correction(
        status: u16,
        headers: &HeaderMap,
        body: &[u8],
        used_region: Option<&str>,
        signed: bool,
    ) -> Option<Correction> {
        let locator = Locator::parse("s3://b/k").unwrap();
        super::super::correction(&locator, status, headers, body, used_region, signed)
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(n, v)| (n.parse().unwrap(), v.parse().unwrap()))
            .collect()
    }

    #[test]
    fn corrections_name_another_region_or_refresh_expired_credentials() {
        let none = HeaderMap::new();
        let header_hint = headers(&[("x-amz-bucket-region", "eu-west-1")]);
        assert_eq!(
            correction(301, &header_hint, b"", Some("us-east-1"), true),
            Some(Correction::Region("eu-west-1".into()))
        );
        // The same region is no correction (the 403 then stays AUTH).
        assert_eq!(
            correction(403, &header_hint, b"", Some("eu-west-1"), true),
            None
        );
        let body = b"<Error><Code>AuthorizationHeaderMalformed</Code><Region>ap-east-1</Region>\
                     </Error>";
        assert_eq!(
            correction(400, &none, body, Some("us-east-1"), true),
            Some(Correction::Region("ap-east-1".into()))
        );
        assert_eq!(
            correction(400, &none, body, Some("us-east-1"), false),
            Some(Correction::Region("ap-east-1".into()))
        );
        assert_eq!(
            correction(400, &none, b"<Region>a b</Region>", None, true),
            None
        );
        for code in ["ExpiredToken", "InvalidToken", "RequestExpired"] {
            let body = format!("<Error><Code>{code}</Code></Error>");
            assert_eq!(
                correction(403, &none, body.as_bytes(), Some("us-east-1"), true),
                Some(Correction::RefreshCredentials)
            );
            assert_eq!(correction(403, &none, body.as_bytes(), None, false), None);
            assert_eq!(correction(400, &none, body.as_bytes(), None, true), None);
        }
        let denied = b"<Error><Code>SignatureDoesNotMatch</Code></Error>";
        assert_eq!(
            correction(403, &none, denied, Some("us-east-1"), true),
            None
        );
    }

    #[test]
    fn a_body_cut_inside_a_utf8_sequence_still_yields_its_region() {
        let mut body = b"<Error><Region>eu-north-1</Region><Message>caf".to_vec();
        body.push(0xC3);
        assert_eq!(body_region(&body), Some("eu-north-1"));
    }
}
