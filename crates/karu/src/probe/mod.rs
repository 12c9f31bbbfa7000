//! Probes: `size`, `stat`, `read_ends`. Local files are read on the caller's thread; remote
//! objects through an IO loop while the caller waits, with the batch path's validation and
//! retries.

pub(crate) mod remote;

use std::fs::File;
use std::time::SystemTime;

use crate::dest::Dest;
use crate::error::{Error, Result, Status};
use crate::locator::Locator;
use crate::validate::condition::Condition;

/// What `stat` learns: the visible size and the strong ETag (none for local files, and none
/// when the server sent a weak, invalid or missing tag).
///
/// ```
/// # let path = std::env::temp_dir().join(format!("karu-doc-object-info-{}.bin", std::process::id()));
/// # std::fs::write(&path, vec![0u8; 4096]).unwrap();
/// let client = karu::Client::new(&karu::Config::empty())?;
/// let object = karu::Locator::parse(path.to_str().unwrap())?;
/// let info = client.stat(&object)?;
/// assert_eq!((info.size, info.etag), (4096, None)); // local files have no ETag
/// assert!(info.last_modified.is_some());
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObjectInfo {
    /// Visible size: the window length when bounded, otherwise the object size past the
    /// window offset.
    pub size: u64,
    /// Strong ETag, quotes included.
    pub etag: Option<String>,
    /// When the object last changed: a local file's modification time, or a remote answer's
    /// `Last-Modified` (none when absent or not an HTTP date).
    pub last_modified: Option<SystemTime>,
}

/// What `read_ends` returns: `min(head, size)` bytes from the start and `min(tail, size)`
/// bytes from the end of the visible object (they overlap on a short object).
///
/// ```
/// # let path = std::env::temp_dir().join(format!("karu-doc-ends-{}.bin", std::process::id()));
/// # std::fs::write(&path, b"HEADER...payload...FOOTER").unwrap();
/// let client = karu::Client::new(&karu::Config::empty())?;
/// let object = karu::Locator::parse(path.to_str().unwrap())?;
/// let ends = client.read_ends(&object, 6, 6)?;
/// assert_eq!(ends.head, b"HEADER");
/// assert_eq!(ends.tail, b"FOOTER");
/// assert_eq!(ends.info.size, 25);
/// let short = client.read_ends(&object, 100, 100)?; // clamped to the object's size
/// assert_eq!((short.head.len(), short.tail.len()), (25, 25));
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ends {
    /// The first bytes.
    pub head: Vec<u8>,
    /// The last bytes.
    pub tail: Vec<u8>,
    /// Size and ETag, as `stat` reports them.
    pub info: ObjectInfo,
    /// The head answer's `Last-Modified` and object size as an `If-Unmodified-Since` pin,
    /// for objects without a strong ETag (downloads pin their chunks with it).
    pub(crate) date_pin: Option<Condition>,
}

fn io_error(locator: &Locator, e: std::io::Error) -> Error {
    Error::new(Status::Io, format!("{}: {e}", locator.display())).caused_by(e)
}

/// An HTTP date (`Last-Modified`) as a time; `None` when it is not one.
pub(crate) fn http_date(value: Option<&str>) -> Option<SystemTime> {
    httpdate::parse_http_date(value?).ok()
}

/// Opens a local file and returns it with its visible size and modification time.
fn open_local(locator: &Locator) -> Result<(File, u64, Option<SystemTime>)> {
    let file = File::open(locator.target()).map_err(|e| io_error(locator, e))?;
    let meta = file.metadata().map_err(|e| io_error(locator, e))?;
    Ok((
        file,
        visible_size(locator, meta.len()),
        meta.modified().ok(),
    ))
}

/// The visible size of an object of `total` bytes through the locator's window.
pub(crate) fn visible_size(locator: &Locator, total: u64) -> u64 {
    let w = locator.window();
    match w.length {
        Some(len) => len,
        None => total.saturating_sub(w.offset),
    }
}

/// `stat` of a local file: its visible size, no ETag.
pub(crate) fn local_stat(locator: &Locator) -> Result<ObjectInfo> {
    let (_, size, last_modified) = open_local(locator)?;
    Ok(ObjectInfo {
        size,
        etag: None,
        last_modified,
    })
}

/// `read_ends` of a local file.
pub(crate) fn local_read_ends(locator: &Locator, head: u64, tail: u64) -> Result<Ends> {
    let (file, size, last_modified) = open_local(locator)?;
    let start = locator.window_offset();
    let head_len = head.min(size);
    let tail_len = tail.min(size);
    let head = read_exact_at(locator, &file, start, head_len)?;
    let tail = read_exact_at(locator, &file, start + (size - tail_len), tail_len)?;
    Ok(Ends {
        head,
        tail,
        info: ObjectInfo {
            size,
            etag: None,
            last_modified,
        },
        date_pin: None,
    })
}

/// Reads exactly `len` bytes at absolute `offset`; a short file (inside a bounded window)
/// is `Range`.
fn read_exact_at(locator: &Locator, file: &File, offset: u64, len: u64) -> Result<Vec<u8>> {
    let mut buf = Dest::Alloc;
    buf.prepare(len).map_err(|e| e.context(locator.display()))?;
    let n = buf
        .read_file(file, offset)
        .map_err(|(_, e)| e.context(locator.display()))?;
    if n as u64 != len {
        return Err(Error::new(
            Status::Range,
            format!(
                "{}: object ended at byte {} inside the window",
                locator.display(),
                offset + n as u64
            ),
        ));
    }
    Ok(buf.into_vec().unwrap_or_default())
}
