//! `LatencyProxy`: a TCP proxy on 127.0.0.1 that adds one-way delay and optional bandwidth caps
//! in front of any address (this kernel has no netem).
//!
//! * **Delay.** Every chunk read from one side is stamped with its arrival time and written to
//!   the other side `delay` later, in order. Chunks are queued, so many can be in transit at once:
//!   the delay adds latency without limiting throughput. A round trip costs `2 × delay`. A new
//!   connection also costs one extra round trip before anything is forwarded (the proxy waits
//!   `2 × delay` before connecting to the target, like a TCP handshake), so the first response
//!   on a fresh connection arrives after about `4 × delay`, later ones on the same connection
//!   after `2 × delay`.
//! * **Bandwidth.** `rate_per_connection` caps each direction of each connection, `rate_total`
//!   caps all directions of all connections together (bytes per second, paced in small slices).
//! * **Slow start** (optional). A real TCP connection sends at most its congestion window per
//!   round trip, starting at 10 segments and doubling each round trip it fills (slow start,
//!   with no loss to end it), and starts over after an idle second; through this proxy the
//!   client's TCP sees a loopback round trip, so a new connection carries at full speed at
//!   once. With [`ProxyOptions::slow_start`] each direction of each connection is paced so.
//! * **Closing.** An end of stream is forwarded (half-close) after the delay; a reset (RST) read
//!   on one side is forwarded as a reset of the other side after the delay.
//! * **Counting.** Besides connections and raw bytes, the proxy parses plain HTTP/1.1 as it
//!   passes and counts requests and response body bytes, so that a server without a log can be
//!   measured (see [`LatencyProxy::requests`]).
//!
//! The proxy runs on its own thread and runtime and stops when dropped.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore, mpsc};
use tokio::time::Instant;

use crate::background::Background;
use crate::http_meter::{Meter, Totals};

/// Settings of a [`LatencyProxy`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyOptions {
    /// One-way delay added in each direction (round trip = 2 × delay).
    pub delay: Duration,
    /// Bandwidth cap in bytes per second for each direction of each connection.
    pub rate_per_connection: Option<u64>,
    /// Bandwidth cap in bytes per second shared by all connections and directions.
    pub rate_total: Option<u64>,
    /// Pace each direction of each connection as TCP's slow start would on a path with the
    /// proxy's round trip (see the [module docs](self)); nothing without a delay.
    pub slow_start: bool,
}

/// Paces bytes at a fixed rate: each reservation gets the next free slot.
struct Pacer {
    rate: f64,
    next: Instant,
}

impl Pacer {
    fn new(rate: u64) -> Pacer {
        Pacer {
            rate: rate.max(1) as f64,
            next: Instant::now(),
        }
    }

    /// Reserves `n` bytes; returns when they may be sent.
    fn reserve(&mut self, n: usize, now: Instant) -> Instant {
        let start = self.next.max(now);
        self.next = start + Duration::from_secs_f64(n as f64 / self.rate);
        start
    }
}

/// One direction of one connection under TCP's slow start: its congestion window, and the
/// bytes sent in the current round trip.
struct SlowStart {
    rtt: Duration,
    window: usize,
    /// When the current round trip began.
    since: Instant,
    sent: usize,
    last: Instant,
}

impl SlowStart {
    /// TCP's initial window: 10 segments of 1,460 bytes (RFC 6928).
    const INITIAL: usize = 10 * 1460;
    /// An idle this long starts the window over (Linux's `tcp_slow_start_after_idle`, after
    /// a retransmission timeout; 1 s is RFC 6298's initial one).
    const IDLE: Duration = Duration::from_secs(1);

    fn new(rtt: Duration, now: Instant) -> SlowStart {
        SlowStart {
            rtt,
            window: Self::INITIAL,
            since: now,
            sent: 0,
            last: now,
        }
    }

    /// Reserves `n` bytes at `now`; returns when they may be sent: in the current round trip
    /// while its window has room, else at the start of the next, whose window is twice as
    /// large (this one was filled). Round trips that passed unfilled leave it as it was.
    fn reserve(&mut self, n: usize, now: Instant) -> Instant {
        if now.saturating_duration_since(self.last) >= Self::IDLE {
            self.window = Self::INITIAL;
            self.since = now;
            self.sent = 0;
        }
        let passed = now.saturating_duration_since(self.since).as_nanos() / self.rtt.as_nanos();
        if passed > 0 {
            let passed = u32::try_from(passed).unwrap_or(u32::MAX);
            self.since += self.rtt.saturating_mul(passed);
            self.sent = 0;
        }
        let mut at = now;
        if self.sent >= self.window {
            self.since += self.rtt;
            at = self.since;
            self.sent = 0;
            self.window = self.window.saturating_mul(2);
        }
        self.sent += n;
        self.last = at;
        at
    }
}

struct Shared {
    opts: ProxyOptions,
    target: SocketAddr,
    connections: AtomicU64,
    to_target: AtomicU64,
    to_client: AtomicU64,
    http: Arc<Totals>,
    total: Option<Mutex<Pacer>>,
}

/// A delaying, rate-capping TCP proxy on 127.0.0.1; see the [module docs](self).
pub struct LatencyProxy {
    shared: Arc<Shared>,
    addr: SocketAddr,
    _background: Background,
}

impl LatencyProxy {
    /// Listens on a free port of 127.0.0.1 and forwards every connection to `target`.
    ///
    /// Panics if the port cannot be bound or the runtime cannot start (this is a test kit).
    pub fn start(target: SocketAddr, opts: ProxyOptions) -> LatencyProxy {
        let shared = Arc::new(Shared {
            opts,
            target,
            connections: AtomicU64::new(0),
            to_target: AtomicU64::new(0),
            to_client: AtomicU64::new(0),
            http: Arc::default(),
            total: opts.rate_total.map(|r| Mutex::new(Pacer::new(r))),
        });
        let sh = shared.clone();
        let (addr, background) =
            Background::listen("karu-testkit-latency-proxy", move |l| accept_loop(l, sh));
        LatencyProxy {
            shared,
            addr,
            _background: background,
        }
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/` followed by `path` (a leading `/` is optional).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// The address the proxy forwards to.
    pub fn target(&self) -> SocketAddr {
        self.shared.target
    }

    /// Number of client connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Bytes written to the target so far (client → target).
    pub fn bytes_to_target(&self) -> u64 {
        self.shared.to_target.load(Ordering::SeqCst)
    }

    /// Bytes written to clients so far (target → client).
    pub fn bytes_to_client(&self) -> u64 {
        self.shared.to_client.load(Ordering::SeqCst)
    }

    /// HTTP/1.1 requests forwarded to the target so far, counted from their heads. Connections
    /// that carry anything else (TLS, HTTP/2) are not counted.
    pub fn requests(&self) -> u64 {
        self.shared.http.requests.load(Ordering::SeqCst)
    }

    /// Response body bytes written to clients so far: what `Content-Length` or chunked framing
    /// delimits (chunked bodies decoded), without heads; nothing for `HEAD` requests.
    pub fn response_body_bytes(&self) -> u64 {
        self.shared.http.body_bytes.load(Ordering::SeqCst)
    }
}

impl std::fmt::Debug for LatencyProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LatencyProxy")
            .field("addr", &self.addr)
            .field("target", &self.shared.target)
            .field("opts", &self.shared.opts)
            .finish()
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((client, _)) => {
                shared.connections.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(connection(client, shared.clone()));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

async fn connection(client: TcpStream, shared: Arc<Shared>) {
    // The handshake's round trip.
    tokio::time::sleep(shared.opts.delay * 2).await;
    let Ok(upstream) = TcpStream::connect(shared.target).await else {
        let _ = client.set_zero_linger();
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let abort = Arc::new(Notify::new());
    let (cr, cw) = client.into_split();
    let (ur, uw) = upstream.into_split();
    let (requests, responses) = Meter::pair(&shared.http);
    let up = direction(cr, uw, shared.clone(), abort.clone(), requests, true);
    let down = direction(ur, cw, shared.clone(), abort.clone(), responses, false);
    tokio::select! {
        _ = async { tokio::join!(up, down) } => {}
        _ = abort.notified() => {}
    }
}

enum Msg {
    Data(Bytes),
    Eof,
    Reset,
}

/// Bytes of one direction allowed in transit inside the proxy.
const BUDGET: usize = 8 << 20;
const READ_SIZE: usize = 32 * 1024;
/// How early a paced slice may go: one tick of tokio's millisecond timer.
const PACE_SLACK: Duration = Duration::from_millis(1);

async fn direction(
    mut rd: OwnedReadHalf,
    mut wr: OwnedWriteHalf,
    shared: Arc<Shared>,
    abort: Arc<Notify>,
    mut meter: Meter,
    to_target: bool,
) {
    let delay = shared.opts.delay;
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Msg)>();
    let budget = Arc::new(Semaphore::new(BUDGET));

    let reader = {
        let budget = budget.clone();
        async move {
            loop {
                let mut buf = BytesMut::with_capacity(READ_SIZE);
                let msg = match rd.read_buf(&mut buf).await {
                    Ok(0) => Msg::Eof,
                    Ok(n) => {
                        // Acknowledge at once: a peer that leaves Nagle's algorithm on (s3s-fs
                        // does) would otherwise hold its last small segment until our delayed
                        // ACK, 40 ms per response on loopback. Linux leaves the mode as it
                        // goes (a write puts the socket back to delaying), so it is set again
                        // after every read and every write.
                        let _ = rd.as_ref().set_quickack(true);
                        match budget.acquire_many(n as u32).await {
                            Ok(p) => p.forget(),
                            Err(_) => return,
                        }
                        Msg::Data(buf.freeze())
                    }
                    Err(_) => Msg::Reset,
                };
                let last = !matches!(msg, Msg::Data(_));
                if tx.send((Instant::now() + delay, msg)).is_err() || last {
                    return;
                }
            }
        }
    };

    let writer = async move {
        let mut pacer = shared.opts.rate_per_connection.map(Pacer::new);
        let mut slow = (shared.opts.slow_start && !delay.is_zero())
            .then(|| SlowStart::new(delay * 2, Instant::now()));
        let slice = [shared.opts.rate_per_connection, shared.opts.rate_total]
            .into_iter()
            .flatten()
            .min()
            .map_or(usize::MAX, |r| ((r / 100) as usize).clamp(1, 16 * 1024));
        let counter = if to_target {
            &shared.to_target
        } else {
            &shared.to_client
        };
        while let Some((due, msg)) = rx.recv().await {
            // Without a delay the proxy only counts: no timer, whose millisecond tick would
            // add up to a millisecond per chunk.
            if !delay.is_zero() {
                tokio::time::sleep_until(due).await;
            }
            match msg {
                Msg::Data(data) => {
                    // Counted before it is written, so a client holding a response knows the
                    // counts include it.
                    meter.feed(&data);
                    for part in data.chunks(slice) {
                        let now = Instant::now();
                        let mut at = now;
                        if let Some(p) = pacer.as_mut() {
                            at = at.max(p.reserve(part.len(), now));
                        }
                        if let Some(s) = slow.as_mut() {
                            at = at.max(s.reserve(part.len(), now));
                        }
                        if let Some(t) = &shared.total {
                            let t = t
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .reserve(part.len(), now);
                            at = at.max(t);
                        }
                        // tokio's timer ticks in whole milliseconds: sleeping until each
                        // slice's exact slot would let one connection send one slice per tick
                        // (16 KiB/ms, ~16 MB/s) whatever the cap. Sending up to one tick early
                        // keeps the long-run rate (slots are still reserved back to back) and
                        // lets a single connection reach the cap, as on a real link.
                        if at > now + PACE_SLACK {
                            tokio::time::sleep_until(at - PACE_SLACK).await;
                        }
                        if wr.write_all(part).await.is_err() {
                            abort.notify_one();
                            return;
                        }
                        let _ = wr.as_ref().set_quickack(true);
                        counter.fetch_add(part.len() as u64, Ordering::SeqCst);
                    }
                    budget.add_permits(data.len());
                }
                Msg::Eof => {
                    let _ = wr.shutdown().await;
                    return;
                }
                Msg::Reset => {
                    let _ = wr.as_ref().set_zero_linger();
                    // Dropping a write half would send a FIN first; the socket closes (with
                    // RST) when the connection task drops the read half.
                    wr.forget();
                    abort.notify_one();
                    return;
                }
            }
        }
    };
    tokio::join!(reader, writer);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_doubles_the_window_each_filled_round_trip_and_restarts_after_idle() {
        let rtt = Duration::from_millis(20);
        let t0 = Instant::now();
        let mut s = SlowStart::new(rtt, t0);
        let seg = SlowStart::INITIAL;
        // The first round trip carries the initial window; the next byte waits for the next
        // round trip, which carries twice as much, and so on.
        assert_eq!(s.reserve(seg, t0), t0);
        assert_eq!(s.reserve(1, t0), t0 + rtt);
        assert_eq!(s.reserve(2 * seg - 1, t0 + rtt), t0 + rtt);
        assert_eq!(s.reserve(1, t0 + rtt), t0 + 2 * rtt);
        assert_eq!(s.window, 4 * seg);
        // A round trip that passes unfilled keeps the window.
        let later = t0 + 5 * rtt + Duration::from_millis(3);
        assert_eq!(s.reserve(seg, later), later);
        assert_eq!(s.window, 4 * seg);
        // A second idle starts it over.
        let idle = later + SlowStart::IDLE;
        assert_eq!(s.reserve(seg, idle), idle);
        assert_eq!(s.window, seg);
        assert_eq!(s.reserve(1, idle), idle + rtt);
    }
}
