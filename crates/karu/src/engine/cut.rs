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
//! and `r` the bytes it has left, the transfer alone ends in `r / s`. Cut where both end
//! together, it carries `(r + d·s) / 2` more bytes and the tail the rest after `d`: both end
//! in `(r / s + d) / 2`. HTTP/1.1 cannot shorten an answer under way, so the cut transfer
//! closes its connection at the cut, and what the server had sent past it by then (about
//! `d·s`, a round trip's worth and the buffers) is fetched for nothing: the cut must save
//! that time, `d`, besides [`MIN_GAIN`], and leave a tail of at least [`MIN_TAIL`].
//!
//! A cut takes only room nothing else wants: no transfer is queued, the client has a free
//! place, and the endpoint's gate admits one more bulk transfer. Where the round trip is
//! short the gate's probing has measured whether more streams carry more; where it is long
//! the gate lets every transfer run, and the cut also needs the endpoint's streams together
//! to carry less than the link's total rate (measured, or the prior) by [`HEADROOM`]: where
//! streams already carry the link, another only shares it. A tail is a transfer like any
//! other, so it may be cut again.
//!
//! The rate is the stream's over its last one or two spans of `d` (at least [`MIN_WINDOW`]),
//! and no cut is looked for in its first [`RAMP`] spans: a new connection carries little in
//! its first round trips, and a rate from them would cut a stream that is only starting. A
//! body that restarts from an earlier offset is not cut.
//!
//! Measured (2026-12-07): one 128 MiB read through the test kit's proxy capped at 100 MB/s
//! per connection at RTT 0 (`tests/gate.rs`, 8 paired runs of the whole test): 0.62 s
//! against 0.72 without cuts (0.86×, CPU equal), 4 pieces growing to 20–23 transfers. On the
//! benchmark's servers the rule mostly keeps still: none at 5 and 20 ms on the test kit
//! server and nginx (their streams together carry the link), a few on C at RTT 0 (s3s-fs
//! and the test kit server), whose walls stayed within their spread. On a long link whose
//! streams are each capped, the total measured from the streams running stands for the link
//! and stops further cuts: there the cold plan's pieces set the streams.

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
    bytes: u64,
    /// The latest mark and the one before it.
    mark: Mark,
    before: Option<Mark>,
}

/// The stream's bytes and the endpoint's bulk bytes at an instant.
#[derive(Clone, Copy, Debug)]
struct Mark {
    at: Instant,
    bytes: u64,
    endpoint: u64,
}

impl Cutter {
    /// Body bytes `got` (object offsets) arrived at `now`, answering the request sent at
    /// `sent`; `endpoint_bytes` counts the bulk body bytes of every transfer to the endpoint
    /// so far, and `total` gives the link's total rate in bytes per second (asked only when a
    /// cut would pay). Returns the offset to cut the transfer at (its bytes run to `end`,
    /// exclusive) when a cut now ends it sooner (see the module docs); the caller then finds
    /// room for the tail, or calls [`Cutter::no_room`].
    pub(crate) fn look(
        &mut self,
        got: Range<u64>,
        end: u64,
        sent: Option<Instant>,
        now: Instant,
        endpoint_bytes: u64,
        total: impl FnOnce() -> u64,
    ) -> Option<u64> {
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
                self.answer = Some(Answer {
                    sent,
                    first: now,
                    bytes: 0,
                    mark,
                    before: None,
                });
                return None;
            }
        };
        a.bytes += got.end - got.start;
        let d = a.first.saturating_duration_since(a.sent);
        let span = d.max(MIN_WINDOW);
        if now.saturating_duration_since(a.mark.at) >= span {
            a.before = Some(a.mark);
            a.mark = Mark {
                bytes: a.bytes,
                ..mark
            };
        }
        if self.next.is_some_and(|t| now < t)
            || now.saturating_duration_since(a.first) < span.saturating_mul(RAMP)
        {
            return None;
        }
        let from = a.before?;
        let secs = now.saturating_duration_since(from.at).as_secs_f64();
        let s = (a.bytes - from.bytes) as f64 / secs;
        let at = point(d, s, self.pos, end)?;
        let together = endpoint_bytes.saturating_sub(from.endpoint) as f64 / secs;
        if together + s > total() as f64 / HEADROOM {
            // The link is busy: asked again a span later, not with every chunk.
            self.next = now.checked_add(span);
            return None;
        }
        Some(at)
    }

    /// The cut found no room: look again after a while.
    pub(crate) fn no_room(&mut self, now: Instant) {
        self.next = now.checked_add(BACK_OFF);
    }
}

/// Where to cut a stream of `rate` bytes per second that has delivered up to `pos` of bytes
/// running to `end`, when a new request brings its first byte after `d`: where both parts
/// end together, if that saves `d` (the waste) and [`MIN_GAIN`] and leaves [`MIN_TAIL`].
fn point(d: Duration, rate: f64, pos: u64, end: u64) -> Option<u64> {
    if rate <= 0.0 || !rate.is_finite() || pos >= end {
        return None;
    }
    let left = (end - pos) as f64;
    let d = d.as_secs_f64();
    let gain = (left / rate - d) / 2.0;
    if gain < d + MIN_GAIN.as_secs_f64() {
        return None;
    }
    // `as` saturates; the point lies strictly between `pos` and `end` since the gain is
    // positive.
    let carried = ((left + d * rate) / 2.0) as u64;
    let at = pos.saturating_add(carried).min(end);
    (end - at >= MIN_TAIL).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: f64 = 1e6;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// `Cutter::look` for bytes `[at, at + n)` at `t0 + now` ms of a request sent at `t0`,
    /// on a link of 1.25 GB/s in all.
    fn look(c: &mut Cutter, t0: Instant, at: u64, n: u64, now: u64, endpoint: u64) -> Option<u64> {
        c.look(
            at..at + n,
            64 << 20,
            Some(t0),
            t0 + ms(now),
            endpoint,
            || 1_250_000_000,
        )
    }

    #[test]
    fn a_slow_stream_is_cut_where_both_parts_end_together() {
        // 40 MB left at 100 MB/s (400 ms), a new request's first byte after 20 ms: the
        // original carries (40 + 2) / 2 = 21 MB, the tail 19 MB after 20 ms: both 210 ms.
        let at = point(ms(20), 100.0 * MB, 10_000_000, 50_000_000).unwrap();
        assert_eq!(at, 31_000_000);
    }

    #[test]
    fn no_cut_where_the_tail_would_not_pay_for_its_waste_or_is_short() {
        // 3 MB left at 100 MB/s (30 ms) against a 40 ms first byte: the tail ends later.
        assert_eq!(point(ms(40), 100.0 * MB, 0, 3_000_000), None);
        // 7 MB left (70 ms) against 25 ms: saves 22.5 ms, not the 25 wasted and 2 more.
        assert_eq!(point(ms(25), 100.0 * MB, 0, 7_000_000), None);
        assert!(point(ms(25), 100.0 * MB, 0, 8_500_000).is_some());
        // Saves 2.5 ms, but the tail is 0.25 MB.
        assert_eq!(point(ms(0), 100.0 * MB, 0, 500_000), None);
        // Nothing left, or no rate.
        assert_eq!(point(ms(1), 100.0 * MB, 5, 5), None);
        assert_eq!(point(ms(1), 0.0, 0, 50_000_000), None);
        assert_eq!(point(ms(1), f64::NAN, 0, 50_000_000), None);
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
        assert_eq!(look(&mut c, t0, 800_000, 400_000, 15, 0), None);
        // At 16 ms, 200 MB/s over the last span, 65 MB left: cut.
        let cut = look(&mut c, t0, 1_200_000, 400_000, 16, 0).expect("a slow stream is cut");
        assert!(cut > 1_600_000 && cut < (64 << 20) - MIN_TAIL, "{cut}");
        // No room: no look for a while.
        c.no_room(t0 + ms(16));
        assert_eq!(look(&mut c, t0, 1_600_000, 100_000, 17, 0), None);
        assert!(look(&mut c, t0, 1_700_000, 100_000, 18, 0).is_some());
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
            c.look(at..at + n, end, Some(t0), t0 + ms(now), 0, || u64::MAX)
        };
        assert_eq!(look(0, 1, 2), None);
        assert_eq!(look(1, 10_000, 6), None);
        // 1 GB/s over the last span: 6 ms alone, and a cut would save 2 ms, not the 2 it
        // wastes and 2 more. Over the whole answer (335 MB/s) it would have seemed to save 8.
        assert_eq!(look(10_001, 2_000_000, 8), None);
    }

    #[test]
    fn streams_that_carry_the_link_together_are_not_cut() {
        let t0 = Instant::now();
        let gb = || 1_000_000_000;
        let mut c = Cutter::default();
        let mut look = |at: u64, n: u64, now: u64, endpoint: u64| {
            c.look(at..at + n, 64 << 20, Some(t0), t0 + ms(now), endpoint, gb)
        };
        assert_eq!(look(0, 1, 1, 0), None);
        assert_eq!(look(1, 200_000, 3, 0), None);
        assert_eq!(look(200_001, 200_000, 5, 1_500_000), None);
        // This stream at 100 MB/s, the endpoint's at 750 MB/s over the last 4 ms: 850 MB/s
        // with this one is above 1 GB/s ÷ 1.25.
        assert_eq!(look(400_001, 200_000, 7, 3_000_000), None);
        // Not asked again within the span; then, with the endpoint's streams at 250 MB/s,
        // there is room.
        assert_eq!(look(600_001, 100_000, 8, 3_000_000), None);
        assert!(look(700_001, 100_000, 9, 3_500_000).is_some());
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
                || u64::MAX,
            )
        };
        assert_eq!(again(1, 51), None);
        assert_eq!(again(1001, 52), None);
    }
}
