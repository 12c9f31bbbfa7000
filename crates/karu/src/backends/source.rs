//! Source Cooperative (spec §5.8): path-style `<SOURCE_ENDPOINT>/<account>/<product>/<key>`,
//! anonymous by default, signed with the S3 signer when configured. No region correction
//! and no requester pays.

use super::attempt::Attempt;
use super::sigv4::{self, DEFAULT_REGION, valid_region};
use super::{Prepared, profile};
use crate::credentials::Auth;
use crate::error::{Error, Result, Status};
use crate::locator::encode_key;
use crate::transport::RedirectPolicy;

/// The public endpoint.
pub(super) const DEFAULT_ENDPOINT: &str = "https://data.source.coop";

pub(super) fn prepare(a: &Attempt, options: &profile::Source) -> Result<Prepared> {
    let id = a.path();
    let endpoint = a.endpoint(&options.endpoint)?;
    // The locator's key is `product/key`; both are encoded like any cloud key.
    let url = format!(
        "{}/{}/{}",
        endpoint.root(),
        encode_key(a.locator.container()),
        encode_key(a.locator.key())
    );
    let uri = a.uri(&url)?;
    let mut headers = a.read_headers()?;
    let redirect = match a.signing.auth {
        Auth::Anonymous => a.follow_redirects(),
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
            let region = options
                .region
                .as_deref()
                .or(resolved.region.as_deref())
                .unwrap_or(DEFAULT_REGION);
            if !valid_region(region) {
                return Err(Error::new(
                    Status::Config,
                    format!("{id}: Source region contains invalid characters"),
                ));
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
            RedirectPolicy::Never
        }
    };
    a.finish(uri, headers, redirect, true)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    use super::super::test_support::{header, pairs, prepare, settings};
    use ::http::HeaderMap;

    use super::super::{ByteRange, Correction, Signing};
    use super::*;
    use crate::config::Credentials;
    use crate::credentials::Resolved;
    use crate::locator::Locator;

    fn prepare_with(options: &[(&str, &str)], uri: &str, auth: &Auth) -> Result<Prepared> {
        let signing = Signing {
            auth,
            region: Some("ignored-1"),
            now: SystemTime::UNIX_EPOCH + Duration::from_secs(1_440_938_160),
        };
        prepare(
            &settings(options),
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
        header(p, "authorization").expect("signed")
    }

    #[test]
    fn anonymous_reads_are_path_style_against_the_endpoint() {
        let p = prepare_with(&[], "source://acct/prod/dir/a b.bin", &Auth::Anonymous).unwrap();
        assert_eq!(
            p.request.uri,
            "https://data.source.coop/acct/prod/dir/a%20b.bin"
        );
        assert_eq!(pairs(&p), [("range".to_owned(), "bytes=-16".to_owned())]);
        assert!(matches!(p.redirect, RedirectPolicy::Follow { .. }));
        assert_eq!(p.region, None);
        let p = prepare_with(
            &[("SOURCE_PROXY_URL", "http://127.0.0.1:5000/")],
            "/vsisource/acct/prod/k",
            &Auth::Anonymous,
        )
        .unwrap();
        assert_eq!(p.request.uri, "http://127.0.0.1:5000/acct/prod/k");
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

    /// The dispatcher's answer for a Source object.
    fn correction(status: u16, body: &[u8], signed: bool) -> Option<Correction> {
        let locator = Locator::parse("source://a/p/k").unwrap();
        super::super::correction(&locator, status, &HeaderMap::new(), body, None, signed)
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
