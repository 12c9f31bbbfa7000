//! Probes on the caller's thread: `size`, `stat`, `read_ends`.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::error::{Error, Result, Status};
use crate::locator::Locator;

/// What `stat` learns: the visible size and the strong ETag (none for local files, and none
/// when the server sent a weak, invalid or missing tag).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Visible size: the window length when bounded, otherwise the object size past the
    /// window offset.
    pub size: u64,
    /// Strong ETag, quotes included.
    pub etag: Option<String>,
}

/// What `read_ends` returns: `min(head, size)` bytes from the start and `min(tail, size)`
/// bytes from the end of the visible object (they overlap on a short object).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ends {
    /// The first bytes.
    pub head: Vec<u8>,
    /// The last bytes.
    pub tail: Vec<u8>,
    /// Size and ETag, as `stat` reports them.
    pub info: ObjectInfo,
}

fn unsupported(locator: &Locator) -> Error {
    Error::new(
        Status::Unsupported,
        format!(
            "{}: reading from the {} backend is not built yet",
            locator.display(),
            locator.backend().name()
        ),
    )
}

fn io_error(locator: &Locator, e: std::io::Error) -> Error {
    Error::new(Status::Io, format!("{}: {e}", locator.display()))
}

/// Opens a local file and returns it with its visible size.
fn open_local(locator: &Locator) -> Result<(File, u64)> {
    let file = File::open(locator.target()).map_err(|e| io_error(locator, e))?;
    let total = file.metadata().map_err(|e| io_error(locator, e))?.len();
    Ok((file, visible_size(locator, total)))
}

/// The visible size of an object of `total` bytes through the locator's window.
fn visible_size(locator: &Locator, total: u64) -> u64 {
    let w = locator.window();
    match w.length {
        Some(len) => len,
        None => total.saturating_sub(w.offset),
    }
}

pub(crate) fn size(locator: &Locator) -> Result<u64> {
    if let Some(len) = locator.window_length() {
        return Ok(len);
    }
    if locator.is_remote() {
        return Err(unsupported(locator));
    }
    open_local(locator).map(|(_, size)| size)
}

pub(crate) fn stat(locator: &Locator) -> Result<ObjectInfo> {
    if locator.is_remote() {
        return Err(unsupported(locator));
    }
    let (_, size) = open_local(locator)?;
    Ok(ObjectInfo { size, etag: None })
}

pub(crate) fn read_ends(locator: &Locator, head: u64, tail: u64) -> Result<Ends> {
    if locator.is_remote() {
        return Err(unsupported(locator));
    }
    let (file, size) = open_local(locator)?;
    let start = locator.window_offset();
    let head_len = head.min(size);
    let tail_len = tail.min(size);
    let head = read_exact_at(locator, &file, start, head_len)?;
    let tail = read_exact_at(locator, &file, start + (size - tail_len), tail_len)?;
    Ok(Ends {
        head,
        tail,
        info: ObjectInfo { size, etag: None },
    })
}

/// Reads exactly `len` bytes at absolute `offset`; a short file (inside a bounded window)
/// is `Range`.
fn read_exact_at(locator: &Locator, file: &File, offset: u64, len: u64) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; len as usize];
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], offset + n as u64) {
            Ok(0) => {
                return Err(Error::new(
                    Status::Range,
                    format!(
                        "{}: object ended at byte {} inside the window",
                        locator.display(),
                        offset + n as u64
                    ),
                ));
            }
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(locator, e)),
        }
    }
    Ok(buf)
}
