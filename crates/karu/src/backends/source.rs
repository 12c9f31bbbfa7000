//! Source Cooperative (spec §5.8): path-style `<SOURCE_ENDPOINT>/<account>/<product>/<key>`,
//! anonymous by default, signed with the S3 signer when configured. No region correction
//! and no requester pays.

use super::endpoint::Endpoint;
use super::{ByteRange, Correction, Prepared, Signing, s3, sigv4};
use crate::config::{Settings, check_managed_headers};
use crate::credentials::Auth;
use crate::error::{Error, Result, Status};
use crate::locator::{Locator, encode_key};
use crate::transport::{MAX_REDIRECTS, RedirectPolicy, Request};

/// The public endpoint.
const DEFAULT_ENDPOINT: &str = "https://data.source.coop";

/// The signing region when nothing names one.
const DEFAULT_REGION: &str = "us-east-1";

pub(super) fn prepare(
    settings: &Settings,
    locator: &Locator,
    range: ByteRange,
    if_match: Option<&str>,
    signing: Signing<'_>,
) -> Result<Prepared> {
    let id = locator.identity();
    let option = |name: &str| settings.option(name, id).filter(|v| !v.is_empty());
    let endpoint = Endpoint::parse(
        id,
        "SOURCE_ENDPOINT",
        option("SOURCE_ENDPOINT").unwrap_or(DEFAULT_ENDPOINT),
        "https",
    )?;
    // The locator's key is `product/key`; both are encoded like any cloud key.
    let url = format!(
        "{}/{}/{}",
        endpoint.root(),
        encode_key(locator.container()),
        encode_key(locator.key())
    );
    let mut headers = vec![("Range".to_owned(), range.header())];
    if let Some(tag) = if_match {
        headers.push(("If-Match".to_owned(), tag.to_owned()));
    }
    let redirect = match signing.auth {
        Auth::Anonymous => RedirectPolicy::Follow {
            max: MAX_REDIRECTS,
            same_origin_only: settings.has_http_headers(),
        },
        Auth::Missing => {
            return Err(Error::new(
                Status::Credentials,
                format!(
                    "{id}: no Source credentials; set SOURCE_ACCESS_KEY_ID and \
                     SOURCE_SECRET_ACCESS_KEY, configure SOURCE_PROFILE, install a custom \
                     provider, or set SOURCE_NO_SIGN_REQUEST=YES"
                ),
            ));
        }
        Auth::Signed(resolved) => {
            let c = &resolved.credentials;
            if c.access_key_id.is_empty() || c.secret_access_key.is_empty() {
                return Err(Error::new(
                    Status::Credentials,
                    format!("{id}: Source credentials require an access key and secret"),
                ));
            }
            let region = option("SOURCE_REGION")
                .or(resolved.region.as_deref())
                .unwrap_or(DEFAULT_REGION);
            if !region
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            {
                return Err(Error::new(
                    Status::Config,
                    format!("{id}: Source region contains invalid characters"),
                ));
            }
            sigv4::sign_get(id, &url, &mut headers, c, region, signing.now)?;
            RedirectPolicy::Never
        }
    };
    let custom = settings.http_headers()?;
    let generated: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
    check_managed_headers(custom, &generated, true)?;
    headers.extend(custom.iter().cloned());
    Ok(Prepared {
        request: Request { url, headers },
        redirect,
        region: None,
    })
}

/// A signed 401, or a signed 403 with an expired-credential code: refresh once.
pub(super) fn correction(status: u16, body: &[u8], signed: bool) -> Option<Correction> {
    let rejected = status == 401 || (status == 403 && s3::expired(body));
    (signed && rejected).then_some(Correction::RefreshCredentials)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::config::{Config, Credentials};
    use crate::credentials::Resolved;

    fn prepare_with(options: &[(&str, &str)], uri: &str, auth: &Auth) -> Result<Prepared> {
        let mut config = Config::empty();
        for (name, value) in options {
            config.set(name, Some(value)).unwrap();
        }
        let signing = Signing {
            auth,
            region: Some("ignored-1"),
            now: SystemTime::UNIX_EPOCH + Duration::from_secs(1_440_938_160),
        };
        prepare(
            &config.freeze().unwrap(),
            &Locator::parse(uri).unwrap(),
            ByteRange::Suffix(16),
            None,
            signing,
        )
    }

    fn signed(key: &str, secret: &str, region: Option<&str>) -> Auth {
        Auth::Signed(Arc::new(Resolved {
            credentials: Credentials {
                access_key_id: key.into(),
                secret_access_key: secret.into(),
                ..Credentials::default()
            },
            region: region.map(str::to_owned),
        }))
    }

    fn authorization(p: &Prepared) -> &str {
        p.request
            .headers
            .iter()
            .find(|(n, _)| n == "authorization")
            .map(|(_, v)| v.as_str())
            .expect("signed")
    }

    #[test]
    fn anonymous_reads_are_path_style_against_the_endpoint() {
        let p = prepare_with(&[], "source://acct/prod/dir/a b.bin", &Auth::Anonymous).unwrap();
        assert_eq!(
            p.request.url,
            "https://data.source.coop/acct/prod/dir/a%20b.bin"
        );
        assert_eq!(
            p.request.headers,
            [("Range".to_owned(), "bytes=-16".to_owned())]
        );
        assert!(matches!(p.redirect, RedirectPolicy::Follow { .. }));
        assert_eq!(p.region, None);
        let p = prepare_with(
            &[("SOURCE_PROXY_URL", "http://127.0.0.1:5000/")],
            "/vsisource/acct/prod/k",
            &Auth::Anonymous,
        )
        .unwrap();
        assert_eq!(p.request.url, "http://127.0.0.1:5000/acct/prod/k");
    }

    #[test]
    fn signing_uses_the_source_region_then_the_profile_region_and_never_the_learnt_one() {
        let p = prepare_with(&[], "source://a/p/k", &signed("AK", "SK", None)).unwrap();
        assert!(authorization(&p).contains("/us-east-1/s3/aws4_request"));
        assert_eq!(p.redirect, RedirectPolicy::Never);
        let p = prepare_with(
            &[],
            "source://a/p/k",
            &signed("AK", "SK", Some("eu-west-2")),
        )
        .unwrap();
        assert!(authorization(&p).contains("/eu-west-2/s3/aws4_request"));
        let p = prepare_with(
            &[
                ("SOURCE_REGION", "us-west-1"),
                ("AWS_REQUEST_PAYER", "requester"),
            ],
            "source://a/p/k",
            &signed("AK", "SK", Some("eu-west-2")),
        )
        .unwrap();
        assert!(authorization(&p).contains("/us-west-1/s3/aws4_request"));
        assert!(!authorization(&p).contains("x-amz-request-payer"));
    }

    #[test]
    fn bad_inputs_are_clear_errors() {
        let e = prepare_with(&[], "source://a/p/k", &signed("AK", "", None)).unwrap_err();
        assert_eq!(e.status(), Status::Credentials);
        assert_eq!(
            e.message(),
            "/vsisource/a/p/k: Source credentials require an access key and secret"
        );
        let e = prepare_with(&[], "source://a/p/k", &Auth::Missing).unwrap_err();
        assert_eq!(e.status(), Status::Credentials);
        let e = prepare_with(
            &[("SOURCE_ENDPOINT", "https://h/?token=x")],
            "source://a/p/k",
            &Auth::Anonymous,
        )
        .unwrap_err();
        assert_eq!(e.status(), Status::Config);
        assert_eq!(
            e.message(),
            "/vsisource/a/p/k: SOURCE_ENDPOINT cannot contain a query"
        );
        let e = prepare_with(
            &[("SOURCE_REGION", "eu west")],
            "source://a/p/k",
            &signed("AK", "SK", None),
        )
        .unwrap_err();
        assert_eq!(e.status(), Status::Config);
    }

    #[test]
    fn refresh_on_a_signed_401_or_an_expired_403() {
        let expired = b"<Error><Code>ExpiredToken</Code></Error>";
        assert_eq!(
            correction(401, b"", true),
            Some(Correction::RefreshCredentials)
        );
        assert_eq!(
            correction(403, expired, true),
            Some(Correction::RefreshCredentials)
        );
        assert_eq!(correction(403, b"<Code>AccessDenied</Code>", true), None);
        assert_eq!(correction(401, b"", false), None);
        assert_eq!(correction(301, expired, true), None);
    }
}
