//! Readahead: a reader walking an object in file order (chunk after chunk) is detected, and
//! the number of blocks fetched past each miss doubles up to a cap, so a sweep costs a few
//! requests instead of one per block.

/// How far ahead (in blocks) a read may start and still continue a sweep: chunk index nodes
/// interleaved with the data are a few blocks apart.
pub(super) const STRIDE: u64 = 8;

/// Sequential-sweep detector over block numbers.
#[derive(Debug)]
pub(super) struct Readahead {
    /// The block after the last read's last block.
    next: u64,
    /// Blocks to fetch past a miss's last block.
    window: u64,
    /// The window's cap in blocks (0 turns readahead off).
    max: u64,
}

impl Readahead {
    pub(super) fn new(max: u64) -> Readahead {
        Readahead {
            next: 0,
            window: 0,
            max,
        }
    }

    /// Records a read of blocks `first..=last` and returns the readahead window in blocks.
    /// A read that reaches past the previous read's last block, starting in it or at most
    /// [`STRIDE`] blocks (or the window, if larger) after it, advances the sweep and doubles
    /// the window (a decoder walking chunks in file order, with index nodes between); a read
    /// inside the previous read's last block (a parser's small reads) leaves it alone, as
    /// does a cached read elsewhere (metadata revisited mid-sweep); another read that missed
    /// the cache (`missed`) ends the sweep.
    pub(super) fn on_read(&mut self, first: u64, last: u64, missed: bool) -> u64 {
        let advancing = first + 1 >= self.next
            && last >= self.next
            && first <= self.next.saturating_add(self.window.max(STRIDE));
        if advancing {
            self.window = (self.window * 2).clamp(1, self.max.max(1)).min(self.max);
            self.next = last + 1;
        } else if missed && last + 1 != self.next {
            self.window = 0;
            self.next = last + 1;
        }
        self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_grows_on_a_sweep_and_resets_on_a_jump() {
        let mut r = Readahead::new(16);
        let windows: Vec<u64> = (0..7).map(|b| r.on_read(b, b, true)).collect();
        assert_eq!(windows, [1, 2, 4, 8, 16, 16, 16]);
        // A cached read elsewhere keeps the sweep.
        assert_eq!(r.on_read(0, 0, false), 16);
        assert_eq!(r.on_read(7, 7, true), 16);
        // Reads inside the last block read (a parser's small reads) leave it alone.
        assert_eq!(r.on_read(7, 7, false), 16);
        assert_eq!(r.on_read(7, 7, true), 16);
        // A missed jump backwards ends it, and so does one too far ahead.
        assert_eq!(r.on_read(2, 2, true), 0);
        assert_eq!(r.on_read(3, 4, true), 1);
        assert_eq!(r.on_read(5 + STRIDE, 5 + STRIDE, true), 2);
        assert_eq!(r.on_read(7 + 2 * STRIDE, 7 + 2 * STRIDE, true), 0);
    }

    #[test]
    fn zero_cap_turns_it_off() {
        let mut r = Readahead::new(0);
        assert_eq!(r.on_read(0, 0, true), 0);
        assert_eq!(r.on_read(1, 1, true), 0);
    }
}
