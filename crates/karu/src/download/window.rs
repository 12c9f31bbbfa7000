//! Throttling-aware parallelism: additive increase, multiplicative decrease (AIMD).
//!
//! A chunk whose batch saw a 429 or 503 halves the window; `window` clean chunks in a row
//! raise it by one, up to the configured parallelism. Chunks already in flight when the
//! window was cut report the same congestion, so only chunks submitted after the last cut
//! may cut again: one burst of throttling costs one halving, not one per chunk.

use super::ParallelismStats;

#[derive(Debug)]
pub(crate) struct Aimd {
    ceiling: u64,
    window: u64,
    /// Clean completions since the window last changed.
    clean: u64,
    /// Sequence number of the next submission.
    next_seq: u64,
    /// Submissions numbered below this were in flight at the last cut.
    cut_at: u64,
    stats: ParallelismStats,
}

impl Aimd {
    pub(crate) fn new(parallelism: u64) -> Aimd {
        Aimd {
            ceiling: parallelism,
            window: parallelism,
            clean: 0,
            next_seq: 0,
            cut_at: 0,
            stats: ParallelismStats {
                min: parallelism,
                max: parallelism,
                final_: parallelism,
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

    /// A chunk submitted as `seq` finished; `throttled` when its store answered 429 or 503.
    pub(crate) fn finished(&mut self, seq: u64, throttled: bool) {
        if throttled {
            self.clean = 0;
            if seq >= self.cut_at {
                self.window = (self.window / 2).max(1);
                self.cut_at = self.next_seq;
            }
        } else {
            self.clean += 1;
            if self.clean >= self.window && self.window < self.ceiling {
                self.window += 1;
                self.clean = 0;
            }
        }
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
    fn one_burst_halves_once_and_clean_chunks_climb_back() {
        let mut a = Aimd::new(8);
        let seqs: Vec<u64> = (0..8).map(|_| a.submit()).collect();
        // Every chunk of the burst was throttled, but they were in flight together.
        for s in seqs {
            a.finished(s, true);
        }
        assert_eq!(a.window(), 4);
        let s = a.submit();
        a.finished(s, true);
        assert_eq!(a.window(), 2);
        for _ in 0..2 {
            let s = a.submit();
            a.finished(s, false);
        }
        assert_eq!(a.window(), 3);
        for _ in 0..100 {
            let s = a.submit();
            a.finished(s, false);
        }
        assert_eq!(a.window(), 8);
        let st = a.stats();
        assert_eq!((st.min, st.max, st.final_), (2, 8, 8));
    }

    #[test]
    fn never_below_one() {
        let mut a = Aimd::new(1);
        for _ in 0..5 {
            let s = a.submit();
            a.finished(s, true);
        }
        assert_eq!(a.window(), 1);
    }
}
