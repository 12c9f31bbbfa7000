//! `Reader`: random access to one object for format readers (HDF5, netCDF, TIFF, Parquet
//! footers), which parse by many small reads and revisit the same structures.
//!
//! A remote object is read in aligned blocks kept in an LRU cache within a byte budget; open
//! costs one request (the first block, size and version, through `read_ends`), and every
//! later request is pinned to the version seen at open, so an object replaced meanwhile gives
//! `Precondition`, never bytes of two versions. Concurrent misses on one block share one
//! request; a sequential sweep grows a readahead window, and a miss in an object small enough
//! that the link carries its missing bytes within a round trip fetches all of them (so does
//! a second miss when only a few blocks of it are missing). Local files are read directly.

mod cache;
mod cursor;
#[cfg(feature = "hdf5")]
pub mod h5;
mod local;
mod readahead;
mod remote;

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use crate::client::Client;
use crate::download::block_on;
use crate::error::{Error, Result, Status};
use crate::locator::Locator;

pub use cursor::Cursor;

use local::LocalFile;
use remote::Remote;

/// How a [`Reader`] caches: block size and cache budget.
///
/// ```
/// let options = karu::ReaderOptions::default().block_size(256 << 10).cache_bytes(16 << 20);
/// # let _ = options;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReaderOptions {
    block_size: u64,
    cache_bytes: u64,
}

impl Default for ReaderOptions {
    /// 1 MiB blocks, a 64 MiB cache.
    fn default() -> ReaderOptions {
        ReaderOptions {
            block_size: 1 << 20,
            cache_bytes: 64 << 20,
        }
    }
}

impl ReaderOptions {
    /// The block size in bytes: the unit of requests and of the cache (at least 1; 0 makes
    /// `open` fail with `Invalid`).
    pub fn block_size(mut self, bytes: u64) -> ReaderOptions {
        self.block_size = bytes;
        self
    }

    /// The cache budget in bytes. A budget below one block keeps nothing: every read then
    /// fetches its blocks (still exact).
    pub fn cache_bytes(mut self, bytes: u64) -> ReaderOptions {
        self.cache_bytes = bytes;
        self
    }
}

/// What a [`Reader`] did so far.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReaderStats {
    /// Blocks found in the cache (or in flight for another caller).
    pub hits: u64,
    /// Blocks that had to be fetched.
    pub misses: u64,
    /// Requests sent, open and retries included (for a local file: positional reads).
    pub requests: u64,
    /// Bytes received (for a local file: bytes read).
    pub bytes_fetched: u64,
}

/// Random access to one object, pinned to the version seen at open; `Clone + Send + Sync`
/// (clones share the cache).
///
/// ```
/// # let path = std::env::temp_dir().join(format!("karu-doc-reader-{}.bin", std::process::id()));
/// # std::fs::write(&path, b"0123456789").unwrap();
/// use std::io::{Read, Seek, SeekFrom};
/// let client = karu::Client::new(&karu::Config::empty())?;
/// let object = karu::Locator::parse(path.to_str().unwrap())?;
/// let reader = karu::Reader::open(&client, &object, karu::ReaderOptions::default())?;
/// assert_eq!(reader.len(), 10);
/// assert_eq!(&reader.read_at(2, 3)?[..], b"234");
/// assert_eq!(&reader.read_at(8, 5)?[..], b"89"); // short at the end only
/// let mut cursor = reader.cursor();
/// cursor.seek(SeekFrom::End(-4)).unwrap();
/// let mut tail = String::new();
/// cursor.read_to_string(&mut tail).unwrap();
/// assert_eq!(tail, "6789");
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Clone)]
pub struct Reader {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("len", &self.len())
            .field("etag", &self.etag())
            .finish_non_exhaustive()
    }
}

enum Source {
    Local(LocalFile),
    Remote(Box<Remote>),
}

struct Inner {
    source: Source,
}

/// `start..start + len` clamped to an object of `size` bytes; `Invalid` when it overflows.
fn clamp(start: u64, len: u64, size: u64) -> Result<Range<u64>> {
    let end = start.checked_add(len).ok_or_else(|| {
        Error::new(
            Status::Invalid,
            format!("range at {start} of {len} bytes overflows"),
        )
    })?;
    Ok(start.min(size)..end.min(size))
}

/// A range given as `Range<u64>`, clamped; `Invalid` when reversed.
fn clamp_range(r: &Range<u64>, size: u64) -> Result<Range<u64>> {
    if r.end < r.start {
        return Err(Error::new(
            Status::Invalid,
            format!("reversed range {}..{}", r.start, r.end),
        ));
    }
    Ok(r.start.min(size)..r.end.min(size))
}

impl Reader {
    /// Opens `locator`: a remote object costs one request (its first block, size and
    /// version); a local file is opened for direct reads.
    pub fn open(client: &Client, locator: &Locator, options: ReaderOptions) -> Result<Reader> {
        block_on(Reader::open_async(client, locator, options))
    }

    /// The async twin of [`open`](Reader::open) (any executor).
    pub async fn open_async(
        client: &Client,
        locator: &Locator,
        options: ReaderOptions,
    ) -> Result<Reader> {
        if options.block_size == 0 {
            return Err(Error::new(Status::Invalid, "reader block size 0"));
        }
        let source = if locator.is_remote() {
            Source::Remote(Box::new(Remote::open(client, locator, options).await?))
        } else {
            Source::Local(LocalFile::open(locator)?)
        };
        Ok(Reader {
            inner: Arc::new(Inner { source }),
        })
    }

    /// The object's size as of open (or the last [`refresh`](Reader::refresh)).
    pub fn len(&self) -> u64 {
        match &self.inner.source {
            Source::Local(f) => f.len(),
            Source::Remote(r) => r.current().len,
        }
    }

    /// True for an empty object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The strong ETag every request is pinned to (none for local files, or when the server
    /// gave none: requests are then pinned by `Last-Modified` and size where it gave those).
    pub fn etag(&self) -> Option<&str> {
        match &self.inner.source {
            Source::Local(_) => None,
            Source::Remote(r) => r.current().etag.as_deref(),
        }
    }

    /// `len` bytes at `offset`, shorter only where the object ends (empty at or past it).
    pub fn read_at(&self, offset: u64, len: u64) -> Result<Bytes> {
        block_on(self.read_at_async(offset, len))
    }

    /// The async twin of [`read_at`](Reader::read_at) (any executor; dropping it unfinished
    /// cancels its requests, and concurrent readers waiting on its blocks fetch them
    /// themselves).
    pub async fn read_at_async(&self, offset: u64, len: u64) -> Result<Bytes> {
        match &self.inner.source {
            Source::Local(f) => {
                clamp(offset, len, u64::MAX)?;
                f.read_at(offset, len).map(Bytes::from)
            }
            Source::Remote(remote) => {
                let v = remote.current();
                let r = clamp(offset, len, v.len)?;
                let mut out = remote.read(v, std::slice::from_ref(&r), true).await?;
                Ok(out.pop().unwrap_or_default())
            }
        }
    }

    /// Fills `buf` from `offset`; returns the bytes read, fewer than `buf.len()` only where
    /// the object ends.
    pub fn read_into(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        match &self.inner.source {
            Source::Local(f) => f.read_into(offset, buf),
            Source::Remote(_) => {
                let data = self.read_at(offset, buf.len() as u64)?;
                buf[..data.len()].copy_from_slice(&data);
                Ok(data.len())
            }
        }
    }

    /// The bytes of each range (clamped to the object's end), read as one planned batch of
    /// the missing blocks, which also fills the cache.
    pub fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        block_on(self.read_ranges_async(ranges))
    }

    /// The async twin of [`read_ranges`](Reader::read_ranges).
    pub async fn read_ranges_async(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        match &self.inner.source {
            Source::Local(_) => {
                let mut out = Vec::with_capacity(ranges.len());
                for r in ranges {
                    let r = clamp_range(r, self.len())?;
                    out.push(self.read_at_async(r.start, r.end - r.start).await?);
                }
                Ok(out)
            }
            Source::Remote(remote) => {
                let v = remote.current();
                let ranges = ranges
                    .iter()
                    .map(|r| clamp_range(r, v.len))
                    .collect::<Result<Vec<_>>>()?;
                remote.read(v, &ranges, false).await
            }
        }
    }

    /// A hint that `ranges` will be read soon: their missing blocks are fetched on a
    /// background thread into the cache (no-op for local files; errors are left for the
    /// reads that follow to see).
    pub fn prefetch(&self, ranges: &[Range<u64>]) {
        if matches!(self.inner.source, Source::Local(_)) || ranges.is_empty() {
            return;
        }
        let reader = self.clone();
        let ranges = ranges.to_vec();
        // A thread that cannot start only loses the hint.
        let _ = std::thread::Builder::new()
            .name("karu-prefetch".into())
            .spawn(move || {
                let _ = reader.read_ranges(&ranges);
            });
    }

    /// Asks the object's size and version again (one request for a remote object): after a
    /// change (a file that grew, or was replaced), later reads see the new version and the
    /// cache starts empty; reads already running keep the old version's pin.
    pub fn refresh(&self) -> Result<()> {
        match &self.inner.source {
            Source::Local(f) => f.refresh(),
            Source::Remote(r) => block_on(r.refresh()),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> ReaderStats {
        match &self.inner.source {
            Source::Local(f) => {
                let (requests, bytes_fetched) = f.counts();
                ReaderStats {
                    requests,
                    bytes_fetched,
                    ..ReaderStats::default()
                }
            }
            Source::Remote(r) => {
                let (requests, bytes_fetched) = r.counts();
                let (hits, misses) = r.cache_counts();
                ReaderStats {
                    hits,
                    misses,
                    requests,
                    bytes_fetched,
                }
            }
        }
    }

    /// A `std::io::Read + Seek` view with its own position (starting at 0).
    pub fn cursor(&self) -> Cursor {
        Cursor::new(self.clone())
    }
}
