//! A running transfer's unread tail, cut off onto a transfer of its own.
//!
//! A plan is made before the link is known (every cold client's first batch) or from
//! estimates of past transfers, and a stream may turn out slow: an object store may serve
//! each stream at a fraction of what its link carries (s3s-fs streams a body at 60–150 MB/s
//! where several together carry 300–400), so a long transfer would end the batch alone while
//! slots idle. Once a bulk transfer's own stream has been measured, the transfer hands the
//! unread end of its range to a new transfer when that ends both sooner.
//!
//! With `d` the time a new request takes to bring its first byte (taken as this transfer's
//! own: its request, and its connection's handshake if it opened one), `s` the stream's rate
//! and `r` the bytes it has left, the transfer alone ends in `r / s`. A tail goes on a new
//! connection, whose window starts small and doubles each round trip (TCP's slow start): it
//! carries as if at `s` from `l = d +` [`ramp`] on. Cut into itself and `n` tails that all
//! end together, the transfer ends in `t = (r / s + n·l) / (n + 1)`, carrying `s·t` more
//! bytes, and each tail `s·(t − l)` (one tail: `(r / s + l) / 2`). HTTP/1.1
//! cannot shorten an answer under way, so the cut transfer closes its connection at the cut,
//! and what the server had sent past it by then (about `d·s`, a round trip's worth and the
//! buffers) is fetched for nothing: the cut must save that time, `d`, besides [`MIN_GAIN`],
//! and leave each tail at least [`MIN_TAIL`]. It makes as many tails (at most [`MAX_TAILS`])
//! as pay and find room.
//!
//! A cut takes only room nothing else wants: no transfer is queued, the client has a free
//! place, and the endpoint's gate admits one more bulk transfer, for each tail. Where the
//! round trip is short the gate's probing has measured whether more streams carry more.
//! Where it is long the gate lets every transfer run and has measured nothing of it, and the
//! streams running, counted at least at this stream's rate, must leave room under the link's
//! total by [`HEADROOM`] (see [`headroom`]): where streams already carry the link, another
//! only shares it. But that total, measured while those streams run, is only their sum, which
//! would stop every cut where each stream is slow (S3 serves about 100 MB/s a connection), so
//! the gate tries (`Gate::tails`): its first cut adds at most as many streams as run, under the
//! prior's total; once the tails carry bytes, the streams together must carry more by the
//! probing's gain for a doubling, or what they carried (or the measured total, if more) is the
//! link's from then on. A tail is a transfer like any other, so it may be cut again.
//!
//! The rate is the stream's over its last one or two spans (at least [`MIN_WINDOW`]), and no
//! cut is looked for in its first [`RAMP`] spans, nor while the stream or the endpoint's
//! streams still speed up ([`rising`]): a new connection carries little in its first round
//! trips, and a rate from them would cut a stream that is only starting (and a trial would
//! read the climb as growth). A span is `d`,
//! or, where the gate is open, the answer's round trip (its first byte less its connection's
//! handshake): `d` holds the handshake too, and spans twice a long link's round trip found the
//! 32 MiB pieces of a cold plan mostly carried before a trial's tails were judged. A body that
//! restarts from an earlier offset is not cut.
//!
//! Measured (2026-12-07): one 128 MiB read through the test kit's proxy capped at 100 MB/s
//! per connection at RTT 0 (`tests/gate.rs`, 8 paired runs of the whole test): 0.62 s
//! against 0.72 without cuts (0.86×, CPU equal), 4 pieces growing to 20–23 transfers. At 5
//! and 20 ms round trips (3 runs each) 244–394 and 350–388 ms; before, when no tail was cut
//! there (the measured total stood for the link), 447–462 at 20 ms; 16 pieces of 8 MiB from
//! the start, 223–301. Workload C on the same links in `karu-bench` (`/conn` profiles): see
//! BENCHMARKS.md. On the benchmark's other profiles the trial cuts a few tails on C at 5 ms and
//! at 1 Gbit/s, whose walls stayed within their spread, and none at 20 and 50 ms (C's pieces
//! end before a cut pays).
//!
//! Before the trial waited for a steady rate (2026-12-08), workload C's cold batches through
//! the test kit proxy at 5 ms began it 15 ms after the first bytes, while the streams together
//! read 100–320 MB/s and later carried 440–600: 2 of 12 runs read the climb as growth and cut
//! 9–12 tails. And a trial judged as no growth before the link's total was measured (C at RTT
//! 0 behind 150 MB/s a connection, where the gate had opened) left the prior's 1.25 GB/s as
//! the ceiling: 15 more tails followed at once. On the proxy's path with slow start at 20 ms
//! (`karu-bench --profiles 20/ss`, 7 runs each on the test kit server and nginx), C's runs
//! that cut took 407–485 ms against 287–349 for those that did not; 3–4 of 7 cut before the
//! ramp was priced and cuts waited for a steady rate, 2 and 0 of 7 after. Behind 100 MB/s a
//! connection with slow start (`5/conn/ss`, `20/conn/ss`, what S3 looks like) C took 346
//! against 443 ms at 5 ms and 586 against 562 at 20; on the proxy's `/conn` path without it,
//! where a new connection runs at once, fewer cuts cost C 426–459 against 327–341 ms at 5 ms
//! and 481–483 against 370–392 at 20 (see BENCHMARKS.md).

use std::ops::Range;
use std::time::{Duration, Instant};

/// The shortest tail cut off: a bulk transfer's length (see `engine::gate::BULK`), so that a
/// tail is paced at its endpoint's gate as its transfer was.
pub(crate) const MIN_TAIL: u64 = super::gate::BULK;
/// The least time a cut must save beyond its waste: below it the measure's own error decides.
pub(crate) const MIN_GAIN: Duration = Duration::from_millis(2);
/// The shortest span a stream's rate is measured over.
pub(crate) const MIN_WINDOW: Duration = Duration::from_millis(2);
/// Spans after an answer's first byte before its rate is trusted.
pub(crate) const RAMP: u32 = 3;
/// How far below the link's total rate the endpoint's streams must run for one more to pay.
pub(crate) const HEADROOM: f64 = 1.25;
/// The most tails one cut makes (room and [`MIN_TAIL`] usually allow fewer).
pub(crate) const MAX_TAILS: u32 = 16;
/// How long a transfer that found no room waits before it looks again.
const BACK_OFF: Duration = Duration::from_millis(2);

/// What a bulk transfer measures of its stream, to decide where to cut it.
#[derive(Debug, Default)]
pub(crate) struct Cutter {
    /// The answer being measured.
    answer: Option<Answer>,
    /// Object offset after the last byte delivered.
    pos: u64,
    /// No look before this instant.
    next: Option<Instant>,
    /// A body restarted from an earlier offset: the transfer is not cut.
    off: bool,
}

/// One answer's stream: when its request went out and its first body byte came, its body
/// bytes so far, and the marks its rate is measured from.
#[derive(Debug)]
struct Answer {
    sent: Instant,
    first: Instant,
    /// The path's round trip, as best known: a new connection's window grows once per it.
    rtt: Duration,
    /// The span its rate is measured over (see [`Cutter::look`]).
    span: Duration,
    bytes: u64,
    /// The latest mark and the one before it.
    mark: Mark,
    before: Option<Mark>,
    /// Whether the stream or the endpoint's streams carried more in the latest whole span
    /// than in the one before (see [`rising`]); so until two spans have been measured.
    rising: bool,
}

/// The stream's bytes and the endpoint's bulk bytes at an instant.
#[derive(Clone, Copy, Debug)]
struct Mark {
    at: Instant,
    bytes: u64,
    endpoint: u64,
}

/// What a cutter asks of its transfer's endpoint.
pub(crate) trait Link {
    /// The answer's round trip, where the stream's own first byte is not the span to measure
    /// its rate over (see the module docs); asked once per answer.
    fn rtt(&self) -> Option<Duration>;
    /// How many tails the link has room for beside a stream of `rate` while the endpoint's
    /// streams carry `together` (bytes per second); asked only when a cut would pay.
    fn room(&self, rate: f64, together: f64) -> u32;
}

/// Where a stream is cut: it carries its bytes up to `at`, and the rest is shared by tails
/// of their own (see [`Cut::bounds`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Cut {
    /// The time a new request takes to bring its first byte.
    d: Duration,
    /// How long after the cut a tail carries at the stream's rate (see [`ramp`]).
    lead: Duration,
    /// The span the stream's rate was measured over.
    span: Duration,
    /// The stream's rate, bytes per second.
    pub(crate) rate: f64,
    /// Object offset the stream has delivered up to.
    pos: u64,
    /// Object offset after the stream's last byte.
    end: u64,
    /// The most tails that pay.
    pub(crate) tails: u32,
    /// What the endpoint's bulk transfers carried together over the stream's last spans,
    /// bytes per second.
    pub(crate) together: f64,
}

impl Cut {
    /// Where the stream and `n` tails (at most [`Cut::tails`]) all end together: the stream's
    /// new end first, then each further tail's start, ascending. `None` when `n` is 0 or
    /// more than pay.
    pub(crate) fn bounds(&self, n: u32) -> Option<Vec<u64>> {
        if n == 0 || n > self.tails {
            return None;
        }
        let at = share(self.d, self.lead, self.rate, self.pos, self.end, n)?;
        let each = (self.end - at) / u64::from(n);
        Some((0..u64::from(n)).map(|i| at + i * each).collect())
    }

    /// How long after the cut its tails' bytes count in what the endpoint's streams carry
    /// together: their first byte, then the two spans a stream's rate is measured over.
    pub(crate) fn settle(&self) -> Duration {
        self.d.saturating_add(self.span.saturating_mul(2))
    }
}

impl Cutter {
    /// Body bytes `got` (object offsets) arrived at `now`, answering the request sent at
    /// `sent`; `endpoint_bytes` counts the bulk body bytes of every transfer to the endpoint
    /// so far, and `link` answers for the endpoint. Returns where a cut now ends the transfer
    /// (its bytes run to `end`, exclusive) sooner, with up to as many tails as pay and have
    /// room (see the module docs); the caller then finds places for them, or calls
    /// [`Cutter::no_room`].
    pub(crate) fn look(
        &mut self,
        got: Range<u64>,
        end: u64,
        sent: Option<Instant>,
        now: Instant,
        endpoint_bytes: u64,
        link: &impl Link,
    ) -> Option<Cut> {
        if self.off || (self.pos > 0 && got.start < self.pos) {
            self.off = true;
            return None;
        }
        self.pos = got.end;
        let sent = sent?;
        let mark = Mark {
            at: now,
            bytes: 0,
            endpoint: endpoint_bytes,
        };
        let a = match &mut self.answer {
            Some(a) if a.sent == sent => a,
            _ => {
                // A new answer (the first, or a resumed one): its stream starts now.
                let d = now.saturating_duration_since(sent);
                let rtt = link.rtt().map_or(d, |r| r.min(d));
                self.answer = Some(Answer {
                    sent,
                    first: now,
                    rtt,
                    span: rtt.max(MIN_WINDOW),
                    bytes: 0,
                    mark,
                    before: None,
                    rising: true,
                });
                return None;
            }
        };
        a.bytes += got.end - got.start;
        let d = a.first.saturating_duration_since(a.sent);
        let span = a.span;
        if now.saturating_duration_since(a.mark.at) >= span {
            let latest = Mark {
                bytes: a.bytes,
                ..mark
            };
            if let Some(before) = a.before {
                a.rising = rising(before, a.mark, latest);
            }
            a.before = Some(a.mark);
            a.mark = latest;
        }
        if self.next.is_some_and(|t| now < t)
            || now.saturating_duration_since(a.first) < span.saturating_mul(RAMP)
        {
            return None;
        }
        let from = a.before?;
        if a.rising {
            // Its rate is a floor of what it will carry: a cut would hand bytes it is about
            // to carry faster to connections that start slow.
            return None;
        }
        let secs = now.saturating_duration_since(from.at).as_secs_f64();
        let rate = (a.bytes - from.bytes) as f64 / secs;
        // Whether one tail pays at all, before asking for room.
        let lead = d.saturating_add(ramp(a.rtt, rate));
        share(d, lead, rate, self.pos, end, 1)?;
        let together = endpoint_bytes.saturating_sub(from.endpoint) as f64 / secs;
        let most = most_tails(d, lead, rate, self.pos, end).min(link.room(rate, together));
        if most == 0 {
            // The link is busy: asked again a span later, not with every chunk.
            self.next = now.checked_add(span);
            return None;
        }
        Some(Cut {
            d,
            lead,
            span,
            rate,
            pos: self.pos,
            end,
            tails: most,
            together,
        })
    }

    /// The cut found no room: look again after a while.
    pub(crate) fn no_room(&mut self, now: Instant) {
        self.next = now.checked_add(BACK_OFF);
    }
}

/// Whether a stream still speeds up: it, or the endpoint's streams, carried more than
/// [`GAIN`](super::gate::GAIN) times faster between marks `mark` and `latest` than between
/// `before` and `mark` (whole spans each: a path's window comes in one burst a round trip).
/// New streams speed up for some round trips (TCP's slow start doubles a window each), and
/// on a cold machine for longer (the server, the client and their buffers warming up:
/// workload C's first 15 ms read 100 MB/s where its streams later carried 440): a rate
/// measured then is a floor, not what the streams carry.
fn rising(before: Mark, mark: Mark, latest: Mark) -> bool {
    let rate = |from: Mark, to: Mark, bytes: fn(Mark) -> u64| {
        let secs = to.at.saturating_duration_since(from.at).as_secs_f64();
        bytes(to).saturating_sub(bytes(from)) as f64 / secs
    };
    let faster = |bytes: fn(Mark) -> u64| {
        rate(mark, latest, bytes) > super::gate::GAIN * rate(before, mark, bytes)
    };
    faster(|m| m.bytes) || faster(|m| m.endpoint)
}

/// How many tails of a stream at `rate` (bytes per second) fit under a link of `ceiling`,
/// while the endpoint's `running` bulk transfers carry `together` (each counted at least at
/// `rate`: tails cut off a moment ago carry nothing yet): as many as keep them all within
/// the ceiling ÷ [`HEADROOM`]. Where streams already carry the link, another only shares it.
pub(crate) fn headroom(ceiling: f64, running: u32, rate: f64, together: f64) -> u32 {
    let carried = together.max(f64::from(running) * rate);
    let room = (ceiling / HEADROOM - carried) / rate;
    // `as` saturates, and a NaN (no rate) is 0.
    if room >= 1.0 { room as u32 } else { 0 }
}

/// TCP's initial congestion window: 10 segments of 1,460 bytes (RFC 6928).
const INITIAL_WINDOW: f64 = 14_600.0;

/// How much later than its first byte a tail on a new connection carries as a stream at
/// `rate` would, on a path whose round trip is `rtt`: slow start doubles its window from
/// [`INITIAL_WINDOW`] each round trip until one round trip carries `rate · rtt`, and the round
/// trips before sum to about one more of those, so the tail runs as if at `rate` from
/// `rtt · (log2(rate · rtt / INITIAL_WINDOW) − 1)` on. A cut closes a stream whose window has
/// grown and hands its end to connections that start small: on the test kit proxy's path with
/// TCP's slow start at 20 ms (`ProxyOptions::slow_start`), workload C's cold runs that cut
/// tails took 431–485 ms against 295–328 for those that cut none (2026-12-08). Where the
/// round trip is short (loopback) the ramp is a fraction of a millisecond.
fn ramp(rtt: Duration, rate: f64) -> Duration {
    let rtt = rtt.as_secs_f64();
    let rounds = (rate * rtt / INITIAL_WINDOW).log2() - 1.0;
    // A NaN (no rate) or a window that starts full is no ramp.
    Duration::try_from_secs_f64(rtt * rounds).unwrap_or(Duration::ZERO)
}

/// The most tails a stream of `rate` bytes per second, delivered up to `pos` of bytes
/// running to `end`, may be cut into when a new request brings its first byte after `d` and
/// carries at the stream's rate from `lead` on: as many as leave each at least [`MIN_TAIL`],
/// at most [`MAX_TAILS`] (0 when no cut pays).
fn most_tails(d: Duration, lead: Duration, rate: f64, pos: u64, end: u64) -> u32 {
    (1..=MAX_TAILS)
        .take_while(|&n| share(d, lead, rate, pos, end, n).is_some())
        .last()
        .unwrap_or(0)
}

/// Where to cut a stream of `rate` bytes per second that has delivered up to `pos` of bytes
/// running to `end`, when a new request brings its first byte after `d` and carries at the
/// stream's rate from `lead` on (`d` and the new connection's [`ramp`]), for `n` tails to
/// share the rest: where the stream and every tail end together, if that saves `d` (the
/// waste) and [`MIN_GAIN`] and leaves each tail [`MIN_TAIL`].
///
/// Alone the stream ends after `r / s` (`r` the bytes left, `s` its rate); cut, it ends
/// after `t` with `s·t` more bytes, and each tail, at the same rate from `lead` (`l`) on,
/// carries `s·(t − l)`: `r = s·t + n·s·(t − l)`, so `t = (r / s + n·l) / (n + 1)`.
fn share(d: Duration, lead: Duration, rate: f64, pos: u64, end: u64, n: u32) -> Option<u64> {
    if rate <= 0.0 || !rate.is_finite() || pos >= end || n == 0 {
        return None;
    }
    let left = (end - pos) as f64;
    let d = d.as_secs_f64();
    let lead = lead.as_secs_f64();
    let n = f64::from(n);
    let alone = left / rate;
    let together = (alone + n * lead) / (n + 1.0);
    if alone - together < d + MIN_GAIN.as_secs_f64() {
        return None;
    }
    // `as` saturates; the point lies strictly between `pos` and `end` since the gain is
    // positive.
    let carried = (rate * together) as u64;
    let at = pos.saturating_add(carried).min(end);
    ((end - at) / n as u64 >= MIN_TAIL).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: f64 = 1e6;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// An endpoint with room for `room` tails, which records what it was asked.
    struct Room {
        room: u32,
        asked: std::cell::RefCell<Vec<(f64, f64)>>,
    }

    impl Room {
        fn new(room: u32) -> Room {
            Room {
                room,
                asked: Default::default(),
            }
        }
    }

    impl Link for Room {
        fn rtt(&self) -> Option<Duration> {
            None
        }

        fn room(&self, rate: f64, together: f64) -> u32 {
            self.asked.borrow_mut().push((rate, together));
            self.room
        }
    }

    /// `Cutter::look` for bytes `[at, at + n)` at `t0 + now` ms of a request sent at `t0`,
    /// with room for any number of tails.
    fn look(c: &mut Cutter, t0: Instant, at: u64, n: u64, now: u64, endpoint: u64) -> Option<Cut> {
        c.look(
            at..at + n,
            64 << 20,
            Some(t0),
            t0 + ms(now),
            endpoint,
            &Room::new(u32::MAX),
        )
    }

    #[test]
    fn a_rate_still_climbing_is_rising() {
        let t0 = Instant::now();
        let mark = |at: u64, bytes: u64, endpoint: u64| Mark {
            at: t0 + ms(at),
            bytes,
            endpoint,
        };
        let (before, at_mark) = (mark(0, 0, 0), mark(10, 1_000_000, 4_000_000));
        // 100 MB/s, then 100 MB/s again: steady (the endpoint's 400 too).
        assert!(!rising(before, at_mark, mark(20, 2_000_000, 8_000_000)));
        // The stream at 200 MB/s in the latest span: rising; so is the endpoint at 800.
        assert!(rising(before, at_mark, mark(20, 3_000_000, 8_000_000)));
        assert!(rising(before, at_mark, mark(20, 2_000_000, 12_000_000)));
        // Nothing in the span before (a window still to come): rising.
        assert!(rising(before, mark(10, 0, 0), mark(20, 1, 1)));
    }

    #[test]
    fn a_slow_stream_is_cut_where_it_and_its_tails_end_together() {
        // 40 MB left at 100 MB/s (400 ms), a new request's first byte after 20 ms: the
        // original carries (40 + 2) / 2 = 21 MB, the tail 19 MB after 20 ms: both 210 ms.
        assert_eq!(
            share(ms(20), ms(20), 100.0 * MB, 10_000_000, 50_000_000, 1),
            Some(31_000_000)
        );
        // With 3 tails: (400 + 3 × 20) / 4 = 115 ms, 11.5 MB carried, 9.5 MB a tail after
        // 20 ms.
        assert_eq!(
            share(ms(20), ms(20), 100.0 * MB, 10_000_000, 50_000_000, 3),
            Some(21_500_000)
        );
        let cut = Cut {
            d: ms(20),
            lead: ms(20),
            span: ms(20),
            rate: 100.0 * MB,
            pos: 10_000_000,
            end: 50_000_000,
            tails: 3,
            together: 0.0,
        };
        assert_eq!(
            cut.bounds(3),
            Some(vec![21_500_000, 31_000_000, 40_500_000])
        );
        assert_eq!(cut.bounds(1), Some(vec![31_000_000]));
        assert_eq!((cut.bounds(0), cut.bounds(4)), (None, None));
        // Tails of at least `MIN_TAIL`: 40 MB allows up to 16 (the most), 7 MB two.
        assert_eq!(
            most_tails(ms(20), ms(20), 100.0 * MB, 0, 40_000_000),
            MAX_TAILS
        );
        assert_eq!(most_tails(ms(1), ms(1), 100.0 * MB, 0, 7_000_000), 2);
    }

    #[test]
    fn a_tail_on_a_new_connection_carries_at_the_streams_rate_only_after_slow_start() {
        // 100 MB/s over 20 ms round trips: 2 MB a round trip, reached after log2(137) = 7.1
        // doublings of 14.6 KB; the round trips before carry about one more, so 6.1 round
        // trips are lost.
        let r = ramp(ms(20), 100.0 * MB);
        assert!((120..=124).contains(&r.as_millis()), "{r:?}");
        // On loopback (0.1 ms) it is a fraction of a millisecond; with no rate, none.
        assert!(ramp(Duration::from_micros(100), 1000.0 * MB) < ms(1));
        assert_eq!(ramp(ms(20), 0.0), Duration::ZERO);
        assert_eq!(ramp(Duration::ZERO, 100.0 * MB), Duration::ZERO);
        // 20 MB left at 100 MB/s (200 ms): one tail from a 20 ms first byte would save 90
        // ms, but one that carries fully only 122 ms later saves 29: still worth its 20 ms
        // of waste, with the stream cut later.
        let lead = ms(20) + r;
        let at = share(ms(20), lead, 100.0 * MB, 0, 20_000_000, 1).unwrap();
        assert!(at > share(ms(20), ms(20), 100.0 * MB, 0, 20_000_000, 1).unwrap());
        // 10 MB left (100 ms): no tail pays.
        assert_eq!(share(ms(20), lead, 100.0 * MB, 0, 10_000_000, 1), None);
        assert!(share(ms(20), ms(20), 100.0 * MB, 0, 10_000_000, 1).is_some());
    }

    #[test]
    fn no_cut_where_the_tail_would_not_pay_for_its_waste_or_is_short() {
        let one = |d, rate, pos, end| share(d, d, rate, pos, end, 1);
        // 3 MB left at 100 MB/s (30 ms) against a 40 ms first byte: the tail ends later.
        assert_eq!(one(ms(40), 100.0 * MB, 0, 3_000_000), None);
        // 7 MB left (70 ms) against 25 ms: saves 22.5 ms, not the 25 wasted and 2 more.
        assert_eq!(one(ms(25), 100.0 * MB, 0, 7_000_000), None);
        assert!(one(ms(25), 100.0 * MB, 0, 8_500_000).is_some());
        assert_eq!(most_tails(ms(25), ms(25), 100.0 * MB, 0, 7_000_000), 0);
        // Saves 2.5 ms, but the tail is 0.25 MB.
        assert_eq!(one(ms(0), 100.0 * MB, 0, 500_000), None);
        // Nothing left, or no rate.
        assert_eq!(one(ms(1), 100.0 * MB, 5, 5), None);
        assert_eq!(one(ms(1), 0.0, 0, 50_000_000), None);
        assert_eq!(one(ms(1), f64::NAN, 0, 50_000_000), None);
    }

    #[test]
    fn the_cutter_measures_past_the_ramp_before_it_cuts() {
        let t0 = Instant::now();
        let mut c = Cutter::default();
        // The request went out at 0 and its first byte came at 4 ms: spans of 4 ms, and no
        // cut before 12 ms after it.
        assert_eq!(look(&mut c, t0, 0, 1000, 4, 0), None);
        assert_eq!(look(&mut c, t0, 1000, 399_000, 8, 0), None);
        assert_eq!(look(&mut c, t0, 400_000, 400_000, 12, 0), None);
        assert_eq!(look(&mut c, t0, 800_000, 200_000, 15, 0), None);
        // At 16 ms, 100 MB/s over its last spans (not climbing), 66 MB left: cut, into as
        // many tails as pay.
        let cut = look(&mut c, t0, 1_000_000, 200_000, 16, 0).expect("a slow stream is cut");
        assert_eq!(cut.tails, MAX_TAILS);
        let at = cut.bounds(1).unwrap()[0];
        assert!(at > 1_200_000 && at < (64 << 20) - MIN_TAIL, "{at}");
        // No room: no look for a while.
        c.no_room(t0 + ms(16));
        assert_eq!(look(&mut c, t0, 1_200_000, 100_000, 17, 0), None);
        assert!(look(&mut c, t0, 1_300_000, 100_000, 18, 0).is_some());
        // A span twice as fast as the one before: climbing, not cut.
        assert_eq!(look(&mut c, t0, 1_400_000, 600_000, 20, 0), None);
        assert_eq!(look(&mut c, t0, 2_000_000, 1, 21, 0), None);
        // A body that starts over is never cut again.
        assert_eq!(look(&mut c, t0, 0, 1000, 19, 0), None);
        assert_eq!(look(&mut c, t0, 1000, 1000, 40, 0), None);
    }

    #[test]
    fn a_stream_is_measured_over_its_last_spans_not_its_start() {
        let t0 = Instant::now();
        let mut c = Cutter::default();
        // First byte at 2 ms (spans of 2 ms); a slow start (10 KB in 4 ms), then 2 MB in 2
        // ms, with 6 MB left.
        let end = 2_010_001 + 6_000_000;
        let mut look = |at: u64, n: u64, now: u64| {
            c.look(
                at..at + n,
                end,
                Some(t0),
                t0 + ms(now),
                0,
                &Room::new(u32::MAX),
            )
        };
        assert_eq!(look(0, 1, 2), None);
        assert_eq!(look(1, 10_000, 6), None);
        // 1 GB/s over the last span: 6 ms alone, and a cut would save 2 ms, not the 2 it
        // wastes and 2 more. Over the whole answer (335 MB/s) it would have seemed to save 8.
        assert_eq!(look(10_001, 2_000_000, 8), None);
    }

    #[test]
    fn the_room_a_link_leaves_bounds_the_tails() {
        let t0 = Instant::now();
        let mut c = Cutter::default();
        let mut asked = Vec::new();
        let mut look = |at: u64, n: u64, now: u64, endpoint: u64, room: u32| {
            let link = Room::new(room);
            let cut = c.look(
                at..at + n,
                64 << 20,
                Some(t0),
                t0 + ms(now),
                endpoint,
                &link,
            );
            asked.extend(link.asked.take());
            cut
        };
        assert_eq!(look(0, 1, 1, 0, 5), None);
        assert_eq!(look(1, 200_000, 3, 0, 5), None);
        assert_eq!(look(200_001, 200_000, 5, 1_500_000, 5), None);
        // This stream at 100 MB/s, the endpoint's at 750 MB/s over the last 4 ms: no room.
        assert_eq!(look(400_001, 200_000, 7, 3_000_000, 0), None);
        // Not asked again within the span; then room for two tails.
        assert_eq!(look(600_001, 100_000, 8, 3_000_000, 5), None);
        let cut = look(700_001, 100_000, 9, 3_500_000, 2).expect("room");
        assert_eq!(cut.tails, 2);
        assert_eq!(asked.len(), 2);
        let (rate, together) = asked[0];
        assert!((rate / 1e8 - 1.0).abs() < 1e-9 && (together / 7.5e8 - 1.0).abs() < 1e-9);
    }

    #[test]
    fn headroom_counts_the_streams_running_and_keeps_below_the_ceiling() {
        // 1 GB/s ÷ 1.25 = 800 MB/s: 4 streams carrying 400 leave room for 4 of 100 MB/s.
        assert_eq!(headroom(1e9, 4, 1e8, 4e8), 4);
        // Tails just started carry nothing yet, but count at the stream's rate.
        assert_eq!(headroom(1e9, 8, 1e8, 4e8), 0);
        // Streams carrying the link: none.
        assert_eq!(headroom(1e9, 5, 2e8, 1e9), 0);
        assert_eq!(headroom(1e9, 1, f64::NAN, 0.0), 0);
    }

    #[test]
    fn a_resumed_answer_is_measured_afresh() {
        let t0 = Instant::now();
        let mut c = Cutter::default();
        assert_eq!(look(&mut c, t0, 0, 1, 1, 0), None);
        // The body broke and a new request went out at 50 ms: its first chunk starts a new
        // measure, whatever the old one said.
        let resent = t0 + ms(50);
        let mut again = |at: u64, now: u64| {
            c.look(
                at..at + 1000,
                64 << 20,
                Some(resent),
                t0 + ms(now),
                0,
                &Room::new(u32::MAX),
            )
        };
        assert_eq!(again(1, 51), None);
        assert_eq!(again(1001, 52), None);
    }
}
