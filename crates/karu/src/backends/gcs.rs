//! Google Cloud Storage over the XML API (spec §5.8): path-style URLs under `GCS_ENDPOINT`,
//! `Accept-Encoding: gzip` so gzip-stored objects arrive as stored, and anonymous, bearer or
//! HMAC (GOOG1) requests.

use aws_lc_rs::hmac;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use ::http::header::{ACCEPT_ENCODING, AUTHORIZATION, DATE, HeaderName, HeaderValue};

use super::attempt::Attempt;
use super::{Prepared, profile};
use crate::credentials::Auth;
use crate::error::{Error, Result, Status};
use crate::locator::{Locator, encode_key};
use crate::transport::RedirectPolicy;

/// `GCS_ENDPOINT`'s default.
pub(super) const DEFAULT_ENDPOINT: &str = "https://storage.googleapis.com";

/// How one request authenticates.
enum Method<'a> {
    Anonymous,
    Bearer(&'a str),
    Hmac { id: &'a str, secret: &'a str },
}

pub(super) fn prepare(a: &Attempt, options: &profile::Gcs) -> Result<Prepared> {
    let locator = a.locator;
    let root = a.endpoint(&options.endpoint)?.root();
    let resource = format!("/{}/{}", locator.container(), encode_key(locator.key()));
    let method = match a.signing.auth {
        Auth::Anonymous => Method::Anonymous,
        Auth::Missing => return Err(no_credentials(locator)),
        Auth::Signed(resolved) => {
            let c = &resolved.credentials;
            if !c.bearer_token.is_empty() {
                Method::Bearer(&c.bearer_token)
            } else if !c.access_key_id.is_empty() && !c.secret_access_key.is_empty() {
                Method::Hmac {
                    id: &c.access_key_id,
                    secret: &c.secret_access_key,
                }
            } else {
                return Err(no_credentials(locator));
            }
        }
    };

    let uri = a.uri(&format!("{root}{resource}"))?;
    let mut headers = a.read_headers()?;
    headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
    let user_project = options.user_project.as_deref();
    if let Some(project) = user_project {
        a.header(
            &mut headers,
            HeaderName::from_static("x-goog-user-project"),
            project,
        )?;
    }
    // Signed requests never follow redirects: a redirect would carry the signature elsewhere.
    let redirect = match method {
        Method::Anonymous => a.follow_redirects(),
        Method::Bearer(token) => {
            a.header(&mut headers, AUTHORIZATION, &format!("Bearer {token}"))?;
            RedirectPolicy::Never
        }
        Method::Hmac { id, secret } => {
            let date = httpdate::fmt_http_date(a.signing.now);
            let signature = goog1_signature(secret, &date, user_project, &resource);
            a.header(&mut headers, DATE, &date)?;
            a.header(
                &mut headers,
                AUTHORIZATION,
                &format!("GOOG1 {id}:{signature}"),
            )?;
            RedirectPolicy::Never
        }
    };
    a.finish(uri, headers, redirect, true)
}

/// The GOOG1 (HMAC-SHA1) signature of a GET: empty Content-MD5 and Content-Type lines, the
/// date, the canonical `x-goog-*` header when set, then the resource.
fn goog1_signature(secret: &str, date: &str, user_project: Option<&str>, resource: &str) -> String {
    let mut to_sign = format!("GET\n\n\n{date}\n");
    if let Some(project) = user_project {
        to_sign.push_str(&format!("x-goog-user-project:{project}\n"));
    }
    to_sign.push_str(resource);
    let key = hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, secret.as_bytes());
    STANDARD.encode(hmac::sign(&key, to_sign.as_bytes()).as_ref())
}

fn no_credentials(locator: &Locator) -> Error {
    Error::new(
        Status::Credentials,
        format!(
            "{}: no GCS credentials; set GCS_ACCESS_TOKEN, configure \
             GCS_HMAC_ACCESS_KEY_ID/GCS_HMAC_SECRET_ACCESS_KEY, install a custom provider, or \
             set GCS_NO_SIGN_REQUEST=YES",
            locator.display()
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use super::super::test_support::{header, pairs, prepare, settings, signed};
    use super::super::{ByteRange, Signing};
    use super::*;
    use crate::config::Credentials;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn build(
        options: &[(&str, &str)],
        uri: &str,
        auth: &Auth,
        if_match: Option<&str>,
    ) -> Result<Prepared> {
        let signing = Signing {
            auth,
            region: None,
            now: at(1_440_938_160),
        };
        let range = ByteRange::Span {
            first: 10,
            last: 29,
        };
        prepare(
            &settings(options),
            &Locator::parse(uri).unwrap(),
            range,
            if_match,
            signing,
        )
    }

    #[test]
    fn goog1_vector() {
        let auth = signed(Credentials {
            access_key_id: "GOOG123".into(),
            secret_access_key: "secret".into(),
            ..Credentials::default()
        });
        let p = build(
            &[("GCS_USER_PROJECT", "billing-project")],
            "gs://bucket/a b",
            &auth,
            None,
        )
        .unwrap();
        assert_eq!(p.request.uri, "https://storage.googleapis.com/bucket/a%20b");
        assert_eq!(header(&p, "Date"), Some("Sun, 30 Aug 2015 12:36:00 GMT"));
        assert_eq!(
            header(&p, "Authorization"),
            Some("GOOG1 GOOG123:ZIzQchNR2PmJ+kE3icykQrHrBaE=")
        );
        assert_eq!(header(&p, "x-goog-user-project"), Some("billing-project"));
        assert_eq!(header(&p, "Accept-Encoding"), Some("gzip"));
        assert_eq!(header(&p, "Range"), Some("bytes=10-29"));
        assert!(matches!(p.redirect, RedirectPolicy::Never));
        // Without a user project the canonical header line is absent.
        let p = build(&[], "gs://bucket/a b", &auth, None).unwrap();
        let expected = goog1_signature(
            "secret",
            "Sun, 30 Aug 2015 12:36:00 GMT",
            None,
            "/bucket/a%20b",
        );
        assert_eq!(
            header(&p, "Authorization"),
            Some(format!("GOOG1 GOOG123:{expected}").as_str())
        );
        assert_ne!(expected, "ZIzQchNR2PmJ+kE3icykQrHrBaE=");
    }

    #[test]
    fn anonymous_requests_follow_redirects() {
        let p = build(
            &[("GCS_ENDPOINT", "http://127.0.0.1:4443/")],
            "/vsigs/bkt/dir/%x y",
            &Auth::Anonymous,
            Some("\"etag\""),
        )
        .unwrap();
        assert_eq!(p.request.uri, "http://127.0.0.1:4443/bkt/dir/%25x%20y");
        assert_eq!(
            pairs(&p),
            vec![
                ("range".to_owned(), "bytes=10-29".to_owned()),
                ("if-match".to_owned(), "\"etag\"".to_owned()),
                ("accept-encoding".to_owned(), "gzip".to_owned()),
            ]
        );
        assert!(matches!(
            p.redirect,
            RedirectPolicy::Follow {
                same_origin_only: false,
                ..
            }
        ));
        assert_eq!(p.region, None);
    }

    #[test]
    fn bearer_tokens_win_over_hmac_keys() {
        let auth = signed(Credentials {
            bearer_token: "ya29.token".into(),
            access_key_id: "GOOG123".into(),
            secret_access_key: "secret".into(),
            ..Credentials::default()
        });
        let p = build(&[("GCS_USER_PROJECT", "p")], "gs://b/k", &auth, None).unwrap();
        assert_eq!(header(&p, "Authorization"), Some("Bearer ya29.token"));
        assert_eq!(header(&p, "Date"), None);
        assert_eq!(header(&p, "x-goog-user-project"), Some("p"));
        assert!(matches!(p.redirect, RedirectPolicy::Never));
    }

    #[test]
    fn missing_or_unusable_credentials() {
        let message = "/vsigs/b/k: no GCS credentials; set GCS_ACCESS_TOKEN, configure \
                       GCS_HMAC_ACCESS_KEY_ID/GCS_HMAC_SECRET_ACCESS_KEY, install a custom \
                       provider, or set GCS_NO_SIGN_REQUEST=YES";
        let half = signed(Credentials {
            access_key_id: "GOOG123".into(),
            ..Credentials::default()
        });
        for auth in [Auth::Missing, half] {
            let e = build(&[], "gs://b/k", &auth, None).unwrap_err();
            assert_eq!(e.status(), Status::Credentials);
            assert_eq!(e.message(), message);
        }
    }

    #[test]
    fn configured_headers_cannot_touch_auth_or_goog_headers() {
        let p = build(
            &[("KARU_HTTP_HEADERS", "X-Trace: 1")],
            "gs://b/k",
            &Auth::Anonymous,
            None,
        )
        .unwrap();
        assert_eq!(header(&p, "X-Trace"), Some("1"));
        assert!(matches!(
            p.redirect,
            RedirectPolicy::Follow {
                same_origin_only: true,
                ..
            }
        ));
        for name in [
            "Authorization",
            "x-goog-user-project",
            "Accept-Encoding",
            "Date",
        ] {
            let e = build(
                &[("KARU_HTTP_HEADERS", &format!("{name}: x"))],
                "gs://b/k",
                &Auth::Anonymous,
                None,
            )
            .unwrap_err();
            assert_eq!(e.status(), Status::Config);
            assert_eq!(
                e.message(),
                format!("KARU_HTTP_HEADERS cannot override Karu-managed header '{name}'")
            );
        }
    }

    #[test]
    fn malformed_endpoints_fail_with_config() {
        for endpoint in ["https://h/?x=1", "ftp://h", "https://user@h"] {
            let e = build(
                &[("GCS_ENDPOINT", endpoint)],
                "gs://b/k",
                &Auth::Anonymous,
                None,
            )
            .unwrap_err();
            assert_eq!(e.status(), Status::Config, "{endpoint}");
            assert!(e.message().starts_with("/vsigs/b/k: GCS_ENDPOINT "), "{e}");
        }
        // A bare host gets https.
        let p = build(
            &[("GCS_ENDPOINT", "gcs.example.test")],
            "gs://b/k",
            &Auth::Anonymous,
            None,
        )
        .unwrap();
        assert_eq!(p.request.uri, "https://gcs.example.test/b/k");
    }
}
