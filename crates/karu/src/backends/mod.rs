//! Backends turn a locator and a byte range into a prepared request: URL, headers, signature
//! and redirect policy; and they read provider-specific hints (region, expired token) from
//! error responses. They open no connections.

mod attempt;
mod azure;
mod endpoint;
mod gcs;
mod http;
mod hugging_face;
mod profile;
mod s3;
mod sigv4;
mod source;
#[cfg(test)]
mod test_support;

use std::time::SystemTime;

use ::http::HeaderMap;

use attempt::Attempt;
use profile::Profile;
pub(crate) use profile::Profiles;
// The connection string parser, for the fuzz targets (`crate::fuzzing`).
#[cfg(feature = "fuzzing")]
pub(crate) use azure::connection_string::ConnectionString;

use crate::config::Settings;
use crate::credentials::Auth;
use crate::error::{Error, Result, Status};
use crate::locator::{Backend, Locator};
use crate::transport::{RedirectPolicy, Request};
use crate::validate::condition::Condition;

/// The bytes a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ByteRange {
    /// `bytes=first-last` (inclusive, absolute).
    Span {
        /// First byte.
        first: u64,
        /// Last byte, inclusive.
        last: u64,
    },
    /// `bytes=-n`: the last `n` bytes.
    Suffix(u64),
    /// `bytes=first-`: everything from `first` to the end of the object.
    From(u64),
}

impl ByteRange {
    /// How many bytes the range asks for, where the request alone says (not `From`).
    pub(crate) fn length(self) -> Option<u64> {
        match self {
            ByteRange::Span { first, last } => Some(last.saturating_sub(first).saturating_add(1)),
            ByteRange::Suffix(n) => Some(n),
            ByteRange::From(_) => None,
        }
    }

    /// The `Range` header value.
    pub(crate) fn header(self) -> String {
        // Pushed, not formatted: one per attempt (an integer's `to_string` skips the
        // formatter).
        let mut value = String::with_capacity(48);
        value.push_str("bytes=");
        match self {
            ByteRange::Span { first, last } => {
                value.push_str(&first.to_string());
                value.push('-');
                value.push_str(&last.to_string());
            }
            ByteRange::Suffix(n) => {
                value.push('-');
                value.push_str(&n.to_string());
            }
            ByteRange::From(first) => {
                value.push_str(&first.to_string());
                value.push('-');
            }
        }
        value
    }
}

/// A request ready to send, with how to treat redirects.
#[derive(Clone, Debug)]
pub(crate) struct Prepared {
    /// URL and headers.
    pub(crate) request: Request,
    /// Redirect handling for this backend.
    pub(crate) redirect: RedirectPolicy,
    /// The region the request was signed for (S3), for region correction.
    pub(crate) region: Option<String>,
}

/// What one attempt signs with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Signing<'a> {
    /// What the credential stage decided.
    pub(crate) auth: &'a Auth,
    /// A region learnt from the server (region correction), overriding the configured one.
    pub(crate) region: Option<&'a str>,
    /// The signing time.
    pub(crate) now: SystemTime,
}

/// Builds the request for one attempt (requests are rebuilt and re-signed for every
/// attempt, with the final range and region) from the profile of the object's path, which
/// `profiles` reads from `settings` once.
pub(crate) fn prepare(
    settings: &Settings,
    profiles: &Profiles,
    locator: &Locator,
    range: ByteRange,
    pin: Option<&Condition>,
    signing: Signing<'_>,
) -> Result<Prepared> {
    let attempt = Attempt {
        settings,
        locator,
        range,
        pin,
        signing,
        signers: &profiles.signers,
    };
    match (&*profiles.get(settings, locator), locator.backend()) {
        // Local files go to the file workers, never through a request.
        (_, Backend::File) => Err(Error::new(
            Status::Unsupported,
            format!("{}: a local file has no remote request", locator.display()),
        )),
        (Profile::S3(options), _) => s3::prepare(&attempt, options),
        (Profile::Source(options), _) => source::prepare(&attempt, options),
        (Profile::Gcs(options), _) => gcs::prepare(&attempt, options),
        (Profile::Azure(options), _) => azure::prepare(&attempt, options),
        (Profile::HuggingFace(options), _) => hugging_face::prepare(&attempt, options),
        (Profile::Plain, _) => http::prepare(&attempt),
    }
}

/// A one-time correction a backend asks for after an error response (spec §5.5). Neither
/// counts as an attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Correction {
    /// Re-sign for this region (S3), remembered for the rest of the batch.
    Region(String),
    /// The credentials expired or were rejected: refresh them once.
    RefreshCredentials,
}

/// Whether an error response asks for a correction. `body` is the first 4 KiB of the body;
/// `used_region` the region the request was signed for; `signed` whether it carried
/// credentials.
pub(crate) fn correction(
    locator: &Locator,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    used_region: Option<&str>,
    signed: bool,
) -> Option<Correction> {
    let backend = locator.backend();
    if backend == Backend::S3
        && let Some(region) = s3::region_hint(headers, body)
        && used_region != Some(region)
    {
        return Some(Correction::Region(region.to_owned()));
    }
    // Only credentials that were sent can have expired.
    let rejected = match backend {
        Backend::S3 => status == 403 && s3::expired(body),
        Backend::Source => status == 401 || (status == 403 && s3::expired(body)),
        Backend::Gcs | Backend::Azure | Backend::AzureDataLake => status == 401,
        Backend::File | Backend::Http | Backend::HuggingFace => false,
    };
    (signed && rejected).then_some(Correction::RefreshCredentials)
}

/// False for providers that answer a suffix range (`bytes=-n`) wrongly: Azure ignores the
/// form (spec §5.6), so its tails are read by offset once the size is known.
pub(crate) fn answers_suffix_ranges(backend: Backend) -> bool {
    !matches!(backend, Backend::Azure | Backend::AzureDataLake)
}

/// True for backends whose transfers go through the credential stage first.
pub(crate) fn needs_credentials(backend: Backend) -> bool {
    crate::credentials::kind_of(backend).is_some()
}
