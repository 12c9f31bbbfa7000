//! Throttling-aware parallelism that converges instead of oscillating.
//!
//! A throttled answer (429 or 503) lowers the window to the chunks still in flight: what the
//! store was serving when it refused one more. The first cut, with no ceiling known yet, also
//! halves the window: behind latency the chunks in flight include requests still on the wire
//! and bodies already sent, so they overstate what the store serves at once (a store limited
//! to 4 was seen refusing at 5 to 7 of 8), and the window would stay above the store's limit.
//! That level plus one is remembered as the ceiling where throttling began. Below it the window grows by one after `window` clean
//! chunks in a row; at the ceiling it grows only once [`PROBE_AFTER`] has passed without
//! throttling, and each such probe moves the ceiling up by one, so a store that throttles
//! above N costs about one refused request per [`PROBE_AFTER`], not one per burst.
//!
//! Chunks submitted before the last cut report the same congestion: they lower the window
//! further (to what is still in flight) but count as the same cut.

use std::time::{Duration, Instant};

use super::ParallelismStats;

/// How long the window stays below a remembered ceiling before probing one above it.
pub(crate) const PROBE_AFTER: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub(crate) struct Window {
    /// The configured parallelism: never exceeded.
    limit: u64,
    window: u64,
    /// In-flight count at which the store last refused a request.
    ceiling: Option<u64>,
    /// Clean completions since the window last changed.
    clean: u64,
    /// When the window last met throttling or probed above its ceiling.
    quiet_since: Instant,
    /// Sequence number of the next submission.
    next_seq: u64,
    /// Submissions numbered below this were in flight at the last cut.
    cut_at: u64,
    stats: ParallelismStats,
}

impl Window {
    pub(crate) fn new(parallelism: u64) -> Window {
        Window {
            limit: parallelism,
            window: parallelism,
            ceiling: None,
            clean: 0,
            quiet_since: Instant::now(),
            next_seq: 0,
            cut_at: 0,
            stats: ParallelismStats {
                min: parallelism,
                max: parallelism,
                final_: parallelism,
                cuts: 0,
            },
        }
    }

    /// How many chunks may be in flight now.
    pub(crate) fn window(&self) -> u64 {
        self.window
    }

    /// Numbers a submission.
    pub(crate) fn submit(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq - 1
    }

    /// A chunk submitted as `seq` was throttled while `in_flight` others were still running.
    pub(crate) fn throttled(&mut self, seq: u64, in_flight: u64, now: Instant) {
        self.clean = 0;
        self.quiet_since = now;
        let mut lowered = in_flight.clamp(1, self.window);
        if seq >= self.cut_at {
            self.stats.cuts += 1;
            self.cut_at = self.next_seq;
            // A refused probe above a known ceiling needs no halving: the level below it was
            // served.
            if self.ceiling.is_none() {
                lowered = lowered.min(self.window.div_ceil(2));
            }
        }
        self.window = lowered;
        self.ceiling = Some(lowered + 1);
        self.record();
    }

    /// A chunk finished without throttling.
    pub(crate) fn clean(&mut self, now: Instant) {
        self.clean += 1;
        if self.clean < self.window || self.window >= self.limit {
            return;
        }
        let probing = self.ceiling.is_some_and(|c| self.window + 1 >= c);
        if probing {
            if now.duration_since(self.quiet_since) < PROBE_AFTER {
                return;
            }
            self.quiet_since = now;
            self.ceiling = Some(self.window + 2);
        }
        self.window += 1;
        self.clean = 0;
        self.record();
    }

    fn record(&mut self) {
        self.stats.min = self.stats.min.min(self.window);
        self.stats.max = self.stats.max.max(self.window);
        self.stats.final_ = self.window;
    }

    pub(crate) fn stats(&self) -> ParallelismStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_settles_at_what_the_store_served_and_counts_one_cut() {
        let t0 = Instant::now();
        let mut w = Window::new(16);
        let seqs: Vec<u64> = (0..16).map(|_| w.submit()).collect();
        // The store serves 3 and refuses 13, which come back one by one.
        for (i, &s) in seqs[3..].iter().enumerate() {
            w.throttled(s, 15 - i as u64, t0);
        }
        assert_eq!(w.window(), 3);
        assert_eq!(w.stats().cuts, 1);
        // Many clean chunks soon after: the window stays below the ceiling (4).
        for _ in 0..50 {
            w.clean(t0 + Duration::from_millis(500));
        }
        assert_eq!(w.window(), 3);
        // After PROBE_AFTER one probe goes above; the next waits again.
        for _ in 0..3 {
            w.clean(t0 + PROBE_AFTER);
        }
        assert_eq!(w.window(), 4);
        for _ in 0..50 {
            w.clean(t0 + PROBE_AFTER + Duration::from_millis(100));
        }
        assert_eq!(w.window(), 4);
        let s = w.submit();
        w.throttled(s, 3, t0 + PROBE_AFTER * 2);
        assert_eq!(w.window(), 3);
        let st = w.stats();
        assert_eq!((st.min, st.max, st.final_, st.cuts), (3, 16, 3, 2));
    }

    #[test]
    fn the_first_cut_halves_a_window_that_in_flight_overstates_and_a_probe_does_not() {
        let t0 = Instant::now();
        let mut w = Window::new(8);
        let seqs: Vec<u64> = (0..8).map(|_| w.submit()).collect();
        // Behind latency a store limited to 4 refuses only 2 of 8, seen at 7 and 6 in flight.
        w.throttled(seqs[7], 7, t0);
        w.throttled(seqs[6], 6, t0);
        assert_eq!(w.window(), 4);
        assert_eq!(w.stats().cuts, 1);
        // A refused probe goes back to what was in flight, not to half.
        for _ in 0..4 {
            w.clean(t0 + PROBE_AFTER);
        }
        assert_eq!(w.window(), 5);
        let s = w.submit();
        w.throttled(s, 4, t0 + PROBE_AFTER);
        assert_eq!(w.window(), 4);
        let st = w.stats();
        assert_eq!((st.min, st.max, st.final_, st.cuts), (4, 8, 4, 2));
    }

    #[test]
    fn without_a_ceiling_it_climbs_back_to_the_limit_and_never_below_one() {
        let t0 = Instant::now();
        let mut w = Window::new(4);
        let s = w.submit();
        w.throttled(s, 0, t0);
        assert_eq!(w.window(), 1);
        // Below the ceiling (2) growth is additive; at it, it waits.
        for _ in 0..20 {
            w.clean(t0);
        }
        assert_eq!(w.window(), 1);
        for _ in 0..20 {
            w.clean(t0 + PROBE_AFTER * 3);
        }
        assert_eq!(w.window(), 2);
        let mut fresh = Window::new(3);
        for _ in 0..10 {
            fresh.clean(t0);
        }
        assert_eq!(fresh.window(), 3);
    }
}
