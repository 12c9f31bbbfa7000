//! The option table: every accepted name (spec 3.7), its aliases, its value kind, whether
//! its value is a secret and which credential chain it feeds. Nothing else is accepted.

use super::provider::CredentialsKind;

/// How a value is validated at freeze.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Any string.
    Text,
    /// YES/NO, TRUE/FALSE, ON/OFF or 1/0.
    Bool,
    /// A whole unsigned decimal string in `[min, max]`.
    Uint { min: u64, max: u64 },
    /// Only "requester".
    RequestPayer,
    /// AUTO, 1.1, 2, 2TLS or 2PRIOR_KNOWLEDGE.
    HttpVersion,
    /// cost or guards.
    CoalesceMode,
}

/// One canonical option.
#[derive(Debug)]
pub(crate) struct OptionDef {
    pub(crate) name: &'static str,
    /// Other spellings, in environment precedence order (after the canonical name).
    pub(crate) aliases: &'static [&'static str],
    pub(crate) kind: Kind,
    /// Redacted in `Debug` output.
    pub(crate) secret: bool,
    /// The provider family whose credentials this option feeds (spec §5.10): where its
    /// value comes from is part of that family's credential cache scope.
    pub(crate) credentials: Option<CredentialsKind>,
}

/// Index of a canonical option in [`OPTIONS`]; ordering follows the table.
pub(crate) type OptId = usize;

const fn opt(name: &'static str, kind: Kind) -> OptionDef {
    OptionDef {
        name,
        aliases: &[],
        kind,
        secret: false,
        credentials: None,
    }
}

const fn text(name: &'static str) -> OptionDef {
    opt(name, Kind::Text)
}

const fn secret(name: &'static str) -> OptionDef {
    OptionDef {
        secret: true,
        ..text(name)
    }
}

const fn flag(name: &'static str) -> OptionDef {
    opt(name, Kind::Bool)
}

const fn uint(name: &'static str, min: u64, max: u64) -> OptionDef {
    opt(name, Kind::Uint { min, max })
}

const fn aliased(def: OptionDef, aliases: &'static [&'static str]) -> OptionDef {
    OptionDef { aliases, ..def }
}

const fn feeds(kind: CredentialsKind, def: OptionDef) -> OptionDef {
    OptionDef {
        credentials: Some(kind),
        ..def
    }
}

/// An option of the native AWS chain.
const fn aws(def: OptionDef) -> OptionDef {
    feeds(CredentialsKind::Aws, def)
}

/// An option of the native GCS chain.
const fn gcs(def: OptionDef) -> OptionDef {
    feeds(CredentialsKind::Gcs, def)
}

/// An option of the native Azure chain.
const fn azure(def: OptionDef) -> OptionDef {
    feeds(CredentialsKind::Azure, def)
}

/// An option of the native Source Cooperative chain.
const fn source(def: OptionDef) -> OptionDef {
    feeds(CredentialsKind::Source, def)
}

/// `LONG_MAX` of the reference build (64-bit POSIX).
const LONG_MAX: u64 = i64::MAX as u64;

/// Canonical options in the order of spec 3.7 (aliases folded into their canonical entry).
pub(crate) static OPTIONS: &[OptionDef] = &[
    // CORE
    uint("KARU_CONCURRENCY", 1, 4096),
    uint("KARU_IO_THREADS", 1, 64),
    uint("KARU_COALESCE_GAP", 0, u64::MAX),
    uint("KARU_COALESCE_LIMIT", 1, u64::MAX),
    uint("KARU_COALESCE_PARTS", 1, 1 << 20),
    uint("KARU_COALESCE_AMPLIFICATION", 1, 1 << 20),
    // Not in the reference build: how the planner chooses merges and splits.
    opt("KARU_COALESCE_MODE", Kind::CoalesceMode),
    uint("KARU_RANGE_FALLBACK_LIMIT", 0, u64::MAX),
    aliased(uint("KARU_MAX_ATTEMPTS", 1, 16), &["KARU_MAX_RETRIES"]),
    uint("KARU_REQUEST_TIMEOUT", 0, 86400),
    uint("KARU_CONNECT_TIMEOUT", 1, 3600),
    uint("KARU_LOW_SPEED_TIME", 0, 3600),
    uint("KARU_LOW_SPEED_LIMIT", 0, LONG_MAX),
    // S3
    flag("AWS_NO_SIGN_REQUEST"),
    aws(text("AWS_ACCESS_KEY_ID")),
    aws(secret("AWS_SECRET_ACCESS_KEY")),
    aws(secret("AWS_SESSION_TOKEN")),
    aliased(text("AWS_REGION"), &["AWS_DEFAULT_REGION"]),
    aws(aliased(text("AWS_PROFILE"), &["AWS_DEFAULT_PROFILE"])),
    aws(text("AWS_SHARED_CREDENTIALS_FILE")),
    aws(text("AWS_CONFIG_FILE")),
    aliased(
        text("AWS_S3_ENDPOINT"),
        &["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"],
    ),
    flag("AWS_HTTPS"),
    flag("AWS_VIRTUAL_HOSTING"),
    opt("AWS_REQUEST_PAYER", Kind::RequestPayer),
    aws(text("AWS_ROLE_ARN")),
    aws(text("AWS_STS_ENDPOINT")),
    aws(text("AWS_WEB_IDENTITY_TOKEN_FILE")),
    aws(text("AWS_ROLE_SESSION_NAME")),
    aws(text("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")),
    aws(text("AWS_CONTAINER_CREDENTIALS_FULL_URI")),
    aws(secret("AWS_CONTAINER_AUTHORIZATION_TOKEN")),
    aws(text("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")),
    aws(flag("AWS_EC2_METADATA_DISABLED")),
    aws(uint("AWS_METADATA_SERVICE_TIMEOUT", 1, 60)),
    // Not in the reference build: the AWS SDKs' name for the IMDS root, which lets tests
    // reach a loopback metadata server.
    aws(text("AWS_EC2_METADATA_SERVICE_ENDPOINT")),
    // GCS
    flag("GCS_NO_SIGN_REQUEST"),
    gcs(text("GCS_HMAC_ACCESS_KEY_ID")),
    gcs(secret("GCS_HMAC_SECRET_ACCESS_KEY")),
    gcs(secret("GCS_ACCESS_TOKEN")),
    gcs(secret("GCS_REFRESH_TOKEN")),
    gcs(text("GCS_CLIENT_ID")),
    gcs(secret("GCS_CLIENT_SECRET")),
    gcs(secret("GCS_PRIVATE_KEY")),
    gcs(text("GCS_PRIVATE_KEY_FILE")),
    gcs(text("GCS_CLIENT_EMAIL")),
    gcs(text("GCS_SCOPE")),
    text("GCS_USER_PROJECT"),
    text("GCS_ENDPOINT"),
    gcs(text("GCS_METADATA_ENDPOINT")),
    gcs(flag("GCS_METADATA_DISABLED")),
    gcs(text("GOOGLE_APPLICATION_CREDENTIALS")),
    gcs(text("CLOUDSDK_CONFIG")),
    // Not in the reference: the token URL of the refresh-token and private-key flows, so
    // tests (and private deployments) can point them somewhere else.
    gcs(text("GCS_OAUTH_TOKEN_URI")),
    // AZURE
    flag("AZURE_NO_SIGN_REQUEST"),
    azure(secret("AZURE_STORAGE_CONNECTION_STRING")),
    azure(text("AZURE_STORAGE_ACCOUNT")),
    azure(secret("AZURE_STORAGE_ACCESS_KEY")),
    azure(secret("AZURE_STORAGE_SAS_TOKEN")),
    azure(secret("AZURE_STORAGE_ACCESS_TOKEN")),
    text("AZURE_STORAGE_ENDPOINT"),
    azure(text("AZURE_TENANT_ID")),
    azure(text("AZURE_CLIENT_ID")),
    azure(secret("AZURE_CLIENT_SECRET")),
    azure(text("AZURE_FEDERATED_TOKEN_FILE")),
    azure(text("AZURE_AUTHORITY_HOST")),
    azure(text("AZURE_STORAGE_SCOPE")),
    azure(text("AZURE_STORAGE_RESOURCE")),
    azure(text("AZURE_IMDS_OBJECT_ID")),
    azure(text("AZURE_IMDS_CLIENT_ID")),
    azure(text("AZURE_IMDS_MSI_RES_ID")),
    azure(text("IDENTITY_ENDPOINT")),
    azure(secret("IDENTITY_HEADER")),
    azure(text("IMDS_ENDPOINT")),
    // HUGGING_FACE
    text("HF_ENDPOINT"),
    aliased(secret("HF_TOKEN"), &["HUGGING_FACE_HUB_TOKEN"]),
    text("HF_TOKEN_PATH"),
    text("HF_HOME"),
    // SOURCE
    flag("SOURCE_NO_SIGN_REQUEST"),
    source(text("SOURCE_ACCESS_KEY_ID")),
    source(secret("SOURCE_SECRET_ACCESS_KEY")),
    source(secret("SOURCE_SESSION_TOKEN")),
    source(text("SOURCE_PROFILE")),
    source(text("SOURCE_SHARED_CREDENTIALS_FILE")),
    source(text("SOURCE_CONFIG_FILE")),
    text("SOURCE_REGION"),
    aliased(text("SOURCE_ENDPOINT"), &["SOURCE_PROXY_URL"]),
    // HTTP. Headers may carry credentials, and a proxy URL may carry user information.
    secret("KARU_HTTP_HEADERS"),
    opt("KARU_HTTP_VERSION", Kind::HttpVersion),
    aliased(
        text("KARU_HTTP_CA_BUNDLE"),
        &["CURL_CA_BUNDLE", "SSL_CERT_FILE"],
    ),
    text("KARU_HTTP_CA_PATH"),
    secret("KARU_HTTP_PROXY"),
    secret("KARU_HTTP_PROXY_CREDENTIALS"),
    text("KARU_HTTP_USER_AGENT"),
];

/// Every accepted spelling, as spec 3.7 lists them (aliases inline), plus
/// `KARU_COALESCE_MODE`, `AWS_EC2_METADATA_SERVICE_ENDPOINT` and `GCS_OAUTH_TOKEN_URI`.
pub(crate) static ACCEPTED_NAMES: &[&str] = &[
    "KARU_CONCURRENCY",
    "KARU_IO_THREADS",
    "KARU_COALESCE_GAP",
    "KARU_COALESCE_LIMIT",
    "KARU_COALESCE_PARTS",
    "KARU_COALESCE_AMPLIFICATION",
    "KARU_COALESCE_MODE",
    "KARU_RANGE_FALLBACK_LIMIT",
    "KARU_MAX_ATTEMPTS",
    "KARU_MAX_RETRIES",
    "KARU_REQUEST_TIMEOUT",
    "KARU_CONNECT_TIMEOUT",
    "KARU_LOW_SPEED_TIME",
    "KARU_LOW_SPEED_LIMIT",
    "AWS_NO_SIGN_REQUEST",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_S3_ENDPOINT",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL",
    "AWS_HTTPS",
    "AWS_VIRTUAL_HOSTING",
    "AWS_REQUEST_PAYER",
    "AWS_ROLE_ARN",
    "AWS_STS_ENDPOINT",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_SESSION_NAME",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_EC2_METADATA_DISABLED",
    "AWS_METADATA_SERVICE_TIMEOUT",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    "GCS_NO_SIGN_REQUEST",
    "GCS_HMAC_ACCESS_KEY_ID",
    "GCS_HMAC_SECRET_ACCESS_KEY",
    "GCS_ACCESS_TOKEN",
    "GCS_REFRESH_TOKEN",
    "GCS_CLIENT_ID",
    "GCS_CLIENT_SECRET",
    "GCS_PRIVATE_KEY",
    "GCS_PRIVATE_KEY_FILE",
    "GCS_CLIENT_EMAIL",
    "GCS_SCOPE",
    "GCS_USER_PROJECT",
    "GCS_ENDPOINT",
    "GCS_METADATA_ENDPOINT",
    "GCS_METADATA_DISABLED",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "CLOUDSDK_CONFIG",
    "GCS_OAUTH_TOKEN_URI",
    "AZURE_NO_SIGN_REQUEST",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_ACCOUNT",
    "AZURE_STORAGE_ACCESS_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_ACCESS_TOKEN",
    "AZURE_STORAGE_ENDPOINT",
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
    "HF_ENDPOINT",
    "HF_TOKEN",
    "HF_TOKEN_PATH",
    "HF_HOME",
    "HUGGING_FACE_HUB_TOKEN",
    "SOURCE_NO_SIGN_REQUEST",
    "SOURCE_ACCESS_KEY_ID",
    "SOURCE_SECRET_ACCESS_KEY",
    "SOURCE_SESSION_TOKEN",
    "SOURCE_PROFILE",
    "SOURCE_SHARED_CREDENTIALS_FILE",
    "SOURCE_CONFIG_FILE",
    "SOURCE_REGION",
    "SOURCE_ENDPOINT",
    "SOURCE_PROXY_URL",
    "KARU_HTTP_HEADERS",
    "KARU_HTTP_VERSION",
    "KARU_HTTP_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "SSL_CERT_FILE",
    "KARU_HTTP_CA_PATH",
    "KARU_HTTP_PROXY",
    "KARU_HTTP_PROXY_CREDENTIALS",
    "KARU_HTTP_USER_AGENT",
];

/// The canonical option a spelling names, case-insensitively; `None` for unknown names.
pub(crate) fn resolve(name: &str) -> Option<OptId> {
    // Only ASCII letters fold: a non-ASCII spelling can never be a known name anyway. No
    // upper-cased copy: backends resolve names on every attempt.
    let is = |known: &str| known.eq_ignore_ascii_case(name);
    OPTIONS
        .iter()
        .position(|d| is(d.name) || d.aliases.iter().any(|a| is(a)))
}

/// The definition of a canonical option.
pub(crate) fn def(id: OptId) -> &'static OptionDef {
    &OPTIONS[id]
}

/// The id of a canonical name known at compile time (panics on a typo: a bug, not input).
pub(crate) fn id_of(canonical: &str) -> OptId {
    OPTIONS
        .iter()
        .position(|d| d.name == canonical)
        .unwrap_or_else(|| panic!("{canonical} is not a canonical karu option"))
}

/// The options feeding the native credential chain of `kind`, in table order.
pub(crate) fn credential_options(kind: CredentialsKind) -> impl Iterator<Item = OptId> {
    (0..OPTIONS.len()).filter(move |&id| OPTIONS[id].credentials == Some(kind))
}

/// The options whose values are secrets, in table order.
pub(crate) fn secret_options() -> impl Iterator<Item = OptId> {
    (0..OPTIONS.len()).filter(|&id| OPTIONS[id].secret)
}

/// True when the canonical option is client-wide (may not appear in a path rule).
pub(crate) fn is_client_wide(id: OptId) -> bool {
    def(id).name.starts_with("KARU_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_options_per_family() {
        let names = |kind| {
            credential_options(kind)
                .map(|id| def(id).name)
                .collect::<Vec<_>>()
        };
        let counts = CredentialsKind::ALL.map(|k| names(k).len());
        assert_eq!(counts, [17, 15, 18, 6]);
        // Switches and endpoints of the data path are not credential options.
        for kind in CredentialsKind::ALL {
            let names = names(kind);
            assert!(
                names
                    .iter()
                    .all(|n| !n.ends_with("_NO_SIGN_REQUEST") && !n.ends_with("_REGION")),
                "{names:?}"
            );
        }
        assert!(names(CredentialsKind::Aws).contains(&"AWS_PROFILE"));
        assert!(!names(CredentialsKind::Gcs).contains(&"GCS_ENDPOINT"));
    }

    #[test]
    fn vocabulary_is_exactly_the_spec_list() {
        // The spec's 100 names plus KARU_COALESCE_MODE, AWS_EC2_METADATA_SERVICE_ENDPOINT and
        // GCS_OAUTH_TOKEN_URI.
        assert_eq!(ACCEPTED_NAMES.len(), 103);
        let mut spellings: Vec<&str> = OPTIONS
            .iter()
            .flat_map(|d| std::iter::once(d.name).chain(d.aliases.iter().copied()))
            .collect();
        let mut listed = ACCEPTED_NAMES.to_vec();
        spellings.sort_unstable();
        listed.sort_unstable();
        assert_eq!(spellings, listed);
        let mut dedup = listed.clone();
        dedup.dedup();
        assert_eq!(dedup.len(), listed.len(), "no spelling twice");
    }

    #[test]
    fn table_order_follows_the_spec_list() {
        // Canonical names appear in the same relative order as in spec 3.7.
        let canon: Vec<&str> = OPTIONS.iter().map(|d| d.name).collect();
        let listed: Vec<&str> = ACCEPTED_NAMES
            .iter()
            .copied()
            .filter(|n| canon.contains(n))
            .collect();
        assert_eq!(canon, listed);
    }

    #[test]
    fn resolve_folds_case_and_aliases() {
        assert_eq!(resolve("aws_default_region"), Some(id_of("AWS_REGION")));
        assert_eq!(
            resolve("Karu_Max_Retries"),
            Some(id_of("KARU_MAX_ATTEMPTS"))
        );
        assert_eq!(resolve("SSL_CERT_FILE"), Some(id_of("KARU_HTTP_CA_BUNDLE")));
        assert_eq!(resolve("KARU_THREADS"), None);
        assert_eq!(resolve("GDAL_HTTP_HEADERS"), None);
        assert_eq!(resolve("GS_SECRET_ACCESS_KEY"), None);
        assert_eq!(resolve("CPL_DEBUG"), None);
        assert_eq!(resolve(""), None);
    }

    #[test]
    fn every_listed_name_resolves() {
        for n in ACCEPTED_NAMES {
            assert!(resolve(n).is_some(), "{n}");
            assert!(resolve(&n.to_ascii_lowercase()).is_some(), "{n}");
        }
    }
}
