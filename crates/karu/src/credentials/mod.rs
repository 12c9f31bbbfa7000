//! Credentials (spec §5.9–5.11): deciding whether a transfer is signed, the native discovery
//! chains per cloud, the custom callbacks, and the scoped cache in front of both. Lookups run
//! on the credential workers (or a probe's caller), never on the IO loops. Backends sign with
//! what this room returns; this room never signs requests.

mod aws;
mod azure;
mod cache;
mod gcs;
mod gcs_adc;
pub(crate) mod http;
mod jwt;
mod keys;
mod oauth;
mod process;
mod profile;
mod source;
#[cfg(test)]
pub(crate) mod test_support;
mod timestamp;

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

pub(crate) use cache::CredentialCache;
pub(crate) use http::CredentialHttp;
// The parsers of untrusted credential input, for the fuzz targets (`crate::fuzzing`).
#[cfg(feature = "fuzzing")]
pub(crate) use {
    aws::sts_elements,
    gcs_adc::{Adc, json as adc_json, parse as parse_adc, subject_token_in},
    jwt::SigningKey,
    process::parse as parse_process_output,
    profile::parse as parse_profile,
};

use crate::config::{Credentials, CredentialsKind, Settings};
use crate::error::{Error, Result, Status};
use crate::locator::{Backend, Locator};

/// What a transfer signs with, as the credential stage decided.
#[derive(Clone, Debug, Default)]
pub(crate) enum Auth {
    /// Anonymous: not a signing backend, or `<P>_NO_SIGN_REQUEST` says so.
    #[default]
    Anonymous,
    /// Signing was wanted but no source had credentials: the backend reports its "no
    /// credentials" error.
    Missing,
    /// Sign with these.
    Signed(Arc<Resolved>),
}

/// Credentials ready to sign with, plus what a chain attached to them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// The secrets (and `expires_at`; `None` = no expiry known).
    pub(crate) credentials: Credentials,
    /// A region the source named (an AWS profile's `region`), used when no region option is
    /// set.
    pub(crate) region: Option<String>,
}

impl Resolved {
    /// Wraps credentials without a region.
    pub(crate) fn new(credentials: Credentials) -> Resolved {
        Resolved {
            credentials,
            region: None,
        }
    }
}

/// What a native chain may use while it loads credentials for one path.
pub(crate) struct LoadContext<'a> {
    /// The client's settings (options are read for `path`).
    pub(crate) settings: &'a Settings,
    /// The canonical path of the object (`/vsis3/bucket/key`).
    pub(crate) path: &'a str,
    /// When the read's request timeout runs out (`None`: no deadline). Bounds
    /// `credential_process` and every credential HTTP request.
    pub(crate) deadline: Option<Instant>,
    /// HTTP for STS, token, container and metadata endpoints, with the client's proxy, CA
    /// and User-Agent.
    pub(crate) http: &'a CredentialHttp,
}

impl LoadContext<'_> {
    /// Option `name` for this path, empty values treated as unset.
    pub(crate) fn option(&self, name: &str) -> Option<&str> {
        self.settings
            .option(name, self.path)
            .filter(|v| !v.is_empty())
    }

    /// A CREDENTIALS error about this path: "<path>: <why>".
    pub(crate) fn failure(&self, why: impl fmt::Display) -> Error {
        Error::new(Status::Credentials, format!("{}: {why}", self.path))
    }

    /// Reads a key or token file of at most 1 MiB; failures are "cannot read <what>
    /// '<file>': <why>".
    pub(crate) fn read_file(&self, what: &str, file: &Path) -> Result<String> {
        const LIMIT: u64 = 1 << 20;
        let read = || {
            if std::fs::metadata(file)?.len() > LIMIT {
                return Err(std::io::Error::other(format!(
                    "the file is larger than {LIMIT} bytes"
                )));
            }
            std::fs::read_to_string(file)
        };
        read()
            .map_err(|e| self.failure(format_args!("cannot read {what} '{}': {e}", file.display())))
    }
}

/// The credential kind a backend signs with, when it signs at all.
pub(crate) fn kind_of(backend: Backend) -> Option<CredentialsKind> {
    match backend {
        Backend::S3 => Some(CredentialsKind::Aws),
        Backend::Gcs => Some(CredentialsKind::Gcs),
        Backend::Azure | Backend::AzureDataLake => Some(CredentialsKind::Azure),
        Backend::Source => Some(CredentialsKind::Source),
        Backend::File | Backend::Http | Backend::HuggingFace => None,
    }
}

/// The `<P>_NO_SIGN_REQUEST` option of a kind.
fn no_sign_option(kind: CredentialsKind) -> &'static str {
    match kind {
        CredentialsKind::Aws => "AWS_NO_SIGN_REQUEST",
        CredentialsKind::Gcs => "GCS_NO_SIGN_REQUEST",
        CredentialsKind::Azure => "AZURE_NO_SIGN_REQUEST",
        CredentialsKind::Source => "SOURCE_NO_SIGN_REQUEST",
    }
}

/// Spec §5.9's decision per transfer: the kind to sign with, or `None` for anonymous.
pub(crate) fn signing_kind(settings: &Settings, locator: &Locator) -> Option<CredentialsKind> {
    let kind = kind_of(locator.backend())?;
    let path = locator.identity();
    if let Some(no_sign) = settings.flag(no_sign_option(kind), path) {
        return (!no_sign).then_some(kind);
    }
    match kind {
        // Source signs only when configured: a callback or any of its credential options.
        CredentialsKind::Source => {
            let configured = settings.credentials_provider(kind).is_some()
                || settings
                    .credential_options(kind, path)
                    .any(|(value, _)| value.is_some_and(|v| !v.is_empty()));
            configured.then_some(kind)
        }
        _ => Some(kind),
    }
}

/// Runs the native chain of `kind`: `Ok(None)` when it found nothing (the backend then
/// reports its "no credentials" error).
pub(crate) fn load_native(kind: CredentialsKind, ctx: &LoadContext) -> Result<Option<Resolved>> {
    let loaded = match kind {
        CredentialsKind::Aws => aws::load(ctx)?,
        CredentialsKind::Gcs => gcs::load(ctx)?,
        CredentialsKind::Azure => azure::load(ctx)?,
        CredentialsKind::Source => source::load(ctx)?,
    };
    match loaded {
        Some(r) if is_expired(&r.credentials, SystemTime::now()) => Err(Error::new(
            Status::Credentials,
            format!(
                "{}: credential provider returned expired credentials",
                ctx.path
            ),
        )),
        other => Ok(other),
    }
}

/// True when credentials carry an expiry that has passed.
pub(crate) fn is_expired(c: &Credentials, now: SystemTime) -> bool {
    c.expires_at.is_some_and(|t| t <= now)
}
