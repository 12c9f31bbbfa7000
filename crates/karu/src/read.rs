//! `Read`: one positional read as the caller describes it, and where its bytes go.

use std::ops::Range;

use crate::dest::{Dest, RawBuf};
use crate::error::{Error, Result, Status};
use crate::locator::Locator;
use crate::validate::condition::Condition;

/// One positional read: an object, an offset relative to the locator's window, a length,
/// a destination, a caller's tag and an optional version condition.
///
/// ```
/// let object = karu::Locator::parse("/tmp/data.bin").unwrap();
/// let read = karu::Read::new(&object, 4096, 512).tag(7).into_buffer(Vec::with_capacity(512));
/// assert_eq!(read.length(), 512);
/// ```
#[derive(Debug)]
pub struct Read {
    pub(crate) locator: Locator,
    pub(crate) offset: u64,
    pub(crate) length: u64,
    pub(crate) tag: u64,
    /// Boxed: most reads have none, and a batch's reads are held until they are planned.
    pub(crate) pin: Option<Box<Condition>>,
    pub(crate) dest: Dest,
}

impl Read {
    /// A read of `length` bytes at `offset` (relative to the locator's window) into a buffer
    /// karu allocates.
    pub fn new(locator: &Locator, offset: u64, length: u64) -> Read {
        Read {
            locator: locator.clone(),
            offset,
            length,
            tag: 0,
            pin: None,
            dest: Dest::Alloc,
        }
    }

    /// One read per nonempty range of `locator`, tagged with the range's position (an empty
    /// range gets no read); `Invalid` for a range that ends before it starts.
    ///
    /// ```
    /// let object = karu::Locator::parse("/tmp/data.bin")?;
    /// let reads = karu::Read::of_ranges(&object, &[8..10, 4..4, 0..2])?;
    /// assert_eq!(reads.iter().map(|r| r.length()).collect::<Vec<_>>(), [2, 2]);
    /// assert!(karu::Read::of_ranges(&object, &[3..1]).is_err());
    /// # Ok::<(), karu::Error>(())
    /// ```
    pub fn of_ranges(locator: &Locator, ranges: &[Range<u64>]) -> Result<Vec<Read>> {
        let mut reads = Vec::with_capacity(ranges.len());
        for (i, r) in ranges.iter().enumerate() {
            let length = range_length(r)?;
            if length > 0 {
                reads.push(Read::new(locator, r.start, length).tag(i as u64));
            }
        }
        Ok(reads)
    }

    /// Sets the tag returned untouched in this read's completion.
    pub fn tag(mut self, tag: u64) -> Read {
        self.tag = tag;
        self
    }

    /// Requires the object's ETag to match (`If-Match`): a changed object fails the read with
    /// `Precondition`. Local files refuse it with `Unsupported`.
    pub fn if_match(mut self, etag: &str) -> Read {
        self.pin = Some(Box::new(Condition::IfMatch(etag.to_owned())));
        self
    }

    /// Pins the read to a version by `condition` (a download pins its chunks to the version
    /// its probe saw, by ETag or by `Last-Modified` and size). The planner groups reads by
    /// `If-Match` only, so a date-pinned read is submitted alone (one chunk per batch).
    pub(crate) fn pinned(mut self, condition: Condition) -> Read {
        self.pin = Some(Box::new(condition));
        self
    }

    /// Reads into this vector (its bytes replaced by the read's) instead of a new
    /// allocation; the vector comes back in the completion (a failed read's may end after
    /// its defined bytes; one whose buffer could not be had comes back as it was).
    pub fn into_buffer(mut self, buffer: Vec<u8>) -> Read {
        self.dest = Dest::Owned(buffer);
        self
    }

    /// Reads into caller memory at `ptr` (at least `length` bytes, which need not be
    /// initialised: karu writes them through raw pointers and never reads them).
    ///
    /// # Safety
    /// The memory must be valid for writes, and must not be read or written by anyone else
    /// (another read of any batch included), until the batch this read is submitted in has
    /// been dropped (or, for a blocking fetch, until the call returns). This is the C ABI's
    /// contract; safe code uses owned buffers or
    /// [`Client::fetch_into`](crate::Client::fetch_into).
    pub unsafe fn with_raw_buffer(mut self, ptr: *mut u8) -> Read {
        let len = usize::try_from(self.length).unwrap_or(usize::MAX);
        // SAFETY: the caller's contract above.
        self.dest = Dest::Raw(unsafe { RawBuf::new(ptr, len) });
        self
    }

    /// The locator read from.
    pub fn locator(&self) -> &Locator {
        &self.locator
    }

    /// The offset, relative to the locator's window.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The length in bytes.
    pub fn length(&self) -> u64 {
        self.length
    }
}

/// The length of `range`, `Invalid` when it is reversed.
pub(crate) fn range_length(range: &Range<u64>) -> Result<u64> {
    range.end.checked_sub(range.start).ok_or_else(|| {
        Error::new(
            Status::Invalid,
            format!("range {}..{} ends before it starts", range.start, range.end),
        )
    })
}
