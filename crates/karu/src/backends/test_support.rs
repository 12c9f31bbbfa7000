//! Helpers for the backends' unit tests.

use std::sync::Arc;
use std::time::SystemTime;

use super::{ByteRange, Prepared, Signing};
use crate::config::Credentials;
use crate::config::Settings;
use crate::credentials::{Auth, Resolved};
use crate::error::Result;
use crate::locator::Locator;
use crate::validate::condition::Condition;

/// Backends are tested through the dispatcher, as the engine calls them, pinned by
/// `If-Match` when `if_match` is given.
pub(super) fn prepare(
    settings: &Settings,
    locator: &Locator,
    range: ByteRange,
    if_match: Option<&str>,
    signing: Signing<'_>,
) -> Result<Prepared> {
    let pin = if_match.map(|t| Condition::IfMatch(t.to_owned()));
    let profiles = super::Profiles::default();
    super::prepare(settings, &profiles, locator, range, pin.as_ref(), signing)
}
pub(super) use crate::credentials::test_support::settings;

/// An anonymous attempt, now.
pub(super) fn anonymous() -> Signing<'static> {
    static ANONYMOUS: Auth = Auth::Anonymous;
    Signing {
        auth: &ANONYMOUS,
        region: None,
        now: SystemTime::now(),
    }
}

/// Signs with `credentials`, no region attached.
pub(super) fn signed(credentials: Credentials) -> Auth {
    Auth::Signed(Arc::new(Resolved::new(credentials)))
}

/// The value of header `name` (case-insensitive) of a prepared request.
pub(super) fn header<'a>(p: &'a Prepared, name: &str) -> Option<&'a str> {
    p.request
        .headers
        .get(name.to_ascii_lowercase().as_str())
        .and_then(|v| v.to_str().ok())
}

/// A prepared request's headers as (name, value) pairs, in order.
pub(super) fn pairs(p: &Prepared) -> Vec<(String, String)> {
    p.request
        .headers
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect()
}
