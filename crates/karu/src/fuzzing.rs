//! Entry points for the fuzz targets in `fuzz/` (feature `fuzzing`; hidden, not a stable API).
//!
//! The parsers that read untrusted text are crate-private; these thin functions call them
//! through their ordinary entry points and return plain values, so that the targets can check
//! properties without the crate widening its public API.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::backends::ConnectionString;
use crate::credentials::{self, Adc, SigningKey};
use crate::error::Error;
use crate::locator::{Locator, Window};
use crate::validate::{self, content_range};

pub use crate::config::{canonical_prefix, prefix_matches};
pub use crate::locator::{encode_key, redact_url};

/// `uri` parsed, with its window replaced by `offset` and `length` (windows the parser would
/// refuse included, to reach the planner's overflow checks). `None` when `uri` does not parse.
pub fn locator_with_window(uri: &str, offset: u64, length: Option<u64>) -> Option<Locator> {
    let l = Locator::parse(uri).ok()?;
    Some(Locator::from_parts(
        l.backend(),
        l.identity().to_owned(),
        l.target().to_owned(),
        l.container().to_owned(),
        l.key().to_owned(),
        Window { offset, length },
    ))
}

/// A header map from raw name/value pairs; pairs HTTP could not carry are left out, as a
/// client would never receive them.
pub fn headers(pairs: &[(&[u8], &[u8])]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
            map.append(n, v);
        }
    }
    map
}

/// `Content-Range` parsed: `(first, last, total)` of `bytes F-L/T` or `bytes F-L/*`.
pub fn content_range(value: &str) -> Option<(u64, u64, Option<u64>)> {
    content_range::parse(value).map(|r| (r.first, r.last, r.total))
}

/// The total of the unsatisfied form `bytes */T`.
pub fn content_range_unsatisfied(value: &str) -> Option<u64> {
    content_range::parse_unsatisfied(value)
}

/// What a transfer attempt asked for (mirrors the crate's own `Expect`).
#[derive(Clone, Copy, Debug)]
pub struct Expect<'a> {
    /// Redacted URL, for messages.
    pub url: &'a str,
    /// First byte asked in this attempt.
    pub start: u64,
    /// Last byte asked (inclusive).
    pub end: u64,
    /// First byte of the transfer before any resume.
    pub original_start: u64,
    /// Most bytes discarded when a server ignores `Range`.
    pub fallback_limit: u64,
    /// The strong tag sent in `If-Match`.
    pub pin: Option<&'a str>,
    /// Whether `pin` is the caller's.
    pub pin_is_callers: bool,
}

/// The verdict on a response head (mirrors the crate's own `Head`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Head {
    /// Keep `len` body bytes for offsets from `first` after discarding `skip`.
    Body {
        /// Bytes to discard first.
        skip: u64,
        /// Object offset of the first kept byte.
        first: u64,
        /// Bytes to keep.
        len: u64,
        /// Object size, when told.
        total: Option<u64>,
        /// The strong ETag.
        etag: Option<String>,
        /// A 200 while resuming.
        restarted: bool,
    },
    /// A non-2xx status whose body is classified next.
    ErrorBody(u16),
    /// A final failure.
    Fail(Error),
    /// The object changed under Karu's own pin.
    VersionChanged,
    /// The object no longer matches the caller's `if_match`.
    Precondition(Error),
}

/// The response-head check of a batch transfer.
pub fn check_head(expect: &Expect, status: u16, headers: &HeaderMap) -> Head {
    let e = validate::Expect {
        url: expect.url,
        start: expect.start,
        end: expect.end,
        original_start: expect.original_start,
        fallback_limit: expect.fallback_limit,
        pin: expect.pin,
        pin_is_callers: expect.pin_is_callers,
        unmodified: None,
    };
    match validate::check_head(&e, status, headers) {
        validate::Head::Body {
            skip,
            first,
            len,
            total,
            etag,
            restarted,
        } => Head::Body {
            skip,
            first,
            len,
            total,
            etag,
            restarted,
        },
        validate::Head::ErrorBody { status } => Head::ErrorBody(status),
        validate::Head::Fail(e) => Head::Fail(e),
        validate::Head::VersionChanged => Head::VersionChanged,
        validate::Head::Precondition(e) => Head::Precondition(e),
    }
}

/// A classified non-2xx answer (mirrors the crate's own `Failure`).
#[derive(Clone, Debug)]
pub struct Failure {
    /// The error the read gets.
    pub error: Error,
    /// Worth retrying.
    pub transient: bool,
    /// The server asked to slow down.
    pub throttled: bool,
    /// The wait the server asked for.
    pub retry_after: Option<Duration>,
    /// A restart after a version change.
    pub version_changed: bool,
}

/// Classifies a non-2xx answer from its status, headers and body prefix.
pub fn classify_error(
    url: &str,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    own_pin: bool,
) -> Failure {
    let f = validate::classify_error(url, status, headers, body, own_pin);
    Failure {
        error: f.error,
        transient: f.transient,
        throttled: f.throttled,
        retry_after: f.retry_after,
        version_changed: f.version_changed,
    }
}

/// The summary of an error body that messages quote.
pub fn summary(body: &[u8]) -> String {
    validate::summary(body)
}

/// The fields an AWS STS XML answer (or error) is read for.
pub fn sts_fields(body: &[u8]) -> HashMap<String, String> {
    credentials::sts_elements(
        body,
        &[
            "Code",
            "AccessKeyId",
            "SecretAccessKey",
            "SessionToken",
            "Expiration",
        ],
    )
}

/// An AWS shared config or credentials file: section → key → value.
pub fn aws_profile(text: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    credentials::parse_profile(text)
}

/// A `credential_process` helper's output: `(access key id, secret, session token)`, or the
/// message suffix explaining the refusal.
pub fn credential_process(output: &[u8]) -> Result<(String, String, String), &'static str> {
    credentials::parse_process_output(output)
        .map(|c| (c.access_key_id, c.secret_access_key, c.session_token))
}

/// A Google ADC file read as far as possible without I/O: its type, with a service
/// account's key parsed and an external account's token taken from `subject` (the text its
/// source would give). Errors are the messages the loader would show after `"<path>: "`.
pub fn google_adc(text: &str, subject: &str) -> Result<&'static str, String> {
    let json = credentials::adc_json(text, "adc.json")?;
    match credentials::parse_adc(&json, "adc.json")? {
        Adc::ServiceAccount { key, .. } => {
            SigningKey::from_pem(key)?;
            Ok("service_account")
        }
        Adc::AuthorizedUser { .. } => Ok("authorized_user"),
        Adc::ExternalAccount(external) => {
            credentials::subject_token_in(subject, external.json_field)?;
            Ok("external_account")
        }
    }
}

/// An Azure connection string's honored keys, by lower-cased name, or the refusal.
pub fn azure_connection_string(text: &str) -> Result<BTreeMap<&'static str, String>, String> {
    let c = ConnectionString::parse(text)?;
    Ok(BTreeMap::from([
        ("accountname", c.account),
        ("accountkey", c.key),
        ("sharedaccesssignature", c.sas),
        ("blobendpoint", c.blob_endpoint),
        ("dfsendpoint", c.dfs_endpoint),
        ("endpointsuffix", c.suffix),
        ("defaultendpointsprotocol", c.protocol),
    ]))
}
