//! Batches (spec §1.7 items 30–36): submit, next, free, stats and fetch.

use core::ffi::{CStr, c_int};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use karu_core::plan::Overrides;
use karu_core::{Next, Read, Status};

use crate::error;
use crate::handles::{Slot, karu_batch, karu_client};
use crate::types::*;

/// The requests as a slice (empty for `count == 0`).
///
/// # Safety
/// `requests` points to `count` readable requests when `count > 0`.
unsafe fn requests<'a>(requests: *const karu_req, count: usize) -> &'a [karu_req] {
    if count == 0 {
        &[]
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { std::slice::from_raw_parts(requests, count) }
    }
}

/// Reads a versioned input struct's `struct_size` and the planner overrides it covers.
///
/// # Safety
/// `options` is NULL or points to at least `struct_size` readable bytes.
unsafe fn overrides(call: &str, options: *const karu_submit_options) -> Result<Overrides, c_int> {
    if options.is_null() {
        return Ok(Overrides::default());
    }
    // SAFETY: the first field is always present (C contract).
    let size = unsafe { (&raw const (*options).struct_size).read() };
    if size < 16 {
        return Err(error::fail(
            Status::Invalid,
            format!("{call}: submit options structure is too small"),
        ));
    }
    let field = |offset: usize| -> Option<u64> {
        // SAFETY: read only when `offset + 8 <= struct_size`, inside the caller's struct.
        let v = (offset + 8 <= size).then(|| unsafe {
            options
                .cast::<u8>()
                .add(offset)
                .cast::<u64>()
                .read_unaligned()
        });
        v.filter(|v| *v != KARU_INHERIT)
    };
    Ok(Overrides {
        gap: field(core::mem::offset_of!(karu_submit_options, coalesce_gap)),
        limit: field(core::mem::offset_of!(karu_submit_options, coalesce_limit)),
        parts: field(core::mem::offset_of!(karu_submit_options, coalesce_parts)),
        amplification: field(core::mem::offset_of!(
            karu_submit_options,
            coalesce_amplification
        )),
        mode: None,
    })
}

/// The whole-submit checks of spec §1.7 item 30, in order.
///
/// # Safety
/// Each request's `if_match` is NULL or a C string.
unsafe fn check_requests(call: &str, reqs: &[karu_req]) -> Result<(), c_int> {
    for (i, r) in reqs.iter().enumerate() {
        let problem = if r.locator.is_null() {
            "has no locator"
        } else if r.length == 0 {
            "is empty"
        } else if r.length == KARU_TO_END {
            "does not have a finite length"
        } else if !r.if_match.is_null()
            // SAFETY: a non-NULL `if_match` is a C string (C contract).
            && unsafe { CStr::from_ptr(r.if_match) }
                .to_bytes()
                .iter()
                .any(|b| matches!(b, b'\r' | b'\n'))
        {
            "has an invalid ETag"
        } else {
            continue;
        };
        return Err(error::fail(
            Status::Invalid,
            format!("{call}: request {i} {problem}"),
        ));
    }
    Ok(())
}

/// Refuses caller buffers that overlap within one submit: two workers would write the same
/// bytes at once, a data race. Karu's own buffers never overlap anything.
fn check_overlaps(call: &str, reqs: &[karu_req]) -> Result<(), c_int> {
    let spans = reqs
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.buffer.is_null())
        .map(|(i, r)| {
            let start = r.buffer as usize;
            let len = usize::try_from(r.length).unwrap_or(usize::MAX);
            (start, start.saturating_add(len), i)
        });
    let overlap = |(a, b): (usize, usize)| {
        let (first, second) = (a.min(b), a.max(b));
        Err(error::fail(
            Status::Invalid,
            format!("{call}: request {second}'s buffer overlaps request {first}'s"),
        ))
    };
    // Buffers in address order (the usual layout) are checked in one pass, without sorting.
    let mut prev: Option<(usize, usize, usize)> = None;
    let mut sorted = true;
    for (start, end, i) in spans.clone() {
        if let Some((p_start, p_end, p)) = prev {
            if start < p_start {
                sorted = false;
                break;
            }
            if start < p_end {
                return overlap((p, i));
            }
        }
        prev = Some((start, end, i));
    }
    if sorted {
        return Ok(());
    }
    let mut all = Vec::new();
    all.try_reserve_exact(reqs.len())
        .map_err(|_| error::fail(Status::NoMem, format!("{call}: out of memory")))?;
    all.extend(spans);
    all.sort_unstable();
    // Sorted and disjoint so far: only the previous span can reach past the next start.
    let mut prev: Option<(usize, usize)> = None;
    for (start, end, i) in all {
        if let Some((p_end, p)) = prev
            && start < p_end
        {
            return overlap((p, i));
        }
        prev = Some((end, i));
    }
    Ok(())
}

/// Checks, converts and submits; the common part of submit, submit_with, fetch, fetch_with.
///
/// # Safety
/// The C contract of `karu_client_submit` for `client` and `reqs`.
unsafe fn submit(
    call: &str,
    client: &karu_client,
    reqs: &[karu_req],
    overrides: &Overrides,
) -> Result<Box<karu_batch>, c_int> {
    client
        .client
        .policy()
        .with(overrides)
        .map_err(|e| error::fail(e.status(), format!("{call}: {}", e.message())))?;
    // SAFETY: forwarded C contract.
    unsafe { check_requests(call, reqs)? };
    check_overlaps(call, reqs)?;
    let mut batch = Box::new(karu_batch {
        batch: None,
        slots: Vec::with_capacity(reqs.len()),
        pid: crate::pid(),
    });
    let mut reads = Vec::with_capacity(reqs.len());
    for (i, r) in reqs.iter().enumerate() {
        let (buffer, allocated) = if r.buffer.is_null() {
            // karu allocates with the C allocator so that `karu_free` (free) releases it.
            let p = usize::try_from(r.length)
                // SAFETY: plain allocation of a nonzero size.
                .map(|n| unsafe { libc::malloc(n) })
                .unwrap_or(std::ptr::null_mut());
            if p.is_null() {
                batch.free_unclaimed();
                return Err(error::fail(
                    Status::NoMem,
                    format!("{call}: cannot allocate {} bytes for request {i}", r.length),
                ));
            }
            (p, true)
        } else {
            (r.buffer, false)
        };
        batch.slots.push(Slot {
            tag: r.tag,
            buffer,
            allocated,
            handed_over: AtomicBool::new(false),
        });
        // SAFETY: checked non-NULL above; a live locator (C contract). It is cloned (shared,
        // immutable), so the caller may free it while the batch runs.
        let locator = unsafe { &(*r.locator).locator };
        let mut read = Read::new(locator, r.offset, r.length).tag(i as u64);
        if !r.if_match.is_null() {
            // SAFETY: a C string (C contract); copied here.
            read = read.if_match(&unsafe { crate::text(r.if_match) });
        }
        // SAFETY: the caller's buffer stays valid until `karu_batch_free` (C contract), and
        // karu's own buffer is freed only after the batch is dropped (`free_unclaimed`) or
        // once handed to the caller by a completion; the Rust batch is dropped, waiting for
        // every worker, before either happens.
        reads.push(unsafe { read.with_raw_buffer(buffer.cast()) });
    }
    match client.client.submit_with(reads, overrides) {
        Ok(b) => {
            batch.batch = Some(b);
            Ok(batch)
        }
        Err(e) => {
            batch.free_unclaimed();
            Err(error::fail(e.status(), format!("{call}: {}", e.message())))
        }
    }
}

/// Common entry of submit and submit_with.
///
/// # Safety
/// The C contract of `karu_client_submit_with`.
unsafe fn submit_entry(
    call: &str,
    client: *mut karu_client,
    reqs: *const karu_req,
    count: usize,
    options: *const karu_submit_options,
    out_batch: *mut *mut karu_batch,
) -> karu_status {
    error::clear();
    if client.is_null() || out_batch.is_null() || (count > 0 && reqs.is_null()) {
        return error::fail(Status::Invalid, format!("{call}: null argument"));
    }
    // SAFETY: `out_batch` is non-NULL and writable (C contract).
    unsafe { *out_batch = std::ptr::null_mut() };
    // SAFETY: forwarded C contract.
    let result = unsafe {
        overrides(call, options).and_then(|o| submit(call, &*client, requests(reqs, count), &o))
    };
    match result {
        Ok(batch) => {
            // SAFETY: as above.
            unsafe { *out_batch = Box::into_raw(batch) };
            KARU_OK
        }
        Err(status) => status,
    }
}

/// Submits `count` reads and returns at once with a batch to drain with `karu_batch_next`.
///
/// Buffers: each caller buffer belongs to the batch until `karu_batch_free`; karu only
/// writes it (it may be uninitialised memory) and never reads it. The caller buffers of one
/// submit must not overlap: overlapping ones fail the whole submit with `KARU_ERR_INVALID`
/// ("request j's buffer overlaps request i's"). Lending a buffer to two live batches at
/// once, or touching it while its batch runs, is the caller's error (undefined behaviour).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_submit(
    client: *mut karu_client,
    requests: *const karu_req,
    count: usize,
    out_batch: *mut *mut karu_batch,
) -> karu_status {
    // SAFETY: forwarded C contract.
    unsafe {
        submit_entry(
            "karu_client_submit",
            client,
            requests,
            count,
            std::ptr::null(),
            out_batch,
        )
    }
}

/// As `karu_client_submit`, with per-batch planner overrides (NULL inherits all).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_submit_with(
    client: *mut karu_client,
    requests: *const karu_req,
    count: usize,
    options: *const karu_submit_options,
    out_batch: *mut *mut karu_batch,
) -> karu_status {
    // SAFETY: forwarded C contract.
    unsafe {
        submit_entry(
            "karu_client_submit_with",
            client,
            requests,
            count,
            options,
            out_batch,
        )
    }
}

/// `Err` with the INVALID status when the batch was inherited across `fork()`.
fn check_owner(call: &str, batch: &karu_batch) -> Result<(), c_int> {
    if batch.pid == crate::pid() {
        Ok(())
    } else {
        Err(error::fail(
            Status::Invalid,
            format!("{call}: batches do not cross fork()"),
        ))
    }
}

/// Takes one completion into `out` (OK), or returns END or TIMEOUT. A negative `timeout_ms`
/// waits forever and 0 polls. Several threads may call this on one batch.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_batch_next(
    batch: *mut karu_batch,
    out: *mut karu_done,
    timeout_ms: c_int,
) -> karu_status {
    error::clear();
    if batch.is_null() || out.is_null() {
        return error::fail(Status::Invalid, "karu_batch_next: null argument");
    }
    // SAFETY: a live batch, not being freed concurrently (C contract).
    let batch = unsafe { &*batch };
    if let Err(status) = check_owner("karu_batch_next", batch) {
        return status;
    }
    let Some(rust) = batch.batch.as_ref() else {
        return KARU_END;
    };
    let next = match u64::try_from(timeout_ms) {
        Err(_) => rust.next().map_or(Next::End, Next::Done),
        Ok(ms) => rust.next_timeout(Duration::from_millis(ms)),
    };
    let done = match next {
        Next::Done(done) => done,
        Next::End => return KARU_END,
        Next::Timeout => return KARU_TIMEOUT,
    };
    let slot = &batch.slots[done.tag as usize];
    slot.handed_over.store(true, Ordering::Release);
    let status = match &done.result {
        Ok(()) => KARU_OK,
        Err(e) => {
            error::from(e);
            e.status().code()
        }
    };
    // SAFETY: `out` is non-NULL and writable (C contract).
    unsafe {
        out.write(karu_done {
            tag: slot.tag,
            status,
            got: done.got,
            buffer: slot.buffer,
        })
    };
    KARU_OK
}

/// Cancels the batch, waits until no worker touches its buffers, frees karu buffers never
/// handed over, and frees the batch. Accepts NULL; in a forked child it returns at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_batch_free(batch: *mut karu_batch) {
    if batch.is_null() {
        return;
    }
    // SAFETY: `batch` came from submit and is freed once, not concurrently with next.
    let mut batch = unsafe { Box::from_raw(batch) };
    if batch.pid != crate::pid() {
        // The parent's workers do not exist here; its memory is left alone.
        std::mem::forget(batch);
        return;
    }
    // Dropping the Rust batch cancels it and blocks until no worker references a buffer.
    drop(batch.batch.take());
    batch.free_unclaimed();
}

/// The batch's counters, each read independently; fields past `struct_size` are untouched.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_batch_get_stats(
    batch: *const karu_batch,
    out: *mut karu_batch_stats,
) -> karu_status {
    error::clear();
    if batch.is_null() || out.is_null() {
        return error::fail(Status::Invalid, "karu_batch_get_stats: null argument");
    }
    // SAFETY: a live batch (C contract).
    let batch = unsafe { &*batch };
    if let Err(status) = check_owner("karu_batch_get_stats", batch) {
        return status;
    }
    // SAFETY: the first field is always present (C contract).
    let size = unsafe { (&raw const (*out).struct_size).read() };
    if size < 16 {
        return error::fail(
            Status::Invalid,
            "karu_batch_get_stats: struct_size is too small",
        );
    }
    let s = batch.batch.as_ref().map(|b| b.stats()).unwrap_or_default();
    let values = [
        s.transfers,
        s.transfers_finished,
        s.requested_bytes,
        s.received_bytes,
        s.retries,
        s.throttled,
        s.new_connections,
        s.resumed,
        s.credential_refreshes,
    ];
    // SAFETY: `out` holds `size` writable bytes (C contract, checked above).
    unsafe { write_u64_fields(out.cast(), size, &values) };
    KARU_OK
}

/// Common body of fetch and fetch_with.
///
/// # Safety
/// The C contract of `karu_client_fetch_with`.
unsafe fn fetch(
    call: &str,
    client: *mut karu_client,
    reqs: *const karu_req,
    count: usize,
    options: *const karu_submit_options,
) -> karu_status {
    error::clear();
    if client.is_null() || (count > 0 && reqs.is_null()) {
        return error::fail(Status::Invalid, format!("{call}: null argument"));
    }
    // SAFETY: forwarded C contract.
    let reqs = unsafe { requests(reqs, count) };
    if let Some(i) = reqs.iter().position(|r| r.buffer.is_null()) {
        return error::fail(
            Status::Invalid,
            format!("{call}: request {i} has no destination buffer"),
        );
    }
    if count == 0 {
        return KARU_OK;
    }
    // SAFETY: forwarded C contract.
    let batch =
        match unsafe { overrides(call, options).and_then(|o| submit(call, &*client, reqs, &o)) } {
            Ok(batch) => batch,
            Err(status) => return status,
        };
    let mut first: Option<karu_core::Error> = None;
    if let Some(rust) = batch.batch.as_ref() {
        for done in rust {
            if let Err(e) = done.result {
                first.get_or_insert(e);
            }
        }
    }
    // SAFETY: the batch was just made by `submit` in this process.
    unsafe { karu_batch_free(Box::into_raw(batch)) };
    match first {
        None => KARU_OK,
        Some(e) => error::from(&e),
    }
}

/// Submits, drains with infinite waits and frees: OK, or the first failure in completion
/// order (its message becomes the last error). Every request needs a buffer, and the
/// buffers must not overlap (INVALID), as for `karu_client_submit`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_fetch(
    client: *mut karu_client,
    requests: *const karu_req,
    count: usize,
) -> karu_status {
    // SAFETY: forwarded C contract.
    unsafe {
        fetch(
            "karu_client_fetch",
            client,
            requests,
            count,
            std::ptr::null(),
        )
    }
}

/// As `karu_client_fetch`, with per-batch planner overrides.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn karu_client_fetch_with(
    client: *mut karu_client,
    requests: *const karu_req,
    count: usize,
    options: *const karu_submit_options,
) -> karu_status {
    // SAFETY: forwarded C contract.
    unsafe { fetch("karu_client_fetch_with", client, requests, count, options) }
}
