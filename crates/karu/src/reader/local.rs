//! Local files: positional reads straight from the file, with no cache (the kernel's page
//! cache already is one).
//!
//! Not memory-mapped: every read returns owned bytes, so a map would save no copy over
//! `pread` from the page cache, and a mapped file that another process truncates kills the
//! reader with `SIGBUS` on the next access, which no error path can catch.
//!
//! Version pinning: the open file stays the version seen at open when the path is replaced
//! (a rename keeps the old inode alive); a file changed in place is caught by comparing its
//! size and modification time after each read with those seen at open (`Precondition`).
//! `refresh` opens the path again.

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use crate::dest::{Dest, RawBuf};
use crate::error::{Error, Result, Status};
use crate::locator::Locator;
use crate::probe::visible_size;

/// One opening of the file.
struct Opened {
    file: File,
    /// Visible size.
    len: u64,
    /// Size and modification time at open.
    version: (u64, Option<SystemTime>),
}

/// A local file read directly.
pub(super) struct LocalFile {
    locator: Locator,
    display: String,
    opened: RwLock<Arc<Opened>>,
    reads: AtomicU64,
    bytes: AtomicU64,
}

fn io_error(display: &str, e: std::io::Error) -> Error {
    Error::new(Status::Io, format!("{display}: {e}")).caused_by(e)
}

fn open(locator: &Locator, display: &str) -> Result<Opened> {
    let file = File::open(locator.target()).map_err(|e| io_error(display, e))?;
    let version = version(&file, display)?;
    Ok(Opened {
        len: visible_size(locator, version.0),
        file,
        version,
    })
}

fn version(file: &File, display: &str) -> Result<(u64, Option<SystemTime>)> {
    let meta = file.metadata().map_err(|e| io_error(display, e))?;
    Ok((meta.len(), meta.modified().ok()))
}

impl LocalFile {
    pub(super) fn open(locator: &Locator) -> Result<LocalFile> {
        let display = locator.display();
        let opened = open(locator, &display)?;
        Ok(LocalFile {
            locator: locator.clone(),
            display,
            opened: RwLock::new(Arc::new(opened)),
            reads: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        })
    }

    fn current(&self) -> Arc<Opened> {
        Arc::clone(&self.opened.read().unwrap_or_else(|e| e.into_inner()))
    }

    pub(super) fn len(&self) -> u64 {
        self.current().len
    }

    /// Opens the path again: later reads see the file as it is now.
    pub(super) fn refresh(&self) -> Result<()> {
        let opened = Arc::new(open(&self.locator, &self.display)?);
        *self.opened.write().unwrap_or_else(|e| e.into_inner()) = opened;
        Ok(())
    }

    /// Positional reads and bytes read so far.
    pub(super) fn counts(&self) -> (u64, u64) {
        (
            self.reads.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }

    /// Reads `len` bytes at visible `offset`, shorter where the file ends; a file changed
    /// since open is `Precondition`.
    pub(super) fn read_at(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        let o = self.current();
        let n = len.min(o.len.saturating_sub(offset));
        let mut dest = Dest::Alloc;
        dest.prepare_zeroed(n)
            .map_err(|e| e.context(&self.display))?;
        let mut buf = dest.into_vec().unwrap_or_default();
        self.fill(&o, offset, &mut buf)?;
        Ok(buf)
    }

    /// Fills the start of `buf` from visible `offset`; returns the bytes read, fewer only
    /// where the file ends.
    pub(super) fn read_into(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let o = self.current();
        let n = (buf.len() as u64).min(o.len.saturating_sub(offset)) as usize;
        self.fill(&o, offset, &mut buf[..n])?;
        Ok(n)
    }

    fn fill(&self, o: &Opened, offset: u64, buf: &mut [u8]) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let at = self.locator.window_offset().saturating_add(offset);
        // SAFETY: `buf` is borrowed mutably for this whole call and initialised; the raw
        // destination is used only inside it.
        let mut dest = Dest::Raw(unsafe { RawBuf::new(buf.as_mut_ptr(), buf.len()) });
        let got = dest
            .read_file(&o.file, at)
            .map_err(|(_, e)| e.context(&self.display))?;
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(got as u64, Ordering::Relaxed);
        if got < buf.len() || version(&o.file, &self.display)? != o.version {
            return Err(Error::new(
                Status::Precondition,
                format!("{}: the file changed since it was opened", self.display),
            ));
        }
        Ok(())
    }
}
