//! Where a read's bytes go, and the only ways karu writes them: a copy or a positional file
//! read through a raw pointer. Caller memory is never seen through a reference, since karu
//! did not initialise it (C `malloc` output, any raw buffer) and may not assume it is.

use std::fs::File;
use std::os::fd::AsRawFd;

use crate::error::{Error, Result, Status};

/// Where a read's bytes go.
#[derive(Debug)]
pub(crate) enum Dest {
    /// karu allocates a buffer of the read's length when the read runs.
    Alloc,
    /// The caller's vector, before the read runs; or a vector of the read's length, all of
    /// it initialised (see [`Dest::prepare_zeroed`]). Returned in the completion.
    Owned(Vec<u8>),
    /// A vector being filled from its start ([`Dest::prepare`]): its length counts the bytes
    /// initialised so far (written, or zeroed where a write skipped ahead), and its capacity
    /// holds the `want` bytes of the read. Zeroing a
    /// buffer the body then overwrites cost a tenth of the client's CPU on workload C (a
    /// `memset` of every byte, as large as the copy itself).
    Filling { buf: Vec<u8>, want: usize },
    /// Memory the caller guarantees valid (and unaliased) until the batch is dropped.
    Raw(RawBuf),
}

/// A raw destination: `len` bytes at `ptr` that karu may write, but never reads or borrows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a RawBuf is only built through `RawBuf::new`, whose contract makes the memory
// exclusively karu's while it is used, and each read's memory is written by exactly one
// worker at a time.
unsafe impl Send for RawBuf {}

impl RawBuf {
    /// # Safety
    /// `ptr` must be valid for writes of `len` bytes (initialised or not) for as long as the
    /// `RawBuf` is used, and no one else may access that memory meanwhile.
    pub(crate) unsafe fn new(ptr: *mut u8, len: usize) -> RawBuf {
        RawBuf { ptr, len }
    }

    /// Copies `data` to byte `at`, clamped to the buffer; returns how many bytes it copied.
    fn write(self, at: usize, data: &[u8]) -> usize {
        let n = data.len().min(self.len.saturating_sub(at));
        if n > 0 {
            // SAFETY: `[at, at + n)` lies inside the buffer (`RawBuf::new`), and `data` is a
            // Rust slice, so it cannot overlap memory karu owns exclusively.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(at), n) };
        }
        n
    }

    /// Reads the file from `offset` until the buffer is full or the file ends; returns how
    /// many bytes were read, or the OS error with the count read before it. A file cannot
    /// hold bytes at or past 2^63 (`off_t`; the kernel refuses such ranges with EINVAL), so
    /// reading there finds its end.
    fn read_file(self, file: &File, offset: u64) -> std::result::Result<usize, (usize, Error)> {
        const FILE_END: u64 = libc::off_t::MAX as u64;
        let mut n = 0;
        while n < self.len {
            let at = offset.saturating_add(n as u64);
            let count = (self.len - n)
                .min(usize::try_from(FILE_END.saturating_sub(at)).unwrap_or(usize::MAX));
            if count == 0 {
                break;
            }
            // SAFETY: `[n, n + count)` lies inside the buffer (`RawBuf::new`); the kernel
            // writes at most `count` bytes there and karu forms no reference to them.
            let k = unsafe {
                libc::pread(
                    file.as_raw_fd(),
                    self.ptr.add(n).cast(),
                    count,
                    at as libc::off_t,
                )
            };
            match k {
                0 => break,
                k if k > 0 => n += k as usize,
                _ => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err((n, Error::new(Status::Io, e.to_string()).caused_by(e)));
                    }
                }
            }
        }
        Ok(n)
    }
}

/// A zeroed vector of `len` bytes, or `NoMem` when it cannot be allocated.
/// Large buffers come zeroed from the allocator (fresh pages), not from a pass over them.
pub(crate) fn zeroed(len: usize) -> Result<Vec<u8>> {
    if len == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u8>(len).map_err(|_| no_memory(len))?;
    // SAFETY: the layout's size is nonzero.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(no_memory(len));
    }
    // SAFETY: `ptr` comes from the global allocator with the layout of `len` bytes (capacity
    // `len`), and all `len` bytes are initialised (zero).
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// The error of a buffer of `len` bytes that could not be allocated.
pub(crate) fn no_memory(len: usize) -> Error {
    Error::new(
        Status::NoMem,
        format!("cannot allocate a buffer of {len} bytes"),
    )
}

impl Dest {
    /// Makes the destination hold `len` bytes written from its start on (a gap left by a
    /// write past the bytes written so far reads as zeros): allocates karu's buffer, or
    /// reserves room in the caller's vector (whose bytes it drops), without initialising
    /// it; `NoMem` when that memory cannot be had. A raw buffer is used as given.
    pub(crate) fn prepare(&mut self, len: u64) -> Result<()> {
        let want = usize::try_from(len).map_err(|_| no_memory(usize::MAX))?;
        match self {
            Dest::Alloc => {
                let mut buf = Vec::new();
                buf.try_reserve_exact(want).map_err(|_| no_memory(want))?;
                *self = Dest::Filling { buf, want };
            }
            Dest::Owned(v) => {
                // The caller's vector comes back as it was when the room cannot be had.
                v.try_reserve_exact(want.saturating_sub(v.len()))
                    .map_err(|_| no_memory(want))?;
                let mut buf = std::mem::take(v);
                buf.clear();
                *self = Dest::Filling { buf, want };
            }
            Dest::Filling { .. } | Dest::Raw(_) => {}
        }
        Ok(())
    }

    /// Makes the destination hold `len` bytes, every one initialised (zero), for writers in
    /// any order (a split read's pieces): large buffers come zeroed from the allocator as
    /// fresh pages, where [`Dest::prepare`] would zero the gap before a later piece's bytes.
    pub(crate) fn prepare_zeroed(&mut self, len: u64) -> Result<()> {
        let n = usize::try_from(len).map_err(|_| no_memory(usize::MAX))?;
        match self {
            Dest::Alloc => *self = Dest::Owned(zeroed(n)?),
            Dest::Owned(v) => {
                v.try_reserve_exact(n.saturating_sub(v.len()))
                    .map_err(|_| no_memory(n))?;
                v.resize(n, 0);
            }
            Dest::Filling { .. } | Dest::Raw(_) => {}
        }
        Ok(())
    }

    /// The prepared destination as raw memory (empty before `prepare`): a filling buffer's
    /// whole capacity, the initialised bytes of any other vector, or the caller's memory.
    fn raw(&mut self) -> RawBuf {
        match self {
            Dest::Alloc => RawBuf {
                ptr: std::ptr::null_mut(),
                len: 0,
            },
            // SAFETY (both vectors): the memory is the vector's own and `want` is within
            // its capacity (`prepare`), borrowed mutably for as long as the returned RawBuf
            // is used by the caller of `raw` (within one `&mut self` call); karu writes there
            // and forms no reference to bytes it has not initialised.
            Dest::Filling { buf, want } => unsafe { RawBuf::new(buf.as_mut_ptr(), *want) },
            Dest::Owned(v) => unsafe { RawBuf::new(v.as_mut_ptr(), v.len()) },
            Dest::Raw(r) => *r,
        }
    }

    /// A filling buffer's bytes `[len, end)` were just written: its length moves to `end`.
    fn filled(&mut self, end: usize) {
        if let Dest::Filling { buf, want } = self
            && end > buf.len()
            && end <= *want
        {
            // SAFETY: `end` is within the capacity (`want`); `[0, len)` was initialised and
            // the caller wrote `[len, end)` through `raw`.
            unsafe { buf.set_len(end) };
        }
    }

    /// Copies `data` to byte `at` of the destination (clamped to its prepared length).
    pub(crate) fn write(&mut self, at: usize, data: &[u8]) {
        if let Dest::Filling { buf, want } = self
            && at > buf.len()
            && at < *want
        {
            // A write past the bytes written so far: the gap reads as zeros (within the
            // capacity, so no reallocation).
            buf.resize(at, 0);
        }
        let n = self.raw().write(at, data);
        if n > 0 {
            // `[at, at + n)` was written, and any gap before `at` zeroed.
            self.filled(at + n);
        }
    }

    /// Fills the prepared destination from the file at `offset` until it is full or the file
    /// ends; returns how many bytes were read, or the OS error with the count before it.
    pub(crate) fn read_file(
        &mut self,
        file: &File,
        offset: u64,
    ) -> std::result::Result<usize, (usize, Error)> {
        let result = self.raw().read_file(file, offset);
        // The reads filled `[0, n)` in order from the start.
        self.filled(match &result {
            Ok(n) | Err((n, _)) => *n,
        });
        result
    }

    /// The owned buffer, if karu or the caller moved one in: of the prepared length once
    /// every byte was written; a buffer being filled ends after its last written byte (a
    /// failed read's tail is neither zeroed nor kept: for a huge read that failed early,
    /// zeroing would touch every page of memory no byte was written to).
    pub(crate) fn into_vec(self) -> Option<Vec<u8>> {
        match self {
            Dest::Owned(v) | Dest::Filling { buf: v, .. } => Some(v),
            Dest::Alloc | Dest::Raw(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::MaybeUninit;

    #[test]
    fn writes_are_clamped_to_the_destination() {
        let mut d = Dest::Alloc;
        d.write(0, b"ignored before prepare");
        d.prepare(4).unwrap();
        d.write(2, b"xyz");
        d.write(9, b"far");
        assert_eq!(d.into_vec().unwrap(), b"\0\0xy");
    }

    #[test]
    fn a_filling_buffer_holds_what_was_written_and_zeros_elsewhere() {
        // Written in order, with a rewrite from an earlier offset (a restarted body).
        let mut d = Dest::Alloc;
        d.prepare(6).unwrap();
        d.write(0, b"abc");
        d.write(1, b"BC");
        d.write(3, b"defXYZ");
        assert_eq!(d.into_vec().unwrap(), b"aBCdef");
        // Writes at or past the end write nothing and count nothing as written.
        let mut d = Dest::Alloc;
        d.prepare(4).unwrap();
        d.write(1, b"y");
        d.write(4, b"z");
        d.write(9, b"z");
        assert_eq!(d.into_vec().unwrap(), b"\0y");
        // A read that failed after two bytes: its buffer ends there.
        let mut d = Dest::Owned(b"caller's old bytes".to_vec());
        d.prepare(5).unwrap();
        d.write(0, b"ok");
        assert_eq!(d.into_vec().unwrap(), b"ok");
        // A second `prepare` keeps what was written.
        let mut d = Dest::Alloc;
        d.prepare(3).unwrap();
        d.write(0, b"x");
        d.prepare(3).unwrap();
        d.write(2, b"z");
        assert_eq!(d.into_vec().unwrap(), b"x\0z");
        // Zeroed for writers in any order.
        let mut d = Dest::Alloc;
        d.prepare_zeroed(4).unwrap();
        d.write(2, b"zz");
        d.write(0, b"a");
        assert_eq!(d.into_vec().unwrap(), b"a\0zz");
    }

    #[test]
    fn raw_memory_is_written_through_pointers_only() {
        let mut mem = [MaybeUninit::<u8>::uninit(); 8];
        // SAFETY: `mem` outlives `d` and nothing else touches it meanwhile.
        let mut d = Dest::Raw(unsafe { RawBuf::new(mem.as_mut_ptr().cast(), 6) });
        d.prepare(6).unwrap();
        d.write(0, b"abcdefgh");
        // SAFETY: the first six bytes were just written.
        let got: Vec<u8> = mem[..6]
            .iter()
            .map(|b| unsafe { b.assume_init() })
            .collect();
        assert_eq!(got, b"abcdef");
    }

    #[test]
    fn allocations_that_cannot_be_had_are_no_mem() {
        for len in [u64::MAX, 1 << 63] {
            assert_eq!(
                Dest::Alloc.prepare(len).unwrap_err().status(),
                Status::NoMem
            );
            let mut owned = Dest::Owned(vec![1]);
            assert_eq!(owned.prepare(len).unwrap_err().status(), Status::NoMem);
            assert_eq!(
                owned.into_vec().unwrap(),
                [1],
                "the caller's vector comes back"
            );
            let mut zeroed = Dest::Alloc;
            assert_eq!(
                zeroed.prepare_zeroed(len).unwrap_err().status(),
                Status::NoMem
            );
        }
    }

    #[test]
    fn file_reads_stop_at_the_largest_file_offset() {
        let path = std::env::temp_dir().join(format!("karu-dest-{}", std::process::id()));
        std::fs::write(&path, b"0123456789").unwrap();
        let file = File::open(&path).unwrap();
        let mut d = Dest::Alloc;
        d.prepare(4).unwrap();
        assert_eq!(d.read_file(&file, 8).unwrap(), 2);
        assert_eq!(d.read_file(&file, 1 << 63).unwrap(), 0);
        assert_eq!(d.read_file(&file, (1 << 63) - 2).unwrap(), 0);
        assert_eq!(d.read_file(&file, u64::MAX - 1).unwrap(), 0);
        assert_eq!(d.read_file(&file, 3).unwrap(), 4);
        assert_eq!(d.into_vec().unwrap(), b"3456");
        std::fs::remove_file(&path).unwrap();
    }
}
