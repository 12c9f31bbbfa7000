//! Helpers for the chains' unit tests: a settings snapshot and a load context around it.

use std::time::Instant;

use super::{CredentialHttp, LoadContext};
use crate::config::{Config, Settings};
use crate::transport::{Transport, TransportOptions};

/// Freezes a hermetic builder with `options` set explicitly.
pub(crate) fn settings(options: &[(&str, &str)]) -> Settings {
    let mut config = Config::empty();
    for (name, value) in options {
        config.set(name, Some(value)).expect("known option");
    }
    config.freeze().expect("valid options")
}

/// A credential HTTP client with default transport options.
pub(crate) fn http() -> CredentialHttp {
    CredentialHttp::new(Transport::new(TransportOptions::default()).expect("transport"))
}

/// Runs `f` with a load context for `path` under `settings`.
pub(crate) fn with_context<T>(
    settings: &Settings,
    path: &str,
    deadline: Option<Instant>,
    f: impl FnOnce(&LoadContext) -> T,
) -> T {
    let http = http();
    let ctx = LoadContext {
        settings,
        path,
        deadline,
        http: &http,
    };
    f(&ctx)
}
