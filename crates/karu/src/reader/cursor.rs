//! `Cursor`: `std::io::Read + Seek` over a [`Reader`], for libraries that take a reader.

use std::io::{self, SeekFrom};

use super::Reader;

/// A position over a [`Reader`]; reads go through the reader's cache (and its readahead, so
/// a sequential `read_to_end` costs a few requests).
#[derive(Clone, Debug)]
pub struct Cursor {
    reader: Reader,
    pos: u64,
}

impl Cursor {
    pub(super) fn new(reader: Reader) -> Cursor {
        Cursor { reader, pos: 0 }
    }

    /// The current position.
    pub fn position(&self) -> u64 {
        self.pos
    }
}

impl io::Read for Cursor {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self
            .reader
            .read_into(self.pos, buf)
            .map_err(io::Error::other)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl io::Seek for Cursor {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let (base, delta) = match to {
            SeekFrom::Start(p) => {
                self.pos = p;
                return Ok(p);
            }
            SeekFrom::End(d) => (self.reader.len(), d),
            SeekFrom::Current(d) => (self.pos, d),
        };
        match base.checked_add_signed(delta) {
            Some(p) => {
                self.pos = p;
                Ok(p)
            }
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek before the start or past 2^64",
            )),
        }
    }
}
