//! The thread-local last error (spec §1.7 item 5): at most 511 bytes plus a NUL.

use core::ffi::c_char;
use std::cell::RefCell;

use karu_core::{Error, Status};

use crate::types::karu_status;

const CAPACITY: usize = 512;

thread_local! {
    static LAST: RefCell<[u8; CAPACITY]> = const { RefCell::new([0; CAPACITY]) };
}

/// Empties this thread's last error.
pub(crate) fn clear() {
    LAST.with(|b| b.borrow_mut()[0] = 0);
}

/// Replaces this thread's last error with `message`, cut at 511 bytes (on a character
/// boundary) or at an interior NUL.
pub(crate) fn set(message: &str) {
    let mut end = message
        .find('\0')
        .unwrap_or(message.len())
        .min(CAPACITY - 1);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    LAST.with(|b| {
        let mut b = b.borrow_mut();
        b[..end].copy_from_slice(&message.as_bytes()[..end]);
        b[end] = 0;
    });
}

/// This thread's buffer, valid for the thread's lifetime.
pub(crate) fn as_ptr() -> *const c_char {
    LAST.with(|b| b.as_ptr() as *const c_char)
}

/// Records `message` and returns `status` as a C status.
pub(crate) fn fail(status: Status, message: impl AsRef<str>) -> karu_status {
    set(message.as_ref());
    status.code()
}

/// Records an error of the Rust API and returns its C status.
pub(crate) fn from(e: &Error) -> karu_status {
    let message = if e.message().is_empty() {
        e.status().as_str()
    } else {
        e.message()
    };
    fail(e.status(), message)
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    fn last() -> String {
        // SAFETY: this thread's NUL-terminated buffer.
        unsafe { CStr::from_ptr(super::as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn capped_at_511_bytes_on_a_character_boundary() {
        super::set(&"é".repeat(300)); // 600 bytes of 2-byte characters
        assert_eq!(last().len(), 510);
        super::set(&"x".repeat(600));
        assert_eq!(last().len(), 511);
        super::set("cut\0here");
        assert_eq!(last(), "cut");
        super::clear();
        assert_eq!(last(), "");
    }

    #[test]
    fn thread_local() {
        super::set("main thread");
        std::thread::spawn(|| assert_eq!(last(), ""))
            .join()
            .unwrap();
        assert_eq!(last(), "main thread");
    }
}
