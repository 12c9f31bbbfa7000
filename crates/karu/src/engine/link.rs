//! Link estimates per endpoint (scheme, host, port), measured from completed exchanges and
//! handed to the planner as a [`CostModel`](crate::plan::CostModel).
//!
//! What is measured, and how each estimate resists outliers:
//! - **Round trip**: request written → first body byte, from first attempts answered 2xx. On a
//!   new connection the handshakes come first: the sample is the time from the connection's
//!   setup ([`ConnectionTag`](crate::transport::ConnectionTag)) or the whole time divided by the
//!   round trips it held (2 over TCP, 3 with TLS), whichever is smaller (see [`round_trip`]),
//!   so a cold client learns from its very first wave. The estimate is the smallest sample
//!   taken within [`RTT_SPAN`] of the latest: queueing behind other requests and bodies and
//!   slow server moments only ever add time, so the minimum tracks the path itself.
//! - **Per-request cost**: building and signing a request (attempt start → handed to the
//!   transport), the median of the last samples, plus [`TRANSPORT_COST`] for the client's
//!   share that is not timed (writing the request, parsing the answer).
//! - **Connection rate**: body bytes ÷ (last byte − first byte) of first attempts answered 2xx
//!   with at least [`RATE_BODY`] bytes that arrived alone (no other body of the endpoint
//!   arriving at any time during it); the median of the last samples. A body sharing the link
//!   measures its share, not what one connection can carry: taken as a connection's rate it
//!   would make one transfer look many times slower than the link and the planner would cut
//!   every large read. Until a lone body is measured, one connection is assumed to carry the
//!   whole link (the total rate); once both are measured, one connection carries at most the
//!   link's total: a lone body that came in one burst (a shaper's bucket after an idle moment)
//!   reads faster than the link (1.95 GB/s through the test kit proxy capped at 125 MB/s,
//!   2026-12-07), and lifting the total to it made a re-plan merge as if bytes were free. Until
//!   both are measured no plan splits on a guessed ratio of the two: the model caps a transfer
//!   at [`COLD_TRANSFER`](crate::plan::cost::COLD_TRANSFER), cut into pieces that the engine's
//!   gate runs side by side only where more streams are measured to carry more.
//! - **Total rate**: bytes of every body ÷ the time at least one body of the endpoint was owed
//!   (from one round trip, the estimate, after its request was handed over, to its last byte),
//!   over windows of at least [`TOTAL_WINDOW`] and [`TOTAL_BYTES`] in which two or more bodies
//!   overlapped; the largest window within [`RTT_SPAN`] of the latest (the link's capacity is
//!   what it carried at best). Not the largest of the last few: a plan of many small transfers
//!   carries fewer bytes a second where each request costs the path something (the server's
//!   and proxy's CPU on 2 shared cores), its windows read lower, the next batch's plan sends
//!   smaller transfers still, and a warm client spiralled down: workload R through the test
//!   kit proxy at 5 ms, three batches per client, read 325, 225, 201 and then 88 MB/s (1.13,
//!   0.97 and 1.32 s; 2026-12-07), and 568, 529, 215 (0.92, 0.81, 1.03 s); with the span's
//!   largest, 613, 728, 728 (0.92, 0.73, 0.79 s) and 319, 273, 273 (0.94, 0.99, 0.85 s).
//!   Owed, not arriving: a small body comes in one burst, and a link it fills shows its
//!   cap as the wait before each burst, not in it. Timed from their first bytes, workload R's 4
//!   KiB bodies through the test kit proxy capped at 125 MB/s (16 cold batches, RTT 0,
//!   2026-12-07) read 215–726 MB/s at the re-plans and 260–370 after a batch, and the re-plans
//!   merged gaps the cap paid for: 6 batches took 0.77–1.46 s (5,107–6,850 transfers), the rest
//!   0.51–0.58. Timed as owed (and the connection bound above), 92–122 MB/s at the re-plans and
//!   89–125 after, and all 16 took 0.50–0.55 s (8,936–9,301 transfers); the warm batches after
//!   them 0.44–0.50 s. The window closes at a body's end, whose bytes have come, not at a
//!   start, whose wait it holds. The round trip keeps a long link's waits out: there a body is
//!   owed from about when it starts. Until a window has closed, the open one stands in once it
//!   holds [`TOTAL_BYTES`] over at least [`OPEN_WINDOW`] with bodies overlapping: a cold
//!   client's first wave re-plans the rest when its first round ends, often before 50 ms of
//!   bodies, and the prior's 10 Gbit/s would then make every gap look free on a slow link. With
//!   no window at all the prior stands, even once a lone body is measured: one body alone is no
//!   sample of many together. Taken as the link, a lone body made workload R's re-plans price
//!   bytes wrongly both ways (2026-12-06): on the test kit server at RTT 0 it read 2.8–3.1 GB/s
//!   where the batch sustains about 1.6, and every 1 MiB gap was merged (2,430 transfers, 400
//!   ms against gap 0's 260–345); on s3s-fs it read 136–183 MB/s where bodies together carry
//!   370, and 5,248–8,605 transfers went out where merging more was faster (at 20 ms
//!   2,074–2,320 ms against the guards' 1,674–1,757; at RTT 0 1,235 ms, against 980 for a
//!   re-plan on the prior).
//!
//! Retried exchanges and throttled answers (429, 503) give no sample. Until an estimate has a
//! sample it is the documented prior ([`CostModel::priors`](crate::plan::CostModel::priors)).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::backends::{self, ByteRange, Signing};
use crate::config::Settings;
use crate::credentials::Auth;
use crate::locator::Locator;
use crate::plan::{CostModel, LinkEstimate};

/// Samples kept per estimate.
pub(crate) const WINDOW: usize = 16;
/// Smallest body that gives a connection-rate sample (a smaller one arrives in a burst).
pub(crate) const RATE_BODY: u64 = 128 << 10;
/// Shortest window of a total-rate sample.
pub(crate) const TOTAL_WINDOW: Duration = Duration::from_millis(50);
/// Fewest bytes in a total-rate sample.
pub(crate) const TOTAL_BYTES: u64 = 1 << 20;
/// Shortest open window that stands in for the total rate while none has closed. A shorter
/// one is mostly a cold start: a cold wave's first answers come while its requests are still
/// leaving, and the server and any proxy open their connections and start their tasks. On
/// s3s-fs at 20 ms, first rounds of 10–16 ms read 230–440 MB/s where the server carries
/// 400–420 MB/s, and the re-plans they fed sent 3,800–4,300 transfers in 1.6–1.7 s against
/// the guards' 2,430 in 1.3 s (7 runs, 2026-12-05). Through the test kit proxy at 20 ms
/// (workload R, cold clients, 2026-12-07) the first wave's 50 transfers (8.8 MB) kept bodies
/// owed for 15–38 ms and read 240–410 MB/s, where warm batches carry 1.4 GB/s less their
/// requests' cost: with a 20 ms threshold the runs whose wave outlasted it re-planned
/// 2,700–3,000 transfers in 1.21–1.31 s, the others (on the prior) 2,100 in 0.97–1.11 (in 1
/// and 2 of 5 runs, and 3 of 5 in the full matrix); at 5 ms, 4 of 5 re-planned 5,053–6,865
/// transfers in 0.88–1.19 s. With 40 ms, 5 of 5 at 20 ms sent 2,100 in 0.95–1.03 s, and at 5
/// ms 2,451–2,814 in 0.70–1.09 s (median 0.78). A slow link keeps a first round's bodies
/// arriving long enough to be read: at 1 Gbit/s the wave's 8.8 MB take 70 ms (83–118 MB/s
/// read at 40 ms; 5,053 transfers at 20 ms and 8,958–9,331 at RTT 0, as with 20 ms), and so
/// do s3s-fs's slow streams (its R at 5 and 20 ms re-planned 6,865 and 5,053 transfers,
/// 0.87× and 0.79× the fastest other reader).
pub(crate) const OPEN_WINDOW: Duration = Duration::from_millis(40);
/// The client's per-request work besides building and signing (writing the request, parsing
/// the response head, completing the reads): measured once on loopback, not per request.
pub(crate) const TRANSPORT_COST: Duration = Duration::from_micros(25);
/// How long a round-trip sample counts: the estimate is the smallest sample taken within this
/// span of the latest one, as in BBR's min-RTT filter. Queueing only adds time, and under
/// load every recent sample may hold some: a cold wave's later answers wait behind its
/// earlier ones. Of workload R's first wave on the test kit server at RTT 0 (2026-12-06), the
/// last 16 answers read 1.2–5 ms and the first ones 0.7 ms (timed from their connection's
/// setup), where the path answers in 0.3 ms with few requests in flight. Re-planned on the
/// last 16, 5 of 6 runs merged every 1 MiB gap (2,430 transfers, 0.31–0.46 s); on the span's
/// minimum, 6 of 6 sent 3,046–6,354 (0.28–0.34 s). A path whose round trip grew for good is
/// followed within the span. The total rate is the largest window within the same span (a
/// capacity, as in BBR's max-bandwidth filter; see the module docs).
pub(crate) const RTT_SPAN: Duration = Duration::from_secs(10);
/// Most samples a [`Recent`] holds at once (each later and worse than the one before it).
const RTT_KEPT: usize = 256;

/// The last samples of one figure, with how many were ever taken.
#[derive(Debug, Default)]
struct Samples {
    last: VecDeque<f64>,
    count: u64,
    keep: usize,
}

impl Samples {
    fn new(keep: usize) -> Samples {
        Samples {
            keep,
            ..Samples::default()
        }
    }

    fn push(&mut self, v: f64) {
        if !v.is_finite() || v < 0.0 {
            return;
        }
        if self.last.len() == self.keep {
            self.last.pop_front();
        }
        self.last.push_back(v);
        self.count += 1;
    }

    fn median(&self) -> Option<f64> {
        let mut v: Vec<f64> = self.last.iter().copied().collect();
        v.sort_unstable_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    }
}

/// The best sample taken within [`RTT_SPAN`] of the latest one (the smallest, for a round
/// trip; the largest, for a capacity), with how many were ever taken.
#[derive(Debug)]
struct Recent<V> {
    /// The samples that may still be the best once older ones expire: each later one is
    /// worse (a later, better or equal sample drops every one before it that it matches).
    candidates: VecDeque<(Instant, V)>,
    count: u64,
    /// Whether larger is better.
    largest: bool,
}

impl<V: Copy + PartialOrd> Recent<V> {
    fn smallest() -> Recent<V> {
        Recent {
            candidates: VecDeque::new(),
            count: 0,
            largest: false,
        }
    }

    fn largest() -> Recent<V> {
        Recent {
            largest: true,
            ..Recent::smallest()
        }
    }

    fn push(&mut self, at: Instant, v: V) {
        // A sample that compares with nothing (NaN) would never be dropped nor beaten.
        if v.partial_cmp(&v).is_none() {
            return;
        }
        let largest = self.largest;
        while self
            .candidates
            .back()
            .is_some_and(|&(_, b)| if largest { b <= v } else { b >= v })
        {
            self.candidates.pop_back();
        }
        while self
            .candidates
            .front()
            .is_some_and(|&(t, _)| at.saturating_duration_since(t) > RTT_SPAN)
            || self.candidates.len() >= RTT_KEPT
        {
            self.candidates.pop_front();
        }
        self.candidates.push_back((at, v));
        self.count += 1;
    }

    /// The best sample taken within [`RTT_SPAN`] of the latest one: a client idle for longer
    /// keeps what it last measured.
    fn best(&self) -> Option<V> {
        self.candidates.front().map(|&(_, v)| v)
    }
}

/// One endpoint's samples and its total-rate window.
#[derive(Debug)]
struct Endpoint {
    rtt: Recent<Duration>,
    per_request: Samples,
    rate: Samples,
    total: Recent<f64>,
    /// Bodies arriving now.
    receiving: u32,
    /// Most bodies arriving at once in this window.
    peak: u32,
    /// Since when a body has been owed (while `receiving > 0`; see [`Endpoint::body_started`]).
    since: Option<Instant>,
    /// Time with a body owed in this window, before `since`.
    busy: Duration,
    /// Time before which every owed moment is counted (the last busy run's end, or the
    /// window's start): a later body's owed time never counts it twice.
    counted: Option<Instant>,
    /// Bodies started so far (a body that saw none start while it arrived was alone).
    starts: u64,
}

impl Endpoint {
    fn new() -> Endpoint {
        Endpoint {
            rtt: Recent::smallest(),
            per_request: Samples::new(WINDOW),
            rate: Samples::new(WINDOW),
            total: Recent::largest(),
            receiving: 0,
            peak: 0,
            since: None,
            busy: Duration::ZERO,
            counted: None,
            starts: 0,
        }
    }

    /// A body of a request handed over at `sent` starts arriving; returns its ticket when no
    /// other body is arriving (it stays alone while [`Endpoint::starts`] still equals the
    /// ticket).
    ///
    /// The body was owed from one round trip after `sent` (see the module docs): that time,
    /// where not counted yet, joins the window's busy time.
    fn body_started(&mut self, now: Instant, sent: Instant) -> Option<u64> {
        let owed = self
            .rtt
            .best()
            .and_then(|rtt| sent.checked_add(rtt))
            .map_or(now, |o| o.min(now));
        let owed = self.counted.map_or(owed, |c| owed.max(c));
        let alone = self.receiving == 0;
        self.since = Some(match self.since {
            Some(since) if !alone => since.min(owed),
            _ => owed,
        });
        self.receiving += 1;
        self.peak = self.peak.max(self.receiving);
        self.starts += 1;
        alone.then_some(self.starts)
    }

    /// A body ended: the window may close, at an end (where a body's bytes have come) rather
    /// than at a start (whose wait it holds, but none of its bytes).
    fn body_ended(&mut self, now: Instant, bytes: &AtomicU64) {
        self.window(now, bytes);
        self.receiving = self.receiving.saturating_sub(1);
        if self.receiving == 0
            && let Some(since) = self.since.take()
        {
            self.busy += now.saturating_duration_since(since);
            self.counted = Some(now);
        }
    }

    /// Time in this window with a body arriving, up to `now`.
    fn busy(&self, now: Instant) -> Duration {
        self.busy
            + self
                .since
                .map_or(Duration::ZERO, |s| now.saturating_duration_since(s))
    }

    /// Closes the total-rate window once it is long and full enough: a sample when bodies
    /// overlapped in it.
    fn window(&mut self, now: Instant, bytes: &AtomicU64) {
        let busy = self.busy(now);
        let carried = bytes.load(Ordering::Relaxed);
        if busy < TOTAL_WINDOW || carried < TOTAL_BYTES {
            return;
        }
        if self.peak >= 2 {
            self.total.push(now, carried as f64 / busy.as_secs_f64());
        }
        bytes.fetch_sub(carried, Ordering::Relaxed);
        self.busy = Duration::ZERO;
        self.since = self.since.map(|_| now);
        self.counted = Some(now);
        self.peak = self.receiving;
    }

    /// The open window's rate, once it may stand in for a closed one (see the module docs).
    fn open_rate(&self, now: Instant, carried: u64) -> Option<f64> {
        let busy = self.busy(now);
        (self.peak >= 2 && carried >= TOTAL_BYTES && busy >= OPEN_WINDOW)
            .then(|| carried as f64 / busy.as_secs_f64())
    }

    /// The measured total rate, `carried` being the open window's bytes so far: the best
    /// closed window, or the open one where it stands in.
    fn total_rate(&self, now: Instant, carried: u64) -> Option<u64> {
        let total = self.total.best().or_else(|| self.open_rate(now, carried));
        total.map(|v| (v as u64).max(1))
    }

    /// The estimate, `carried` being the open window's bytes so far.
    fn estimate(&self, concurrency: u32, now: Instant, carried: u64) -> LinkEstimate {
        let prior = CostModel::priors(concurrency);
        let secs = |v: f64| Duration::try_from_secs_f64(v).unwrap_or(Duration::MAX);
        let rate = |v: f64| (v as u64).max(1);
        let measured = self.rate.median().map(rate);
        let total = self.total_rate(now, carried);
        // No lone body yet: one connection is assumed to carry the link. No overlapping
        // bodies yet: the link is the prior, whatever one connection carried alone (see
        // the module docs). Until both are measured no split is planned on a guessed ratio
        // of the two: a long transfer is cut for the gate to pace.
        let connection_rate = match (measured, total) {
            // A connection carries no more than the link: a lone body that came in a burst
            // (a shaper's bucket, the first slices of an idle link) reads faster than both.
            (Some(c), Some(t)) => c.min(t),
            (c, t) => c.or(t).unwrap_or(prior.total_rate),
        };
        LinkEstimate {
            model: CostModel {
                rtt: self.rtt.best().unwrap_or(prior.rtt),
                per_request: self
                    .per_request
                    .median()
                    .map_or(prior.per_request, |v| secs(v) + TRANSPORT_COST),
                connection_rate,
                total_rate: total.unwrap_or(prior.total_rate),
                concurrency,
                max_transfer: CostModel::transfer_cap(measured.is_some(), total.is_some()),
                total_known: total.is_some(),
            },
            rtt_samples: self.rtt.count,
            rate_samples: self.rate.count,
            total_samples: self.total.count,
        }
    }
}

/// One endpoint: its estimates, and the body bytes of its current total-rate window
/// (counted as they arrive, without the lock).
#[derive(Debug)]
struct Link {
    state: Mutex<Endpoint>,
    bytes: AtomicU64,
}

impl Link {
    fn lock(&self) -> MutexGuard<'_, Endpoint> {
        // Samples are plain pushes: a panic cannot leave them inconsistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The estimates of every endpoint a client has talked to.
#[derive(Debug, Default)]
pub(crate) struct LinkTable {
    endpoints: Mutex<HashMap<String, Arc<Link>>>,
}

impl LinkTable {
    fn link(&self, endpoint: &str) -> Arc<Link> {
        let mut map = self.endpoints.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = map.get(endpoint) {
            return Arc::clone(l);
        }
        let link = Arc::new(Link {
            state: Mutex::new(Endpoint::new()),
            bytes: AtomicU64::new(0),
        });
        map.insert(endpoint.to_owned(), Arc::clone(&link));
        link
    }

    /// `endpoint`'s link, if it has one (unlike [`LinkTable::link`], none is made).
    fn known(&self, endpoint: &str) -> Option<Arc<Link>> {
        let map = self.endpoints.lock().unwrap_or_else(|e| e.into_inner());
        map.get(endpoint).cloned()
    }

    /// `endpoint`'s total rate, if measured: a window closed, or the open one stands in (see
    /// the module docs).
    pub(crate) fn total_rate(&self, endpoint: &str) -> Option<u64> {
        self.known(endpoint).and_then(|l| {
            let carried = l.bytes.load(Ordering::Relaxed);
            l.lock().total_rate(Instant::now(), carried)
        })
    }

    /// The estimate for `endpoint` (the priors for one never seen).
    pub(crate) fn estimate(&self, endpoint: &str, concurrency: u32) -> LinkEstimate {
        let link = self.known(endpoint);
        let now = Instant::now();
        match link {
            Some(l) => l
                .lock()
                .estimate(concurrency, now, l.bytes.load(Ordering::Relaxed)),
            None => Endpoint::new().estimate(concurrency, now, 0),
        }
    }
}

/// `scheme://host:port` of an absolute request URI (the port made explicit), or `None`.
pub(crate) fn endpoint(uri: &http::Uri) -> Option<String> {
    let scheme = uri.scheme_str()?;
    let host = uri.host()?;
    let port = uri.port_u16().or(match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    })?;
    // Built by pushing: this runs once per transfer, and `format!` cost more than the
    // lookup (an integer's `to_string` skips the formatter).
    let port = port.to_string();
    let mut key = String::with_capacity(scheme.len() + host.len() + port.len() + 4);
    key.push_str(scheme);
    key.push_str("://");
    key.extend(host.chars().map(|c| c.to_ascii_lowercase()));
    key.push(':');
    key.push_str(&port);
    Some(key)
}

/// The endpoint a locator's requests go to first (before any redirect), as its exchanges
/// record it; `None` for a local file or a locator no request can be built for.
pub(crate) fn locator_endpoint(settings: &Settings, locator: &Locator) -> Option<String> {
    if !locator.is_remote() {
        return None;
    }
    let signing = Signing {
        auth: &Auth::Anonymous,
        region: None,
        now: std::time::SystemTime::now(),
    };
    let range = ByteRange::Span { first: 0, last: 0 };
    let profiles = backends::Profiles::default();
    let prepared = backends::prepare(settings, &profiles, locator, range, None, signing).ok()?;
    endpoint(&prepared.request.uri)
}

/// One exchange's measurement, kept by its attempt loop: what the current attempt sent and
/// received, reported to the table as the attempt ends.
#[derive(Debug)]
pub(crate) struct Meter<'a> {
    table: Option<&'a LinkTable>,
    link: RefCell<Option<Arc<Link>>>,
    prepared: Cell<Option<Instant>>,
    sent: Cell<Option<Instant>>,
    first_byte: Cell<Option<Instant>>,
    /// The body's ticket when it started alone (see [`Endpoint::body_started`]).
    alone: Cell<Option<u64>>,
    bytes: Cell<u64>,
    status: Cell<u16>,
    new_connection: Cell<bool>,
    /// When the answering connection's setup completed, if known.
    ready: Cell<Option<Instant>>,
    tls: Cell<bool>,
}

impl<'a> Meter<'a> {
    /// A meter reporting to `table` (none: measures nothing).
    pub(crate) fn new(table: Option<&'a LinkTable>) -> Meter<'a> {
        Meter {
            table,
            link: RefCell::new(None),
            prepared: Cell::new(None),
            sent: Cell::new(None),
            first_byte: Cell::new(None),
            alone: Cell::new(None),
            bytes: Cell::new(0),
            status: Cell::new(0),
            new_connection: Cell::new(false),
            ready: Cell::new(None),
            tls: Cell::new(false),
        }
    }

    /// An attempt starts building its request.
    pub(crate) fn preparing(&self) {
        if self.table.is_some() {
            self.prepared.set(Some(Instant::now()));
        }
    }

    /// The attempt's request goes to the transport.
    pub(crate) fn sent(&self, uri: &http::Uri) {
        let Some(table) = self.table else { return };
        // A previous attempt whose body broke off ends here.
        self.ended(false);
        let mut link = self.link.borrow_mut();
        if link.is_none() {
            *link = endpoint(uri).map(|e| table.link(&e));
        }
        self.sent.set(Some(Instant::now()));
        self.tls.set(uri.scheme_str() == Some("https"));
        self.first_byte.set(None);
        self.bytes.set(0);
        self.status.set(0);
    }

    /// When the current attempt's request went to the transport.
    pub(crate) fn sent_at(&self) -> Option<Instant> {
        self.sent.get()
    }

    /// The response head arrived, on a new connection or not; `ready` is when the connection's
    /// setup completed, if known.
    pub(crate) fn head(&self, status: u16, new_connection: bool, ready: Option<Instant>) {
        self.status.set(status);
        self.new_connection.set(new_connection);
        self.ready.set(ready);
    }

    /// This attempt's round trip, once its first body byte came (its connection's
    /// handshakes left out, as for a sample: see [`round_trip`]).
    pub(crate) fn round_trip(&self) -> Option<Duration> {
        Some(round_trip(
            self.sent.get()?,
            self.first_byte.get()?,
            self.fresh(),
        ))
    }

    /// The attempt's connection, if it was opened for it.
    fn fresh(&self) -> Option<Fresh> {
        self.new_connection.get().then(|| Fresh {
            ready: self.ready.get(),
            trips: if self.tls.get() { 3 } else { 2 },
        })
    }

    /// Body bytes arrived.
    pub(crate) fn body(&self, n: u64) {
        let link = self.link.borrow();
        let Some(link) = link.as_ref() else { return };
        if self.first_byte.get().is_none() {
            let now = Instant::now();
            self.first_byte.set(Some(now));
            let sent = self.sent.get().unwrap_or(now);
            self.alone.set(link.lock().body_started(now, sent));
        }
        link.bytes.fetch_add(n, Ordering::Relaxed);
        self.bytes.set(self.bytes.get().saturating_add(n));
    }

    /// The attempt ended; `clean` when it is the exchange's first attempt and it succeeded,
    /// so its times may be samples.
    pub(crate) fn ended(&self, clean: bool) {
        let Some(first) = self.first_byte.take() else {
            return;
        };
        let link = self.link.borrow();
        let Some(link) = link.as_ref() else { return };
        let now = Instant::now();
        let bytes = self.bytes.get();
        let clean = clean && (200..300).contains(&self.status.get());
        let mut e = link.lock();
        let alone = self.alone.take().is_some_and(|t| t == e.starts);
        e.body_ended(now, &link.bytes);
        if !clean {
            return;
        }
        if let (Some(prepared), Some(sent)) = (self.prepared.get(), self.sent.get()) {
            e.per_request
                .push(sent.saturating_duration_since(prepared).as_secs_f64());
            e.rtt.push(now, round_trip(sent, first, self.fresh()));
        }
        let body = now.saturating_duration_since(first);
        if alone && bytes >= RATE_BODY && !body.is_zero() {
            e.rate.push(bytes as f64 / body.as_secs_f64());
        }
    }
}

/// A new connection's part in its first answer's time.
#[derive(Clone, Copy, Debug)]
struct Fresh {
    /// When its setup completed, if known.
    ready: Option<Instant>,
    /// Round trips from the hand-over to the first byte, handshakes included: 2 over TCP, 3
    /// with TLS.
    trips: u32,
}

/// One round-trip sample of a request handed over at `sent` and answered at `first`;
/// `fresh` if its connection was opened for it.
///
/// On a new connection the sample is the smaller of two bounds of one round trip: the time
/// from the setup's completion (the request cannot be written before it), and the whole
/// time divided by the round trips it held. Where a handshake takes a round trip both agree;
/// where setting up a cold wave's many connections at once is work (loopback, a busy
/// server), the first bound leaves that work out; where setup completes at once and the
/// handshake is paid on the first data (the test kit's latency proxy), the second does.
fn round_trip(sent: Instant, first: Instant, fresh: Option<Fresh>) -> Duration {
    let whole = first.saturating_duration_since(sent);
    match fresh {
        // Set up before the hand-over (for another request): no handshake on its path.
        Some(Fresh { ready: Some(r), .. }) if r <= sent => whole,
        Some(f) => (whole / f.trips.max(1)).min(
            f.ready
                .map_or(whole, |r| first.saturating_duration_since(r)),
        ),
        None => whole,
    }
}

impl Drop for Meter<'_> {
    /// An exchange dropped mid-body (cancelled, timed out) still ends its body.
    fn drop(&mut self) {
        self.ended(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_make_ports_explicit() {
        assert_eq!(
            endpoint(&"https://Example.com/a?b".parse().unwrap()).as_deref(),
            Some("https://example.com:443")
        );
        assert_eq!(
            endpoint(&"http://127.0.0.1:8080/x".parse().unwrap()).as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(endpoint(&"/relative".parse().unwrap()), None);
    }

    #[test]
    fn estimates_start_from_the_priors_and_resist_outliers() {
        let table = LinkTable::default();
        let cold = table.estimate("http://h:1", 8);
        assert_eq!(cold.model, CostModel::priors(8));
        assert!(cold.is_cold());
        {
            let link = table.link("http://h:1");
            let mut e = link.lock();
            for rtt in [20, 21, 500, 22] {
                // One queued answer: the minimum ignores it.
                e.rtt.push(Instant::now(), Duration::from_millis(rtt));
            }
            for rate in [50e6, 52e6, 1e12, 48e6, 51e6] {
                e.rate.push(rate); // one burst: the median ignores it
            }
        }
        let warm = table.estimate("http://h:1", 8);
        assert_eq!(warm.model.rtt, Duration::from_millis(20));
        assert_eq!(warm.model.connection_rate, 51_000_000);
        // No overlapping bodies measured: the link is the prior.
        assert_eq!(warm.model.total_rate, CostModel::PRIOR_TOTAL_RATE);
        assert_eq!((warm.rtt_samples, warm.rate_samples), (4, 5));
    }

    #[test]
    fn a_new_connections_round_trip_leaves_out_its_setup_or_its_handshakes() {
        let t0 = Instant::now();
        let ms = |n: f64| Duration::from_secs_f64(n / 1e3);
        let at = |n: f64| t0 + ms(n);
        let fresh = |ready: f64, trips| {
            Some(Fresh {
                ready: Some(at(ready)),
                trips,
            })
        };
        // A reused connection: the whole time.
        assert_eq!(round_trip(t0, at(20.0), None), ms(20.0));
        // A real 20 ms path: the TCP handshake takes a round trip, TLS one more.
        assert_eq!(round_trip(t0, at(40.0), fresh(20.0, 2)), ms(20.0));
        assert_eq!(round_trip(t0, at(60.0), fresh(40.0, 3)), ms(20.0));
        // Behind the latency proxy, setup completes at once and the first data pays for it.
        assert_eq!(round_trip(t0, at(40.0), fresh(0.1, 2)), ms(20.0));
        // A cold wave on loopback: setting up its connections took 6 ms, the path 0.7.
        assert_eq!(round_trip(t0, at(6.7), fresh(6.0, 2)), ms(0.7));
        // A connection set up before the request (for another one): no handshake to count.
        let early = Some(Fresh {
            ready: Some(t0),
            trips: 2,
        });
        assert_eq!(round_trip(at(1.0), at(5.0), early), ms(4.0));
        assert_eq!(
            round_trip(
                t0,
                at(8.0),
                Some(Fresh {
                    ready: None,
                    trips: 2
                })
            ),
            ms(4.0)
        );
    }

    #[test]
    fn the_total_rate_is_the_largest_window_of_the_last_span() {
        let t0 = Instant::now();
        let mut e = Endpoint::new();
        let total = |e: &Endpoint, now| e.estimate(64, now, 0).model.total_rate;
        // Windows of ever smaller transfers read ever lower: the best stands.
        for (i, rate) in [6e8, 3e8, 2e8, 1e8].into_iter().enumerate() {
            e.total
                .push(t0 + Duration::from_millis(100 * i as u64), rate);
        }
        assert_eq!(total(&e, t0), 600_000_000);
        assert_eq!(e.total.count, 4);
        // Until it is older than the span: then the best after it.
        let later = t0 + RTT_SPAN + Duration::from_millis(150);
        e.total.push(later, 5e7);
        assert_eq!(total(&e, later), 200_000_000);
        // A sample that is no number is not taken.
        e.total.push(later, f64::NAN);
        assert_eq!((total(&e, later), e.total.count), (200_000_000, 5));
    }

    #[test]
    fn the_round_trip_is_the_smallest_sample_of_the_last_span() {
        let t0 = Instant::now();
        let us = Duration::from_micros;
        let mut rtt = Recent::smallest();
        // A cold wave: the first answer is the least queued one; the ones behind it wait.
        rtt.push(t0, us(700));
        for i in 0..20 {
            rtt.push(t0 + Duration::from_millis(i), us(2_000 + 100 * i));
        }
        assert_eq!(rtt.best(), Some(us(700)));
        assert_eq!(rtt.count, 21);
        // Samples taken longer than the span before the latest no longer count.
        let later = t0 + RTT_SPAN + Duration::from_micros(10_500);
        rtt.push(later, us(9_000));
        assert_eq!(rtt.best(), Some(us(3_100)));
        // A smaller sample replaces every larger one before it.
        rtt.push(later, us(1_000));
        assert_eq!(rtt.candidates.len(), 1);
        assert_eq!(rtt.best(), Some(us(1_000)));
        // Rising samples are held up to a bound.
        for i in 0..1_000 {
            rtt.push(later, us(2_000 + i));
        }
        assert_eq!(rtt.candidates.len(), RTT_KEPT);
    }

    #[test]
    fn a_connection_rate_comes_from_lone_bodies_only() {
        let table = LinkTable::default();
        let link = table.link("http://h:1");
        let meter = |ms: u64| {
            let m = Meter::new(Some(&table));
            m.preparing();
            m.sent(&"http://h:1/x".parse().unwrap());
            m.head(206, false, None);
            m.body(1 << 20);
            std::thread::sleep(Duration::from_millis(ms));
            m
        };
        // Two bodies side by side: each measures its share of the link, not a connection.
        let (a, b) = (meter(0), meter(5));
        a.ended(true);
        b.ended(true);
        assert_eq!(link.lock().rate.count, 0);
        // A body alone is a sample.
        meter(5).ended(true);
        assert_eq!(link.lock().rate.count, 1);
        // Nothing alone measured: one connection is assumed to carry the link, and a long
        // transfer is cut for the gate.
        let cap = Some(crate::plan::cost::COLD_TRANSFER);
        let cold = LinkTable::default().estimate("http://h:1", 8);
        assert_eq!(cold.model.connection_rate, cold.model.total_rate);
        assert_eq!(cold.model.max_transfer, cap);
        // One measured alone, the link's total still the prior: still cut for the gate.
        let lone = table.estimate("http://h:1", 8).model;
        assert_ne!(lone.connection_rate, CostModel::PRIOR_TOTAL_RATE);
        assert_eq!(
            (lone.total_rate, lone.max_transfer),
            (CostModel::PRIOR_TOTAL_RATE, cap)
        );
        // Both measured: the model decides.
        {
            let mut e = link.lock();
            e.total.push(Instant::now(), 3e8);
        }
        let warm = table.estimate("http://h:1", 8).model;
        assert_eq!(warm.total_rate, 300_000_000.max(warm.connection_rate));
        assert_eq!(warm.max_transfer, None);
    }

    #[test]
    fn an_open_window_stands_in_for_the_total_rate_until_one_closes() {
        let mut e = Endpoint::new();
        let bytes = AtomicU64::new(0);
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let total = |e: &Endpoint, now, carried| e.estimate(8, now, carried).model.total_rate;
        e.body_started(t0, t0);
        e.body_started(t0, t0);
        // Too short, or too few bytes, or one body alone: the prior.
        assert_eq!(total(&e, ms(5), 4 << 20), CostModel::PRIOR_TOTAL_RATE);
        // A first round's 15 or 35 ms are mostly its cold start.
        assert_eq!(total(&e, ms(15), 4 << 20), CostModel::PRIOR_TOTAL_RATE);
        assert_eq!(total(&e, ms(35), 4 << 20), CostModel::PRIOR_TOTAL_RATE);
        assert_eq!(total(&e, ms(40), 1000), CostModel::PRIOR_TOTAL_RATE);
        let lone = Endpoint::new();
        assert_eq!(total(&lone, ms(40), 4 << 20), CostModel::PRIOR_TOTAL_RATE);
        // 5 MB over 40 ms of two bodies: 125 MB/s.
        assert_eq!(total(&e, ms(40), 5_000_000), 125_000_000);
        // A closed window replaces it.
        bytes.fetch_add(10 << 20, Ordering::Relaxed);
        e.body_ended(ms(100), &bytes);
        assert_eq!(e.total.count, 1);
        let closed = e.total.best().unwrap() as u64;
        assert_eq!(total(&e, ms(101), 1 << 30), closed);
    }

    #[test]
    fn total_rate_needs_overlapping_bodies() {
        let mut e = Endpoint::new();
        let bytes = AtomicU64::new(0);
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        // One body at a time: no total-rate sample.
        e.body_started(t0, t0);
        bytes.fetch_add(10 << 20, Ordering::Relaxed);
        e.body_ended(ms(100), &bytes);
        assert_eq!(e.total.count, 0);
        // Two bodies side by side over 100 ms carry 20 MiB; the window closes as the first
        // of them ends.
        e.body_started(ms(200), ms(200));
        e.body_started(ms(200), ms(200));
        bytes.fetch_add(20 << 20, Ordering::Relaxed);
        e.body_ended(ms(300), &bytes);
        assert_eq!(e.total.count, 1);
        let rate = e.total.best().unwrap();
        assert!((rate - 20.0 * 1048576.0 / 0.1).abs() < 1.0, "{rate}");
    }

    #[test]
    fn small_bodies_through_a_capped_link_measure_the_cap() {
        let mut e = Endpoint::new();
        let bytes = AtomicU64::new(0);
        let t0 = Instant::now();
        let us = |n: u64| t0 + Duration::from_micros(n);
        e.rtt.push(t0, Duration::from_millis(1));
        // 60 requests of 100 KiB sent at once through a link carrying 100 MB/s, one round
        // trip of 1 ms: each pair of bodies comes in one 0.1 ms burst once the link has
        // carried it, 2.048 ms after the pair before.
        for k in 0..30 {
            let burst = us(1_000 + k * 2_048 + 1_948);
            e.body_started(burst, t0);
            e.body_started(burst, t0);
            bytes.fetch_add(2 * 102_400, Ordering::Relaxed);
            let end = burst + Duration::from_micros(100);
            e.body_ended(end, &bytes);
            e.body_ended(end, &bytes);
        }
        // Owed from one round trip after sending: the cap, not 20 times it (the bursts).
        let rate = e.estimate(64, us(70_000), bytes.load(Ordering::Relaxed));
        let total = rate.model.total_rate as f64;
        assert!((total / 1e8 - 1.0).abs() < 0.02, "{total}");
        // A long link's round trip is not owed time: bodies sent 20 ms before they start.
        let mut long = Endpoint::new();
        let bytes = AtomicU64::new(0);
        long.rtt.push(t0, Duration::from_millis(20));
        long.body_started(us(20_000), t0);
        long.body_started(us(20_000), t0);
        bytes.fetch_add(10_000_000, Ordering::Relaxed);
        long.body_ended(us(70_000), &bytes);
        long.body_ended(us(70_000), &bytes);
        long.body_started(us(90_000), us(70_000));
        assert_eq!(long.total.best(), Some(2e8));
    }

    #[test]
    fn a_connection_carries_no_more_than_the_measured_link() {
        let mut e = Endpoint::new();
        e.rate.push(2e9);
        e.total.push(Instant::now(), 1.25e8);
        let m = e.estimate(64, Instant::now(), 0).model;
        assert_eq!(
            (m.connection_rate, m.total_rate),
            (125_000_000, 125_000_000)
        );
    }
}
