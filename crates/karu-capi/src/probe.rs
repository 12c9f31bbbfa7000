//! Synchronous probes (spec §1.7 items 26–28) and download (item 29, spec §6).

use core::ffi::{c_char, c_int, c_void};
use core::mem::offset_of;

use karu_core::{ObjectInfo, Status};

use crate::error;
use crate::handles::{karu_client, karu_locator};
use crate::types::*;

/// Writes size and ETag into the fields `struct_size` covers. The ETag is written only when
/// all 256 bytes fit, and as an empty string when it has 256 bytes or more.
///
/// # Safety
/// `out` points to at least `struct_size` writable bytes, `struct_size >= 16`.
unsafe fn write_info(out: *mut karu_object_info, info: &ObjectInfo) {
    // SAFETY: guaranteed by the caller.
    let size = unsafe { (&raw const (*out).struct_size).read() };
    // SAFETY: `size` is covered (struct_size >= 16).
    unsafe { (&raw mut (*out).size).write_unaligned(info.size) };
    if offset_of!(karu_object_info, etag) + 256 <= size {
        let mut etag = [0 as c_char; 256];
        let tag = info.etag.as_deref().unwrap_or("").as_bytes();
        if tag.len() < 256 && !tag.contains(&0) {
            for (d, s) in etag.iter_mut().zip(tag) {
                *d = *s as c_char;
            }
        }
        // SAFETY: the whole array is inside `struct_size`.
        unsafe { (&raw mut (*out).etag).write_unaligned(etag) };
    }
}

/// The `struct_size` check of stat and read_ends.
///
/// # Safety
/// `out` is non-NULL and its first field readable.
unsafe fn check_info(call: &str, out: *const karu_object_info) -> Result<(), c_int> {
    // SAFETY: guaranteed by the caller.
    if unsafe { (&raw const (*out).struct_size).read() } < 16 {
        return Err(error::fail(
            Status::Invalid,
            format!("{call}: struct_size is too small"),
        ));
    }
    Ok(())
}

/// The visible size: a bounded window's length with no I/O, a local file's size past the
/// window offset, or one ranged GET for a remote object.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_size(
    client: *mut karu_client,
    locator: *const karu_locator,
    out_size: *mut u64,
) -> karu_status {
    error::clear();
    if client.is_null() || locator.is_null() || out_size.is_null() {
        return error::fail(Status::Invalid, "karu_client_size: null argument");
    }
    // SAFETY: live client and locator, writable output (C contract).
    unsafe {
        match (*client).client.size(&(*locator).locator) {
            Ok(size) => {
                *out_size = size;
                KARU_OK
            }
            Err(e) => error::from(&e),
        }
    }
}

/// Size and strong ETag in one probe (local files have no ETag).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_stat(
    client: *mut karu_client,
    locator: *const karu_locator,
    out: *mut karu_object_info,
) -> karu_status {
    error::clear();
    if client.is_null() || locator.is_null() || out.is_null() {
        return error::fail(Status::Invalid, "karu_client_stat: null argument");
    }
    // SAFETY: live client and locator; `out` has `struct_size` writable bytes (C contract).
    unsafe {
        if let Err(status) = check_info("karu_client_stat", out) {
            return status;
        }
        match (*client).client.stat(&(*locator).locator) {
            Ok(info) => {
                write_info(out, &info);
                KARU_OK
            }
            Err(e) => error::from(&e),
        }
    }
}

/// The first `head_length` and last `tail_length` bytes of the visible object (each buffer
/// receives `min(length, size)` bytes), with its size and ETag.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_read_ends(
    client: *mut karu_client,
    locator: *const karu_locator,
    head: *mut c_void,
    head_length: u64,
    tail: *mut c_void,
    tail_length: u64,
    out: *mut karu_object_info,
) -> karu_status {
    const CALL: &str = "karu_client_read_ends";
    error::clear();
    if client.is_null()
        || locator.is_null()
        || out.is_null()
        || (head.is_null() && head_length > 0)
        || (tail.is_null() && tail_length > 0)
    {
        return error::fail(Status::Invalid, format!("{CALL}: null argument"));
    }
    // SAFETY: `out` is non-NULL (C contract).
    if let Err(status) = unsafe { check_info(CALL, out) } {
        return status;
    }
    let finite = |n: u64| n != KARU_TO_END && usize::try_from(n).is_ok();
    if !finite(head_length) || !finite(tail_length) {
        return error::fail(Status::Invalid, format!("{CALL}: lengths must be finite"));
    }
    // SAFETY: live client and locator (C contract).
    let (client, locator) = unsafe { (&(*client).client, &(*locator).locator) };
    if head_length == 0 && tail_length == 0 {
        return match client.stat(locator) {
            // SAFETY: checked above.
            Ok(info) => unsafe {
                write_info(out, &info);
                KARU_OK
            },
            Err(e) => error::from(&e),
        };
    }
    match client.read_ends(locator, head_length, tail_length) {
        Ok(ends) => {
            // SAFETY: each buffer holds its length in bytes, and the copies are no longer
            // than the requested lengths (C contract).
            unsafe {
                let h = ends.head.len().min(head_length as usize);
                std::ptr::copy_nonoverlapping(ends.head.as_ptr(), head.cast::<u8>(), h);
                let t = ends.tail.len().min(tail_length as usize);
                std::ptr::copy_nonoverlapping(ends.tail.as_ptr(), tail.cast::<u8>(), t);
                write_info(out, &ends.info);
            }
            KARU_OK
        }
        Err(e) => error::from(&e),
    }
}

/// The download options after the checks of spec §6.1.
struct DownloadOptions {
    chunk_size: u64,
    parallelism: u64,
    overwrite: bool,
    progress: karu_download_progress,
    progress_user_data: *mut c_void,
}

/// A C progress callback with its user data, callable from the downloading thread.
struct ProgressFn {
    callback: unsafe extern "C" fn(*mut c_void, u64, u64) -> c_int,
    user_data: *mut c_void,
}

// SAFETY: the callback runs on the thread that called `karu_client_download` (the download
// blocks it) or on a karu thread, as the C contract allows; the user data is the caller's.
unsafe impl Send for ProgressFn {}

/// Checks download options (spec §6.1 item 4); NULL means all defaults.
///
/// # Safety
/// `options` is NULL or points to at least `struct_size` readable bytes.
unsafe fn download_options(
    call: &str,
    options: *const karu_download_options,
) -> Result<DownloadOptions, c_int> {
    let mut o = DownloadOptions {
        chunk_size: KARU_DOWNLOAD_CHUNK_SIZE_DEFAULT,
        parallelism: KARU_DOWNLOAD_PARALLELISM_DEFAULT,
        overwrite: false,
        progress: None,
        progress_user_data: std::ptr::null_mut(),
    };
    let invalid = |m: &str| Err(error::fail(Status::Invalid, format!("{call}: {m}")));
    if options.is_null() {
        return Ok(o);
    }
    // SAFETY: the first field is always present (C contract).
    let size = unsafe { (&raw const (*options).struct_size).read() };
    if size < 16 {
        return invalid("download options structure is too small");
    }
    let covers = |offset: usize, len: usize| offset + len <= size;
    // SAFETY: each field is read only when inside `struct_size`.
    unsafe {
        o.chunk_size = (&raw const (*options).chunk_size).read();
        if covers(offset_of!(karu_download_options, parallelism), 8) {
            o.parallelism = (&raw const (*options).parallelism).read();
        }
        let mut overwrite = 0;
        if covers(offset_of!(karu_download_options, overwrite), 4) {
            overwrite = (&raw const (*options).overwrite).read();
        }
        if covers(offset_of!(karu_download_options, progress), 8) {
            o.progress = (&raw const (*options).progress).read();
        }
        if covers(offset_of!(karu_download_options, progress_user_data), 8) {
            o.progress_user_data = (&raw const (*options).progress_user_data).read();
        }
        if overwrite != 0 && overwrite != 1 {
            return invalid("overwrite must be zero or one");
        }
        o.overwrite = overwrite == 1;
    }
    // The numeric checks are the Rust API's own (same messages).
    let rust = karu_core::DownloadOptions {
        chunk_size: o.chunk_size,
        parallelism: o.parallelism,
        ..Default::default()
    };
    rust.validate().map_err(|e| error::from(&e))?;
    Ok(o)
}

/// Writes the fields of a download result that `struct_size` covers; the ETag only when all
/// 256 bytes fit (empty when it has 256 bytes or more).
///
/// # Safety
/// `out` points to at least `struct_size` writable bytes, `struct_size >= 16`.
unsafe fn write_result(out: *mut karu_download_result, r: &karu_core::DownloadResult) {
    // SAFETY: guaranteed by the caller.
    let size = unsafe { (&raw const (*out).struct_size).read() };
    let values = [
        r.size,
        r.downloaded,
        r.received_bytes,
        r.retries,
        r.throttled,
        r.new_connections,
        r.resumed,
        r.credential_refreshes,
    ];
    // SAFETY: guaranteed by the caller.
    unsafe { write_u64_fields(out.cast(), size, &values) };
    if offset_of!(karu_download_result, etag) + 256 <= size {
        let mut etag = [0 as c_char; 256];
        let tag = r.etag.as_deref().unwrap_or("").as_bytes();
        if tag.len() < 256 && !tag.contains(&0) {
            for (d, s) in etag.iter_mut().zip(tag) {
                *d = *s as c_char;
            }
        }
        // SAFETY: the whole array is inside `struct_size`.
        unsafe { (&raw mut (*out).etag).write_unaligned(etag) };
    }
}

/// Downloads the whole visible object to `destination` (spec §6): checks the arguments as
/// §6.1 describes, then runs `Client::download`. On failure the result is left untouched.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_download(
    client: *mut karu_client,
    locator: *const karu_locator,
    destination: *const c_char,
    options: *const karu_download_options,
    out_result: *mut karu_download_result,
) -> karu_status {
    const CALL: &str = "karu_client_download";
    error::clear();
    if client.is_null() || locator.is_null() || destination.is_null() {
        return error::fail(Status::Invalid, format!("{CALL}: null argument"));
    }
    // SAFETY: a C string (C contract).
    let destination = unsafe { core::ffi::CStr::from_ptr(destination) };
    if destination.is_empty() {
        return error::fail(Status::Invalid, format!("{CALL}: destination is empty"));
    }
    // SAFETY: the first field of a non-NULL result is readable (C contract).
    if !out_result.is_null() && unsafe { (&raw const (*out_result).struct_size).read() } < 16 {
        return error::fail(
            Status::Invalid,
            format!("{CALL}: result structure is too small"),
        );
    }
    // SAFETY: forwarded C contract.
    let o = match unsafe { download_options(CALL, options) } {
        Ok(o) => o,
        Err(status) => return status,
    };
    let progress = o.progress.map(|callback| {
        let f = ProgressFn {
            callback,
            user_data: o.progress_user_data,
        };
        Box::new(move |done: u64, total: u64| {
            let f = &f;
            // SAFETY: the caller's callback with its own user data (C contract).
            unsafe { (f.callback)(f.user_data, done, total) != 0 }
        }) as karu_core::Progress<'_>
    });
    let options = karu_core::DownloadOptions {
        chunk_size: o.chunk_size,
        parallelism: o.parallelism,
        overwrite: o.overwrite,
        progress,
        ..Default::default()
    };
    let path = path_of(destination);
    // SAFETY: live client and locator (C contract).
    let (client, locator) = unsafe { (&(*client).client, &(*locator).locator) };
    match client.download(locator, &path, options) {
        Ok(result) => {
            if !out_result.is_null() {
                // SAFETY: checked above.
                unsafe { write_result(out_result, &result) };
            }
            KARU_OK
        }
        Err(e) => error::from(&e),
    }
}

/// A destination path from its C bytes.
#[cfg(unix)]
fn path_of(p: &core::ffi::CStr) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::OsStr::from_bytes(p.to_bytes()).into()
}

/// A destination path from its C bytes (UTF-8 expected off Unix).
#[cfg(not(unix))]
fn path_of(p: &core::ffi::CStr) -> std::path::PathBuf {
    p.to_string_lossy().into_owned().into()
}
