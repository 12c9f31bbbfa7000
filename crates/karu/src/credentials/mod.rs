//! Credentials (spec §5.9–5.11): deciding whether a transfer is signed, the native discovery
//! chains per cloud, the custom callbacks, and the scoped cache in front of both. Lookups run
//! on the credential workers (or a probe's caller), never on the IO loops. Backends sign with
//! what this room returns; this room never signs requests.

mod aws;
mod azure;
mod cache;
mod gcs;
mod gcs_adc;
mod gcs_oauth;
pub(crate) mod http;
mod jwt;
mod process;
mod profile;
mod source;
#[cfg(test)]
mod test_support;
mod timestamp;

use std::sync::Arc;
use std::time::{Instant, SystemTime};

pub(crate) use cache::CredentialCache;
pub(crate) use http::CredentialHttp;

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
                || scope_options(kind)
                    .iter()
                    .any(|n| settings.option(n, path).is_some_and(|v| !v.is_empty()));
            configured.then_some(kind)
        }
        _ => Some(kind),
    }
}

/// The credential option names of a provider family (spec §5.10): where each one's value
/// comes from forms the cache scope.
pub(crate) fn scope_options(kind: CredentialsKind) -> &'static [&'static str] {
    match kind {
        CredentialsKind::Aws => &[
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_PROFILE",
            "AWS_SHARED_CREDENTIALS_FILE",
            "AWS_CONFIG_FILE",
            "AWS_ROLE_ARN",
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_ROLE_SESSION_NAME",
            "AWS_STS_ENDPOINT",
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
            "AWS_EC2_METADATA_DISABLED",
            "AWS_METADATA_SERVICE_TIMEOUT",
            "AWS_EC2_METADATA_SERVICE_ENDPOINT",
        ],
        CredentialsKind::Gcs => &[
            "GCS_ACCESS_TOKEN",
            "GCS_HMAC_ACCESS_KEY_ID",
            "GCS_HMAC_SECRET_ACCESS_KEY",
            "GCS_REFRESH_TOKEN",
            "GCS_CLIENT_ID",
            "GCS_CLIENT_SECRET",
            "GCS_PRIVATE_KEY",
            "GCS_PRIVATE_KEY_FILE",
            "GCS_CLIENT_EMAIL",
            "GCS_SCOPE",
            "GCS_METADATA_ENDPOINT",
            "GCS_METADATA_DISABLED",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "CLOUDSDK_CONFIG",
            "GCS_OAUTH_TOKEN_URI",
        ],
        CredentialsKind::Azure => &[
            "AZURE_STORAGE_CONNECTION_STRING",
            "AZURE_STORAGE_ACCOUNT",
            "AZURE_STORAGE_ACCESS_KEY",
            "AZURE_STORAGE_SAS_TOKEN",
            "AZURE_STORAGE_ACCESS_TOKEN",
            "AZURE_TENANT_ID",
            "AZURE_CLIENT_ID",
            "AZURE_CLIENT_SECRET",
            "AZURE_FEDERATED_TOKEN_FILE",
            "AZURE_AUTHORITY_HOST",
            "AZURE_STORAGE_SCOPE",
            "AZURE_STORAGE_RESOURCE",
            "AZURE_IMDS_OBJECT_ID",
            "AZURE_IMDS_CLIENT_ID",
            "AZURE_IMDS_MSI_RES_ID",
            "IDENTITY_ENDPOINT",
            "IDENTITY_HEADER",
            "IMDS_ENDPOINT",
        ],
        CredentialsKind::Source => &[
            "SOURCE_ACCESS_KEY_ID",
            "SOURCE_SECRET_ACCESS_KEY",
            "SOURCE_SESSION_TOKEN",
            "SOURCE_PROFILE",
            "SOURCE_SHARED_CREDENTIALS_FILE",
            "SOURCE_CONFIG_FILE",
        ],
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
