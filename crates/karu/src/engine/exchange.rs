//! One logical ranged GET with everything that makes it trustworthy: the attempt loop
//! (retries, backoff, the deadline, the unreachable cap), response validation, resume of an
//! interrupted body pinned by a strong ETag, streaming into a sink, and exact counters.
//! Batch transfers and the probes share it.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::backends::{self, ByteRange, Correction, Profiles, Signing};
use crate::batch::{Counters, Shared};
use crate::config::Settings;
use crate::credentials::{Auth, Resolved};
use crate::error::{Error, Result, Status};
use crate::locator::Locator;
use crate::transport::{
    self, BodyWakes, HttpClient, Pool, RecvLowat, Response, TransportError, TransportErrorKind,
};
use crate::validate::condition::Condition;
use crate::validate::{self, Deadline, Expect, Head, etag};

use super::credentials::Lookups;
use super::link::Meter;
use super::remote::{Entry, Gates};
use super::secrets::{self, Sent};

/// What one attempt asks the loop to do next.
pub(crate) enum Step<T> {
    /// Finished.
    Done(T),
    /// A final failure.
    Fail(Error),
    /// A transient failure: try again if attempts and time remain.
    Retry {
        /// The error reported if no attempt is left.
        error: Error,
        /// The server's `Retry-After`.
        retry_after: Option<Duration>,
        /// A DNS or connect failure (at most 3 attempts).
        unreachable: bool,
    },
}

/// What the attempt loop needs from the IO loop it runs on.
pub(crate) struct Env<'a> {
    /// This loop's HTTP client.
    pub(crate) client: &'a HttpClient,
    /// The client's settings.
    pub(crate) settings: &'a Settings,
    /// Counters of the batch served, if any.
    pub(crate) counters: Option<&'a Counters>,
    /// The batch, to stop promptly when it is cancelled.
    pub(crate) batch: Option<&'a Shared>,
    /// Connections this loop has already seen (the first response on one counts it new).
    pub(crate) seen: &'a RefCell<HashSet<u64>>,
    /// Jitter source.
    pub(crate) rng: &'a RefCell<fastrand::Rng>,
    /// The credential workers, for lookups of probes and refreshes after a rejection.
    pub(crate) lookups: &'a Lookups,
    /// This loop's backend profiles (options read once per backend and path rules).
    pub(crate) profiles: &'a Profiles,
    /// Times and bytes of the current attempt, for the link estimates.
    pub(crate) meter: Meter<'a>,
    /// For a probe: the gates each exchange passes first (a batch's transfer passed its
    /// gate before it ran).
    pub(crate) gates: Option<&'a Gates>,
}

impl Env<'_> {
    fn count(&self, pick: impl Fn(&Counters) -> &std::sync::atomic::AtomicU64, n: u64) {
        if let Some(c) = self.counters {
            Counters::add(pick(c), n);
        }
    }

    /// Records the response's connection and throttling.
    fn note_response(&self, resp: &Response) {
        let mut seen = self.seen.borrow_mut();
        if seen.len() > 65_536 {
            // Ids only grow; forgetting old ones bounds memory on long-lived loops.
            seen.clear();
        }
        let new = seen.insert(resp.connection);
        if new {
            self.count(|c| &c.new_connections, 1);
        }
        self.meter.head(resp.status, new, resp.connected_at);
        if resp.status == 429 || resp.status == 503 {
            self.count(|c| &c.throttled, 1);
        }
    }

    /// Counts accepted 2xx body bytes.
    fn received(&self, n: u64) {
        self.count(|c| &c.received_bytes, n);
        self.meter.body(n);
    }
}

/// What a transfer brings from the credential stage.
#[derive(Clone, Debug, Default)]
pub(crate) struct Access {
    /// How to sign; `None` until looked up (probes and unsigned backends skip the stage).
    pub(crate) auth: Option<Auth>,
    /// When the read's deadline started (at the credential lookup), if before the first
    /// attempt.
    pub(crate) started: Option<Instant>,
}

/// One response handler: what to ask for in an attempt, and what a response means.
pub(crate) trait Handler {
    /// The result of the whole exchange.
    type Output;
    /// Range and version condition for the next attempt.
    fn next_request(&self) -> (ByteRange, Option<Condition>);
    /// Judges a response (reading its body as needed).
    async fn on_response(&mut self, env: &Env<'_>, url: &str, resp: Response)
    -> Step<Self::Output>;
    /// Called when the loop gives up on a version change it kept retrying.
    fn version_change_pending(&self) -> bool {
        false
    }
}

/// The shortest answer that goes to the pool whose connections read in large steps: half
/// the planner's smallest piece, so every piece of a cut transfer does. Not the gate's
/// [`BULK`](super::gate::BULK): at 2 MiB, Parquet's row groups of 3 MB (workload P) left the
/// connection their footer read had opened for one of their own, and the scans took 3–5 %
/// longer at RTT 20 ms (10 runs each, 2026-12-05).
const LONG_ANSWER: u64 = crate::plan::cost::MIN_PIECE / 2;

/// The connection pool for a request of `range`: a long answer's speed is its stream's, so
/// it gets the pool whose connections read in large steps; shorter ones the pool with small
/// buffers.
fn pool(range: ByteRange) -> Pool {
    match range.length() {
        Some(n) if n < LONG_ANSWER => Pool::Short,
        _ => Pool::Long,
    }
}

/// Runs attempts until `handler` is done, fails, or attempts or time run out. The error
/// leaves with every secret of the exchange hidden (an echoing server must not put them into
/// messages).
pub(crate) async fn run<H: Handler>(
    env: &Env<'_>,
    locator: &Locator,
    access: &Access,
    handler: &mut H,
) -> Result<H::Output> {
    let mut sent = Sent::default();
    let mut entry = match env.gates {
        Some(gates) => Some(gates.enter(locator).await),
        None => None,
    };
    attempts(env, locator, access, handler, &mut sent, entry.as_mut())
        .await
        .map_err(|e| secrets::redact(env.settings, locator, &sent, e))
}

/// [`run`]'s attempt loop; `sent` notes what each attempt sent; `entry` (a probe's) hears
/// of each answer.
async fn attempts<H: Handler>(
    env: &Env<'_>,
    locator: &Locator,
    access: &Access,
    handler: &mut H,
    sent: &mut Sent,
    mut entry: Option<&mut Entry>,
) -> Result<H::Output> {
    let url = locator.display();
    let timeout = env.settings.request_timeout();
    let deadline = match access.started {
        Some(t) => Deadline::starting_at(t, timeout),
        None => Deadline::new(timeout),
    };
    let max_attempts = env.settings.max_attempts();
    let mut attempts = 0u32;
    let mut unreachable = false;
    let signs = backends::needs_credentials(locator.backend());
    let mut auth = match &access.auth {
        Some(a) => a.clone(),
        None if signs => lookup(env, locator, None, &deadline).await?,
        None => Auth::Anonymous,
    };
    let mut corrected_region = false;
    let mut learnt_region: Option<String> = None;
    let mut refreshed = false;
    loop {
        if deadline.expired() {
            return Err(Deadline::exceeded(&url));
        }
        attempts += 1;
        let (range, pin) = handler.next_request();
        let pool = pool(range);
        // Only signing backends learn regions: others skip the batch's map (a lock per
        // attempt).
        let region = learnt_region.clone().or_else(|| {
            env.batch
                .filter(|_| signs)
                .and_then(|b| b.region(locator.identity()))
        });
        let signing = Signing {
            auth: &auth,
            region: region.as_deref(),
            now: SystemTime::now(),
        };
        env.meter.preparing();
        let prepared = backends::prepare(
            env.settings,
            env.profiles,
            locator,
            range,
            pin.as_ref(),
            signing,
        )?;
        sent.note(&prepared.request, &auth);
        env.meter.sent(&prepared.request.uri);
        let backends::Prepared {
            request,
            redirect,
            region: used_region,
        } = prepared;
        let signed = matches!(auth, Auth::Signed(_));
        let throttled = std::cell::Cell::new(false);
        let attempt = async {
            // In its own scope, so the sent request's future is gone (and its room reused)
            // while the response is read.
            let answer = {
                let send = pin!(env.client.send(request, redirect, pool));
                low_speed_bound(env.settings, send).await
            };
            match answer {
                None => (
                    Step::Retry {
                        error: no_head(env.settings, &url),
                        retry_after: None,
                        unreachable: false,
                    },
                    None,
                ),
                Some(Ok(resp)) => {
                    throttled.set(matches!(resp.status, 429 | 503));
                    env.note_response(&resp);
                    if let Some(e) = entry.as_deref_mut() {
                        e.answered(env.meter.sent_at());
                    }
                    if signs && matches!(resp.status, 301 | 307 | 400 | 401 | 403) {
                        // Provider hints live in the error body: read it here, once.
                        let prefix = error_prefix(env.settings, resp.body).await;
                        let correction = backends::correction(
                            locator,
                            resp.status,
                            &resp.headers,
                            &prefix,
                            used_region.as_deref(),
                            signed,
                        );
                        let step =
                            classified_step(&url, resp.status, &resp.headers, &prefix, false);
                        (step, correction)
                    } else {
                        (handler.on_response(env, &url, resp).await, None)
                    }
                }
                Some(Err(e)) => (transport_step(&url, e), None),
            }
        };
        let (step, correction) = {
            // Pinned here, so the attempt's future is kept once (see `cancellable`).
            let attempt = pin!(attempt);
            match cancellable(env, pin!(timed(&deadline, attempt))).await {
                None => return Err(cancelled(&url)),
                Some(None) => return Err(Deadline::exceeded(&url)),
                Some(Some(step)) => step,
            }
        };
        env.meter
            .ended(attempts == 1 && !throttled.get() && matches!(step, Step::Done(_)));
        // One region correction and one credential refresh per exchange; neither counts
        // as an attempt (spec §5.5).
        match correction {
            Some(Correction::Region(r)) if !corrected_region && region.as_deref() != Some(&r) => {
                corrected_region = true;
                if let Some(b) = env.batch {
                    b.remember_region(locator.identity(), &r);
                }
                learnt_region = Some(r);
                attempts -= 1;
                continue;
            }
            Some(Correction::RefreshCredentials) if !refreshed && signed => {
                refreshed = true;
                env.count(|c| &c.credential_refreshes, 1);
                let rejected = match &auth {
                    Auth::Signed(r) => Some(Arc::clone(r)),
                    _ => None,
                };
                auth = lookup(env, locator, rejected, &deadline).await?;
                attempts -= 1;
                continue;
            }
            _ => {}
        }
        let (error, retry_after) = match step {
            Step::Done(v) => return Ok(v),
            Step::Fail(e) => return Err(e),
            Step::Retry {
                error, retry_after, ..
            } if throttled.get() && env.batch.is_some_and(|b| b.hands_back(retry_after)) => {
                return Err(error);
            }
            Step::Retry {
                error,
                retry_after,
                unreachable: u,
            } => {
                unreachable |= u;
                (error, retry_after)
            }
        };
        if attempts >= validate::attempt_cap(max_attempts, unreachable) {
            return Err(if handler.version_change_pending() {
                validate::version_changed(&url)
            } else {
                error
            });
        }
        let wait = validate::delay(attempts, retry_after, &mut env.rng.borrow_mut());
        if !deadline.fits(wait) {
            return Err(Deadline::no_time(&url));
        }
        if cancellable(env, pin!(tokio::time::sleep(wait)))
            .await
            .is_none()
        {
            return Err(cancelled(&url));
        }
        env.count(|c| &c.retries, 1);
    }
}

fn cancelled(url: &str) -> Error {
    Error::new(Status::Cancelled, format!("{url}: cancelled"))
}

/// Runs `fut` unless the batch is cancelled first (`None`).
///
/// The wrappers here take the future pinned where its caller keeps it: an `async fn` that
/// took it by value would hold it twice (as its argument and inside what it awaits), and
/// nested wrappers doubled the transfer's future to 14 KB, all of it copied when the
/// transfer is spawned.
async fn cancellable<F: Future>(env: &Env<'_>, fut: Pin<&mut F>) -> Option<F::Output> {
    match env.batch {
        None => Some(fut.await),
        Some(batch) => tokio::select! {
            biased;
            () = batch.cancelled() => None,
            v = fut => Some(v),
        },
    }
}

/// Runs `fut` within the deadline (`None` when it expires first).
async fn timed<F: Future>(deadline: &Deadline, fut: Pin<&mut F>) -> Option<F::Output> {
    match deadline.attempt_timeout() {
        None => Some(fut.await),
        Some(left) => tokio::time::timeout(left, fut).await.ok(),
    }
}

/// A transport failure as a step: connection-level trouble is transient, the rest final.
pub(crate) fn transport_step<T>(url: &str, e: TransportError) -> Step<T> {
    let error = Error::new(e.kind.status(), format!("{url}: {}", e.message)).caused_by(e.clone());
    match e.kind {
        TransportErrorKind::Resolve | TransportErrorKind::Connect => Step::Retry {
            error,
            retry_after: None,
            unreachable: true,
        },
        TransportErrorKind::Timeout | TransportErrorKind::Io | TransportErrorKind::Protocol => {
            Step::Retry {
                error,
                retry_after: None,
                unreachable: false,
            }
        }
        // Certificate and handshake failures do not heal by retrying; nor do redirect rules.
        TransportErrorKind::Tls
        | TransportErrorKind::RedirectBlocked
        | TransportErrorKind::RedirectProtocol
        | TransportErrorKind::TooManyRedirects
        | TransportErrorKind::InvalidUrl
        | TransportErrorKind::Setup => Step::Fail(error),
    }
}

/// Reads the first 4 KiB of an error body and classifies the response.
pub(crate) async fn error_step<T>(
    env: &Env<'_>,
    url: &str,
    resp: Response,
    own_pin: bool,
) -> Step<T> {
    let prefix = error_prefix(env.settings, resp.body).await;
    classified_step(url, resp.status, &resp.headers, &prefix, own_pin)
}

/// The first 4 KiB of an error body, for classification and messages; a body that stalls
/// past the low-speed time counts as empty (error bodies are best effort).
async fn error_prefix(settings: &Settings, body: Incoming) -> Bytes {
    low_speed_bound(
        settings,
        pin!(transport::read_prefix(body, validate::CAPTURE)),
    )
    .await
    .unwrap_or_default()
}

/// Drains (or aborts) an unwanted body so its connection may be reused; one that stalls past
/// the low-speed time is dropped, which closes its connection.
async fn drain(settings: &Settings, body: Incoming) {
    low_speed_bound(
        settings,
        pin!(transport::drain_or_abort(body, transport::DRAIN_LIMIT)),
    )
    .await;
}

/// The low-speed rule's window (`KARU_LOW_SPEED_TIME`), when the rule is on: a time and a
/// limit above zero, as curl reads its pair.
fn low_speed_time(settings: &Settings) -> Option<Duration> {
    let time = settings.low_speed_time();
    (!time.is_zero() && settings.low_speed_limit() > 0).then_some(time)
}

/// Runs a phase that receives no kept body bytes (the wait for a response head, redirects
/// included; an error body; a drain) under the low-speed rule: such a phase moves next to
/// nothing, so it may last at most the low-speed time, as curl's rule, which also covers the
/// wait for the head, allows. This is what bounds a read when `KARU_REQUEST_TIMEOUT` is 0.
/// `None` when the phase took longer.
async fn low_speed_bound<F: Future>(settings: &Settings, fut: Pin<&mut F>) -> Option<F::Output> {
    match low_speed_time(settings) {
        None => Some(fut.await),
        Some(time) => tokio::time::timeout(time, fut).await.ok(),
    }
}

/// NETWORK: no response head arrived within the low-speed time (transient, like curl's
/// "operation too slow").
fn no_head(settings: &Settings, url: &str) -> Error {
    too_slow(url, settings.low_speed_limit(), settings.low_speed_time())
}

/// At most `max` bytes of a body kept whole (a probe's), under the low-speed rule: a body
/// keeping the rule's pace is done within its window plus `max` bytes at its rate, so one
/// that takes longer stalled. That step retries it with NETWORK, as a stalled streamed body.
pub(crate) async fn bounded_prefix<T>(
    settings: &Settings,
    url: &str,
    body: Incoming,
    max: usize,
) -> std::result::Result<Bytes, Step<T>> {
    let read = transport::read_prefix(body, max);
    let Some(time) = low_speed_time(settings) else {
        return Ok(read.await);
    };
    let pace = Duration::try_from_secs_f64(max as f64 / settings.low_speed_limit() as f64)
        .unwrap_or(Duration::MAX);
    tokio::time::timeout(time.saturating_add(pace), read)
        .await
        .map_err(|_| Step::Retry {
            error: no_head(settings, url),
            retry_after: None,
            unreachable: false,
        })
}

/// The step for an error response whose body prefix has been read.
fn classified_step<T>(
    url: &str,
    status: u16,
    headers: &http::HeaderMap,
    prefix: &[u8],
    own_pin: bool,
) -> Step<T> {
    let f = validate::classify_error(url, status, headers, prefix, own_pin);
    if f.transient || f.version_changed {
        Step::Retry {
            error: f.error,
            retry_after: f.retry_after.or_else(|| {
                validate::retry_after(headers, SystemTime::now()).filter(|_| f.throttled)
            }),
            unreachable: false,
        }
    } else {
        Step::Fail(f.error)
    }
}

/// Asks the credential workers how to sign (with `refresh`, after dropping that rejected
/// value from the cache), within the read's deadline.
async fn lookup(
    env: &Env<'_>,
    locator: &Locator,
    refresh: Option<Arc<Resolved>>,
    deadline: &Deadline,
) -> Result<Auth> {
    let until = deadline.remaining().map(|left| Instant::now() + left);
    env.lookups.lookup(locator, refresh, until).await
}

/// Streams a body, calling `keep(offset_in_kept, bytes)` for bytes after the first `skip`
/// and up to `len` kept bytes; `keep` may return a smaller `len` (never below what it has
/// been given), and the body is then read no further. Aborts on the low-speed rule. Returns
/// how many bytes were kept, or the error with that count when the body broke.
pub(crate) async fn stream_body(
    env: &Env<'_>,
    url: &str,
    mut body: Incoming,
    lowat: Option<RecvLowat>,
    skip: u64,
    mut len: u64,
    mut keep: impl FnMut(u64, &[u8]) -> Option<u64>,
) -> std::result::Result<(u64, Incoming), (u64, Error)> {
    // Wake-ups batched by the socket's low-water mark (see `transport::lowat`); put back to
    // one byte when this returns.
    let mut wakes = lowat.map(BodyWakes::new);
    let low_limit = env.settings.low_speed_limit();
    let low_time = low_speed_time(env.settings);
    // The low-speed rule on a coarse tick: one timer per body, checked once per window (not
    // armed per frame); each window must bring the rule's bytes.
    let mut tick = low_time.map(|time| (time, Box::pin(tokio::time::sleep(time))));
    let mut window = 0u64;
    // A new low-speed window: no bytes yet, a whole window's time ahead.
    let restart = |window: &mut u64, time: Duration, sleep: Pin<&mut tokio::time::Sleep>| {
        *window = 0;
        sleep.reset(tokio::time::Instant::now() + time);
    };
    let mut end = skip.saturating_add(len); // body offset after the last kept byte
    let mut pos = 0u64; // body bytes seen
    let mut kept = 0u64;
    while kept < len {
        if let Some(batch) = env.batch
            && batch.backlogged()
        {
            // The consumer fell behind: stop reading (the socket's window holds the sender
            // back) until it catches up. The wait is not the link's: the low-speed window
            // restarts after it.
            batch.room().await;
            if let Some((time, sleep)) = tick.as_mut() {
                restart(&mut window, *time, sleep.as_mut());
            }
        }
        let frame = match tick.as_mut() {
            None => body.frame().await,
            Some((time, sleep)) => tokio::select! {
                frame = body.frame() => frame,
                () = sleep.as_mut() => {
                    // Bytes held back by a raised mark are not slow: the window restarts
                    // with every byte read as it comes.
                    let held = wakes.as_mut().is_some_and(BodyWakes::relax);
                    if window < low_limit.saturating_mul(time.as_secs().max(1)) && !held {
                        return Err((kept, too_slow(url, low_limit, *time)));
                    }
                    restart(&mut window, *time, sleep.as_mut());
                    continue;
                }
            },
        };
        let data: Bytes = match frame {
            None => break,
            Some(Err(e)) => {
                let te = TransportError::classify(&e);
                return Err((
                    kept,
                    Error::new(Status::Network, format!("{url}: {}", te.message)).caused_by(te),
                ));
            }
            Some(Ok(f)) => match f.into_data() {
                Ok(d) => d,
                Err(_) => continue, // trailers
            },
        };
        env.received(data.len() as u64);
        window = window.saturating_add(data.len() as u64);
        let start = pos;
        pos += data.len() as u64;
        if let Some(w) = wakes.as_mut() {
            w.frame(pos, end.saturating_sub(pos));
        }
        // The part of this chunk past the skipped prefix and within the kept length.
        let from = skip.saturating_sub(start).min(data.len() as u64);
        let upto = end.saturating_sub(start).min(data.len() as u64);
        if from < upto {
            let shorter = keep(kept, &data[from as usize..upto as usize]);
            kept += upto - from;
            if let Some(n) = shorter {
                len = len.min(n.max(kept));
                end = skip.saturating_add(len);
            }
        }
    }
    Ok((kept, body))
}

fn too_slow(url: &str, limit: u64, time: Duration) -> Error {
    Error::new(
        Status::Network,
        format!(
            "{url}: transfer slower than {limit} bytes/s for {} s",
            time.as_secs()
        ),
    )
}

/// Where a ranged exchange ended: bytes `[start, end)` were delivered in full.
#[derive(Debug)]
pub(crate) struct Fetched {
    /// Object offset after the last delivered byte (less than asked when the object ended).
    pub(crate) end: u64,
    /// Object size, when a response told it.
    pub(crate) total: Option<u64>,
    /// The strong ETag that pinned the bytes.
    pub(crate) etag: Option<String>,
    /// The `Last-Modified` of the answer the last bytes came from.
    pub(crate) last_modified: Option<String>,
}

/// A ranged read of `[start, last]` into a sink, resuming interrupted bodies.
pub(crate) struct RangeRead<'c, S> {
    start: u64,
    last: u64,
    /// The caller's version condition, sent as given.
    pin: Option<&'c Condition>,
    /// The caller's tag when it is a single strong one (a pin responses are checked against).
    caller_pin: Option<&'c str>,
    /// Bytes from `start` already delivered in full.
    kept: u64,
    /// Karu's own pin for resuming: the first response's strong ETag.
    resume_tag: Option<String>,
    version_changed: bool,
    fallback_limit: u64,
    /// The last byte as it may be cut shorter while the body streams (see `engine::cut`).
    cut: Option<&'c Cell<u64>>,
    sink: S,
}

/// The `last` of a [`RangeRead`] that asks for everything from its start (`bytes=start-`).
pub(crate) const OPEN: u64 = u64::MAX;

impl<'c, S: FnMut(u64, &[u8], Option<&str>)> RangeRead<'c, S> {
    /// Reads `[start, last]` (to the object's end when `last` is [`OPEN`]); `sink(offset,
    /// bytes, version)` receives object bytes (possibly again after a restart) with the
    /// strong ETag of the answer they came from.
    pub(crate) fn new(
        settings: &Settings,
        start: u64,
        last: u64,
        pin: Option<&'c Condition>,
        sink: S,
    ) -> Self {
        RangeRead {
            start,
            last,
            pin,
            caller_pin: pin
                .and_then(Condition::if_match)
                .filter(|t| etag::is_single_strong(t)),
            kept: 0,
            resume_tag: None,
            version_changed: false,
            fallback_limit: settings.range_fallback_limit(),
            cut: None,
            sink,
        }
    }

    /// Reads no further than `last` holds whenever it is looked at: the sink may lower it
    /// while a body streams (the rest of the body is then not read, and a retry asks only
    /// up to it).
    pub(crate) fn cut_by(self, last: &'c Cell<u64>) -> Self {
        RangeRead {
            cut: Some(last),
            ..self
        }
    }
}

impl<S: FnMut(u64, &[u8], Option<&str>)> Handler for RangeRead<'_, S> {
    type Output = Fetched;

    fn next_request(&self) -> (ByteRange, Option<Condition>) {
        let first = self.start + self.kept;
        let range = match self.last() {
            OPEN => ByteRange::From(first),
            last => ByteRange::Span { first, last },
        };
        let pin = match (self.pin, &self.resume_tag) {
            (Some(p), _) => Some(p.clone()),
            (None, Some(t)) if self.kept > 0 => Some(Condition::IfMatch(t.clone())),
            _ => None,
        };
        (range, pin)
    }

    fn version_change_pending(&self) -> bool {
        self.version_changed
    }

    async fn on_response(&mut self, env: &Env<'_>, url: &str, resp: Response) -> Step<Fetched> {
        let own_pin = self.caller_pin.is_none() && self.kept > 0 && self.resume_tag.is_some();
        let pin = self.caller_pin.or(if own_pin {
            self.resume_tag.as_deref()
        } else {
            None
        });
        let expect = Expect {
            url,
            start: self.start + self.kept,
            end: self.last(),
            original_start: self.start,
            fallback_limit: self.fallback_limit,
            pin,
            pin_is_callers: self.caller_pin.is_some(),
            unmodified: match self.pin {
                Some(Condition::IfUnmodifiedSince { date, total }) => Some((date, *total)),
                _ => None,
            },
        };
        let (skip, first, len, total, tag) =
            match validate::check_head(&expect, resp.status, &resp.headers) {
                Head::Body {
                    skip,
                    first,
                    len,
                    total,
                    etag,
                    restarted,
                } => {
                    if restarted {
                        // The kept prefix and its tag are gone: this body pins the read now.
                        self.restart();
                    }
                    (skip, first, len, total, etag)
                }
                Head::ErrorBody { .. } => {
                    let step = error_step(env, url, resp, own_pin).await;
                    if matches!(step, Step::Retry { .. }) && own_pin {
                        // A 412 against our own tag: the object changed; start over.
                        self.version_changed = true;
                        self.restart();
                    }
                    return step;
                }
                Head::Fail(e) | Head::Precondition(e) => {
                    drain(env.settings, resp.body).await;
                    return Step::Fail(e);
                }
                Head::VersionChanged => {
                    self.version_changed = true;
                    self.restart();
                    return Step::Retry {
                        error: validate::version_changed(url),
                        retry_after: None,
                        unreachable: false,
                    };
                }
            };
        if self.resume_tag.is_none() {
            self.resume_tag = tag.clone();
        }
        let last_modified = resp
            .headers
            .get(http::header::LAST_MODIFIED)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let expected_body = resp
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let sink = &mut self.sink;
        let version = tag.as_deref().or(self.caller_pin);
        let cut = self.cut;
        let streamed = stream_body(env, url, resp.body, resp.lowat, skip, len, |at, data| {
            sink(first + at, data, version);
            // A cut leaves the bytes up to its last byte.
            cut.map(|last| last.get().saturating_add(1).saturating_sub(first))
        })
        .await;
        let len = len.min(self.last().saturating_add(1).saturating_sub(first));
        match streamed {
            Ok((kept, rest)) => {
                let announced_more = expected_body.is_some_and(|n| n > skip + kept);
                if kept < len && (announced_more || resp.status == 206) {
                    // The body ended before what its headers promised: truncated.
                    return self.interrupted(
                        env,
                        first,
                        kept,
                        Error::new(
                            Status::Network,
                            format!("{url}: body ended after {kept} of {len} bytes"),
                        ),
                    );
                }
                // Read to the end of the body (drain a small tail, abort a large one): only
                // a body read to its end gives its connection back to the pool.
                drain(env.settings, rest).await;
                Step::Done(Fetched {
                    end: first + kept,
                    total,
                    etag: tag.or_else(|| self.caller_pin.map(str::to_owned)),
                    last_modified,
                })
            }
            Err((kept, error)) => self.interrupted(env, first, kept, error),
        }
    }
}

impl<S> RangeRead<'_, S> {
    /// The last byte to read: the one asked for, or a cut's.
    fn last(&self) -> u64 {
        self.cut.map_or(self.last, |c| c.get().min(self.last))
    }

    fn restart(&mut self) {
        self.kept = 0;
        self.resume_tag = None;
    }

    /// A body broke after `kept` bytes from object offset `first`: keep them if a strong tag
    /// pins the object, else restart.
    fn interrupted(&mut self, env: &Env<'_>, first: u64, kept: u64, error: Error) -> Step<Fetched> {
        let delivered_to = first + kept;
        let have = delivered_to.saturating_sub(self.start);
        let pinned = self.caller_pin.is_some() || self.resume_tag.is_some();
        if self.pin.and_then(Condition::if_match).is_some() && self.caller_pin.is_none() {
            // `*` or a list: no single version to resume against.
            self.restart();
        } else if pinned && have > self.kept && first <= self.start + self.kept {
            self.kept = have;
            env.count(|c| &c.resumed, 1);
        } else if !pinned {
            self.restart();
        }
        Step::Retry {
            error,
            retry_after: None,
            unreachable: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_and_open_ended_requests_take_the_long_pool() {
        let span = |first: u64, length: u64| ByteRange::Span {
            first,
            last: first + length - 1,
        };
        assert_eq!(pool(span(0, 1)), Pool::Short);
        assert_eq!(pool(span(1 << 40, LONG_ANSWER - 1)), Pool::Short);
        assert_eq!(pool(span(7, LONG_ANSWER)), Pool::Long);
        assert_eq!(pool(ByteRange::Suffix(512 << 10)), Pool::Short);
        assert_eq!(pool(ByteRange::Suffix(LONG_ANSWER)), Pool::Long);
        assert_eq!(pool(ByteRange::From(0)), Pool::Long);
        assert_eq!(
            pool(ByteRange::Span {
                first: 0,
                last: u64::MAX
            }),
            Pool::Long
        );
    }
}
