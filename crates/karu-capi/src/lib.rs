//! `libkaru`: karu's C ABI (spec §1), binary-compatible with `karu.h`.
//!
//! A thin layer over the Rust API of the `karu` crate: it converts types and statuses and owns
//! nothing the Rust API does not already own, apart from the C-side bookkeeping the ABI needs
//! (tags, C-allocated buffers, the thread-local error text and the creating process id).
//!
//! Conventions: every function returning `karu_status` clears the thread-local error on entry;
//! argument errors begin with the function name; out-pointers are nulled only after the
//! argument checks; every free function accepts NULL.

#![allow(non_camel_case_types)]
// Every exported function dereferences caller pointers; the C contract (spec §1) is the
// safety documentation, checked for NULL where the spec says so.
#![allow(clippy::missing_safety_doc)]

// cbindgen emits the functions of this file, then those of the modules in declaration
// order: probes before batches, as in the reference header (spec §1.7). (Separate groups
// keep rustfmt from sorting them.)
mod error;
mod handles;
mod provider;
pub mod types;

mod probe;

mod batch;

use core::ffi::{CStr, c_char, c_int, c_void};
use std::ffi::CString;
use std::sync::{Arc, OnceLock};

use karu_core::{Client, Config, CredentialsKind, Locator, Status};

pub use batch::*;
pub use probe::*;
pub use types::*;

/// The current process id (fork detection, spec §1.10).
pub(crate) fn pid() -> u32 {
    std::process::id()
}

/// A C string argument as UTF-8 text (invalid sequences replaced).
///
/// # Safety
/// `p` must be a valid NUL-terminated string.
pub(crate) unsafe fn text<'a>(p: *const c_char) -> std::borrow::Cow<'a, str> {
    // SAFETY: guaranteed by the caller.
    unsafe { CStr::from_ptr(p) }.to_string_lossy()
}

// ---------------------------------------------------------------------------------------------
// Versions and errors (spec §1.7 items 1–7)

/// Returns `KARU_API_VERSION` (1).
#[unsafe(no_mangle)]
pub extern "C" fn karu_api_version() -> c_int {
    KARU_API_VERSION
}

/// The release string.
#[unsafe(no_mangle)]
pub extern "C" fn karu_version_string() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// A description of the HTTP stack.
#[unsafe(no_mangle)]
pub extern "C" fn karu_http_backend() -> *const c_char {
    c"karu (Rust): hyper 1 + rustls 0.23 (aws-lc-rs), HTTP/1.1 and HTTP/2".as_ptr()
}

/// The fixed text of a status; "unknown status" for any other value. Static storage.
#[unsafe(no_mangle)]
pub extern "C" fn karu_status_string(status: karu_status) -> *const c_char {
    static TEXTS: OnceLock<Vec<(karu_status, CString)>> = OnceLock::new();
    let texts = TEXTS.get_or_init(|| {
        (-64..64)
            .filter_map(Status::from_code)
            .map(|s| {
                let text = CString::new(s.as_str()).expect("status texts have no NUL");
                (s.code(), text)
            })
            .collect()
    });
    texts
        .iter()
        .find(|(code, _)| *code == status)
        .map_or(c"unknown status".as_ptr(), |(_, t)| t.as_ptr())
}

/// This thread's last error text (empty when none); valid until the next status-returning
/// call on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn karu_last_error() -> *const c_char {
    error::as_ptr()
}

/// Empties this thread's last error text.
#[unsafe(no_mangle)]
pub extern "C" fn karu_clear_error() {
    error::clear();
}

/// Frees a buffer karu allocated for a request with a NULL buffer (C `free`); accepts NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_free(ptr: *mut c_void) {
    // SAFETY: the caller passes NULL or a pointer karu allocated with `malloc`.
    unsafe { libc::free(ptr) };
}

// ---------------------------------------------------------------------------------------------
// Configuration (items 8–13)

unsafe fn config_create(
    out: *mut *mut karu_config,
    name: &str,
    make: fn() -> Config,
) -> karu_status {
    error::clear();
    if out.is_null() {
        return error::fail(Status::Invalid, format!("{name}: null output"));
    }
    let config = Box::new(karu_config { config: make() });
    // SAFETY: `out` is non-NULL and points to writable storage (C contract).
    unsafe { *out = Box::into_raw(config) };
    KARU_OK
}

/// A builder from a snapshot of the environment, with default credential discovery.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_config_create(out: *mut *mut karu_config) -> karu_status {
    // SAFETY: forwarded C contract.
    unsafe { config_create(out, "karu_config_create", Config::from_env) }
}

/// A hermetic builder: no environment, home directory, CA bundle or implicit discovery.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_config_create_empty(out: *mut *mut karu_config) -> karu_status {
    // SAFETY: forwarded C contract.
    unsafe { config_create(out, "karu_config_create_empty", Config::empty) }
}

/// Frees a builder; accepts NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_config_free(config: *mut karu_config) {
    if !config.is_null() {
        // SAFETY: `config` came from `karu_config_create*` and is freed once (C contract).
        drop(unsafe { Box::from_raw(config) });
    }
}

/// Sets (or with a NULL value removes) an option's explicit value.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_config_set_option(
    config: *mut karu_config,
    name: *const c_char,
    value: *const c_char,
) -> karu_status {
    error::clear();
    if config.is_null() || name.is_null() {
        return error::fail(Status::Invalid, "karu_config_set_option: null argument");
    }
    // SAFETY: non-NULL pointers to a live builder and C strings (C contract).
    let (config, name) = unsafe { (&mut (*config).config, text(name)) };
    // SAFETY: as above.
    let value = (!value.is_null()).then(|| unsafe { text(value) });
    match config.set(&name, value.as_deref()) {
        Ok(_) => KARU_OK,
        Err(e) => error::from(&e),
    }
}

/// Sets (or with a NULL value removes) an option for every path under `prefix`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_config_set_path_option(
    config: *mut karu_config,
    prefix: *const c_char,
    name: *const c_char,
    value: *const c_char,
) -> karu_status {
    error::clear();
    if config.is_null() || prefix.is_null() || name.is_null() {
        return error::fail(
            Status::Invalid,
            "karu_config_set_path_option: null argument",
        );
    }
    // SAFETY: non-NULL pointers to a live builder and C strings (C contract).
    let (config, prefix, name) = unsafe { (&mut (*config).config, text(prefix), text(name)) };
    // SAFETY: as above.
    let value = (!value.is_null()).then(|| unsafe { text(value) });
    match config.set_path(&prefix, &name, value.as_deref()) {
        Ok(_) => KARU_OK,
        Err(e) => error::from(&e),
    }
}

/// Installs, replaces or (with NULL, NULL, NULL) removes the credentials callback of `kind`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_config_set_credentials_provider(
    config: *mut karu_config,
    kind: karu_credentials_kind,
    provider: karu_credentials_provider,
    user_data: *mut c_void,
    release: karu_credentials_provider_free,
) -> karu_status {
    error::clear();
    if config.is_null() {
        return error::fail(
            Status::Invalid,
            "karu_config_set_credentials_provider: null config",
        );
    }
    let Some(kind) = CredentialsKind::from_code(kind) else {
        return error::fail(Status::Config, "unknown credentials kind");
    };
    let installed: Option<Arc<dyn karu_core::CredentialsProvider>> = match provider {
        Some(callback) => Some(Arc::new(provider::CProvider::new(
            callback, user_data, release,
        ))),
        None if user_data.is_null() && release.is_none() => None,
        None => {
            return error::fail(
                Status::Config,
                "clearing a credentials provider requires null user_data and release",
            );
        }
    };
    // SAFETY: non-NULL pointer to a live builder (C contract).
    unsafe { (*config).config.set_credentials_provider(kind, installed) };
    KARU_OK
}

// ---------------------------------------------------------------------------------------------
// Clients (items 14–19)

/// Freezes `config` into a client; the config may be freed straight afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_create(
    config: *const karu_config,
    out: *mut *mut karu_client,
) -> karu_status {
    error::clear();
    if config.is_null() || out.is_null() {
        return error::fail(Status::Invalid, "karu_client_create: null argument");
    }
    // SAFETY: `out` is non-NULL and writable (C contract).
    unsafe { *out = std::ptr::null_mut() };
    // SAFETY: non-NULL pointer to a live builder (C contract).
    match Client::new(unsafe { &(*config).config }) {
        Ok(client) => {
            let client = Box::new(karu_client { client, pid: pid() });
            // SAFETY: as above.
            unsafe { *out = Box::into_raw(client) };
            KARU_OK
        }
        Err(e) => error::from(&e),
    }
}

/// Frees a client; accepts NULL. Live batches keep the engine alive. In a forked child the
/// inherited client is leaked (its parent's engine threads do not exist there).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_free(client: *mut karu_client) {
    if client.is_null() {
        return;
    }
    // SAFETY: `client` came from `karu_client_create` and is freed once (C contract).
    let client = unsafe { Box::from_raw(client) };
    if client.pid != pid() {
        std::mem::forget(client);
    }
}

/// Whether `config` would build a client with exactly this client's settings. No I/O.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_matches_config(
    client: *const karu_client,
    config: *const karu_config,
    out_match: *mut c_int,
) -> karu_status {
    error::clear();
    if client.is_null() || config.is_null() || out_match.is_null() {
        return error::fail(Status::Invalid, "karu_client_matches_config: null argument");
    }
    // SAFETY: non-NULL pointers to live objects and writable storage (C contract).
    unsafe {
        *out_match = 0;
        match (*client).client.matches(&(*config).config) {
            Ok(same) => {
                *out_match = c_int::from(same);
                KARU_OK
            }
            Err(e) => error::from(&e),
        }
    }
}

/// The client's frozen `KARU_CONCURRENCY`; 0 for NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_concurrency(client: *const karu_client) -> c_int {
    // SAFETY: NULL or a live client (C contract).
    unsafe { client.as_ref() }.map_or(0, |c| {
        c_int::try_from(c.client.settings().concurrency()).unwrap_or(c_int::MAX)
    })
}

/// The client's frozen coalescing gap; 0 for NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_coalesce_gap(client: *const karu_client) -> u64 {
    // SAFETY: NULL or a live client (C contract).
    unsafe { client.as_ref() }.map_or(0, |c| c.client.settings().coalesce_gap())
}

/// The client's frozen `KARU_MAX_ATTEMPTS`; 0 for NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_max_attempts(client: *const karu_client) -> c_int {
    // SAFETY: NULL or a live client (C contract).
    unsafe { client.as_ref() }.map_or(0, |c| {
        c_int::try_from(c.client.settings().max_attempts()).unwrap_or(c_int::MAX)
    })
}

// ---------------------------------------------------------------------------------------------
// Locators (items 20–25)

/// Parses a URI or path into a locator (no I/O).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_resolve(
    uri: *const c_char,
    out: *mut *mut karu_locator,
) -> karu_status {
    error::clear();
    if uri.is_null() || out.is_null() {
        return error::fail(Status::Invalid, "karu_resolve: null argument");
    }
    // SAFETY: `out` is non-NULL and writable; `uri` is a C string (C contract).
    let uri = unsafe {
        *out = std::ptr::null_mut();
        CStr::from_ptr(uri)
    };
    let Ok(uri) = uri.to_str() else {
        return error::fail(Status::Uri, "karu_resolve: URI is not valid UTF-8");
    };
    match Locator::parse(uri) {
        Ok(locator) => {
            let Ok(identity) = CString::new(locator.identity()) else {
                return error::fail(Status::Uri, "karu_resolve: URI contains a NUL byte");
            };
            let handle = Box::new(karu_locator {
                locator,
                uri: identity,
            });
            // SAFETY: as above.
            unsafe { *out = Box::into_raw(handle) };
            KARU_OK
        }
        Err(e) => error::from(&e),
    }
}

/// Frees a locator; accepts NULL. Batches keep their own copies.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_locator_free(locator: *mut karu_locator) {
    if !locator.is_null() {
        // SAFETY: `locator` came from `karu_resolve` and is freed once (C contract).
        drop(unsafe { Box::from_raw(locator) });
    }
}

/// The canonical identity, owned by the locator; `""` for NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_locator_uri(locator: *const karu_locator) -> *const c_char {
    // SAFETY: NULL or a live locator (C contract).
    unsafe { locator.as_ref() }.map_or(c"".as_ptr(), |l| l.uri.as_ptr())
}

/// 1 for every backend except local files; 0 for a local file or NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_locator_is_remote(locator: *const karu_locator) -> c_int {
    // SAFETY: NULL or a live locator (C contract).
    unsafe { locator.as_ref() }.map_or(0, |l| c_int::from(l.locator.is_remote()))
}

/// The window offset; 0 for NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_locator_window_offset(locator: *const karu_locator) -> u64 {
    // SAFETY: NULL or a live locator (C contract).
    unsafe { locator.as_ref() }.map_or(0, |l| l.locator.window_offset())
}

/// The window length, `KARU_TO_END` when unbounded; 0 for NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_locator_window_length(locator: *const karu_locator) -> u64 {
    // SAFETY: NULL or a live locator (C contract).
    unsafe { locator.as_ref() }.map_or(0, |l| l.locator.window_length().unwrap_or(KARU_TO_END))
}
