//! What a backend builds one attempt's request from, and the steps every backend shares:
//! the profile's endpoint, the `Range` and `If-Match` headers, redirect handling of unsigned
//! requests, and the configured headers appended last. Requests are built straight into a
//! parsed URL and a header map, which the transport sends as they are.

use http::Uri;
use http::header::{HeaderMap, HeaderName, HeaderValue, RANGE};

use super::endpoint::Endpoint;
use super::profile::Checked;
use super::sigv4::Signers;
use super::{ByteRange, Prepared, Signing};
use crate::config::{Settings, check_managed_headers};
use crate::error::{Error, Result, Status};
use crate::locator::Locator;
use crate::transport::{self, MAX_REDIRECTS, RedirectPolicy, Request};
use crate::validate::condition::Condition;

/// One attempt's inputs (requests are rebuilt and re-signed for every attempt, with the
/// final range and region).
pub(super) struct Attempt<'a> {
    /// The client's settings.
    pub(super) settings: &'a Settings,
    /// The object.
    pub(super) locator: &'a Locator,
    /// The bytes asked for.
    pub(super) range: ByteRange,
    /// The version the object must still be, when pinned.
    pub(super) pin: Option<&'a Condition>,
    /// What the attempt signs with.
    pub(super) signing: Signing<'a>,
    /// The loop's SigV4 signer credentials.
    pub(super) signers: &'a Signers,
}

impl<'a> Attempt<'a> {
    /// The object's canonical path (`/vsis3/bucket/key`), which options are resolved for.
    pub(super) fn path(&self) -> &'a str {
        self.locator.identity()
    }

    /// A profile's endpoint, or the CONFIG error naming its option.
    pub(super) fn endpoint<'e>(&self, checked: &'e Checked) -> Result<&'e Endpoint> {
        checked
            .as_ref()
            .map_err(|problem| Endpoint::invalid(self.path(), problem))
    }

    /// Checks endpoint `value` from `source` (where the value came from); a bare host gets
    /// `https`. Errors name the source, never the value.
    pub(super) fn parse_endpoint(&self, source: &str, value: &str) -> Result<Endpoint> {
        Endpoint::check(source, value, "https")
            .map_err(|problem| Endpoint::invalid(self.path(), &problem))
    }

    /// The headers every request starts with: `Range`, then `If-Match` or
    /// `If-Unmodified-Since` when pinned.
    pub(super) fn read_headers(&self) -> Result<HeaderMap> {
        let mut headers = HeaderMap::with_capacity(8);
        self.header(&mut headers, RANGE, &self.range.header())?;
        if let Some((name, value)) = self.pin.map(Condition::header) {
            self.header(&mut headers, name, value)?;
        }
        Ok(headers)
    }

    /// Adds header `name: value`; a value HTTP cannot carry fails the read with URI, as the
    /// transport would, naming the header but not the value.
    pub(super) fn header(
        &self,
        headers: &mut HeaderMap,
        name: HeaderName,
        value: &str,
    ) -> Result<()> {
        let value = HeaderValue::from_str(value).map_err(|_| {
            Error::new(
                Status::Uri,
                format!(
                    "{}: invalid request header value for {:?}",
                    self.locator.display(),
                    name.as_str()
                ),
            )
        })?;
        headers.append(name, value);
        Ok(())
    }

    /// The URL a backend formatted, parsed once (the transport sends it as it is).
    pub(super) fn uri(&self, url: &str) -> Result<Uri> {
        transport::parse_url(url).map_err(|e| {
            Error::new(
                e.kind.status(),
                format!("{}: {}", self.locator.display(), e.message),
            )
        })
    }

    /// The `If-Match` value, when pinned by ETag.
    pub(super) fn if_match(&self) -> Option<&'a str> {
        self.pin.and_then(Condition::if_match)
    }

    /// The `If-Unmodified-Since` value, when pinned by date.
    pub(super) fn if_unmodified_since(&self) -> Option<&'a str> {
        match self.pin {
            Some(Condition::IfUnmodifiedSince { date, .. }) => Some(date),
            _ => None,
        }
    }

    /// Redirects of requests that carry no signature: followed, and kept to the origin
    /// when configured headers must not reach another host.
    pub(super) fn follow_redirects(&self) -> RedirectPolicy {
        RedirectPolicy::Follow {
            max: MAX_REDIRECTS,
            same_origin_only: self.settings.has_http_headers(),
        }
    }

    /// Appends the configured headers to the ones the backend generated (which they may
    /// not override, nor with `protect_auth` the authentication headers of clouds) and
    /// assembles the request.
    pub(super) fn finish(
        &self,
        uri: Uri,
        mut headers: HeaderMap,
        redirect: RedirectPolicy,
        protect_auth: bool,
    ) -> Result<Prepared> {
        let custom = self.settings.http_headers()?;
        // Most clients configure none: no per-attempt list of names to check them against.
        if !custom.is_empty() {
            let generated: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
            check_managed_headers(custom, &generated, protect_auth)?;
            for (name, value) in custom {
                let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                    Error::new(
                        Status::Uri,
                        format!(
                            "{}: invalid request header name {name:?}",
                            self.locator.display()
                        ),
                    )
                })?;
                self.header(&mut headers, name, value)?;
            }
        }
        Ok(Prepared {
            request: Request { uri, headers },
            redirect,
            region: None,
        })
    }
}
