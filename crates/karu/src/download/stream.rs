//! One stream into the temporary file: a single ranged GET whose answer is also the
//! download's probe.
//!
//! The stream asks for the bytes from `start` (the first byte, or the resume point) to the
//! end of the object (`bytes=start-`), or to a known end. The first answer's headers are
//! handed to the download at once ([`Line::poll_head`]): they tell the size and the version
//! (strong ETag, `Last-Modified`) that pin every chunk, while the body keeps streaming into
//! the file. Chunks may then take the tail: the download lowers [`Line`]'s stop, and the
//! stream ends once it has written up to it.
//!
//! Every later answer (a retry) must repeat the first one's size, strong ETag and
//! `Last-Modified`, and is sent pinned to that version: bytes of two versions are never put
//! together. An object with no validator at all is read by one stream from its first byte,
//! and an interrupted stream then starts over from that byte (the exchange resumes only
//! under a strong ETag).

use std::fs::File;
use std::future::Future;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::backends::ByteRange;
use crate::batch::Shared;
use crate::engine::exchange::{self, Access, Env, Fetched, Handler, OPEN, RangeRead, Step};
use crate::engine::remote::LoopState;
use crate::error::{Error, Result, Status};
use crate::locator::Locator;
use crate::transport::{self, Response};
use crate::validate::condition::{Condition, stated_total};
use crate::validate::etag;

/// What the stream's first successful answer told about the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    /// The object's size (not the window's), when the answer stated it.
    pub(crate) total: Option<u64>,
    /// The strong ETag.
    pub(crate) etag: Option<String>,
    /// `Last-Modified`, as sent.
    pub(crate) last_modified: Option<String>,
}

impl Head {
    /// The condition that pins other requests to this version: its strong ETag, else its
    /// `Last-Modified` and size; `None` when the answer had neither.
    pub(crate) fn pin(&self) -> Option<Condition> {
        match (&self.etag, &self.last_modified) {
            (Some(tag), _) => Some(Condition::IfMatch(tag.clone())),
            (None, Some(date)) => Some(Condition::IfUnmodifiedSince {
                date: date.clone(),
                total: self.total,
            }),
            (None, None) => None,
        }
    }
}

/// What a stream and its download share.
#[derive(Debug)]
pub(crate) struct Line {
    head: Mutex<(Option<Head>, Option<Waker>)>,
    /// Visible offset up to which the stream has written every byte.
    reached: AtomicU64,
    /// The stream writes nothing at or past this visible offset, and ends once it has
    /// written up to it.
    stop: AtomicU64,
}

impl Line {
    /// A line for a stream starting at visible offset `start`.
    pub(crate) fn new(start: u64) -> Arc<Line> {
        Arc::new(Line {
            head: Mutex::new((None, None)),
            reached: AtomicU64::new(start),
            stop: AtomicU64::new(u64::MAX),
        })
    }

    /// Ready with the first answer's headers once they arrived.
    pub(crate) fn poll_head(&self, cx: &mut Context<'_>) -> Poll<Head> {
        let mut slot = self.head.lock().unwrap_or_else(|e| e.into_inner());
        match &slot.0 {
            Some(head) => Poll::Ready(head.clone()),
            None => {
                slot.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    fn publish(&self, head: Head) {
        let waker = {
            let mut slot = self.head.lock().unwrap_or_else(|e| e.into_inner());
            slot.0 = Some(head);
            slot.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Visible offset up to which every byte is written.
    pub(crate) fn reached(&self) -> u64 {
        self.reached.load(Ordering::Acquire)
    }

    /// Where the stream stops (chunks take the bytes from there).
    pub(crate) fn stop_at(&self, at: u64) {
        self.stop.store(at, Ordering::Release);
    }

    /// Where the stream stops.
    pub(crate) fn stop(&self) -> u64 {
        self.stop.load(Ordering::Acquire)
    }
}

/// The job that streams visible bytes from `start` to `end` (the object's end when `None`)
/// of `locator` into `file` (at their own offsets), pinned by `pin` when given, counting
/// into `counters` and stopping when they are cancelled. `total` is the object size every
/// answer must state, when known beforehand. It ends successfully once it has written up to
/// the line's stop, and returns the visible offset up to which it wrote.
pub(crate) fn job(
    locator: Locator,
    file: File,
    (start, end): (u64, Option<u64>),
    pin: Option<Condition>,
    total: Option<u64>,
    counters: Arc<Shared>,
    line: Arc<Line>,
) -> impl FnOnce(Rc<LoopState>) -> Pin<Box<dyn Future<Output = Result<u64>>>> + Send + 'static {
    move |st| {
        Box::pin(async move {
            let env = st.env(Some(&counters));
            let woff = locator.window_offset();
            let asked = end.unwrap_or(u64::MAX);
            let mut failed = None;
            let fetched = {
                let sink = |at: u64, data: &[u8], _version: Option<&str>| {
                    let at = at - woff;
                    let stop = line.stop();
                    let n = stop.saturating_sub(at).min(data.len() as u64);
                    if n > 0
                        && failed.is_none()
                        && let Err(e) = file.write_all_at(&data[..n as usize], at)
                    {
                        failed = Some(e);
                    }
                    if failed.is_none() && at <= line.reached() {
                        line.reached.fetch_max(at + n, Ordering::AcqRel);
                    }
                    if stop < asked && at + data.len() as u64 >= stop {
                        // Chunks took the rest: this stream's part is written.
                        counters.cancel();
                    }
                };
                let last = match end {
                    Some(e) => woff + e - 1,
                    None => OPEN,
                };
                let mut watch = Watch {
                    inner: RangeRead::new(&st.settings, woff + start, last, pin.as_ref(), sink),
                    total,
                    first: None,
                    line: &line,
                };
                exchange::run(&env, &locator, &Access::default(), &mut watch).await
            };
            if let Some(e) = failed {
                return Err(Error::new(
                    Status::Io,
                    format!("cannot write temporary output: {e}"),
                ));
            }
            let stop = line.stop();
            match fetched {
                Err(_) if stop < asked && line.reached() >= stop => Ok(stop),
                Err(e) => Err(e),
                Ok(Fetched { end: got, .. }) => Ok((got - woff).min(stop)),
            }
        })
    }
}

/// The error for answers that disagree about the object.
pub(crate) fn changed(url: &str) -> Error {
    Error::new(
        Status::Precondition,
        format!(
            "{url}: the object changed during the download (its size, ETag or Last-Modified \
             differ between answers)"
        ),
    )
}

/// A range read that publishes its first successful answer's headers, checks every later
/// one against them (same object size, strong ETag and `Last-Modified`), and pins its
/// retries to that version.
struct Watch<'l, H> {
    inner: H,
    /// The object size every answer must state, when known beforehand.
    total: Option<u64>,
    /// The first successful answer's headers.
    first: Option<Head>,
    line: &'l Line,
}

impl<H: Handler<Output = Fetched>> Handler for Watch<'_, H> {
    type Output = Fetched;

    fn next_request(&self) -> (ByteRange, Option<Condition>) {
        let (range, pin) = self.inner.next_request();
        (range, pin.or_else(|| self.first.as_ref()?.pin()))
    }

    fn version_change_pending(&self) -> bool {
        self.inner.version_change_pending()
    }

    async fn on_response(&mut self, env: &Env<'_>, url: &str, resp: Response) -> Step<Fetched> {
        if (200..300).contains(&resp.status) {
            let head = Head {
                total: stated_total(resp.status, &resp.headers),
                etag: etag::strong(&resp.headers),
                last_modified: resp
                    .headers
                    .get(http::header::LAST_MODIFIED)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned),
            };
            let same_total = match (self.total, head.total) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            };
            let same = match &self.first {
                None => true,
                Some(first) => first.etag == head.etag && first.last_modified == head.last_modified,
            };
            if !same_total || !same {
                transport::drain_or_abort(resp.body, transport::DRAIN_LIMIT).await;
                return Step::Fail(changed(url));
            }
            if self.first.is_none() {
                self.total = self.total.or(head.total);
                self.line.publish(head.clone());
                self.first = Some(head);
            }
        }
        self.inner.on_response(env, url, resp).await
    }
}
