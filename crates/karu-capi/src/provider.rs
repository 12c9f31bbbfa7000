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

#[cfg(test)]
mod tests {
    //! The C callback seen through the Rust API: karu's credential workers call exactly
    //! this (`Settings::credentials_provider(kind).credentials(kind, path)`) per canonical
    //! path. End-to-end invocation by a signed backend needs the S3 backend.

    use core::ffi::{CStr, c_char, c_void};
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, UNIX_EPOCH};

    use karu_core::{CredentialsKind, Status};

    use crate::types::*;
    use crate::*;

    struct State {
        calls: Mutex<Vec<(i32, String)>>,
        status: karu_status,
        expires_at: i64,
        released: AtomicUsize,
    }

    unsafe extern "C" fn callback(
        user_data: *mut c_void,
        kind: karu_credentials_kind,
        path: *const c_char,
        out: *mut karu_credentials,
    ) -> karu_status {
        // SAFETY: the test passes a live `State`, karu a C string and a writable struct.
        unsafe {
            let state = &*(user_data as *const State);
            let path = CStr::from_ptr(path).to_string_lossy().into_owned();
            state.calls.lock().unwrap().push((kind, path));
            (*out).access_key_id = c"AKID".as_ptr();
            (*out).secret_access_key = c"SECRET".as_ptr();
            (*out).session_token = std::ptr::null();
            (*out).cache_prefix = c"/vsis3/bucket".as_ptr();
            (*out).expires_at = state.expires_at;
            state.status
        }
    }

    unsafe extern "C" fn release(user_data: *mut c_void) {
        // SAFETY: the test's live `State`.
        unsafe { &*(user_data as *const State) }
            .released
            .fetch_add(1, Ordering::SeqCst);
    }

    fn state(status: karu_status, expires_at: i64) -> Box<State> {
        Box::new(State {
            calls: Mutex::new(Vec::new()),
            status,
            expires_at,
            released: AtomicUsize::new(0),
        })
    }

    /// A client whose AWS provider is `state`'s callback; the builder is already freed.
    fn client_with(state: &State) -> *mut karu_client {
        let mut config = std::ptr::null_mut();
        let mut client = std::ptr::null_mut();
        // SAFETY: plain use of the C API with valid pointers.
        unsafe {
            assert_eq!(karu_config_create_empty(&mut config), KARU_OK);
            let ud = state as *const State as *mut c_void;
            let s = karu_config_set_credentials_provider(
                config,
                KARU_CREDENTIALS_AWS,
                Some(callback),
                ud,
                Some(release),
            );
            assert_eq!(s, KARU_OK);
            assert_eq!(karu_client_create(config, &mut client), KARU_OK);
            karu_config_free(config);
        }
        client
    }

    #[test]
    fn provider_is_called_per_path_and_converted() {
        let state = state(KARU_OK, 1_900_000_000);
        let client = client_with(&state);
        // SAFETY: a live client from `client_with`.
        let settings = unsafe { (*client).client.settings().clone() };
        let provider = settings
            .credentials_provider(CredentialsKind::Aws)
            .expect("installed");
        assert!(
            settings
                .credentials_provider(CredentialsKind::Gcs)
                .is_none()
        );
        let c = provider
            .credentials(CredentialsKind::Aws, "/vsis3/bucket/a")
            .unwrap();
        provider
            .credentials(CredentialsKind::Aws, "/vsis3/bucket/b")
            .unwrap();
        assert_eq!(
            *state.calls.lock().unwrap(),
            [
                (KARU_CREDENTIALS_AWS, "/vsis3/bucket/a".to_string()),
                (KARU_CREDENTIALS_AWS, "/vsis3/bucket/b".to_string())
            ]
        );
        assert_eq!(c.access_key_id, "AKID");
        assert_eq!(c.secret_access_key, "SECRET");
        assert_eq!(c.session_token, "");
        assert_eq!(c.cache_prefix.as_deref(), Some("/vsis3/bucket"));
        assert_eq!(
            c.expires_at,
            Some(UNIX_EPOCH + Duration::from_secs(1_900_000_000))
        );
        drop(provider);
        drop(settings);
        assert_eq!(state.released.load(Ordering::SeqCst), 0);
        // SAFETY: the client is freed once.
        unsafe { karu_client_free(client) };
        assert_eq!(
            state.released.load(Ordering::SeqCst),
            1,
            "released exactly once"
        );
    }

    #[test]
    fn provider_failures_keep_failure_statuses() {
        for (returned, expected) in [
            (KARU_ERR_AUTH, Status::Auth),
            (KARU_ERR_CREDENTIALS, Status::Credentials),
            (KARU_END, Status::Credentials),
            (3, Status::Credentials),
            (-99, Status::Credentials),
        ] {
            let state = state(returned, 0);
            let client = client_with(&state);
            // SAFETY: a live client from `client_with`.
            let provider = unsafe { (*client).client.settings() }
                .credentials_provider(CredentialsKind::Aws)
                .unwrap();
            let e = provider
                .credentials(CredentialsKind::Aws, "/vsis3/b/k")
                .unwrap_err();
            assert_eq!(e.status(), expected, "callback returned {returned}");
            assert!(e.message().starts_with("/vsis3/b/k: "), "{}", e.message());
            drop(provider);
            // SAFETY: freed once.
            unsafe { karu_client_free(client) };
            assert_eq!(state.released.load(Ordering::SeqCst), 1);
        }
    }

    #[test]
    fn no_expiry_and_empty_prefix_mean_none() {
        let state = state(KARU_OK, 0);
        let client = client_with(&state);
        // SAFETY: a live client.
        let provider = unsafe { (*client).client.settings() }
            .credentials_provider(CredentialsKind::Aws)
            .unwrap();
        let c = provider
            .credentials(CredentialsKind::Aws, "/vsis3/b/k")
            .unwrap();
        assert_eq!(c.expires_at, None);
        drop(provider);
        // SAFETY: freed once.
        unsafe { karu_client_free(client) };
    }
}
