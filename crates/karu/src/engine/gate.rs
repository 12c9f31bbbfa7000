//! How many transfers run at once against one endpoint: bulk ones ([`BULK`] bytes or more)
//! and small ones, counted apart.
//!
//! Where a round trip is long, parallel transfers hide it, and the gate stays open (the
//! client's concurrency is the only limit). Where it is short (loopback, a LAN), parallel
//! transfers pay only when one connection cannot carry what the link can: a server that
//! streams each body slowly (s3s-fs reads files in 4 KiB steps) wants many, while on a small
//! machine with a fast server every extra stream costs CPU hand-offs and gains nothing. The
//! two cannot be told apart without measuring, so on a short link the gate measures:
//!
//! - **Cold** (nothing learnt yet): [`START`] bulk transfers run. A first body byte within
//!   [`SHORT`] of its request shows a short round trip (probing starts); none by then (from
//!   the first admission) shows a long one, and the gate opens: until a later first byte
//!   comes within [`SHORT`] (the late one was a busy machine's), and probing starts then.
//! - **Probing**: an epoch lasts until as many transfers have ended as the level allows (and
//!   at least [`MIN_EPOCH`]), or [`MAX_EPOCH`]; its rate is the bulk bytes received in it
//!   over its time. While a level carries [`GAIN`] times the best rate so far, the level
//!   doubles; otherwise the gate settles on the best level. An epoch in which no transfer had
//!   to wait (the work ran short of the level) says nothing about the level and is started
//!   again. Whole transfers make the steadiest measure (20 ms windows on loopback swung
//!   between 1 and 3.8 GB/s as socket buffers filled and drained); the time limit keeps a
//!   server whose every stream is slow (s3s-fs: 60–100 MB/s, a 13 MB piece 150 ms) from
//!   spending a whole transfer on each doubling: a transfer that waits is told to try again
//!   when the epoch is due, whether or not one ends.
//! - **Settled**: the best level stays the limit for the client's life.
//!
//! An open gate measures no levels: there every stream runs, and whether more streams would
//! carry more is tried by cutting the unread tails of slow ones into transfers of their own
//! ([`Gate::tails`], `engine::cut`).
//!
//! A small transfer's time is mostly its round trip, which parallel transfers hide; where
//! there is none to hide, each new connection costs both ends CPU that a short batch does not
//! pay back. So a cold endpoint, and one known to have a short round trip, starts with
//! [`SMALL`] small transfers at once, and doubles that level each [`GROW`] in which some
//! waited for it: a batch that lasts gets every connection within a few epochs, one that ends
//! sooner opens few. A long round trip lifts the limit with the bulk one. A small transfer's
//! first byte tells the round trip as a bulk one's does, so a batch of small reads learns it.
//! Plans for a short link assume the small level's slots ([`Gate::small_level`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The smallest transfer counted as bulk: one whose bytes take longer than a short link's
/// round trip ([`SHORT`]) at the priors' 1.25 GB/s (2.5 MB, rounded down to a quarter of the
/// planner's smallest piece, so every piece of a cut transfer is bulk). On a short link such
/// a transfer's time is its bytes, and whether more of them at once carry more is measured,
/// not assumed. Workload H at RTT 0 (15 transfers of 3.2 MB, 10 runs each, 2026-12-05):
/// counted as small (below 4 MiB), all 15 ran at once, 24–26 ms on nginx and 26–28 on the
/// test kit server against the guards' one stream's 16–22; counted as bulk, 18–22 and 21–23
/// ms on 1–2 streams. On s3s-fs, whose streams are each slow, the probing costs H 126–142 ms
/// against 106–108 (its other readers 178 and more).
pub(crate) const BULK: u64 = crate::plan::cost::MIN_PIECE / 4;
/// Bulk transfers a cold or probing endpoint starts with: one, since on a short link one
/// stream is often the fastest, and probing doubles from it within a few epochs where more
/// streams carry more. Workload C at RTT 0 (9 pieces of 13 MB on loopback, 7 runs each,
/// 2026-12-05): starting from two, the test kit server took 63–87 ms and nginx 57–66 ms on
/// 5–9 connections; starting from one, 49–67 and 35–51 ms on 3–5; a one-connection
/// sequential reader 49–58 and 37–46 ms.
pub(crate) const START: u32 = 1;
/// Small transfers a cold endpoint, or one with a short round trip, starts with. Workload S
/// at RTT 0 (250 reads of 64 KiB on loopback, 10 runs each, 2026-12-05): 16 at once took 13
/// ms on the test kit server and 11 on nginx, 64 took 16 and 16, a one-connection reader 15
/// and 14. A longer batch wants more: workload R (10,000 reads in some 7,000 transfers) took
/// 163 and 184 ms held at 16 against 136 and 146 with 64; doubling every [`GROW`], 147 and
/// 152 against 140 and 136. With 32, the first byte comes too late for a short link (32
/// connections opened at once on 2 cores), and S opened all 64.
pub(crate) const SMALL: u32 = 16;
/// How long a level of small transfers stands, with some waiting for it, before it doubles.
const GROW: Duration = Duration::from_millis(20);
/// A first body byte sooner than this after its transfer started means a short round trip
/// (on a new connection it holds the handshake too, so the round trip is below half of it).
pub(crate) const SHORT: Duration = Duration::from_millis(2);
/// How much faster a doubled level must be to keep growing.
pub(crate) const GAIN: f64 = 1.25;

/// Shortest epoch: below it a rate is a burst of buffered bytes.
const MIN_EPOCH: Duration = Duration::from_millis(20);
/// Longest epoch: a level's rate is known by then even if no transfer has ended.
const MAX_EPOCH: Duration = Duration::from_millis(50);

/// What the gate has learnt of its endpoint.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Regime {
    /// Nothing yet; `since` is when the first bulk transfer started.
    Cold { since: Option<Instant> },
    /// A short round trip: measuring which level carries the most, in this epoch.
    Probing(Epoch),
    /// Measured: the level stays.
    Settled,
    /// A long round trip: no limit (until a quick first byte shows a short one).
    Open,
}

/// What an open gate has learnt of whether more streams carry more. Its probing does not run
/// there, and the link's total measured from the streams running is only their sum: it says
/// nothing of what one more would add.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Explore {
    /// No stream added yet: the link's total is taken as the prior's (or more, if measured).
    Untried,
    /// Tails were cut off while `streams` bulk transfers carried `rate` (bytes per second)
    /// together; judged once `due`, when the tails' bytes count in what the streams carry.
    Trial {
        streams: u32,
        rate: f64,
        due: Instant,
    },
    /// More streams carried more: the prior's total stands.
    Grows,
    /// More streams carried no more: what they carried together when judged (bytes per
    /// second) is the link's total, or the link's measured total where that is more.
    Saturated(f64),
}

/// The bytes and ends of one probing epoch.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Epoch {
    start: Instant,
    bytes: u64,
    ended: u32,
    /// A transfer was refused in it: there was more work than the level let run.
    refused: bool,
}

#[derive(Debug)]
struct State {
    /// Bulk transfers running.
    running: u32,
    /// Whether more streams carry more, where the gate is open (see [`Gate::tails`]).
    explore: Explore,
    small: Small,
    level: u32,
    regime: Regime,
    /// The best level measured, with its rate (bytes per second).
    best: Option<(u32, f64)>,
}

/// The small transfers of a gate that is not open.
#[derive(Debug)]
struct Small {
    running: u32,
    level: u32,
    /// When the level's epoch started (at its first admission, then at each [`GROW`]).
    since: Option<Instant>,
    /// A small transfer waited for the level in this epoch.
    refused: bool,
}

/// Whether a transfer may start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// It may; it counts as running until its [`Admitted`] is dropped.
    Yes,
    /// Not before another transfer of the endpoint (of the same kind) ends.
    No,
    /// Not before another ends or `Instant` passes (a cold gate that may open then, or a
    /// probing gate whose epoch is due and whose level may grow).
    Until(Instant),
}

/// One endpoint's gate.
#[derive(Debug)]
pub(crate) struct Gate {
    state: Mutex<State>,
    /// Bulk body bytes received, counted as they arrive (without the lock).
    bytes: AtomicU64,
    /// The most transfers the client runs at once.
    ceiling: u32,
}

impl Gate {
    pub(crate) fn new(ceiling: u32) -> Gate {
        let ceiling = ceiling.max(1);
        Gate {
            state: Mutex::new(State {
                running: 0,
                small: Small {
                    running: 0,
                    level: SMALL.min(ceiling),
                    since: None,
                    refused: false,
                },
                level: START,
                regime: Regime::Cold { since: None },
                best: None,
                explore: Explore::Untried,
            }),
            bytes: AtomicU64::new(0),
            ceiling,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Plain counters: a panic cannot leave them inconsistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether one more transfer, `bulk` or small, may start at `now` (counted as running
    /// if so).
    pub(crate) fn enter(&self, now: Instant, bulk: bool) -> Admit {
        let mut s = self.lock();
        Self::judge_cold(&mut s, now);
        self.admit(&mut s, now, bulk)
    }

    /// How many tails a bulk transfer running at `rate` may cut off at `now`, the endpoint's
    /// bulk transfers carrying `together` (bytes per second) and the link's total measured
    /// at `measured`, if at all (see `engine::cut`). A gate that is not open measures by its
    /// probing whether more streams carry more, and admits tails as it admits transfers: no
    /// limit here. An open one (a long round trip) knows only what the streams running carry,
    /// so it tries: the first cut adds at most as many streams as run (a trial), and once its
    /// tails have had `settle` to bring their bytes, the streams together must carry more, by
    /// [`GAIN`] for twice the streams (in proportion for fewer), for more cuts to follow under
    /// the prior's total; otherwise what they carried when judged (or the link's measured
    /// total, if more) stands for the link, as for every later cut. (No stream whose rate
    /// still climbs is cut, so a trial does not read the climb as growth: see `engine::cut`.)
    pub(crate) fn tails(
        &self,
        now: Instant,
        rate: f64,
        together: f64,
        measured: Option<u64>,
    ) -> u32 {
        let mut s = self.lock();
        if s.regime != Regime::Open {
            return u32::MAX;
        }
        if let Explore::Trial {
            streams,
            rate: before,
            due,
        } = s.explore
            && now >= due
        {
            let grown = f64::from(s.running) / f64::from(streams.max(1)) - 1.0;
            s.explore = if grown > 0.0 && together >= before * (1.0 + (GAIN - 1.0) * grown) {
                Explore::Grows
            } else {
                Explore::Saturated(together)
            };
        }
        let prior = crate::plan::CostModel::PRIOR_TOTAL_RATE;
        let ceiling = match s.explore {
            Explore::Trial { .. } => return 0,
            // Judged before the link's total is measured (a cold client's first batch),
            // the prior would stand for it: the very guess the trial disproved.
            Explore::Saturated(judged) => measured.unwrap_or(0).max(judged as u64),
            Explore::Untried | Explore::Grows => measured.unwrap_or(0).max(prior),
        };
        let room = super::cut::headroom(ceiling as f64, s.running, rate, together);
        match s.explore {
            Explore::Untried => room.min(s.running),
            _ => room,
        }
    }

    /// `tails` were cut off at `now` (already admitted) off a stream running at `rate` while
    /// the endpoint's streams carried `together`: the first cut of an open gate starts its
    /// trial, judged after `settle`. What the streams carried before is taken as at least
    /// their number at this stream's rate: a window that began while some were starting
    /// reads low, and would make the trial's growth look larger than it is.
    pub(crate) fn cut(&self, now: Instant, tails: u32, rate: f64, together: f64, settle: Duration) {
        let mut s = self.lock();
        if s.regime == Regime::Open && s.explore == Explore::Untried {
            let streams = s.running.saturating_sub(tails);
            s.explore = Explore::Trial {
                streams,
                rate: together.max(f64::from(streams) * rate),
                // An instant past the clock's range: judged at the next look.
                due: now.checked_add(settle).unwrap_or(now),
            };
        }
    }

    /// Whether the gate lets every bulk transfer run (a long round trip).
    pub(crate) fn is_open(&self) -> bool {
        self.lock().regime == Regime::Open
    }

    /// Body bytes of the bulk transfers through this gate so far.
    pub(crate) fn bulk_bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Whether a probe (a `stat` or `read_ends` exchange) may start at `now`. While the
    /// round trip is unknown or short it is a small transfer (as [`Gate::enter`]); where it
    /// is long, parallel probes hide it, and every one goes at once, uncounted (`None`): a
    /// probe takes none of the client's places (the spec keeps probes apart from
    /// `KARU_CONCURRENCY`), so neither may it take a batch's small transfers' slots.
    pub(crate) fn enter_probe(&self, now: Instant) -> Option<Admit> {
        let mut s = self.lock();
        Self::judge_cold(&mut s, now);
        (s.regime != Regime::Open).then(|| self.admit(&mut s, now, false))
    }

    /// A cold gate with no first byte within [`SHORT`] of its first admission: a long round
    /// trip, which parallel transfers hide, so it opens.
    fn judge_cold(s: &mut State, now: Instant) {
        if let Regime::Cold { since: Some(t) } = s.regime
            && now.saturating_duration_since(t) >= SHORT
        {
            s.regime = Regime::Open;
        }
    }

    fn admit(&self, s: &mut State, now: Instant, bulk: bool) -> Admit {
        let admit = if bulk {
            self.enter_bulk(s, now)
        } else {
            self.enter_small(s, now)
        };
        if admit == Admit::Yes
            && let Regime::Cold { since: None } = s.regime
        {
            s.regime = Regime::Cold { since: Some(now) };
        }
        admit
    }

    fn enter_bulk(&self, s: &mut State, now: Instant) -> Admit {
        self.close_due(s, now);
        if s.running < s.limit().unwrap_or(self.ceiling).max(1) {
            s.running += 1;
            return Admit::Yes;
        }
        match &mut s.regime {
            Regime::Cold { since: Some(t) } => Admit::Until(*t + SHORT),
            // The level may grow when the epoch is due, whether or not a transfer ends.
            Regime::Probing(e) => {
                e.refused = true;
                Admit::Until(e.start + MAX_EPOCH)
            }
            _ => Admit::No,
        }
    }

    fn enter_small(&self, s: &mut State, now: Instant) -> Admit {
        let open = s.regime == Regime::Open;
        let small = &mut s.small;
        if !open {
            let since = *small.since.get_or_insert(now);
            if now.saturating_duration_since(since) >= GROW {
                if small.refused {
                    small.level = small.level.saturating_mul(2).min(self.ceiling);
                }
                small.since = Some(now);
                small.refused = false;
            }
        }
        if small.running < if open { self.ceiling } else { small.level } {
            small.running += 1;
            return Admit::Yes;
        }
        if open || small.level >= self.ceiling {
            return Admit::No;
        }
        small.refused = true;
        // The level may grow when its epoch is due; a cold gate may open sooner.
        let grow = small.since.unwrap_or(now) + GROW;
        match s.regime {
            Regime::Cold { since: Some(t) } => Admit::Until(grow.min(t + SHORT)),
            _ => Admit::Until(grow),
        }
    }

    /// How many small transfers the gate lets run at once on a short link (`None` while it
    /// is cold or open). A plan should assume that many slots: there a round trip measured
    /// with fewer transfers in flight is shorter (less of it is queueing at the server), and
    /// a plan for the client's full concurrency would take it as cheap to repeat.
    pub(crate) fn small_level(&self) -> Option<u32> {
        let s = self.lock();
        matches!(s.regime, Regime::Probing(_) | Regime::Settled).then_some(s.small.level)
    }

    /// The first body byte of a transfer whose request went out at `sent` arrived at `now`.
    /// A quick one proves a short round trip, also on a gate that opened: one late first
    /// byte (or none within [`SHORT`]) may be a busy machine's, not a long path's, while no
    /// answer comes back sooner than the path's round trip. On a busy loopback, batches of
    /// small reads and probes opened their gates for the client's life (workload E at RTT 0
    /// on 128–162 connections); shut again, E took 16 ms against 20, S 15 against 18 and H
    /// 22 against 32 (test kit server, 2 paired rounds of 3, 2026-12-06).
    pub(crate) fn first_byte(&self, sent: Instant, now: Instant) {
        let quick = now.saturating_duration_since(sent) < SHORT;
        let mut s = self.lock();
        match s.regime {
            Regime::Cold { .. } | Regime::Open if quick => {
                s.regime = Regime::Probing(self.epoch(now));
                s.level = START;
            }
            Regime::Cold { .. } => s.regime = Regime::Open,
            _ => {}
        }
    }

    fn epoch(&self, now: Instant) -> Epoch {
        Epoch {
            start: now,
            bytes: self.bytes.load(Ordering::Relaxed),
            ended: 0,
            refused: false,
        }
    }

    /// A transfer, `bulk` or small, ended at `now`.
    fn leave(&self, now: Instant, bulk: bool) {
        let mut s = self.lock();
        if !bulk {
            s.small.running = s.small.running.saturating_sub(1);
            return;
        }
        s.running = s.running.saturating_sub(1);
        if let Regime::Probing(e) = &mut s.regime {
            e.ended = e.ended.saturating_add(1);
        }
        self.close_due(&mut s, now);
    }

    /// Ends a probing epoch that is due by `now` (see the module docs): the level doubles,
    /// or settles on the best measured, and the next epoch starts.
    fn close_due(&self, s: &mut State, now: Instant) {
        let Regime::Probing(epoch) = s.regime else {
            return;
        };
        let elapsed = now.saturating_duration_since(epoch.start);
        if elapsed < MIN_EPOCH || (epoch.ended < s.level && elapsed < MAX_EPOCH) {
            return;
        }
        s.regime = Regime::Probing(self.epoch(now));
        if !epoch.refused {
            // Nothing waited for the level: the work ran short, so this epoch measures
            // nothing about it.
            return;
        }
        let bytes = self
            .bytes
            .load(Ordering::Relaxed)
            .saturating_sub(epoch.bytes);
        let rate = bytes as f64 / elapsed.as_secs_f64();
        match s.best {
            Some((level, best)) if rate < best * GAIN => {
                s.level = level;
                s.regime = Regime::Settled;
            }
            _ => {
                s.best = Some((s.level, rate));
                if s.level >= self.ceiling {
                    s.regime = Regime::Settled;
                } else {
                    s.level = s.level.saturating_mul(2).min(self.ceiling);
                }
            }
        }
    }

    /// The current limit (`None`: open), for tests.
    #[cfg(test)]
    fn limit(&self) -> Option<u32> {
        self.lock().limit()
    }
}

impl State {
    /// How many bulk transfers may run; `None` when the gate is open.
    fn limit(&self) -> Option<u32> {
        match self.regime {
            Regime::Open => None,
            Regime::Cold { .. } => Some(START),
            Regime::Probing(_) | Regime::Settled => Some(self.level),
        }
    }
}

/// A running transfer: tells the gate its first byte and (when bulk) its body bytes, and
/// leaves it when dropped (whichever way the transfer ends).
#[derive(Debug)]
pub(crate) struct Admitted {
    gate: Arc<Gate>,
    bulk: bool,
    seen: bool,
}

impl Admitted {
    /// A transfer `gate` admitted (after [`Gate::enter`] said yes to it, `bulk` or small).
    pub(crate) fn new(gate: Arc<Gate>, bulk: bool) -> Admitted {
        Admitted {
            gate,
            bulk,
            seen: false,
        }
    }

    /// The gate that admitted the transfer, if it was bulk: a bulk transfer's tail may be cut
    /// off onto a transfer of its own (see `engine::cut`).
    pub(crate) fn bulk_gate(&self) -> Option<&Arc<Gate>> {
        self.bulk.then_some(&self.gate)
    }

    /// Body bytes arrived for the request that went out at `sent` (known once the attempt
    /// has sent it, which is before any body byte).
    pub(crate) fn received(&mut self, n: usize, sent: Option<Instant>) {
        if !self.seen
            && let Some(sent) = sent
        {
            self.seen = true;
            self.gate.first_byte(sent, Instant::now());
        }
        if self.bulk {
            self.gate.bytes.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.gate.leave(Instant::now(), self.bulk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    /// Runs `level` transfers that each carry `bytes` over `took` ms, then ends them.
    fn epoch(gate: &Gate, t0: Instant, at: u64, took: u64, bytes: u64) {
        let level = gate.limit().expect("a limit");
        for _ in 0..level {
            assert_eq!(gate.enter(ms(t0, at), true), Admit::Yes);
        }
        assert_ne!(
            gate.enter(ms(t0, at), true),
            Admit::Yes,
            "the level is the limit"
        );
        gate.bytes
            .fetch_add(bytes * u64::from(level), Ordering::Relaxed);
        for _ in 0..level {
            gate.leave(ms(t0, at + took), true);
        }
    }

    /// A probing gate on a short link, its first transfer's byte seen at once.
    fn probing(ceiling: u32) -> (Gate, Instant) {
        let gate = Gate::new(ceiling);
        let t0 = Instant::now();
        assert_eq!(gate.enter(t0, true), Admit::Yes);
        gate.first_byte(t0, t0);
        gate.leave(t0, true);
        assert_eq!(gate.limit(), Some(START));
        (gate, t0)
    }

    #[test]
    fn a_cold_gate_holds_bulk_transfers_until_it_knows_the_round_trip() {
        let gate = Gate::new(64);
        let t0 = Instant::now();
        assert_eq!(gate.enter(t0, true), Admit::Yes);
        assert_eq!(gate.enter(t0, true), Admit::Until(t0 + SHORT));
        // No first byte within SHORT: a long round trip, and the gate opens.
        let later = t0 + SHORT;
        for _ in 0..63 {
            assert_eq!(gate.enter(later, true), Admit::Yes);
        }
        assert_eq!(gate.limit(), None);
    }

    #[test]
    fn a_slow_first_byte_opens_the_gate() {
        let gate = Gate::new(64);
        let t0 = Instant::now();
        assert_eq!(gate.enter(t0, true), Admit::Yes);
        gate.first_byte(t0, ms(t0, 10));
        assert_eq!(gate.limit(), None);
    }

    /// An open gate with `n` bulk transfers running.
    fn open_with(n: u32, t0: Instant) -> Gate {
        let gate = Gate::new(64);
        assert_eq!(gate.enter(t0, true), Admit::Yes);
        gate.first_byte(t0, ms(t0, 10));
        assert!(gate.is_open());
        for _ in 1..n {
            assert_eq!(gate.enter(ms(t0, 10), true), Admit::Yes);
        }
        gate
    }

    /// `gate` (4 streams running) grants a trial of 4 tails to a stream at `rate` of
    /// streams carrying `together` (bytes per second) at 20 ms, and they start, judged 30 ms
    /// on.
    fn trial(gate: &Gate, t0: Instant, rate: f64, together: f64) {
        let measured = Some(together as u64);
        assert_eq!(gate.tails(ms(t0, 20), rate, together, measured), 4);
        for _ in 0..4 {
            assert_eq!(gate.enter(ms(t0, 20), true), Admit::Yes);
        }
        gate.cut(ms(t0, 20), 4, rate, together, Duration::from_millis(30));
    }

    #[test]
    fn an_open_gate_tries_more_streams_and_keeps_adding_while_they_carry_more() {
        let t0 = Instant::now();
        let gate = open_with(4, t0);
        let mb = 1e6;
        // A probing gate leaves tails to its admission.
        let shut = Gate::new(64);
        assert_eq!(shut.tails(t0, 100.0 * mb, 0.0, None), u32::MAX);
        // 4 streams of 100 MB/s under the prior's 1.25 GB/s: room for 6 more, but a trial
        // adds no more than run. Their window read 300 MB/s (some were starting).
        trial(&gate, t0, 100.0 * mb, 300.0 * mb);
        // Until it is judged, no more.
        assert_eq!(gate.tails(ms(t0, 40), 100.0 * mb, 800.0 * mb, None), 0);
        // Twice the streams carried 1.9 times as much (what ran before counts at least 4 ×
        // 100 MB/s): more may follow, up to the prior's 1 GB/s ÷ 1.25.
        assert_eq!(
            gate.tails(ms(t0, 50), 80.0 * mb, 760.0 * mb, Some(760_000_000)),
            3
        );
        assert_eq!(gate.tails(ms(t0, 60), 100.0 * mb, 800.0 * mb, None), 2);
    }

    #[test]
    fn an_open_gate_whose_added_streams_carry_no_more_keeps_to_the_measured_total() {
        let t0 = Instant::now();
        let gate = open_with(4, t0);
        let mb = 1e6;
        // 4 streams sharing a 1 Gbit/s link: 31 MB/s each.
        trial(&gate, t0, 31.0 * mb, 125.0 * mb);
        // 8 streams carry 130 MB/s, not 1.25 × 125: the link is full.
        assert_eq!(
            gate.tails(ms(t0, 50), 16.0 * mb, 130.0 * mb, Some(130_000_000)),
            0
        );
        assert_eq!(
            gate.tails(ms(t0, 90), 15.0 * mb, 120.0 * mb, Some(130_000_000)),
            0
        );
        // Once most have ended, those left carry less than the measured total: room again.
        for _ in 0..6 {
            gate.leave(ms(t0, 95), true);
        }
        assert_eq!(
            gate.tails(ms(t0, 100), 5.0 * mb, 5.0 * mb, Some(130_000_000)),
            18
        );
    }

    #[test]
    fn a_trial_judged_before_the_total_is_measured_keeps_to_what_the_streams_carried() {
        let t0 = Instant::now();
        let gate = open_with(4, t0);
        let mb = 1e6;
        trial(&gate, t0, 100.0 * mb, 400.0 * mb);
        // 8 streams carry 420 MB/s, not 1.25 × 400, and the link's total is not measured
        // yet: the 420 stands for it, not the prior's 1.25 GB/s (which would leave room for
        // 4 more of 50 MB/s).
        assert_eq!(gate.tails(ms(t0, 50), 50.0 * mb, 420.0 * mb, None), 0);
        // A measured total above it takes over: (700 ÷ 1.25 − 420) ÷ 50.
        assert_eq!(
            gate.tails(ms(t0, 60), 50.0 * mb, 420.0 * mb, Some(700_000_000)),
            2
        );
    }

    #[test]
    fn a_quick_first_byte_shuts_a_gate_that_opened() {
        let gate = Gate::new(64);
        let t0 = Instant::now();
        assert_eq!(gate.enter(t0, true), Admit::Yes);
        gate.first_byte(t0, ms(t0, 10));
        assert_eq!(gate.enter(ms(t0, 10), true), Admit::Yes, "open");
        // A later request answered within SHORT: the round trip is short, and the late
        // first byte was the machine's. The two running transfers fill the level.
        gate.first_byte(ms(t0, 20), ms(t0, 21));
        assert_eq!(gate.limit(), Some(START));
        assert_eq!(gate.enter(ms(t0, 21), true), Admit::Until(ms(t0, 71)));
        // Another late first byte does not open it again: probing measures the levels.
        gate.first_byte(ms(t0, 20), ms(t0, 30));
        assert!(matches!(gate.lock().regime, Regime::Probing(_)));
    }

    #[test]
    fn levels_double_while_the_rate_grows_and_settle_on_the_best() {
        // A server whose every stream carries 150 MB/s, up to 600 MB/s in all.
        let (gate, t0) = probing(64);
        let per_stream = |level: u32| (150e6 * f64::from(level)).min(600e6) / f64::from(level);
        let mut at = 0;
        let mut levels = Vec::new();
        while matches!(gate.lock().regime, Regime::Probing(_)) {
            let level = gate.limit().unwrap();
            levels.push(level);
            // 50 ms per epoch; each stream's bytes at its share.
            epoch(&gate, t0, at, 50, (per_stream(level) * 0.05) as u64);
            at += 50;
        }
        assert_eq!(levels, [1, 2, 4, 8]);
        assert_eq!(gate.limit(), Some(4));
    }

    #[test]
    fn a_link_one_stream_fills_settles_where_it_started() {
        let (gate, t0) = probing(64);
        epoch(&gate, t0, 0, 20, 25_000_000); // 1 stream: 1.25 GB/s
        epoch(&gate, t0, 20, 40, 25_000_000); // 2 streams: the same 1.25 GB/s
        assert_eq!(gate.lock().regime, Regime::Settled);
        assert_eq!(gate.limit(), Some(START));
    }

    #[test]
    fn an_epoch_whose_work_ran_short_measures_nothing() {
        let (gate, t0) = probing(64);
        // A transfer runs and ends, and none waited for it: the epoch starts again.
        assert_eq!(gate.enter(t0, true), Admit::Yes);
        gate.leave(ms(t0, 30), true);
        assert_eq!(gate.lock().best, None);
        assert!(matches!(gate.lock().regime, Regime::Probing(_)));
        assert_eq!(gate.limit(), Some(START));
    }

    #[test]
    fn an_epoch_ends_on_time_while_its_transfers_still_run() {
        // Slow streams: the first transfer runs for far longer than an epoch.
        let gate = Gate::new(64);
        let t0 = Instant::now();
        assert_eq!(gate.enter(t0, true), Admit::Yes);
        gate.first_byte(t0, t0);
        // The waiting transfer is told when the epoch is due, not to wait for an end.
        assert_eq!(gate.enter(t0, true), Admit::Until(t0 + MAX_EPOCH));
        gate.bytes.fetch_add(5_000_000, Ordering::Relaxed); // 100 MB/s
        assert_eq!(
            gate.enter(ms(t0, 30), true),
            Admit::Until(t0 + MAX_EPOCH),
            "not yet due"
        );
        assert_eq!(
            gate.enter(t0 + MAX_EPOCH, true),
            Admit::Yes,
            "the level doubled"
        );
        assert_eq!(gate.limit(), Some(2));
        assert_eq!(gate.enter(ms(t0, 60), true), Admit::Until(ms(t0, 100)));
        gate.bytes.fetch_add(10_000_000, Ordering::Relaxed); // 200 MB/s
        assert_eq!(gate.enter(ms(t0, 100), true), Admit::Yes);
        assert_eq!(gate.limit(), Some(4));
        assert_eq!(gate.lock().running, 3);
    }

    #[test]
    fn small_transfers_wait_for_the_round_trip_apart_from_bulk_ones() {
        let gate = Gate::new(64);
        let t0 = Instant::now();
        for _ in 0..SMALL {
            assert_eq!(gate.enter(t0, false), Admit::Yes);
        }
        assert_eq!(gate.enter(t0, false), Admit::Until(t0 + SHORT));
        // Bulk transfers are counted apart: the cold gate still runs its first.
        assert_eq!(gate.enter(t0, true), Admit::Yes);
        gate.leave(t0, false);
        assert_eq!(gate.enter(t0, false), Admit::Yes, "a small one ended");
        // No first byte within SHORT: a long round trip lifts both limits.
        let later = t0 + SHORT;
        for _ in SMALL..64 {
            assert_eq!(gate.enter(later, false), Admit::Yes);
        }
        assert_eq!(gate.enter(later, false), Admit::No, "the client's ceiling");
        assert_eq!(gate.limit(), None);
        assert_eq!(gate.small_level(), None, "plans assume every slot");
    }

    #[test]
    fn a_small_transfer_s_quick_first_byte_keeps_the_short_link_s_limit() {
        let gate = Arc::new(Gate::new(64));
        let t0 = Instant::now();
        assert_eq!(gate.enter(t0, false), Admit::Yes);
        assert_eq!(gate.small_level(), None, "cold: plans assume every slot");
        let mut small = Admitted::new(Arc::clone(&gate), false);
        small.received(100, Some(t0));
        assert_eq!(
            gate.small_level(),
            Some(SMALL),
            "plans assume the gate's level"
        );
        // A short round trip: bulk transfers probe from the start, small ones keep SMALL.
        assert!(matches!(gate.lock().regime, Regime::Probing(_)));
        assert_eq!(gate.limit(), Some(START));
        assert_eq!(gate.bytes.load(Ordering::Relaxed), 0, "bulk bytes only");
        for _ in 1..SMALL {
            assert_eq!(gate.enter(ms(t0, 10), false), Admit::Yes);
        }
        // Waiting, until one ends or the level's epoch is due.
        assert_eq!(gate.enter(ms(t0, 10), false), Admit::Until(t0 + GROW));
        drop(small);
        assert_eq!(gate.lock().small.running, SMALL - 1);
        assert_eq!(gate.enter(ms(t0, 10), false), Admit::Yes);
    }

    #[test]
    fn the_small_level_doubles_while_transfers_wait_for_it() {
        let (gate, t0) = probing(64);
        let fill = |at: Instant| {
            let mut n = 0;
            while gate.enter(at, false) == Admit::Yes {
                n += 1;
            }
            n
        };
        let level = || gate.lock().small.level;
        assert_eq!(fill(t0), SMALL);
        for _ in 0..SMALL {
            gate.leave(t0, false);
        }
        // Some waited in the first epoch: the level doubles when it is due.
        assert_eq!(gate.enter(t0 + GROW, false), Admit::Yes);
        assert_eq!(level(), 2 * SMALL);
        gate.leave(t0 + GROW, false);
        // None waited in the next: it stays.
        assert_eq!(gate.enter(t0 + 2 * GROW, false), Admit::Yes);
        assert_eq!(level(), 2 * SMALL);
        // It grows again while they wait, never past the client's ceiling.
        assert_eq!(fill(t0 + 2 * GROW), 2 * SMALL - 1);
        assert_eq!(fill(t0 + 3 * GROW), 64 - 2 * SMALL);
        assert_eq!(fill(t0 + 4 * GROW), 0);
        assert_eq!(level(), 64);
    }

    #[test]
    fn probes_count_as_small_transfers_until_the_gate_opens() {
        let gate = Gate::new(4);
        let t0 = Instant::now();
        for _ in 0..4 {
            assert_eq!(gate.enter_probe(t0), Some(Admit::Yes));
        }
        assert_eq!(gate.lock().small.running, 4);
        assert_eq!(gate.enter_probe(t0), Some(Admit::No), "the ceiling");
        // No first byte within SHORT: open, and probes go uncounted.
        assert_eq!(gate.enter_probe(t0 + SHORT), None);
        assert_eq!(gate.lock().small.running, 4);
        assert_eq!(
            gate.enter(t0 + SHORT, false),
            Admit::No,
            "batches keep their ceiling"
        );
    }

    #[test]
    fn an_admitted_transfer_leaves_when_dropped() {
        let gate = Arc::new(Gate::new(64));
        let now = Instant::now();
        assert_eq!(gate.enter(now, true), Admit::Yes);
        let mut a = Admitted::new(Arc::clone(&gate), true);
        a.received(10, Some(now));
        assert_eq!(gate.bytes.load(Ordering::Relaxed), 10);
        assert_eq!(gate.lock().running, 1);
        drop(a);
        assert_eq!(gate.lock().running, 0);
    }
}
