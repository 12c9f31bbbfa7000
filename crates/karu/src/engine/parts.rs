//! The whole reads one remote transfer serves. A read's buffer is allocated when its first
//! byte arrives and the read completes as soon as its last byte is written, so a transfer
//! serving hundreds of reads holds only the buffer being filled, and the caller holds only
//! the completions it has not dropped yet.
//!
//! A completed read is never written again: when a body restarts from an earlier offset,
//! bytes for reads already handed out are skipped (the caller may own, reuse or free that
//! memory by then). Each completion names the version (strong ETag) of the answer that
//! wrote its last byte; a resumed body is pinned to the same version, so a read's bytes all
//! come from one version.

use super::PartRead;
use crate::batch::Completion;
use crate::error::{Error, Result, Status};
use crate::locator::Locator;

/// A read of the transfer and whether its destination holds its length yet.
struct Slot {
    read: PartRead,
    prepared: bool,
}

/// A transfer's whole reads, in offset order.
pub(crate) struct Parts {
    /// `None` once the read has completed.
    slots: Vec<Option<Slot>>,
    /// Every slot before this one has completed (bytes arrive in offset order, so the scan
    /// for the next write starts here).
    open: usize,
}

impl Parts {
    /// The reads of a transfer, in offset order; no buffer is allocated yet.
    pub(crate) fn new(reads: Vec<PartRead>) -> Parts {
        Parts {
            slots: reads
                .into_iter()
                .map(|read| {
                    Some(Slot {
                        read,
                        prepared: false,
                    })
                })
                .collect(),
            open: 0,
        }
    }

    /// Copies object bytes `[at, at + data.len())`, answered by `version`, into every read
    /// they overlap; reads whose last byte this writes, and reads whose buffer cannot be
    /// allocated, complete into `done`.
    pub(crate) fn write(
        &mut self,
        locator: &Locator,
        at: u64,
        data: &[u8],
        version: Option<&str>,
        done: &mut Vec<Completion>,
    ) {
        let end = at + data.len() as u64;
        for i in self.open..self.slots.len() {
            let Some(slot) = &mut self.slots[i] else {
                continue;
            };
            let p = &mut slot.read;
            if p.offset >= end {
                break;
            }
            let Some((into, bytes)) = super::overlap(p.offset, p.length, at, data) else {
                continue;
            };
            if !slot.prepared {
                if let Err(e) = p.dest.prepare(p.length) {
                    let e = e.context(locator.display());
                    done.extend(self.take(i).map(|p| p.complete(Err(e), 0)));
                    continue;
                }
                slot.prepared = true;
            }
            p.dest.write(into as usize, bytes);
            if into + bytes.len() as u64 == p.length {
                let length = p.length;
                done.extend(self.take(i).map(|p| Completion {
                    etag: version.map(str::to_owned),
                    ..p.complete(Ok(()), length)
                }));
            }
        }
    }

    /// Whether a read of the transfer has yet to complete.
    pub(crate) fn any_open(&self) -> bool {
        self.open < self.slots.len()
    }

    /// The first offset at or after `target` (and before `end`) where the reads still open
    /// can be cut in two: a read starts there and none before it reaches past it.
    pub(crate) fn boundary(&self, target: u64, end: u64) -> Option<u64> {
        let mut reach = 0;
        for slot in self.slots[self.open..].iter().flatten() {
            let p = &slot.read;
            if p.offset >= end {
                break;
            }
            if p.offset >= target && reach <= p.offset {
                return Some(p.offset);
            }
            reach = reach.max(p.offset + p.length);
        }
        None
    }

    /// Takes out the reads from `at` on (none of which has had a byte yet: bytes arrive in
    /// offset order, and the transfer's have not reached `at`), for a transfer of their own.
    pub(crate) fn split_off(&mut self, at: u64) -> Vec<PartRead> {
        let first = self.slots[self.open..]
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.read.offset >= at))
            .map_or(self.slots.len(), |i| self.open + i);
        let tail = self.slots.split_off(first);
        self.open = self.open.min(self.slots.len());
        self.pass_completed();
        tail.into_iter().flatten().map(|s| s.read).collect()
    }

    /// Removes slot `i` (its read completes), moving `open` past completed slots.
    fn take(&mut self, i: usize) -> Option<PartRead> {
        let slot = self.slots.get_mut(i).and_then(Option::take);
        self.pass_completed();
        slot.map(|s| s.read)
    }

    /// Moves `open` past completed slots.
    fn pass_completed(&mut self) {
        while self.slots.get(self.open).is_some_and(Option::is_none) {
            self.open += 1;
        }
    }

    /// Completions for the reads still open once the transfer has delivered bytes up to
    /// `end` (or failed as a whole).
    pub(crate) fn finish(self, locator: &Locator, result: Result<u64>) -> Vec<Completion> {
        let open = self.slots.into_iter().flatten().map(|s| s.read);
        match result {
            Err(e) => open.map(|p| p.complete(Err(e.clone()), 0)).collect(),
            Ok(end) => open
                .map(|p| {
                    let got = end.saturating_sub(p.offset).min(p.length);
                    let msg = format!(
                        "{}: range [{}, +{}) passes the end of the object at byte {end}",
                        locator.display(),
                        p.offset,
                        p.length
                    );
                    p.complete(Err(Error::new(Status::Range, msg)), got)
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dest::Dest;

    /// Reads of `(offset, length)`, tagged by position.
    fn parts(reads: &[(u64, u64)]) -> Parts {
        Parts::new(
            reads
                .iter()
                .enumerate()
                .map(|(i, &(offset, length))| PartRead {
                    offset,
                    length,
                    tag: i as u64,
                    dest: Dest::Alloc,
                })
                .collect(),
        )
    }

    fn locator() -> Locator {
        Locator::parse("https://example.com/o").unwrap()
    }

    #[test]
    fn a_cut_falls_between_reads_that_no_earlier_read_overlaps() {
        // [0, 10) [10, 30) [20, 25) nested, [30, 40) [35, 50) overlapping, [50, 60).
        let p = parts(&[(0, 10), (10, 20), (20, 5), (30, 10), (35, 15), (50, 10)]);
        assert_eq!(p.boundary(0, 60), Some(0));
        assert_eq!(p.boundary(5, 60), Some(10));
        // 20 lies inside [10, 30): the next start no read passes is 30.
        assert_eq!(p.boundary(11, 60), Some(30));
        // 35 lies inside [30, 40): then 50.
        assert_eq!(p.boundary(31, 60), Some(50));
        assert_eq!(p.boundary(51, 60), None);
        assert_eq!(p.boundary(31, 50), None, "not at or past the end");
    }

    #[test]
    fn the_reads_split_off_are_those_from_the_cut_on() {
        let mut p = parts(&[(0, 10), (10, 10), (20, 10), (30, 10)]);
        let mut done = Vec::new();
        // The first read completes; the cut at 20 takes the last two.
        p.write(&locator(), 0, &[1; 12], None, &mut done);
        assert_eq!(done.len(), 1);
        let tail = p.split_off(20);
        let tags: Vec<u64> = tail.iter().map(|r| r.tag).collect();
        assert_eq!(tags, [2, 3]);
        // The second read completes with the rest of its bytes; none is left open.
        p.write(&locator(), 12, &[1; 8], None, &mut done);
        assert_eq!(done.len(), 2);
        assert!(!p.any_open());
        assert!(p.finish(&locator(), Ok(20)).is_empty());
    }
}
