//! One stream into the temporary file: the rest of an object after the probe, read as a
//! single ranged GET from `start` to its end.
//!
//! Two uses. An object with no validator (no strong ETag, no `Last-Modified`) cannot be read
//! as chunks pinned to one version, so it is read in one stream from its first byte; an
//! interrupted stream starts over from that byte (the exchange resumes only under a strong
//! ETag). And a pinned object whose probe showed that one stream is as fast as the link
//! (see `split`) is read in one stream after the probe's bytes, pinned like a chunk. Every
//! answer must repeat the first one's size (and `Last-Modified`, should one appear): bytes
//! of two versions are never put together.

use std::fs::File;
use std::future::Future;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::backends::ByteRange;
use crate::batch::Shared;
use crate::engine::exchange::{self, Access, Env, Fetched, Handler, RangeRead, Step};
use crate::engine::remote::LoopState;
use crate::error::{Error, Result, Status};
use crate::locator::Locator;
use crate::transport::{self, Response};
use crate::validate::condition::{Condition, stated_total};

/// The job that streams visible bytes `[start, size)` of `locator` into `file` (at their
/// own offsets), pinned by `pin` when given, counting into `counters` and stopping when they
/// are cancelled. It writes nothing at or past `stop` (the size, until chunks take the rest
/// of the object) and ends, successfully, once it has written up to it. `total` is the object size the probe saw, when it knows it (an open
/// window).
pub(crate) fn job(
    locator: Locator,
    file: File,
    (start, size): (u64, u64),
    pin: Option<Condition>,
    total: Option<u64>,
    counters: Arc<Shared>,
    stop: Arc<AtomicU64>,
) -> impl FnOnce(Rc<LoopState>) -> Pin<Box<dyn Future<Output = Result<()>>>> + Send + 'static {
    move |st| {
        Box::pin(async move {
            let env = st.env(Some(&counters));
            let woff = locator.window_offset();
            let mut failed = None;
            // Visible offset up to which this stream has written, in order.
            let mut reached = 0;
            let fetched = {
                let sink = |at: u64, data: &[u8]| {
                    let at = at - woff;
                    let end = stop.load(Ordering::Acquire);
                    let n = end.saturating_sub(at).min(data.len() as u64);
                    if n > 0
                        && failed.is_none()
                        && let Err(e) = file.write_all_at(&data[..n as usize], at)
                    {
                        failed = Some(e);
                    }
                    reached = at + n;
                    if end < size && at + data.len() as u64 >= end {
                        // Chunks took the rest: this stream's part is written.
                        counters.cancel();
                    }
                };
                let mut watch = Watch {
                    inner: RangeRead::new(
                        &st.settings,
                        woff + start,
                        woff + size - 1,
                        pin.as_ref(),
                        sink,
                    ),
                    total,
                    last_modified: None,
                };
                exchange::run(&env, &locator, &Access::default(), &mut watch).await
            };
            if let Some(e) = failed {
                return Err(Error::new(
                    Status::Io,
                    format!("cannot write temporary output: {e}"),
                ));
            }
            let end = stop.load(Ordering::Acquire);
            match fetched {
                Err(_) if end < size && reached >= end => Ok(()),
                Err(e) => Err(e),
                Ok(Fetched { end: got, .. }) if got - woff < end => {
                    Err(changed(&locator.display()))
                }
                Ok(_) => Ok(()),
            }
        })
    }
}

fn changed(url: &str) -> Error {
    Error::new(
        Status::Precondition,
        format!(
            "{url}: the object changed during the download (its size or Last-Modified differ between answers)"
        ),
    )
}

/// A range read that checks every successful answer against the first: same object size,
/// same `Last-Modified`.
struct Watch<H> {
    inner: H,
    /// The object size every answer must state (the probe's, then the first answer's).
    total: Option<u64>,
    /// The first answer's `Last-Modified` (`Some(None)` when it had none).
    last_modified: Option<Option<String>>,
}

impl<H: Handler<Output = Fetched>> Handler for Watch<H> {
    type Output = Fetched;

    fn next_request(&self) -> (ByteRange, Option<Condition>) {
        self.inner.next_request()
    }

    fn version_change_pending(&self) -> bool {
        self.inner.version_change_pending()
    }

    async fn on_response(&mut self, env: &Env<'_>, url: &str, resp: Response) -> Step<Fetched> {
        if (200..300).contains(&resp.status) {
            let modified = resp
                .headers
                .get(http::header::LAST_MODIFIED)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let total = stated_total(resp.status, &resp.headers);
            let same_total = match (self.total, total) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            };
            let same_time = self
                .last_modified
                .as_ref()
                .is_none_or(|first| *first == modified);
            if !same_total || !same_time {
                transport::drain_or_abort(resp.body, transport::DRAIN_LIMIT).await;
                return Step::Fail(changed(url));
            }
            self.total = self.total.or(total);
            self.last_modified.get_or_insert(modified);
        }
        self.inner.on_response(env, url, resp).await
    }
}
