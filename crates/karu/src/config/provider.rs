//! Custom credentials providers (spec 1.5 and 1.7 item 13): the callback shape and what it
//! returns.

use std::fmt;
use std::time::SystemTime;

use crate::error::Result;

/// Which cloud a credentials provider serves. Values match the C ABI's
/// `karu_credentials_kind`.
///
/// ```
/// use karu::CredentialsKind;
/// assert_eq!(CredentialsKind::from_code(2), Some(CredentialsKind::Gcs));
/// assert_eq!(CredentialsKind::Source.code(), 4);
/// assert_eq!(CredentialsKind::from_code(0), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CredentialsKind {
    /// Amazon S3 and S3-compatible stores.
    Aws = 1,
    /// Google Cloud Storage.
    Gcs = 2,
    /// Azure Blob Storage and Data Lake.
    Azure = 3,
    /// Source Cooperative.
    Source = 4,
}

impl CredentialsKind {
    /// Every kind, in code order.
    pub const ALL: [CredentialsKind; 4] = [
        CredentialsKind::Aws,
        CredentialsKind::Gcs,
        CredentialsKind::Azure,
        CredentialsKind::Source,
    ];

    /// The kind with this C ABI value (1 to 4).
    pub fn from_code(code: i32) -> Option<CredentialsKind> {
        CredentialsKind::ALL.into_iter().find(|k| k.code() == code)
    }

    /// The C ABI value.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// Slot index in per-kind tables (0 to 3).
    pub(crate) fn index(self) -> usize {
        self as usize - 1
    }
}

/// Credentials returned by a [`CredentialsProvider`]. Fields a cloud does not use stay empty.
///
/// `Debug` never prints the secret fields; it shows only whether they are set.
///
/// ```
/// use karu::Credentials;
/// let c = Credentials {
///     access_key_id: "AKIDEXAMPLE".into(),
///     secret_access_key: "wJalrXUtnFEMI".into(),
///     ..Credentials::default()
/// };
/// let shown = format!("{c:?}");
/// assert!(shown.contains("AKIDEXAMPLE"));
/// assert!(!shown.contains("wJalrXUtnFEMI"));
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// AWS or Source access key id, or a GCS HMAC key id.
    pub access_key_id: String,
    /// The matching secret key (or an Azure Shared Key).
    pub secret_access_key: String,
    /// A session token for temporary AWS credentials.
    pub session_token: String,
    /// An OAuth bearer token (GCS, Azure).
    pub bearer_token: String,
    /// An Azure shared access signature.
    pub sas_token: String,
    /// The Azure storage account name.
    pub account_name: String,
    /// The path prefix (canonicalized like a path rule) under which these credentials may be
    /// reused; `None` or empty means the provider is asked again for every request.
    pub cache_prefix: Option<String>,
    /// When the credentials expire; `None` means never.
    pub expires_at: Option<SystemTime>,
}

/// Shows "<redacted>" for a set secret and "" for an unset one, so `Debug` still tells which
/// fields a provider filled.
pub(crate) struct Redacted<'a>(pub &'a str);

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("\"\"")
        } else {
            f.write_str("<redacted>")
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &Redacted(&self.secret_access_key))
            .field("session_token", &Redacted(&self.session_token))
            .field("bearer_token", &Redacted(&self.bearer_token))
            .field("sas_token", &Redacted(&self.sas_token))
            .field("account_name", &self.account_name)
            .field("cache_prefix", &self.cache_prefix)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// A caller-supplied source of credentials for one [`CredentialsKind`]. Installing one
/// replaces karu's native discovery for that kind.
///
/// It is called from karu's credential workers, possibly for several paths at once, and
/// must not call back into the client that uses it. A returned error's status passes through
/// when it is a failure status; karu maps others to `Credentials`.
///
/// ```
/// use std::sync::Arc;
/// use karu::{Config, Credentials, CredentialsKind, CredentialsProvider, Result};
/// struct Fixed;
/// impl CredentialsProvider for Fixed {
///     fn credentials(&self, _kind: CredentialsKind, _path: &str) -> Result<Credentials> {
///         Ok(Credentials { bearer_token: "token".into(), ..Credentials::default() })
///     }
/// }
/// let mut config = Config::empty();
/// config.set_credentials_provider(CredentialsKind::Gcs, Some(Arc::new(Fixed)));
/// let settings = config.freeze()?;
/// let provider = settings.credentials_provider(CredentialsKind::Gcs).unwrap();
/// let creds = provider.credentials(CredentialsKind::Gcs, "/vsigs/bucket/key")?;
/// assert_eq!(creds.bearer_token, "token");
/// assert!(settings.credentials_provider(CredentialsKind::Aws).is_none());
/// # Ok::<(), karu::Error>(())
/// ```
pub trait CredentialsProvider: Send + Sync {
    /// Credentials for the object at `canonical_path` (for example `/vsis3/bucket/key`).
    fn credentials(&self, kind: CredentialsKind, canonical_path: &str) -> Result<Credentials>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        for (i, k) in CredentialsKind::ALL.into_iter().enumerate() {
            assert_eq!(k.code(), i as i32 + 1);
            assert_eq!(k.index(), i);
            assert_eq!(CredentialsKind::from_code(k.code()), Some(k));
        }
        assert_eq!(CredentialsKind::from_code(5), None);
        assert_eq!(CredentialsKind::from_code(-1), None);
    }

    #[test]
    fn debug_redacts_every_secret() {
        let c = Credentials {
            access_key_id: "id".into(),
            secret_access_key: "SECRET1".into(),
            session_token: "SECRET2".into(),
            bearer_token: "SECRET3".into(),
            sas_token: "SECRET4".into(),
            account_name: "acct".into(),
            cache_prefix: Some("/vsis3/b".into()),
            expires_at: None,
        };
        let shown = format!("{c:?}");
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(shown.contains("<redacted>"));
        assert!(shown.contains("acct") && shown.contains("/vsis3/b"));
        let empty = format!("{:?}", Credentials::default());
        assert!(!empty.contains("<redacted>"));
    }
}
