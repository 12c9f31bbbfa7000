//! Reads split into pieces (the cost planner cuts a read that would dominate the batch): each
//! piece is a part of its own transfer, possibly on another loop. The read owns one
//! destination the pieces write into, and completes once, when its last piece ends: with
//! success only if every piece delivered all its bytes, otherwise with the error of its
//! earliest failed piece (a `Range` error when the object ended inside the read, with the
//! valid prefix as `got`). Pieces answered by different versions of the object (their strong
//! ETag or, without one, their `Last-Modified` differ) fail the read: its bytes would splice
//! two versions.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::batch::Completion;
use crate::dest::Dest;
use crate::error::{Error, Result, Status};
use crate::locator::Locator;

/// One piece of a split read inside a transfer.
#[derive(Debug)]
pub(crate) struct PieceRead {
    /// Absolute offset of the piece's first byte.
    pub(crate) offset: u64,
    pub(crate) length: u64,
    /// Bytes of the read before this piece.
    pub(crate) skip: u64,
    pub(crate) read: Arc<SplitRead>,
}

impl PieceRead {
    /// Copies object bytes `[at, at + data.len())` that fall in this piece.
    pub(crate) fn write(&self, at: u64, data: &[u8]) {
        if let Some((into, bytes)) = super::overlap(self.offset, self.length, at, data) {
            self.read.write(self.skip + into, bytes);
        }
    }

    /// Cuts the piece at object offset `at`: the bytes from `at` on become a piece of their
    /// own (counted by the read before this one ends), returned; `None` when `at` is not
    /// inside the piece.
    pub(crate) fn cut(&mut self, at: u64) -> Option<PieceRead> {
        let end = self.offset + self.length;
        if at <= self.offset || at >= end {
            return None;
        }
        let kept = at - self.offset;
        self.length = kept;
        Some(self.read.add_piece(at, end - at, self.skip + kept))
    }

    /// Ends the piece: its transfer delivered bytes up to `end` from the object version
    /// `version` (or failed). Returns the read's completion when this was its last piece.
    pub(crate) fn finish(
        self,
        locator: &Locator,
        result: &Result<(u64, Version)>,
    ) -> Option<Completion> {
        let got = match result {
            Ok((end, version)) => {
                self.read.saw(version);
                Ok(end.saturating_sub(self.offset).min(self.length))
            }
            Err(e) => Err(e.clone()),
        };
        self.read.finish(locator, self.skip, self.length, got)
    }
}

/// The version of the object an answer came from: its strong ETag and its `Last-Modified`.
pub(crate) type Version = (Option<String>, Option<String>);

/// A read served by several pieces.
#[derive(Debug)]
pub(crate) struct SplitRead {
    tag: u64,
    /// Absolute offset and length of the whole read.
    offset: u64,
    length: u64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    dest: Dest,
    /// The outcome of preparing the destination, once a piece has tried.
    prepared: Option<Result<()>>,
    /// Pieces not yet ended.
    left: usize,
    /// (skip, length, bytes delivered or the error) of each ended piece.
    ended: Vec<(u64, u64, Result<u64>)>,
    /// The version the first answered piece saw.
    version: Option<Version>,
    /// Some piece saw another version.
    mixed: bool,
}

impl SplitRead {
    pub(crate) fn new(tag: u64, offset: u64, length: u64, dest: Dest) -> Arc<SplitRead> {
        Arc::new(SplitRead {
            tag,
            offset,
            length,
            state: Mutex::new(State {
                dest,
                prepared: None,
                left: 0,
                ended: Vec::new(),
                version: None,
                mixed: false,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Plain writes and pushes: a panic cannot leave the state inconsistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one more piece (all are counted before any is dispatched).
    pub(crate) fn add_piece(self: &Arc<Self>, offset: u64, length: u64, skip: u64) -> PieceRead {
        self.lock().left += 1;
        PieceRead {
            offset,
            length,
            skip,
            read: Arc::clone(self),
        }
    }

    /// Makes the destination hold the whole read, once (the first piece to run allocates).
    pub(crate) fn prepare(&self) -> Result<()> {
        let mut st = self.lock();
        if st.prepared.is_none() {
            let r = st.dest.prepare_zeroed(self.length);
            st.prepared = Some(r);
        }
        st.prepared.clone().unwrap_or(Ok(()))
    }

    /// A piece was answered by `version`.
    fn saw(&self, version: &Version) {
        let mut st = self.lock();
        match &st.version {
            None => st.version = Some(version.clone()),
            Some(v) if v != version => st.mixed = true,
            Some(_) => {}
        }
    }

    fn write(&self, at: u64, data: &[u8]) {
        self.lock().dest.write(at as usize, data);
    }

    fn finish(
        &self,
        locator: &Locator,
        skip: u64,
        length: u64,
        got: Result<u64>,
    ) -> Option<Completion> {
        let mut st = self.lock();
        st.ended.push((skip, length, got));
        st.left = st.left.saturating_sub(1);
        if st.left > 0 {
            return None;
        }
        let mut ended = std::mem::take(&mut st.ended);
        ended.sort_unstable_by_key(|e| e.0);
        // The valid prefix: whole pieces from the start, then what the first short one got.
        let mut prefix = 0u64;
        let mut short = false;
        let mut error = None;
        for (skip, length, got) in ended {
            match got {
                Ok(n) if skip == prefix && !short => {
                    prefix += n;
                    short = n < length;
                }
                Ok(n) if n < length => short = true,
                Ok(_) => {}
                Err(e) => {
                    error.get_or_insert(e);
                }
            }
        }
        let whole = prefix == self.length;
        let result = match error {
            _ if st.mixed => Err(Error::new(
                Status::Http,
                format!(
                    "{}: the object changed between the pieces of a split read",
                    locator.display()
                ),
            )),
            // A piece past the end fails with Range: the read then ended at the prefix.
            Some(e) if e.status() != Status::Range => Err(e),
            None if whole => Ok(()),
            _ => Err(Error::new(
                Status::Range,
                format!(
                    "{}: range [{}, +{}) passes the end of the object at byte {}",
                    locator.display(),
                    self.offset,
                    self.length,
                    self.offset + prefix
                ),
            )),
        };
        let got = match &result {
            Ok(()) => self.length,
            Err(e) if e.status() == Status::Range => prefix,
            Err(_) => 0,
        };
        let dest = std::mem::replace(&mut st.dest, Dest::Alloc);
        Some(Completion {
            tag: self.tag,
            result,
            got,
            buffer: dest.into_vec(),
            etag: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locator() -> Locator {
        Locator::parse("https://example.com/o").unwrap()
    }

    fn v0() -> Version {
        (Some("\"v0\"".into()), None)
    }

    /// A read of 30 bytes at 100 in three pieces of 10.
    fn three() -> (Arc<SplitRead>, Vec<PieceRead>) {
        let read = SplitRead::new(7, 100, 30, Dest::Alloc);
        let pieces = (0..3)
            .map(|i| read.add_piece(100 + i * 10, 10, i * 10))
            .collect();
        read.prepare().unwrap();
        (read, pieces)
    }

    #[test]
    fn a_piece_cut_in_two_completes_its_read_once_with_every_byte() {
        let (_, mut pieces) = three();
        let data: Vec<u8> = (0..30).collect();
        // The middle piece [110, 120) is cut at 114; a cut outside it takes nothing.
        assert!(pieces[1].cut(110).is_none() && pieces[1].cut(120).is_none());
        let tail = pieces[1].cut(114).expect("inside the piece");
        assert_eq!(
            (pieces[1].length, tail.offset, tail.length, tail.skip),
            (4, 114, 6, 14)
        );
        pieces.push(tail);
        let mut done = Vec::new();
        for p in pieces {
            p.write(p.offset, &data[p.skip as usize..][..p.length as usize]);
            let end = p.offset + p.length;
            done.extend(p.finish(&locator(), &Ok((end, v0()))));
        }
        let [done] = done.as_slice() else {
            panic!("{} completions", done.len());
        };
        assert!(done.result.is_ok());
        assert_eq!(done.bytes(), &data[..]);
    }

    #[test]
    fn a_split_read_completes_once_with_every_byte() {
        let (_, mut pieces) = three();
        let data: Vec<u8> = (0..30).collect();
        // Pieces end out of order; only the last one completes the read.
        let last = pieces.remove(0);
        for p in pieces.drain(..).rev() {
            p.write(p.offset, &data[p.skip as usize..][..10]);
            let end = p.offset + 10;
            assert!(p.finish(&locator(), &Ok((end, v0()))).is_none());
        }
        last.write(95, &[0; 5]); // bytes before the piece are not its own
        last.write(100, &data[..10]);
        let done = last.finish(&locator(), &Ok((110, v0()))).unwrap();
        assert_eq!((done.tag, done.got), (7, 30));
        assert!(done.result.is_ok());
        assert_eq!(done.bytes(), &data[..]);
    }

    #[test]
    fn a_failed_piece_fails_the_read_only_once() {
        let (_, mut pieces) = three();
        let broken = Error::new(Status::Network, "reset");
        let c = pieces.remove(2);
        let b = pieces.remove(1);
        let a = pieces.remove(0);
        assert!(a.finish(&locator(), &Ok((110, v0()))).is_none());
        assert!(b.finish(&locator(), &Err(broken)).is_none());
        let done = c.finish(&locator(), &Ok((130, v0()))).unwrap();
        assert_eq!(done.status(), Status::Network);
        assert_eq!(done.got, 0); // never reported as success, nor partly
    }

    #[test]
    fn an_object_ending_inside_the_read_keeps_the_prefix() {
        let (_, mut pieces) = three();
        let past = Error::new(Status::Range, "416");
        let c = pieces.remove(2);
        let b = pieces.remove(1);
        let a = pieces.remove(0);
        assert!(c.finish(&locator(), &Err(past)).is_none());
        assert!(a.finish(&locator(), &Ok((110, v0()))).is_none());
        let done = b.finish(&locator(), &Ok((114, v0()))).unwrap(); // the object ends at 114
        assert_eq!(done.status(), Status::Range);
        assert_eq!(done.got, 14);
        let message = done.result.unwrap_err();
        assert!(
            message
                .message()
                .ends_with("range [100, +30) passes the end of the object at byte 114"),
            "{message}"
        );
    }

    #[test]
    fn pieces_of_two_versions_fail_the_read() {
        let (_, mut pieces) = three();
        let c = pieces.remove(2);
        let b = pieces.remove(1);
        let a = pieces.remove(0);
        let v1 = (Some("\"v1\"".to_owned()), None);
        assert!(a.finish(&locator(), &Ok((110, v0()))).is_none());
        assert!(b.finish(&locator(), &Ok((120, v1))).is_none());
        let done = c.finish(&locator(), &Ok((130, v0()))).unwrap();
        assert_eq!((done.status(), done.got), (Status::Http, 0));
        assert!(format!("{:?}", done.result).contains("changed between the pieces"));
    }
}
