//! The cost model the planner minimises, and the plan it chooses with it.
//!
//! The predicted time of a batch of `n` transfers of `bytes` in all (the largest `max`), on a
//! link with round trip `rtt`, per-request cost `o`, one connection's rate `pc`, all
//! connections' rate `total` and `concurrency` slots (`c = min(concurrency, n)`), is the
//! largest of three bounds plus the client's work on the requests:
//!
//! ```text
//! slots   = (n × (rtt + o) + bytes / pc) / c    every slot busy a round trip and its bytes
//! link    = rtt + bytes / total                 the shared link carries every byte
//! longest = rtt + o + max / pc                  the longest transfer on its connection
//! time    = max(slots, link, longest) + n × o   each request costs the client (and server)
//! ```
//!
//! The last term makes every request cost something even while slots idle: two requests in
//! parallel are not free next to one that fetches a small gap.
//!
//! Predictions are rounded down to a grid of 1/64 of their power of two (about 1.5 %): plans
//! whose times differ by less are equal, and then the one with fewer transfers (then fewer
//! bytes) wins, since every request costs the server something a model of the client misses.
//!
//! [`plan_cost`] sweeps the reads with a few merge gaps side by side, in one pass (none, the
//! guards' gap, the gaps whose bytes cost as much as the round trip they save at each rate, and
//! a ladder from 4 KiB doubling up to the guards' gap, or growing eightfold up to the smallest
//! rated gap while the link's total is the prior), cuts long transfers into pieces of a few
//! sizes (so that idle slots share a transfer that would dominate the batch), and keeps the
//! candidate with the smallest predicted time. Where the best of them takes more rounds than
//! one of requests (more transfers than slots, the slots' bound above the others), the
//! cheapest spans under its gap for that bound's prices are one more candidate (see
//! `cheapest`: the sweep's greed can cost transfers where the amplification guard stops it).
//! The guards plan and the plan without merging are candidates, so the chosen plan is never
//! predicted slower than either. The four guards stay ceilings: a gap never exceeds the
//! policy's, and every transfer or piece keeps its span, parts and amplification within them
//! (a single read larger than the span limit may be cut, as the guards plan never does). A
//! model may also cap a transfer's length ([`CostModel::max_transfer`], set while one
//! connection's rate or the link's total is unmeasured): spans above it are then cut into
//! pieces no longer than the cap, and no others.

use std::time::Duration;

use super::cheapest::{Prices, cheapest, greed_may_cost};
use super::{
    Entry, Open, Part, Plan, Policy, Prepared, Request, Span, Transfer, guards_gap, sweep, transfer,
};

/// The smallest piece a transfer is cut into: 8 MiB, the download's chunk. A new connection
/// starts slow (TCP's window starts near 14 KiB and doubles each round trip), so at 100 MB/s
/// and 20 ms it carries about 4 MB before it runs at its rate; a smaller piece pays a request
/// and a connection's ramp for bytes that one running transfer carries at full rate, and on a
/// link with no round trip to hide (loopback, RTT ≈ 0) parallel pieces only add requests.
pub const MIN_PIECE: u64 = 8 << 20;

/// The longest transfer a cold link's plan keeps whole, and the longest piece it cuts a
/// longer one into (see [`CostModel::max_transfer`]): four of the model's smallest pieces.
/// Where the round trip is long the gate lets every piece run at once, and on a machine whose
/// cores also run the server (and the test kit's latency proxy, which copies every byte)
/// each stream costs CPU that the link does not pay back. Workload C (117 MB in two spans)
/// in 9 pieces of 16 MiB against 5 of 32 MiB (2 alternating rounds of 3, 2026-12-06): on the
/// test kit server 169 against 140 ms at 5 ms and 178 against 166 at 20 ms, on nginx 167
/// against 130 and 186 against 165, at RTT 0 88 against 76 and 77 against 60; on s3s-fs,
/// whose streams are each slow, 313 against 323 at 5 ms and 375 against 390 at 20 ms, still
/// ahead of every other reader there (348–441); under 1 Gbit/s within 1 %. Before, 8 MiB
/// pieces (17) had lost to 16 MiB (9) on every server but s3s-fs's H.
pub const COLD_TRANSFER: u64 = 4 * MIN_PIECE;

/// The smallest merge gap of the ladder tried besides the rated gaps: 4 KiB, doubling up to
/// the guards' gap. The rated gaps are where the model's bounds change hands, not where its
/// best plan lies: that is where the slots' bound meets the link's, between them. On workload
/// R's reads the rated gaps alone left the best plan found up to 25 % slower (as predicted)
/// than the best single gap (5 ms at 250 MB/s: 852 against 656 ms; 20 ms at 147 MB/s: 2,125
/// against 1,812), and measured 2,417 against 2,094 ms at 20 ms under 1 Gbit/s (6 runs each,
/// 2026-12-06). Reads also come at two scales the rated gaps miss: chunks a few KiB apart in
/// clusters some 100 KB apart (HDF5's chunks between B-tree nodes, a Parquet file's pages
/// and column chunks): workload H's 15 clusters of 52 chunks, 190 KB apart, are one transfer
/// each under the priors (57.6 against 58.1 ms for 3), fetching 3.1 MB less. Every rung
/// trusts the round trip: a cold re-plan's is measured by a lone probe (see
/// `engine::wave`), since the cold wave's own answers queue (workload R at RTT 0 under
/// 1 Gbit/s, re-planned on their 3.6–4.3 ms, fetched 62 MB instead of 50). The rungs above
/// the smallest rated gap also trust the link's total rate, and are tried only once it is
/// known ([`CostModel::total_known`]): priced at the priors' 10 Gbit/s, 4 of 12 of workload
/// R's cold batches at RTT 0 under 1 Gbit/s merged across them, fetching 175 MB in 1.4 s
/// instead of 49 MB in 0.5. Until then the rungs are a factor of 8 apart (4, 32 and 256 KiB
/// below the priors' 392 KiB): a cold plan is a guess either way, and fewer candidates keep
/// it quick.
const LADDER_FIRST: u64 = 4 << 10;

/// A link as the planner sees it, and the slots it may use.
///
/// ```
/// use std::time::Duration;
/// use karu::plan::{plan, plan_cost, CostModel, Policy, Request};
/// let object = karu::Locator::parse("https://example.com/data.bin")?;
/// // 1,000 sparse 64 KiB reads, 1 MiB apart.
/// let reads: Vec<Request> = (0..1000u64)
///     .map(|i| Request { locator: &object, offset: i << 20, length: 64 << 10, if_match: None })
///     .collect();
/// let policy = Policy::default();
/// // A 1 Gbit/s link with a 1 ms round trip: a 960 KiB gap costs more than the round trip it
/// // saves, so nothing merges (the guards plan fetches 16 × the bytes in 16 transfers).
/// let lan = CostModel {
///     rtt: Duration::from_millis(1),
///     per_request: Duration::ZERO,
///     connection_rate: 125_000_000,
///     total_rate: 125_000_000,
///     concurrency: 64,
///     max_transfer: None,
///     total_known: true,
/// };
/// let cost = plan_cost(&reads, &policy, &lan);
/// let guards = plan(&reads, &policy);
/// assert_eq!((guards.transfers.len(), cost.transfers.len()), (16, 1000));
/// assert!(lan.predict(&cost) < lan.predict(&guards));
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CostModel {
    /// Round trip: request sent to first body byte.
    pub rtt: Duration,
    /// Cost of one request besides its round trip (preparing, signing, answering it).
    pub per_request: Duration,
    /// Bytes per second one connection carries.
    pub connection_rate: u64,
    /// Bytes per second all connections to the endpoint carry together.
    pub total_rate: u64,
    /// Transfers in flight at once (`KARU_CONCURRENCY`).
    pub concurrency: u32,
    /// The longest transfer a plan keeps whole, if any: a longer one is cut into pieces no
    /// longer than it, and the model tries no pieces of its own. Set while one connection's
    /// rate or the link's total is unmeasured ([`COLD_TRANSFER`]): whether pieces side by side
    /// beat one stream is then unknown to the model, and the engine decides how many run at
    /// once (a bulk transfer waits at its endpoint's gate until more streams are measured to
    /// carry more), so cutting costs a few requests where one stream is as fast and gains many
    /// streams where each is slow. While it is set, predictions take one transfer to run at
    /// the link's rate (`total_rate`), whatever `connection_rate` says; they never cut by it.
    pub max_transfer: Option<u64>,
    /// Whether `total_rate` was measured (or given), not the prior. Merge gaps above the
    /// smallest rated gap are tried only then: they price the gap's bytes at the link's total,
    /// and a cold wave of small bodies can end without measuring it (see `engine::wave`),
    /// leaving the prior's 10 Gbit/s to price them.
    pub total_known: bool,
}

impl CostModel {
    /// Round trip assumed before any measurement: an object store in the same region.
    pub const PRIOR_RTT: Duration = Duration::from_millis(20);
    /// Per-request cost assumed before any measurement.
    pub const PRIOR_PER_REQUEST: Duration = Duration::from_micros(100);
    /// All connections' rate assumed before any measurement: 1.25 GB/s (10 Gbit/s). One
    /// connection is assumed to carry as much until a body arriving alone is measured: how
    /// much faster several connections are than one is what makes a split pay, and a guess
    /// of it would split (and open connections for) every large read on a link where one
    /// connection is as fast. A transfer longer than [`COLD_TRANSFER`] is cut meanwhile
    /// (see [`CostModel::max_transfer`]). The prior stands until bodies side by side are
    /// measured, whatever one connection carried alone: what one body does alone says little
    /// of what many do together (on 2 shared cores a lone body ran at 3 GB/s where a batch's
    /// bodies together sustained 1.6; on s3s-fs, at 170 MB/s where together they carried 370).
    pub const PRIOR_TOTAL_RATE: u64 = 1_250_000_000;

    /// The documented priors, with `concurrency` slots.
    ///
    /// ```
    /// let m = karu::plan::CostModel::priors(64);
    /// assert_eq!(m.rtt, std::time::Duration::from_millis(20));
    /// assert_eq!((m.connection_rate, m.total_rate, m.concurrency), (1_250_000_000, 1_250_000_000, 64));
    /// assert_eq!(m.max_transfer, Some(karu::plan::cost::COLD_TRANSFER));
    /// ```
    pub fn priors(concurrency: u32) -> CostModel {
        CostModel {
            rtt: Self::PRIOR_RTT,
            per_request: Self::PRIOR_PER_REQUEST,
            connection_rate: Self::PRIOR_TOTAL_RATE,
            total_rate: Self::PRIOR_TOTAL_RATE,
            concurrency,
            max_transfer: Self::transfer_cap(false, false),
            total_known: false,
        }
    }

    /// The [`CostModel::max_transfer`] of a model whose connection rate and total rate are
    /// measured or not: [`COLD_TRANSFER`] unless both are. The engine's estimates and `karu
    /// plan`'s given rates both set the cap by this rule.
    ///
    /// ```
    /// use karu::plan::{cost::COLD_TRANSFER, CostModel};
    /// assert_eq!(CostModel::transfer_cap(true, false), Some(COLD_TRANSFER));
    /// assert_eq!(CostModel::transfer_cap(true, true), None);
    /// ```
    pub fn transfer_cap(connection_measured: bool, total_measured: bool) -> Option<u64> {
        (!(connection_measured && total_measured)).then_some(COLD_TRANSFER)
    }

    /// The predicted time of a plan's remote transfers under this model (local files use
    /// no link).
    pub fn predict(&self, plan: &Plan) -> Duration {
        let mut load = Load::default();
        for t in plan.transfers.iter().filter(|t| t.remote) {
            load.add(t.length);
        }
        Duration::try_from_secs_f64(self.time(&load)).unwrap_or(Duration::MAX)
    }

    /// The predicted time in seconds, on the grid (see the module docs).
    fn time(&self, load: &Load) -> f64 {
        let t = self.exact(load);
        if t <= 0.0 || !t.is_finite() {
            return t;
        }
        let step = (t.log2().floor() - 6.0).exp2();
        (t / step).floor() * step
    }

    fn exact(&self, load: &Load) -> f64 {
        if load.n == 0 {
            return 0.0;
        }
        let b = self.bounds(load);
        b.slots.max(b.link).max(b.longest) + b.work
    }

    /// The three bounds of a load's time and the client's work on its requests (see the
    /// module docs).
    fn bounds(&self, load: &Load) -> Bounds {
        let rtt = self.rtt.as_secs_f64();
        let k = rtt + self.per_request.as_secs_f64();
        let pc = self.stream_rate().max(1) as f64;
        let total = self.total_rate.max(1) as f64;
        let bytes = load.bytes as f64;
        let c = u64::from(self.concurrency.max(1)).min(load.n.max(1)) as f64;
        Bounds {
            slots: (load.n as f64 * k + bytes / pc) / c,
            link: rtt + bytes / total,
            longest: k + load.max as f64 / pc,
            work: load.n as f64 * self.per_request.as_secs_f64(),
        }
    }

    /// The prices per transfer and per byte of the slots' bound with the client's work (in
    /// seconds times the slots): what a plan near `load` costs, where its time is its rounds
    /// of requests (more transfers than slots, and the slots' bound above the link's and the
    /// longest transfer's). None elsewhere: fewer transfers then save nothing, or cost bytes
    /// the link is short of.
    fn slot_prices(&self, load: &Load) -> Option<Prices> {
        let c = u64::from(self.concurrency.max(1));
        let b = self.bounds(load);
        (load.n > c && b.slots >= b.link.max(b.longest)).then(|| Prices {
            transfer: self.rtt.as_secs_f64() + self.per_request.as_secs_f64() * (1 + c) as f64,
            byte: 1.0 / self.stream_rate().max(1) as f64,
        })
    }

    /// The rate one transfer is planned to run at: one connection's, or the link's while the
    /// model caps transfers ([`CostModel::max_transfer`]): until both are measured, a plan
    /// that runs transfers side by side rather than one after another (fewer merges, or
    /// pieces) must not win on a guessed ratio of the two.
    fn stream_rate(&self) -> u64 {
        match self.max_transfer {
            Some(_) => self.total_rate,
            None => self.connection_rate,
        }
    }

    /// The merge gaps worth trying: the guards' own, none at all, touching reads only, the
    /// gaps whose bytes take as long as one request's round trip at each rate, and the ladder
    /// from [`LADDER_FIRST`] doubling up to the guards' gap.
    fn gaps(&self, policy: &Policy) -> Vec<Option<u64>> {
        let guards = guards_gap(policy, true);
        let mut gaps = vec![guards];
        if let Some(ceiling) = guards {
            gaps.push(None);
            let k = self.rtt.as_secs_f64() + self.per_request.as_secs_f64();
            let c = f64::from(self.concurrency.max(1));
            let pc = self.stream_rate() as f64;
            let total = self.total_rate as f64;
            let rated = [k * pc, k * total / c, k * total];
            // Until the link's total is known the ladder stops below the smallest rated gap,
            // a factor of 8 apart (see `CostModel::total_known`).
            let (top, step) = match self.total_known {
                true => (f64::INFINITY, 2),
                false => (rated.iter().copied().fold(f64::INFINITY, f64::min), 8),
            };
            let ladder = std::iter::successors(Some(LADDER_FIRST), |g| g.checked_mul(step))
                .take_while(|&g| g < ceiling && (g as f64) < top)
                .map(|g| g as f64);
            for bytes in [0.0].into_iter().chain(rated).chain(ladder) {
                // `as` saturates: a huge product is the ceiling.
                let gap = Some((bytes as u64).min(ceiling));
                if !gaps.contains(&gap) {
                    gaps.push(gap);
                }
            }
        }
        gaps
    }

    /// Piece sizes worth trying for a load: enough pieces to fill a quarter of the slots up
    /// to twice them, never below [`MIN_PIECE`] and only below the longest transfer. None
    /// while the model caps transfers ([`CostModel::max_transfer`]): what pieces side by
    /// side gain is then unmeasured, and the cap's pieces are paced by the engine instead.
    fn piece_sizes(&self, load: &Load) -> Vec<u64> {
        if self.max_transfer.is_some() {
            return Vec::new();
        }
        let c = u64::from(self.concurrency.max(1));
        let mut sizes = Vec::new();
        for m in [c / 4, c / 2, c, 2 * c] {
            let size = load.bytes.div_ceil(u128::from(m.max(1)));
            let size = u64::try_from(size).unwrap_or(u64::MAX).max(MIN_PIECE);
            if size < load.max && !sizes.contains(&size) {
                sizes.push(size);
            }
        }
        sizes
    }
}

/// What the engine has learnt of one endpoint's link (measured by the engine, see
/// [`Client::link_estimate`](crate::Client::link_estimate)); every figure falls back to its prior
/// until it has a sample.
///
/// ```
/// let client = karu::Client::new(&karu::Config::empty())?;
/// let object = karu::Locator::parse("https://example.com/data.bin")?;
/// let estimate = client.link_estimate(&object); // no transfer yet: the priors
/// assert_eq!(estimate.rtt_samples, 0);
/// assert_eq!(estimate.model.rtt, karu::plan::CostModel::PRIOR_RTT);
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkEstimate {
    /// The estimates as the planner uses them (concurrency from the client's settings).
    pub model: CostModel,
    /// Round-trip samples behind `model.rtt` (0: the prior).
    pub rtt_samples: u64,
    /// Connection-rate samples behind `model.connection_rate` (0: the prior).
    pub rate_samples: u64,
    /// Total-rate samples behind `model.total_rate` (0: the prior, or the first window while
    /// it is open); a measured total is at least the connection rate.
    pub total_samples: u64,
}

impl LinkEstimate {
    /// Nothing measured: the priors, with `concurrency` slots.
    pub fn priors(concurrency: u32) -> LinkEstimate {
        LinkEstimate {
            model: CostModel::priors(concurrency),
            rtt_samples: 0,
            rate_samples: 0,
            total_samples: 0,
        }
    }

    /// True when no figure has been measured yet.
    pub fn is_cold(&self) -> bool {
        self.rtt_samples == 0 && self.rate_samples == 0
    }
}

/// Transfers counted for a prediction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Load {
    n: u64,
    bytes: u128,
    max: u64,
}

impl Load {
    fn add(&mut self, length: u64) {
        self.n += 1;
        self.bytes += u128::from(length);
        self.max = self.max.max(length);
    }
}

/// The bounds of a load's predicted time, in seconds.
struct Bounds {
    slots: f64,
    link: f64,
    longest: f64,
    work: f64,
}

/// One transfer of a split: whole reads, or a slice of one read larger than the piece size.
#[derive(Clone, Copy, Debug)]
enum Piece {
    Whole(Span),
    Slice {
        entry: usize,
        skip: u64,
        length: u64,
    },
}

impl Piece {
    fn length(&self) -> u64 {
        match self {
            Piece::Whole(s) => s.length(),
            Piece::Slice { length, .. } => *length,
        }
    }
}

/// Cuts a span merged across gaps of at most `gap` into pieces of at most `size` bytes:
/// consecutive whole reads while they fit (and keep the gap and amplification guards: a read
/// cut out may leave a gap it covered), and a read larger than `size` into equal slices.
fn cut(
    entries: &[Entry],
    span: Span,
    size: u64,
    gap: u64,
    policy: &Policy,
    out: &mut impl FnMut(Piece),
) {
    // A piece keeps the guards with the piece size as its span limit.
    let within = Policy {
        limit: size,
        ..*policy
    };
    let whole = |from: usize, to: usize, o: &Open| {
        Piece::Whole(Span {
            from,
            to,
            start: o.start,
            last: o.last,
        })
    };
    // The piece being built, with its first entry.
    let mut current: Option<(usize, Open)> = None;
    for (k, e) in entries.iter().enumerate().take(span.to).skip(span.from) {
        if e.length > size {
            if let Some((from, o)) = current.take() {
                out(whole(from, k, &o));
            }
            let length = e.length.div_ceil(e.length.div_ceil(size));
            let mut skip = 0;
            while skip < e.length {
                let n = length.min(e.length - skip);
                out(Piece::Slice {
                    entry: k,
                    skip,
                    length: n,
                });
                skip += n;
            }
            continue;
        }
        if let Some((from, o)) = &mut current {
            if o.joins(e, gap, &within) {
                o.join(e, &within);
                continue;
            }
            out(whole(*from, k, o));
        }
        current = Some((k, Open::new(e, &within)));
    }
    if let Some((from, o)) = current {
        out(whole(from, span.to, &o));
    }
}

/// A candidate: a merge gap, a piece size (`None`: no cutting), and whether its spans are the
/// cheapest under the gap ([`cheapest`]) rather than the sweep's.
#[derive(Clone, Copy, Debug)]
struct Choice {
    gap: Option<u64>,
    piece: Option<u64>,
    cheapest: bool,
}

/// Plans reads as [`plan`](super::plan) does, but chooses merges and splits of remote reads
/// by their predicted time under `model` (see the [module docs](self)); local files are
/// planned as the guards plan them (they use no link). No clock, no I/O: the model comes in
/// as a value.
///
/// ```
/// use std::time::Duration;
/// use karu::plan::{plan_cost, CostModel, Policy, Request};
/// let object = karu::Locator::parse("https://example.com/big.bin")?;
/// // One 64 MiB read with a 20 ms round trip, on a link whose connections carry 100 MB/s
/// // each and 1.25 GB/s together, is cut into pieces that run in parallel; each piece is a
/// // part with the read's index and its place in the read.
/// let read = [Request { locator: &object, offset: 0, length: 64 << 20, if_match: None }];
/// let model = CostModel {
///     connection_rate: 100_000_000,
///     max_transfer: None,
///     total_known: true,
///     ..CostModel::priors(64)
/// };
/// let planned = plan_cost(&read, &Policy::default(), &model);
/// assert!(planned.transfers.len() > 1);
/// let mut next = 0;
/// for t in &planned.transfers {
///     let part = planned.parts_of(t)[0];
///     assert_eq!((part.index, part.skip), (0, next));
///     next += part.length;
/// }
/// assert_eq!(next, 64 << 20);
/// # Ok::<(), karu::Error>(())
/// ```
pub fn plan_cost(requests: &[Request<'_>], policy: &Policy, model: &CostModel) -> Plan {
    let mut prepared = Prepared::new(requests);
    let entries = &prepared.entries;
    let mut spans = Vec::new();
    let mut best: Option<((f64, u64, u128), Choice, Load)> = None;
    let consider = |best: &mut Option<_>, load: &Load, choice: Choice| {
        let key = (model.time(load), load.n, load.bytes);
        if best.is_none_or(|(k, _, _)| key < k) {
            *best = Some((key, choice, *load));
        }
    };
    let mut gaps = model.gaps(policy);
    drop_alike(&prepared, &mut gaps);
    for (&gap, load) in gaps.iter().zip(loads(&prepared, &gaps, policy)) {
        let choice = Choice {
            gap,
            piece: None,
            cheapest: false,
        };
        consider(&mut best, &load, choice);
        let sizes = model.piece_sizes(&load);
        if !sizes.is_empty() {
            remote_spans(&prepared, gap, policy, &mut spans);
        }
        for size in sizes {
            let mut load = Load::default();
            for &(base, s) in &spans {
                if s.length() <= size {
                    load.add(s.length());
                } else {
                    cut(
                        &entries[base..],
                        s,
                        size,
                        gap.unwrap_or(0),
                        policy,
                        &mut |p| load.add(p.length()),
                    );
                }
            }
            let piece = Some(size);
            consider(&mut best, &load, Choice { piece, ..choice });
        }
    }
    // Where the best plan's time is its rounds of requests, the cheapest spans under its gap
    // (fewer transfers where the sweep's greed costs some, see `cheapest`).
    let mut cheap = Vec::new();
    if let Some((
        _,
        choice @ Choice {
            gap: Some(gap),
            piece: None,
            ..
        },
        load,
    )) = best
        && let Some(prices) = model.slot_prices(&load)
        && cheapest_spans(&prepared, gap, policy, prices, &mut cheap)
    {
        let mut load = Load::default();
        cheap.iter().for_each(|s| load.add(s.length()));
        let cheapest = true;
        consider(&mut best, &load, Choice { cheapest, ..choice });
    }
    let choice = best.map_or(
        Choice {
            gap: guards_gap(policy, true),
            piece: None,
            cheapest: false,
        },
        |(_, c, _)| c,
    );
    // Room for the chosen candidate's remote transfers (local files' grow it).
    let mut transfers = Vec::with_capacity(best.map_or(0, |((_, n, _), _, _)| n) as usize);
    let mut parts = Vec::with_capacity(entries.len());
    let mut own: Vec<Span> = Vec::new();
    // The chosen cheapest spans, remote group after remote group.
    let mut cheap = cheap.into_iter().peekable();
    for (group, remote) in prepared.groups() {
        own.clear();
        let gap = if remote {
            choice.gap
        } else {
            guards_gap(policy, false)
        };
        if remote && choice.cheapest {
            // A group's spans end at its last entry.
            while let Some(s) = cheap.next_if(|_| own.last().is_none_or(|l| l.to < group.len())) {
                own.push(s);
            }
        } else {
            sweep(group, gap, policy, &mut own);
        }
        // The size a span is cut into, if it is: the model's own piece size, else a cold
        // link's cap (see `CostModel::max_transfer`): pieces of at most the cap, and no more
        // than twice the slots per span (a read of 2^40 bytes is a few large pieces, not 2^17
        // small ones).
        let slots = 2 * u64::from(model.concurrency.max(1));
        let cut_into = |len: u64| match (choice.piece, model.max_transfer) {
            _ if !remote => None,
            (Some(size), _) => (len > size).then_some(size),
            (None, Some(max)) => (len > max).then(|| len.div_ceil(slots).max(max)),
            (None, None) => None,
        };
        for &s in &own {
            match cut_into(s.length()) {
                None => transfers.push(transfer(group, s, remote, &mut parts)),
                Some(size) => cut(group, s, size, gap.unwrap_or(0), policy, &mut |p| {
                    transfers.push(piece(group, p, &mut parts));
                }),
            }
        }
    }
    Plan {
        transfers,
        parts,
        rejected: std::mem::take(&mut prepared.rejected),
        requested_bytes: prepared.requested_bytes,
    }
}

/// The load of every remote group's spans under each of `gaps`, in one pass over the entries:
/// a [`sweep`] per gap, run side by side (each gap's span open at the current entry), so that
/// trying a gap costs a few comparisons per read rather than a pass over them all.
fn loads(prepared: &Prepared, gaps: &[Option<u64>], policy: &Policy) -> Vec<Load> {
    let mut loads = vec![Load::default(); gaps.len()];
    // The gaps that merge at all, with their place in `gaps`: `None` sends every read alone.
    let merging: Vec<(usize, u64)> = gaps
        .iter()
        .enumerate()
        .filter_map(|(i, g)| g.map(|g| (i, g)))
        .collect();
    let mut alone = Load::default();
    let mut open: Vec<Open> = Vec::with_capacity(merging.len());
    for (group, remote) in prepared.groups() {
        let Some((first, rest)) = group.split_first().filter(|_| remote) else {
            continue;
        };
        group.iter().for_each(|e| alone.add(e.length));
        open.clear();
        open.resize(merging.len(), Open::new(first, policy));
        for e in rest {
            for (o, &(i, gap)) in open.iter_mut().zip(&merging) {
                if o.joins(e, gap, policy) {
                    o.join(e, policy);
                } else {
                    loads[i].add(o.length());
                    *o = Open::new(e, policy);
                }
            }
        }
        for (o, &(i, _)) in open.iter().zip(&merging) {
            loads[i].add(o.length());
        }
    }
    for (load, gap) in loads.iter_mut().zip(gaps) {
        if gap.is_none() {
            *load = alone;
        }
    }
    loads
}

/// Drops the candidate gaps that merge exactly as another does, keeping of each such class the
/// guards' own gap (the first) if it is in it, else the smallest: a merge gap decides only
/// whether each read's distance from its span's last byte is within it, so two gaps with no
/// such distance between them plan alike. Where no read ends before the one before it, a
/// read's span ends where the read before it does, and the distances are those between
/// neighbours; otherwise only the widest of them is known to bound every distance, and only
/// gaps above it are dropped. Under a 20 ms, 1 Gbit/s model, reads 64 KiB long and 128 KiB
/// or 1 MiB apart, or contiguous, keep 3 of 12 candidates.
fn drop_alike(prepared: &Prepared, gaps: &mut Vec<Option<u64>>) {
    let guards = gaps.first().copied().flatten();
    let mut sorted: Vec<u64> = gaps.iter().flatten().copied().collect();
    sorted.sort_unstable();
    sorted.dedup();
    // Each read with the last byte of the read before it: `Open::joins` measures the bytes
    // between the two.
    let neighbours = || {
        prepared
            .groups()
            .filter(|&(_, remote)| remote)
            .flat_map(|(group, _)| group.windows(2))
            .map(|w| (w[0].offset + (w[0].length - 1), &w[1]))
    };
    let (mut exact, mut widest) = (true, 0);
    for (before, e) in neighbours() {
        exact &= e.offset + (e.length - 1) >= before;
        widest = widest.max(e.offset.saturating_sub(before).saturating_sub(1));
    }
    // `starts[i]`: some distance lies in (sorted[i - 1], sorted[i]], so sorted[i] merges more.
    // Where reads nest, only the widest neighbour distance is known to bound the distances.
    let mut starts: Vec<bool> = (0..sorted.len())
        .map(|i| !exact && i > 0 && sorted[i - 1] < widest)
        .collect();
    if exact {
        for (before, e) in neighbours() {
            let distance = e.offset.saturating_sub(before).saturating_sub(1);
            if let Some(start) = starts.get_mut(sorted.partition_point(|&g| g < distance)) {
                *start = true;
            }
        }
    }
    // The index of the smallest gap planning as `g` does.
    let class = |g: u64| {
        let i = sorted.partition_point(|&s| s < g);
        (1..=i).rev().find(|&j| starts[j]).unwrap_or(0)
    };
    let keep = |g: u64| match guards {
        Some(x) if class(x) == class(g) => g == x,
        _ => sorted[class(g)] == g,
    };
    gaps.retain(|g| g.is_none_or(keep));
}

/// Most steps of [`cheapest`] per read: workload R's reads take about 22; reads that merge by
/// the hundred (and nest, or stop on the amplification guard) would take hundreds, for a few
/// transfers fewer where each span already holds many reads.
const CHEAPEST_STEPS: u64 = 64;

/// The spans of every remote group under `gap` into `out`, remote group after remote group:
/// the cheapest under `prices` where the sweep's greed may cost transfers
/// ([`greed_may_cost`]), else the sweep's. False (and `out` meaningless) where no group's
/// greed may cost any, or the program would take more than [`CHEAPEST_STEPS`] per read.
fn cheapest_spans(
    prepared: &Prepared,
    gap: u64,
    policy: &Policy,
    prices: Prices,
    out: &mut Vec<Span>,
) -> bool {
    out.clear();
    let mut budget = CHEAPEST_STEPS.saturating_mul(prepared.entries.len() as u64);
    let mut any = false;
    for (group, remote) in prepared.groups() {
        if !remote {
            continue;
        }
        if greed_may_cost(group, gap, policy) {
            if !cheapest(group, gap, policy, prices, &mut budget, out) {
                return false;
            }
            any = true;
        } else {
            sweep(group, Some(gap), policy, out);
        }
    }
    any
}

/// The spans of every remote group under `gap`, each with its group's first entry.
fn remote_spans(
    prepared: &Prepared,
    gap: Option<u64>,
    policy: &Policy,
    out: &mut Vec<(usize, Span)>,
) {
    out.clear();
    let mut own = Vec::new();
    for (range, &remote) in prepared.bounds.windows(2).zip(&prepared.remote) {
        if remote {
            own.clear();
            sweep(&prepared.entries[range[0]..range[1]], gap, policy, &mut own);
            out.extend(own.iter().map(|&s| (range[0], s)));
        }
    }
}

/// The transfer of one piece, its parts appended to `parts`.
fn piece(entries: &[Entry], p: Piece, parts: &mut Vec<Part>) -> Transfer {
    match p {
        Piece::Whole(s) => transfer(entries, s, true, parts),
        Piece::Slice {
            entry,
            skip,
            length,
        } => {
            let e = entries[entry];
            let offset = e.offset + skip;
            parts.push(Part {
                index: e.index,
                offset,
                length,
                skip,
            });
            Transfer {
                index: e.index,
                offset,
                length,
                parts: parts.len() - 1..parts.len(),
                remote: true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locator::Locator;
    use proptest::prelude::*;

    proptest! {
        /// The side-by-side sweeps give every gap the load of its own sweep.
        #[test]
        fn loads_of_all_gaps_at_once_are_those_of_one_sweep_each(
            reads in prop::collection::vec((0..3usize, 0..2_000u64, 1..300u64), 0..60),
            gaps in prop::collection::vec(prop::option::of(0..64u64), 1..8),
            limit in prop_oneof![1..1_000u64, Just(u64::MAX)],
            parts in prop_oneof![1..8u64, Just(u64::MAX)],
            amplification in prop_oneof![1..6u64, Just(u64::MAX)],
        ) {
            let objects = ["https://a.example/x", "https://b.example/y", "/tmp/local"]
                .map(|u| Locator::parse(u).unwrap());
            let requests: Vec<Request> = reads
                .iter()
                .map(|&(o, offset, length)| Request {
                    locator: &objects[o],
                    offset,
                    length,
                    if_match: None,
                })
                .collect();
            let policy = Policy { gap: 1, limit, parts, amplification };
            let prepared = Prepared::new(&requests);
            let mut spans = Vec::new();
            for (&gap, load) in gaps.iter().zip(loads(&prepared, &gaps, &policy)) {
                remote_spans(&prepared, gap, &policy, &mut spans);
                let mut own = Load::default();
                spans.iter().for_each(|(_, s)| own.add(s.length()));
                prop_assert_eq!(load, own, "gap {:?}", gap);
            }
            // A dropped gap plans as a kept one does; the first gap (the guards') is kept.
            let mut kept = gaps.clone();
            drop_alike(&prepared, &mut kept);
            prop_assert_eq!(kept.first(), gaps.first());
            let mut plan_of = |gap| {
                remote_spans(&prepared, gap, &policy, &mut spans);
                spans.iter().map(|&(b, s)| (b, s.from, s.length())).collect::<Vec<_>>()
            };
            let kept_plans: Vec<_> = kept.iter().map(|&k| plan_of(k)).collect();
            for &gap in gaps.iter().filter(|g| !kept.contains(g)) {
                prop_assert!(kept_plans.contains(&plan_of(gap)), "{:?} of {:?}", gap, kept);
            }
        }
    }

    #[test]
    fn rounds_of_requests_take_the_cheapest_spans() {
        // Amplification 2 (see `cheapest`'s test): the sweep sends A and B, then C, then D;
        // one slot and a long round trip make every transfer a round, and B can carry C and
        // D. Bytes cost more than a round trip: each read alone.
        let object = Locator::parse("https://example.com/data.bin").unwrap();
        let reads = [(0, 1), (5, 10), (24, 1), (28, 1)].map(|(offset, length)| Request {
            locator: &object,
            offset,
            length,
            if_match: None,
        });
        let policy = Policy {
            gap: 100,
            limit: 1000,
            parts: 100,
            amplification: 2,
        };
        let model = |rate| CostModel {
            rtt: Duration::from_millis(50),
            per_request: Duration::ZERO,
            connection_rate: rate,
            total_rate: rate,
            concurrency: 1,
            max_transfer: None,
            total_known: true,
        };
        let spans = |p: &Plan| {
            p.transfers
                .iter()
                .map(|t| (t.offset, t.length))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            spans(&crate::plan::plan(&reads, &policy)),
            [(0, 15), (24, 1), (28, 1)]
        );
        let planned = plan_cost(&reads, &policy, &model(1_000_000_000));
        assert_eq!(spans(&planned), [(0, 1), (5, 24)]);
        let indices: Vec<usize> = planned.parts.iter().map(|p| p.index).collect();
        assert_eq!(indices, [0, 1, 2, 3]);
        let planned = plan_cost(&reads, &policy, &model(10));
        assert_eq!(spans(&planned), [(0, 1), (5, 10), (24, 1), (28, 1)]);
    }

    #[test]
    fn only_gaps_that_merge_differently_are_tried() {
        let object = Locator::parse("https://example.com/data.bin").unwrap();
        // Neighbours 10 and 30 bytes apart (from a read's last byte to the next read).
        let reads = [(0, 10), (20, 10), (60, 5)].map(|(offset, length)| Request {
            locator: &object,
            offset,
            length,
            if_match: None,
        });
        let prepared = Prepared::new(&reads);
        let mut gaps = [1000, 5, 10, 15, 30, 40].map(Some).to_vec();
        gaps.insert(1, None);
        drop_alike(&prepared, &mut gaps);
        // 15 merges as 10 does, and 30 and 40 as the guards' own (first) does; none stays.
        assert_eq!(gaps, [Some(1000), None, Some(5), Some(10)]);
        // A read ending before the one before it: the last read is 105 bytes from its
        // neighbour but 20 from its span's end, so only the gaps above 105 go (the guards'
        // own standing for them).
        let nested = [(0, 100), (10, 5), (120, 5)].map(|(offset, length)| Request {
            locator: &object,
            offset,
            length,
            if_match: None,
        });
        let mut gaps = [1000, 5, 19, 25, 200, 300].map(Some).to_vec();
        drop_alike(&Prepared::new(&nested), &mut gaps);
        assert_eq!(gaps, [Some(1000), Some(5), Some(19), Some(25)]);
    }

    fn lengths(plan: &Plan) -> Vec<u64> {
        plan.transfers.iter().map(|t| t.length).collect()
    }

    #[test]
    fn a_cold_link_cuts_long_transfers_into_pieces_and_keeps_short_ones() {
        let object = Locator::parse("https://example.com/data.bin").unwrap();
        let read = |offset: u64, length: u64| Request {
            locator: &object,
            offset,
            length,
            if_match: None,
        };
        let cold = CostModel::priors(64);
        let warm = CostModel {
            max_transfer: None,
            total_known: true,
            ..cold
        };
        // 50 contiguous reads of 1.2 MB: one 60 MB span, cut at read boundaries into pieces
        // of at most 32 MiB when cold; whole when one connection has been measured.
        let reads: Vec<Request> = (0..50).map(|i| read(i * 1_200_000, 1_200_000)).collect();
        let pieces = lengths(&plan_cost(&reads, &Policy::default(), &cold));
        assert_eq!(pieces.iter().sum::<u64>(), 60_000_000);
        assert!(pieces.len() >= 2, "{pieces:?}");
        assert!(pieces.iter().all(|&l| l <= COLD_TRANSFER), "{pieces:?}");
        assert_eq!(
            plan_cost(&reads, &Policy::default(), &warm).transfers.len(),
            1
        );
        // A 10 MB read is under the cap: one transfer.
        assert_eq!(
            lengths(&plan_cost(
                &[read(0, 10_000_000)],
                &Policy::default(),
                &cold
            )),
            [10_000_000]
        );
        // A read of 2^40 bytes: no more than twice the slots in pieces.
        let huge = plan_cost(&[read(0, 1 << 40)], &Policy::default(), &cold);
        assert_eq!(huge.transfers.len(), 128);
        assert_eq!(lengths(&huge).iter().sum::<u64>(), 1 << 40);
    }

    #[test]
    fn a_capped_model_runs_every_transfer_at_the_links_rate() {
        let object = Locator::parse("https://example.com/data.bin").unwrap();
        // Two touching reads of 2 and 1 MiB, on a link whose one connection carries 100 MB/s
        // and all 1.25 GB/s: side by side they beat one 3 MiB transfer (121 against 131 ms).
        let reads = [(0, 2 << 20), (2 << 20, 1 << 20)].map(|(offset, length)| Request {
            locator: &object,
            offset,
            length,
            if_match: None,
        });
        let measured = CostModel {
            rtt: Duration::from_millis(100),
            connection_rate: 100_000_000,
            max_transfer: None,
            total_known: true,
            ..CostModel::priors(64)
        };
        let policy = Policy::default();
        assert_eq!(plan_cost(&reads, &policy, &measured).transfers.len(), 2);
        // While either rate is unmeasured (the cap is set), the ratio is a guess: one
        // connection is taken to carry the link, and the touching reads merge.
        let guessed = CostModel {
            max_transfer: Some(COLD_TRANSFER),
            total_known: true,
            ..measured
        };
        assert_eq!(plan_cost(&reads, &policy, &guessed).transfers.len(), 1);
    }

    #[test]
    fn reads_in_clusters_merge_within_clusters_and_not_across_them() {
        let object = Locator::parse("https://example.com/data.h5").unwrap();
        // 15 clusters of 52 reads of 56 KiB, 1 KiB apart, clusters 3.2 MB apart (gaps of
        // about 200 KB, under the priors' smallest rated gap of 392 KiB).
        let mut reads = Vec::new();
        for cluster in 0..15u64 {
            let mut at = cluster * 3_200_000;
            for _ in 0..52 {
                reads.push(Request {
                    locator: &object,
                    offset: at,
                    length: 56 << 10,
                    if_match: None,
                });
                at += (56 << 10) + 1024;
            }
        }
        let policy = Policy::default();
        let cold = CostModel::priors(64);
        let planned = plan_cost(&reads, &policy, &cold);
        assert_eq!(planned.transfers.len(), 15);
        assert!(planned.transfers.iter().all(|t| t.parts.len() == 52));
        let guards = crate::plan::plan(&reads, &policy);
        assert!(guards.transfers.len() < 15);
        assert!(cold.predict(&planned) < cold.predict(&guards));
        // The ladder: 4 KiB doubling below the guards' gap, besides the rated gaps (on a
        // 1 ms round trip at 10 Gbit/s, 20 KB in one slot's round trip) and the guards' own.
        let lan = CostModel {
            rtt: Duration::from_millis(1),
            per_request: Duration::from_micros(25),
            connection_rate: 1_250_000_000,
            total_rate: 1_250_000_000,
            concurrency: 64,
            max_transfer: None,
            total_known: true,
        };
        let gaps = lan.gaps(&policy);
        let ladder: Vec<Option<u64>> = (12..20).map(|k| Some(1 << k)).collect();
        assert!(ladder.iter().all(|g| gaps.contains(g)), "{gaps:?}");
        assert!(gaps.contains(&Some(20_019)) && gaps.contains(&Some(1 << 20)));
        assert!(gaps.iter().all(|g| g.is_none_or(|g| g <= 1 << 20)));
        // While the total is the prior: 4, 32 and 256 KiB below the smallest rated gap.
        let unknown = CostModel {
            total_known: false,
            ..lan
        };
        let gaps = unknown.gaps(&policy);
        assert!(gaps.contains(&Some(4 << 10)) && !gaps.contains(&Some(8 << 10)));
        let priors = CostModel::priors(64).gaps(&policy);
        for rung in [4 << 10, 32 << 10, 256 << 10] {
            assert!(priors.contains(&Some(rung)), "{priors:?}");
        }
        assert!(!priors.contains(&Some(8 << 10)) && !priors.contains(&Some(512 << 10)));
    }
}
