//! Caller buffers (`bytearray`, `memoryview`, NumPy arrays: anything exporting a writable,
//! C-contiguous buffer) as raw destinations. karu writes them through raw pointers only
//! (`Read::with_raw_buffer`), never through a Rust reference: Python owns that memory.

use std::ffi::{c_char, c_int, c_void};
use std::mem::MaybeUninit;

use pyo3::exceptions::PyBufferError;
use pyo3::ffi::PyObject;
use pyo3::prelude::*;

/// CPython's `Py_buffer` (layout unchanged since 3.3). pyo3 declares the buffer protocol only
/// for the 3.11+ limited API; these functions exist, with this struct, in every CPython 3, so
/// the abi3 module for 3.9 declares them itself.
#[repr(C)]
struct View {
    buf: *mut c_void,
    obj: *mut PyObject,
    len: isize,
    itemsize: isize,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut isize,
    strides: *mut isize,
    suboffsets: *mut isize,
    internal: *mut c_void,
}

unsafe extern "C" {
    fn PyObject_GetBuffer(obj: *mut PyObject, view: *mut View, flags: c_int) -> c_int;
    fn PyBuffer_Release(view: *mut View);
}

/// `PyBUF_CONTIG`: writable and C-contiguous, or the exporter refuses with `BufferError`.
const PYBUF_CONTIG: c_int = 0x0008 | 0x0001;

/// A writable, C-contiguous buffer, exported (so neither freed nor resized) while it lives.
pub(crate) struct Writable {
    /// Boxed: exporters may point `shape` into the view itself, so it must not move.
    view: Box<View>,
}

// SAFETY: the view is only read (its `buf` and `len`) and released under the GIL, from
// whichever thread drops it.
unsafe impl Send for Writable {}
unsafe impl Sync for Writable {}

impl Writable {
    /// Exports `obj`'s buffer: `BufferError` (or `TypeError`) when it is not writable or its
    /// bytes are not one contiguous run.
    pub(crate) fn get(obj: &Bound<'_, PyAny>) -> PyResult<Writable> {
        let mut view = Box::new(MaybeUninit::<View>::uninit());
        // SAFETY: `obj` is a live object (we hold the GIL through `obj`'s token) and `view`
        // is writable memory for one `Py_buffer`, filled on success.
        let rc = unsafe { PyObject_GetBuffer(obj.as_ptr(), view.as_mut_ptr(), PYBUF_CONTIG) };
        if rc != 0 {
            return Err(PyErr::take(obj.py()).unwrap_or_else(|| {
                PyBufferError::new_err("the destination must be a writable, contiguous buffer")
            }));
        }
        // SAFETY: `PyObject_GetBuffer` succeeded, so it filled the view.
        let view = unsafe { Box::from_raw(Box::into_raw(view).cast::<View>()) };
        Ok(Writable { view })
    }

    /// Its size in bytes.
    pub(crate) fn len(&self) -> usize {
        usize::try_from(self.view.len).unwrap_or(0)
    }

    /// Its memory from byte `at` on (clamped to the end), for karu to write.
    pub(crate) fn raw(&self, at: usize) -> Raw {
        let at = at.min(self.len());
        // SAFETY: `at` is within the exported buffer of `len` bytes.
        let ptr = unsafe { self.view.buf.cast::<u8>().add(at) };
        Raw {
            ptr,
            len: self.len() - at,
        }
    }
}

impl Drop for Writable {
    fn drop(&mut self) {
        // SAFETY: the view was filled by `PyObject_GetBuffer` and is released once, with the
        // GIL held.
        Python::attach(|_| unsafe { PyBuffer_Release(&mut *self.view) });
    }
}

/// Buffer memory handed to karu while the GIL is released. Valid while its [`Writable`] lives;
/// the caller promises, as for any `readinto` that releases the GIL, not to touch the buffer
/// from another thread meanwhile.
#[derive(Clone, Copy)]
pub(crate) struct Raw {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
}

// SAFETY: a pointer into an exported buffer, used by one call (and the karu workers it waits
// for) while the `Writable` that exports it is alive.
unsafe impl Send for Raw {}
// SAFETY: as for `Send`; sharing a `Raw` shares the address, not access to the memory.
unsafe impl Sync for Raw {}

impl Raw {
    /// A karu read of this memory's length at `offset`, written straight into it.
    ///
    /// # Safety
    /// The memory must stay exported, and untouched by others, until the batch the read is
    /// submitted in has been dropped.
    pub(crate) unsafe fn read(self, locator: &karu::Locator, offset: u64) -> karu::Read {
        let read = karu::Read::new(locator, offset, self.len as u64);
        // SAFETY: the caller's contract above.
        unsafe { read.with_raw_buffer(self.ptr) }
    }

    /// Copies `data` to the start of the memory (clamped to its length); returns the count.
    pub(crate) fn copy_from(self, data: &[u8]) -> usize {
        let n = data.len().min(self.len);
        // SAFETY: `n` bytes fit in the memory (valid while its `Writable` lives), and `data`
        // is a Rust slice, so the two cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr, n) };
        n
    }
}
