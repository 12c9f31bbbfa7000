//! Backends turn a locator and a byte range into a prepared request: URL, headers (signing
//! comes with the cloud backends) and redirect policy. They open no connections.

mod http;

use std::sync::Arc;

use crate::config::{Credentials, CredentialsKind, Settings};
use crate::error::{Error, Result, Status};
use crate::locator::{Backend, Locator};
use crate::transport::{RedirectPolicy, Request};

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
}

impl ByteRange {
    /// The `Range` header value.
    pub(crate) fn header(self) -> String {
        match self {
            ByteRange::Span { first, last } => format!("bytes={first}-{last}"),
            ByteRange::Suffix(n) => format!("bytes=-{n}"),
        }
    }
}

/// A request ready to send, with how to treat redirects.
#[derive(Clone, Debug)]
pub(crate) struct Prepared {
    /// URL and headers.
    pub(crate) request: Request,
    /// Redirect handling for this backend.
    pub(crate) redirect: RedirectPolicy,
}

/// Builds the request for one attempt (requests are rebuilt, and later re-signed, for every
/// attempt).
pub(crate) fn prepare(
    settings: &Settings,
    locator: &Locator,
    range: ByteRange,
    if_match: Option<&str>,
    credentials: Option<&Credentials>,
) -> Result<Prepared> {
    // Plain HTTP is never signed; the cloud backends sign with `credentials`.
    let _ = credentials;
    match locator.backend() {
        Backend::Http => http::prepare(settings, locator, range, if_match),
        other => Err(not_built(locator, other)),
    }
}

/// The error for a backend whose transport is not built yet.
pub(crate) fn not_built(locator: &Locator, backend: Backend) -> Error {
    Error::new(
        Status::Unsupported,
        format!(
            "{}: reading from the {} backend is not built yet",
            locator.display(),
            backend.name()
        ),
    )
}

/// True for backends this build can read remotely.
pub(crate) fn is_built(backend: Backend) -> bool {
    matches!(backend, Backend::Http)
}

/// True for backends whose transfers go through the credential stage first.
pub(crate) fn needs_credentials(backend: Backend) -> bool {
    // Plain HTTP is anonymous; the signed cloud backends join as they are built.
    match backend {
        Backend::Http | Backend::File => false,
        Backend::S3
        | Backend::Gcs
        | Backend::Azure
        | Backend::AzureDataLake
        | Backend::HuggingFace
        | Backend::Source => true,
    }
}

/// The callback kind that serves a backend's credentials.
fn credentials_kind(backend: Backend) -> Option<CredentialsKind> {
    match backend {
        Backend::S3 => Some(CredentialsKind::Aws),
        Backend::Gcs => Some(CredentialsKind::Gcs),
        Backend::Azure | Backend::AzureDataLake => Some(CredentialsKind::Azure),
        Backend::Source => Some(CredentialsKind::Source),
        Backend::File | Backend::Http | Backend::HuggingFace => None,
    }
}

/// Resolves the credentials a transfer is signed with (on a credential worker): a
/// registered callback for the backend's kind replaces native discovery. The native chains
/// and the scoped cache come with the cloud backends.
pub(crate) fn credentials(
    settings: &Settings,
    locator: &Locator,
) -> Result<Option<Arc<Credentials>>> {
    let Some(kind) = credentials_kind(locator.backend()) else {
        return Ok(None);
    };
    match settings.credentials_provider(kind) {
        Some(provider) => provider
            .credentials(kind, locator.identity())
            .map(|c| Some(Arc::new(c))),
        None => Ok(None),
    }
}
