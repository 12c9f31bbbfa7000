//! The C types of spec §1.2–1.6: constants, statuses, callback types and structs, with their
//! layouts pinned at compile time.

use core::ffi::{c_char, c_int, c_void};
use core::mem::{offset_of, size_of};

/// A status: `KARU_OK`, a positive condition, or a negative error. A C `enum` in the reference
/// header; an `int` here so that unknown values cross the boundary safely (same ABI).
pub type karu_status = c_int;

/// Success.
pub const KARU_OK: karu_status = 0;
/// `karu_batch_next`: the batch is drained.
pub const KARU_END: karu_status = 1;
/// `karu_batch_next`: the wait expired (also a per-read failure).
pub const KARU_TIMEOUT: karu_status = 2;
/// Malformed URI.
pub const KARU_ERR_URI: karu_status = -1;
/// Unsupported virtual filesystem (or a feature not built).
pub const KARU_ERR_UNSUPPORTED: karu_status = -2;
/// Invalid argument.
pub const KARU_ERR_INVALID: karu_status = -3;
/// Out of memory.
pub const KARU_ERR_NOMEM: karu_status = -4;
/// File error.
pub const KARU_ERR_IO: karu_status = -5;
/// Network error.
pub const KARU_ERR_NETWORK: karu_status = -6;
/// HTTP error.
pub const KARU_ERR_HTTP: karu_status = -7;
/// Range past the end of the object.
pub const KARU_ERR_RANGE: karu_status = -8;
/// Not authorized.
pub const KARU_ERR_AUTH: karu_status = -9;
/// Cancelled.
pub const KARU_ERR_CANCELLED: karu_status = -10;
/// Invalid configuration.
pub const KARU_ERR_CONFIG: karu_status = -11;
/// Credentials unavailable.
pub const KARU_ERR_CREDENTIALS: karu_status = -12;
/// Object not found.
pub const KARU_ERR_NOT_FOUND: karu_status = -13;
/// Precondition (`If-Match`) failed.
pub const KARU_ERR_PRECONDITION: karu_status = -14;

/// Which credentials a provider supplies (a C `enum` in the reference header).
pub type karu_credentials_kind = c_int;

/// AWS S3 (and S3-compatible) credentials.
pub const KARU_CREDENTIALS_AWS: karu_credentials_kind = 1;
/// Google Cloud Storage credentials.
pub const KARU_CREDENTIALS_GCS: karu_credentials_kind = 2;
/// Azure Blob Storage credentials.
pub const KARU_CREDENTIALS_AZURE: karu_credentials_kind = 3;
/// Source Cooperative credentials.
pub const KARU_CREDENTIALS_SOURCE: karu_credentials_kind = 4;

/// The C API version.
pub const KARU_API_VERSION: c_int = 1;
/// `karu_locator_window_length` of an unbounded window; never a valid request length.
pub const KARU_TO_END: u64 = u64::MAX;
/// In `karu_submit_options`: use the client's setting.
pub const KARU_INHERIT: u64 = u64::MAX;
/// Default download chunk size (8 MiB).
pub const KARU_DOWNLOAD_CHUNK_SIZE_DEFAULT: u64 = 8388608;
/// Default number of download chunks in flight.
pub const KARU_DOWNLOAD_PARALLELISM_DEFAULT: u64 = 8;

/// Supplies credentials for `canonical_path` into `out`; returns `KARU_OK` or a failure.
/// Runs on karu threads; must not re-enter the client.
pub type karu_credentials_provider = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        kind: karu_credentials_kind,
        canonical_path: *const c_char,
        out: *mut karu_credentials,
    ) -> karu_status,
>;

/// Releases a provider's `user_data`; runs exactly once, when nothing references the
/// registration any more.
pub type karu_credentials_provider_free = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// Download progress: called after the probe, then every 100 ms with the bytes received so
/// far (counted as they arrive, never decreasing), and once at the end; returning 0 cancels the
/// download.
pub type karu_download_progress =
    Option<unsafe extern "C" fn(user_data: *mut c_void, completed: u64, total: u64) -> c_int>;

/// Credentials filled by a provider callback (no size field; 64 bytes). NULL fields are
/// empty; strings are copied before the callback returns.
#[repr(C)]
pub struct karu_credentials {
    /// Access key id.
    pub access_key_id: *const c_char,
    /// Secret access key.
    pub secret_access_key: *const c_char,
    /// Session token.
    pub session_token: *const c_char,
    /// OAuth bearer token.
    pub bearer_token: *const c_char,
    /// Azure SAS token.
    pub sas_token: *const c_char,
    /// Azure account name.
    pub account_name: *const c_char,
    /// Optional path scope for reuse; NULL or empty means no reuse.
    pub cache_prefix: *const c_char,
    /// Unix seconds; 0 means no expiry.
    pub expires_at: i64,
}

/// Size and strong ETag of an object (output, versioned; 272 bytes).
#[repr(C)]
pub struct karu_object_info {
    /// `sizeof(karu_object_info)` as the caller compiled it (at least 16).
    pub struct_size: usize,
    /// Visible size.
    pub size: u64,
    /// Strong ETag with its quotes, NUL-terminated; empty when there is none.
    pub etag: [c_char; 256],
}

/// Per-batch planner overrides (input, versioned; 40 bytes). `KARU_INHERIT` keeps the
/// client's value.
#[repr(C)]
pub struct karu_submit_options {
    /// `sizeof(karu_submit_options)` as the caller compiled it (at least 16).
    pub struct_size: usize,
    /// Largest gap merged between reads; 0 disables merging.
    pub coalesce_gap: u64,
    /// Largest merged transfer.
    pub coalesce_limit: u64,
    /// Most reads in one merged transfer.
    pub coalesce_parts: u64,
    /// Largest ratio of fetched to requested bytes.
    pub coalesce_amplification: u64,
}

/// One read (no size field; 48 bytes).
#[repr(C)]
pub struct karu_req {
    /// The object (and window).
    pub locator: *const karu_locator,
    /// Offset relative to the locator's window.
    pub offset: u64,
    /// Length: nonzero and finite.
    pub length: u64,
    /// Destination of `length` bytes, or NULL to let karu allocate (free with `karu_free`).
    /// Written only, never read; must not overlap another request's buffer (INVALID).
    pub buffer: *mut c_void,
    /// Returned untouched in the completion.
    pub tag: *mut c_void,
    /// Optional strong ETag the object must match; copied at submit.
    pub if_match: *const c_char,
}

/// One completion (no size field; 32 bytes).
#[repr(C)]
pub struct karu_done {
    /// The request's tag.
    pub tag: *mut c_void,
    /// `KARU_OK` or the read's failure.
    pub status: karu_status,
    /// Defined bytes at the start of `buffer`.
    pub got: u64,
    /// The request's buffer, or the one karu allocated.
    pub buffer: *mut c_void,
}

/// Batch counters (output, versioned; 80 bytes).
#[repr(C)]
pub struct karu_batch_stats {
    /// `sizeof(karu_batch_stats)` as the caller compiled it (at least 16).
    pub struct_size: usize,
    /// Transfers left after coalescing.
    pub transfers: u64,
    /// Transfers completed.
    pub transfers_finished: u64,
    /// Sum of valid request lengths.
    pub requested_bytes: u64,
    /// Local bytes read plus accepted 2xx body bytes.
    pub received_bytes: u64,
    /// Ordinary retries.
    pub retries: u64,
    /// Attempts answered with HTTP 429 or 503.
    pub throttled: u64,
    /// Connections opened rather than reused.
    pub new_connections: u64,
    /// Retries that kept more bytes of a partial body.
    pub resumed: u64,
    /// Credential refreshes after an authentication failure.
    pub credential_refreshes: u64,
}

/// Download options (input, versioned; 48 bytes).
#[repr(C)]
pub struct karu_download_options {
    /// `sizeof(karu_download_options)` as the caller compiled it (at least 16).
    pub struct_size: usize,
    /// Bytes per chunk (default 8 MiB).
    pub chunk_size: u64,
    /// Chunks in flight (default 8).
    pub parallelism: u64,
    /// 0 or 1: replace an existing destination.
    pub overwrite: c_int,
    /// Optional progress callback.
    pub progress: karu_download_progress,
    /// Passed to `progress`.
    pub progress_user_data: *mut c_void,
}

/// Download result (output, versioned; 328 bytes).
#[repr(C)]
pub struct karu_download_result {
    /// `sizeof(karu_download_result)` as the caller compiled it (at least 16).
    pub struct_size: usize,
    /// Visible size.
    pub size: u64,
    /// Bytes written.
    pub downloaded: u64,
    /// Bytes received, retries included.
    pub received_bytes: u64,
    /// Ordinary retries.
    pub retries: u64,
    /// Attempts answered with HTTP 429 or 503.
    pub throttled: u64,
    /// Connections opened.
    pub new_connections: u64,
    /// Resumed retries.
    pub resumed: u64,
    /// Credential refreshes.
    pub credential_refreshes: u64,
    /// The strong ETag that pinned every range, or empty.
    pub etag: [c_char; 256],
}

pub use crate::handles::{karu_batch, karu_client, karu_config, karu_locator};

// Layouts of spec §1.6 (LP64/LLP64).
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(size_of::<karu_credentials>() == 64);
    assert!(offset_of!(karu_credentials, access_key_id) == 0);
    assert!(offset_of!(karu_credentials, secret_access_key) == 8);
    assert!(offset_of!(karu_credentials, session_token) == 16);
    assert!(offset_of!(karu_credentials, bearer_token) == 24);
    assert!(offset_of!(karu_credentials, sas_token) == 32);
    assert!(offset_of!(karu_credentials, account_name) == 40);
    assert!(offset_of!(karu_credentials, cache_prefix) == 48);
    assert!(offset_of!(karu_credentials, expires_at) == 56);

    assert!(size_of::<karu_object_info>() == 272);
    assert!(offset_of!(karu_object_info, struct_size) == 0);
    assert!(offset_of!(karu_object_info, size) == 8);
    assert!(offset_of!(karu_object_info, etag) == 16);

    assert!(size_of::<karu_submit_options>() == 40);
    assert!(offset_of!(karu_submit_options, struct_size) == 0);
    assert!(offset_of!(karu_submit_options, coalesce_gap) == 8);
    assert!(offset_of!(karu_submit_options, coalesce_limit) == 16);
    assert!(offset_of!(karu_submit_options, coalesce_parts) == 24);
    assert!(offset_of!(karu_submit_options, coalesce_amplification) == 32);

    assert!(size_of::<karu_req>() == 48);
    assert!(offset_of!(karu_req, locator) == 0);
    assert!(offset_of!(karu_req, offset) == 8);
    assert!(offset_of!(karu_req, length) == 16);
    assert!(offset_of!(karu_req, buffer) == 24);
    assert!(offset_of!(karu_req, tag) == 32);
    assert!(offset_of!(karu_req, if_match) == 40);

    assert!(size_of::<karu_done>() == 32);
    assert!(offset_of!(karu_done, tag) == 0);
    assert!(offset_of!(karu_done, status) == 8);
    assert!(offset_of!(karu_done, got) == 16);
    assert!(offset_of!(karu_done, buffer) == 24);

    assert!(size_of::<karu_batch_stats>() == 80);
    assert!(offset_of!(karu_batch_stats, struct_size) == 0);
    assert!(offset_of!(karu_batch_stats, transfers) == 8);
    assert!(offset_of!(karu_batch_stats, transfers_finished) == 16);
    assert!(offset_of!(karu_batch_stats, requested_bytes) == 24);
    assert!(offset_of!(karu_batch_stats, received_bytes) == 32);
    assert!(offset_of!(karu_batch_stats, retries) == 40);
    assert!(offset_of!(karu_batch_stats, throttled) == 48);
    assert!(offset_of!(karu_batch_stats, new_connections) == 56);
    assert!(offset_of!(karu_batch_stats, resumed) == 64);
    assert!(offset_of!(karu_batch_stats, credential_refreshes) == 72);

    assert!(size_of::<karu_download_options>() == 48);
    assert!(offset_of!(karu_download_options, struct_size) == 0);
    assert!(offset_of!(karu_download_options, chunk_size) == 8);
    assert!(offset_of!(karu_download_options, parallelism) == 16);
    assert!(offset_of!(karu_download_options, overwrite) == 24);
    assert!(offset_of!(karu_download_options, progress) == 32);
    assert!(offset_of!(karu_download_options, progress_user_data) == 40);

    assert!(size_of::<karu_download_result>() == 328);
    assert!(offset_of!(karu_download_result, struct_size) == 0);
    assert!(offset_of!(karu_download_result, size) == 8);
    assert!(offset_of!(karu_download_result, downloaded) == 16);
    assert!(offset_of!(karu_download_result, received_bytes) == 24);
    assert!(offset_of!(karu_download_result, retries) == 32);
    assert!(offset_of!(karu_download_result, throttled) == 40);
    assert!(offset_of!(karu_download_result, new_connections) == 48);
    assert!(offset_of!(karu_download_result, resumed) == 56);
    assert!(offset_of!(karu_download_result, credential_refreshes) == 64);
    assert!(offset_of!(karu_download_result, etag) == 72);

    // Callback pointers are one pointer wide (the `Option` niche).
    assert!(size_of::<karu_credentials_provider>() == 8);
    assert!(size_of::<karu_download_progress>() == 8);
};

/// Writes consecutive `u64` fields that follow a versioned struct's `struct_size`, each only
/// when it lies within the caller's `size` bytes (older callers have shorter structs).
///
/// # Safety
/// `out` points to at least `size` writable bytes.
pub(crate) unsafe fn write_u64_fields(out: *mut u8, size: usize, values: &[u64]) {
    for (i, v) in values.iter().enumerate() {
        let offset = 8 + 8 * i;
        if offset + 8 <= size {
            // SAFETY: inside the caller's `size` bytes.
            unsafe { out.add(offset).cast::<u64>().write_unaligned(*v) };
        }
    }
}
