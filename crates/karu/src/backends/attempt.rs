//! What a backend builds one attempt's request from, and the steps every backend shares:
//! options read for the object's path, endpoint options, the `Range` and `If-Match`
//! headers, redirect handling of unsigned requests, and the configured headers appended
//! last.

use super::endpoint::Endpoint;
use super::{ByteRange, Prepared, Signing};
use crate::config::{Settings, check_managed_headers};
use crate::error::Result;
use crate::locator::Locator;
use crate::transport::{MAX_REDIRECTS, RedirectPolicy, Request};
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
}

impl<'a> Attempt<'a> {
    /// The object's canonical path (`/vsis3/bucket/key`), which options are resolved for.
    pub(super) fn path(&self) -> &'a str {
        self.locator.identity()
    }

    /// Option `name` for the object's path, empty values treated as unset.
    pub(super) fn option(&self, name: &str) -> Option<&'a str> {
        self.settings
            .option(name, self.path())
            .filter(|v| !v.is_empty())
    }

    /// Endpoint option `name`, else `default`, checked; a bare host gets `https`.
    pub(super) fn endpoint(&self, name: &str, default: &str) -> Result<Endpoint> {
        self.parse_endpoint(name, self.option(name).unwrap_or(default))
    }

    /// Checks endpoint `value` from `source` (an option name, or where the value came
    /// from); a bare host gets `https`. Errors name the source, never the value.
    pub(super) fn parse_endpoint(&self, source: &str, value: &str) -> Result<Endpoint> {
        // Endpoints are the clouds', whose paths are their display form: no copy per attempt.
        Endpoint::parse(self.path(), source, value, "https")
    }

    /// The headers every request starts with: `Range`, then `If-Match` or
    /// `If-Unmodified-Since` when pinned.
    pub(super) fn read_headers(&self) -> Vec<(String, String)> {
        let mut headers = vec![("Range".to_owned(), self.range.header())];
        if let Some((name, value)) = self.pin.map(Condition::header) {
            headers.push((name.to_owned(), value.to_owned()));
        }
        headers
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
        url: String,
        mut headers: Vec<(String, String)>,
        redirect: RedirectPolicy,
        protect_auth: bool,
    ) -> Result<Prepared> {
        let custom = self.settings.http_headers()?;
        // Most clients configure none: no per-attempt list of names to check them against.
        if !custom.is_empty() {
            let generated: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
            check_managed_headers(custom, &generated, protect_auth)?;
            headers.extend(custom.iter().cloned());
        }
        Ok(Prepared {
            request: Request { url, headers },
            redirect,
            region: None,
        })
    }
}
