//! A steady tick for a download on any executor: a small thread wakes the download every
//! period, so progress is reported (and cancellation, deadlines and throttling pauses are
//! checked) even while no chunk completes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::Thread;
use std::time::Duration;

use crate::error::{Error, Result, Status};

#[derive(Default)]
struct Shared {
    waker: Mutex<Option<Waker>>,
    fired: AtomicBool,
    stop: AtomicBool,
}

/// The tick source; dropping it stops its thread.
pub(crate) struct Ticker {
    shared: Arc<Shared>,
    thread: Thread,
}

impl Ticker {
    /// Starts ticking every `period` (`NoMem` when no thread can be started).
    pub(crate) fn start(period: Duration) -> Result<Ticker> {
        let shared = Arc::new(Shared::default());
        let theirs = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("karu-download-tick".into())
            .spawn(move || {
                while !theirs.stop.load(Ordering::Acquire) {
                    std::thread::park_timeout(period);
                    theirs.fired.store(true, Ordering::Release);
                    let waker = theirs
                        .waker
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take();
                    if let Some(w) = waker {
                        w.wake();
                    }
                }
            })
            .map_err(|e| {
                Error::new(
                    Status::NoMem,
                    format!("cannot start the download's progress tick: {e}"),
                )
            })?;
        Ok(Ticker {
            thread: handle.thread().clone(),
            shared,
        })
    }

    /// Ready once a tick fired since the last ready poll.
    pub(crate) fn poll_tick(&self, cx: &mut Context<'_>) -> Poll<()> {
        *self.shared.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
        if self.shared.fired.swap(false, Ordering::AcqRel) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.thread.unpark();
    }
}
