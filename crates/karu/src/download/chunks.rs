//! A download's chunks: the queue of those still to read, those in flight (each a batch of
//! one pinned read), and the throttling window that bounds them.

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

/// A chunk in flight: its batch of one read.
pub(super) struct InFlight {
    pub(super) index: u64,
    pub(super) seq: u64,
    pub(super) batch: Batch,
    /// Sent before the stream's answer proved a version, without a pin: its answer must
    /// carry that version's strong ETag.
    pub(super) unproven: bool,
}

/// The chunks of a download: those waiting, those in flight, and the throttling window.
pub(super) struct Chunks {
    pub(super) queue: VecDeque<u64>,
    pub(super) in_flight: Vec<InFlight>,
    pub(super) window: Window,
    pub(super) buffers: Vec<Vec<u8>>,
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
            buffers: Vec::new(),
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
            let mut read = Read::new(locator, offset, length)
                .into_buffer(self.buffers.pop().unwrap_or_default());
            if let Some(pin) = pin {
                read = read.pinned(pin.clone());
            }
            let batch = client.submit_chunk(read)?;
            self.used = true;
            self.in_flight.push(InFlight {
                index,
                seq: self.window.submit(),
                batch,
                unproven: pin.is_none(),
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
