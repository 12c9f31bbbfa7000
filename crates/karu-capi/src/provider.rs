//! A C credentials callback as a Rust [`CredentialsProvider`].

use core::ffi::{CStr, c_char, c_void};
use std::ffi::CString;
use std::time::{Duration, UNIX_EPOCH};

use karu_core::{Credentials, CredentialsKind, CredentialsProvider, Error, Result, Status};

use crate::types::{KARU_OK, karu_credentials, karu_credentials_provider_free, karu_status};

type Callback = unsafe extern "C" fn(
    *mut c_void,
    crate::types::karu_credentials_kind,
    *const c_char,
    *mut karu_credentials,
) -> karu_status;

/// One registration: the callback, its user data and its release function. `release` runs
/// exactly once, when the last reference (builder, settings snapshot, engine or batch) drops.
pub(crate) struct CProvider {
    callback: Callback,
    user_data: *mut c_void,
    release: karu_credentials_provider_free,
}

// SAFETY: the C contract makes the callback callable from any thread with its user data, and
// `release` callable once from whichever thread drops the last reference.
unsafe impl Send for CProvider {}
// SAFETY: as above; karu calls the callback concurrently only as the contract allows.
unsafe impl Sync for CProvider {}

impl CProvider {
    pub(crate) fn new(
        callback: Callback,
        user_data: *mut c_void,
        release: karu_credentials_provider_free,
    ) -> CProvider {
        CProvider {
            callback,
            user_data,
            release,
        }
    }
}

/// A provider's string field: NULL is empty.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string valid for this call.
unsafe fn field(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

impl CredentialsProvider for CProvider {
    fn credentials(&self, kind: CredentialsKind, canonical_path: &str) -> Result<Credentials> {
        let path = CString::new(canonical_path).map_err(|_| {
            Error::new(
                Status::Credentials,
                format!("{canonical_path}: path contains a NUL byte"),
            )
        })?;
        let mut out = karu_credentials {
            access_key_id: std::ptr::null(),
            secret_access_key: std::ptr::null(),
            session_token: std::ptr::null(),
            bearer_token: std::ptr::null(),
            sas_token: std::ptr::null(),
            account_name: std::ptr::null(),
            cache_prefix: std::ptr::null(),
            expires_at: 0,
        };
        // SAFETY: the registered callback with its own user data, a NUL-terminated path and a
        // writable, zeroed output struct, as the C contract describes.
        let status =
            unsafe { (self.callback)(self.user_data, kind.code(), path.as_ptr(), &mut out) };
        if status != KARU_OK {
            let status = Status::from_code(status)
                .filter(|s| s.code() < 0)
                .unwrap_or(Status::Credentials);
            return Err(Error::new(
                status,
                format!(
                    "{canonical_path}: credentials provider failed: {}",
                    status.as_str()
                ),
            ));
        }
        // SAFETY: on success the callback filled the fields with NULL or strings valid until
        // it returns control (now); they are copied here.
        let mut c = unsafe {
            Credentials {
                access_key_id: field(out.access_key_id),
                secret_access_key: field(out.secret_access_key),
                session_token: field(out.session_token),
                bearer_token: field(out.bearer_token),
                sas_token: field(out.sas_token),
                account_name: field(out.account_name),
                cache_prefix: Some(field(out.cache_prefix)).filter(|p| !p.is_empty()),
                expires_at: None,
            }
        };
        c.expires_at = match out.expires_at {
            0 => None,
            s if s > 0 => UNIX_EPOCH.checked_add(Duration::from_secs(s.unsigned_abs())),
            // Already expired: any past instant does.
            _ => Some(UNIX_EPOCH),
        };
        Ok(c)
    }
}

impl Drop for CProvider {
    fn drop(&mut self) {
        if let Some(release) = self.release {
            // SAFETY: the registration's release function with its user data, run exactly
            // once because this is the single owner's drop.
            unsafe { release(self.user_data) };
        }
    }
}
