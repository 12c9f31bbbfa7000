//! A download's chunks: the queue of those still to read, those in flight (each a batch of
//! adjacent pinned sub-reads, served as one request), and the throttling window that bounds
//! them.

use std::collections::{BTreeSet, VecDeque};
use std::future::poll_fn;
use std::task::Poll;
use std::time::Instant;

use super::Layout;
use super::window::Window;
use crate::batch::Batch;
use crate::client::Client;
use crate::error::Result;
use crate::locator::Locator;
use crate::read::Read;
use crate::validate::condition::Condition;

/// The bytes of one sub-read of a chunk: 128 KiB. A chunk's transfer completes each
/// sub-read as soon as its last byte arrives and allocates its buffer only when its first
/// byte does, and the download writes it into the file at once and frees it, so a chunk in
/// flight holds about two sub-reads (one being filled, one being written) instead of the
/// whole chunk. Measured with 8 chunks of 8 MiB in flight (`tests/download_memory.rs`):
/// peak RSS growth 3-4 MiB at 128 KiB, 5-7 MiB at 256 KiB, 15 MiB at 1 MiB, against 62-64
/// MiB with one read per chunk. Issue 17 bounds the whole process by 1.2 times
/// object_store's peak (11 MiB), so the sub-reads' share must stay a few MiB; smaller sizes
/// gain less than 1 MiB more and pay one completion and one positional write per sub-read
/// (at 10 Gbit/s, 128 KiB is already about 10,000 a second). A loopback release download of
/// 512 MiB ran at 1.04-1.11 GB/s, against 0.29-0.72 GB/s with 8 MiB chunk buffers.
const SUB_READ: u64 = 128 << 10;

/// The length of the sub-read at `skip` (its first byte's place) in a chunk of `length`.
pub(super) fn sub_read_length(length: u64, skip: u64) -> u64 {
    length.saturating_sub(skip).min(SUB_READ)
}

/// The sub-reads of a chunk of `length` bytes: `(skip, length)` of each, `skip` being its
/// first byte's place in the chunk (also its read's tag).
fn sub_reads(length: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..length.div_ceil(SUB_READ)).map(move |k| {
        let skip = k * SUB_READ;
        (skip, sub_read_length(length, skip))
    })
}

/// A chunk in flight: its batch of sub-reads, one transfer.
pub(super) struct InFlight {
    pub(super) index: u64,
    pub(super) seq: u64,
    pub(super) batch: Batch,
    /// Sent before the stream's answer proved a version, without a pin: its answer must
    /// carry that version's strong ETag.
    pub(super) unproven: bool,
    /// Sub-reads whose completion has not arrived yet; the chunk is done at 0.
    pub(super) left: u64,
    /// Its answer could not prove the version: nothing more of it is written, and once its
    /// last sub-read completed (the transfer is over) the chunk is read again, pinned.
    pub(super) redo: bool,
}

/// The chunks of a download: those waiting, those in flight, and the throttling window.
pub(super) struct Chunks {
    pub(super) queue: VecDeque<u64>,
    pub(super) in_flight: Vec<InFlight>,
    pub(super) window: Window,
    /// No submission before this: a `Retry-After`, or a pause while nothing is served.
    pub(super) hold: Option<Instant>,
    /// Whether any chunk was sent.
    pub(super) used: bool,
    /// Chunks an earlier call wrote (resume): never read again.
    pub(super) skip: BTreeSet<u64>,
    /// Whether a stream runs beside the chunks: it takes one slot of the window.
    pub(super) beside: bool,
}

impl Chunks {
    pub(super) fn new(parallelism: u64) -> Chunks {
        Chunks {
            queue: VecDeque::new(),
            in_flight: Vec::new(),
            window: Window::new(parallelism),
            hold: None,
            used: false,
            skip: BTreeSet::new(),
            beside: false,
        }
    }

    /// Queues every chunk from the first one starting at or after visible offset `at`.
    pub(super) fn take_from(&mut self, at: u64, layout: &Layout) {
        if let Some(first) = layout.first_chunk_from(at) {
            self.queue = (first..layout.count())
                .filter(|i| !self.skip.contains(i))
                .collect();
        }
    }

    /// Sends queued chunks while the window has room (less the stream's slot).
    pub(super) fn submit(
        &mut self,
        client: &Client,
        locator: &Locator,
        layout: &Layout,
        pin: Option<&Condition>,
    ) -> Result<()> {
        let now = Instant::now();
        if self.hold.is_some_and(|h| h <= now) {
            self.hold = None;
        }
        let room = self
            .window
            .window()
            .saturating_sub(u64::from(self.beside))
            .max(1);
        while self.hold.is_none()
            && (self.in_flight.len() as u64) < room
            && let Some(index) = self.queue.pop_front()
        {
            let (offset, length) = layout.span(index);
            // No buffer is given: each is allocated when the sub-read's first byte arrives.
            let reads: Vec<Read> = sub_reads(length)
                .map(|(skip, len)| {
                    let read = Read::new(locator, offset + skip, len).tag(skip);
                    match pin {
                        Some(pin) => read.pinned(pin.clone()),
                        None => read,
                    }
                })
                .collect();
            let left = reads.len() as u64;
            let batch = client.submit_chunk(reads)?;
            self.used = true;
            self.in_flight.push(InFlight {
                index,
                seq: self.window.submit(),
                batch,
                unproven: pin.is_none(),
                left,
                redo: false,
            });
        }
        Ok(())
    }

    /// Requests in flight: the chunks, and the stream beside them.
    pub(super) fn requests(&self) -> u64 {
        self.in_flight.len() as u64 + u64::from(self.beside)
    }

    /// Bytes received so far by the chunks in flight (each at most its length).
    pub(super) fn live(&self, layout: &Layout) -> u64 {
        self.in_flight
            .iter()
            .map(|f| f.batch.stats().received_bytes.min(layout.span(f.index).1))
            .sum()
    }
}

/// Cancels the chunks still in flight and waits until no worker holds them, so a download
/// that stops (failure, deadline, cancellation) returns only once its requests are over.
pub(super) async fn settle(in_flight: &[InFlight]) {
    for f in in_flight {
        f.batch.shared.cancel();
    }
    poll_fn(|cx| {
        for f in in_flight {
            if f.batch.shared.poll_idle(cx).is_pending() {
                return Poll::Pending;
            }
        }
        Poll::Ready(())
    })
    .await
}
