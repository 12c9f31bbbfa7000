//! The opaque handles of spec §1.4: thin wrappers around the Rust API's types.

use core::ffi::c_void;
use std::ffi::CString;
use std::sync::atomic::AtomicBool;

use karu_core::{Batch, Client, Config, Locator};

/// A configuration builder (`karu_config_create`, `karu_config_create_empty`).
pub struct karu_config {
    pub(crate) config: Config,
}

/// A client (`karu_client_create`).
pub struct karu_client {
    pub(crate) client: Client,
    /// The process that created the client: a forked child leaks, rather than drops, it.
    pub(crate) pid: u32,
}

/// A parsed locator (`karu_resolve`).
pub struct karu_locator {
    pub(crate) locator: Locator,
    /// The canonical identity, NUL-terminated, for `karu_locator_uri`.
    pub(crate) uri: CString,
}

/// One request's C-side state: the caller's tag, the destination, and whether karu
/// allocated it (and still owns it until a completion hands it over).
pub(crate) struct Slot {
    pub(crate) tag: *mut c_void,
    pub(crate) buffer: *mut c_void,
    pub(crate) allocated: bool,
    pub(crate) handed_over: AtomicBool,
}

/// A submitted batch (`karu_client_submit`, `karu_client_submit_with`).
pub struct karu_batch {
    pub(crate) batch: Option<Batch>,
    /// Indexed by the Rust tag (the request's position).
    pub(crate) slots: Vec<Slot>,
    /// The process that submitted the batch: batches do not cross `fork()`.
    pub(crate) pid: u32,
}

impl karu_batch {
    /// Frees karu-allocated buffers that no completion handed over. Call only once no worker
    /// can touch them (after the Rust batch was dropped).
    pub(crate) fn free_unclaimed(&mut self) {
        for s in &self.slots {
            if s.allocated && !s.handed_over.load(std::sync::atomic::Ordering::Acquire) {
                // SAFETY: the buffer came from `libc::malloc` in submit, was never given to
                // the caller, and the batch's workers are finished with it.
                unsafe { libc::free(s.buffer) };
            }
        }
        self.slots.clear();
    }
}
