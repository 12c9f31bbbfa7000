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

    /// Removes slot `i` (its read completes), moving `open` past completed slots.
    fn take(&mut self, i: usize) -> Option<PartRead> {
        let slot = self.slots.get_mut(i).and_then(Option::take);
        while self.slots.get(self.open).is_some_and(Option::is_none) {
            self.open += 1;
        }
        slot.map(|s| s.read)
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
