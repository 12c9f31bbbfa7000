//! The cheapest cut of one group's sorted reads into spans, for a price per transfer and per
//! byte: a dynamic program over the reads, where the sweep ([`super::sweep`]) extends each span
//! as far as the gap and the guards let it.
//!
//! The sweep sends the fewest spans wherever only the gap, the span limit and the parts limit
//! stop it and no read nests in another (a run of reads inside a span that keeps them keeps
//! them too), but not where the amplification guard does: the read that ends one span may be
//! the one the next span needed to start with, to reach further. Workload R's 10,000 random
//! 4 KiB reads in 1 GiB under the guards' gap are 2,430 transfers swept, and at least 2,095
//! within the guards; at 50 ms and 64 slots that is 38 rounds of round trips against 33. A span here keeps every guard as a
//! transfer (each read within the gap of the bytes before it, the span and parts limits, and
//! its span at most the amplification guard times its reads' bytes), but unlike the sweep's it
//! may pass through runs that do not: the bytes of its later reads pay for its earlier gaps.

use super::{Entry, Open, Policy, Span};

/// How many reads past the amplification guard a span is tried further: a span that breaks it
/// may keep it again once more reads join (their bytes pay for its gaps). On workload R's
/// reads under the guards' gap, allowing 0, 2, 4, 8, 16 and 32 reads found 2,430, 2,201, 2,143,
/// 2,114, 2,100 and 2,095 transfers, in about 4, 7, 10, 14, 22 and 38 steps per read (2,095
/// also with 64 and 1,000; 2026-12-07).
const SLACK: usize = 16;

/// What a plan of spans costs: a price per transfer and per byte it fetches, in the units of
/// the one bound of the cost model that the plan's time follows (the slots' bound, see
/// `CostModel::slot_prices`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Prices {
    /// The price of one transfer.
    pub(super) transfer: f64,
    /// The price of one byte fetched.
    pub(super) byte: f64,
}

/// Whether the sweep under `gap` may send more spans than needed: some span of it ends only
/// for the amplification guard (the next read is within the gap, the span limit and the parts
/// limit), or a read ends inside the one before it (then a span's last byte, which the gap is
/// measured from, depends on where the span started). Otherwise every run of reads inside a
/// span keeps the guards too, the sweep's spans are the fewest, and the program below has
/// nothing to find by count.
pub(super) fn greed_may_cost(entries: &[Entry], gap: u64, policy: &Policy) -> bool {
    let Some((first, rest)) = entries.split_first() else {
        return false;
    };
    let mut open = Open::new(first, policy);
    for e in rest {
        let end = e.offset + (e.length - 1);
        if end < open.last {
            return true;
        }
        if open.joins(e, gap, policy) {
            open.join(e, policy);
            continue;
        }
        if open.reaches(e, gap, policy) {
            return true;
        }
        open = Open::new(e, policy);
    }
    false
}

/// Appends to `out` the cheapest spans of `entries` (one group, sorted) under `gap`, the guards
/// and `prices`, unless that takes more than `budget` steps (a step tries one read in one
/// span; from each read a span grows until the gap, the span limit or the parts limit stops
/// it, or [`SLACK`] reads have joined it without its keeping the amplification guard): then
/// it returns false and appends nothing, as where its table cannot be allocated. `budget` is
/// what is left of it afterwards.
pub(super) fn cheapest(
    entries: &[Entry],
    gap: u64,
    policy: &Policy,
    prices: Prices,
    budget: &mut u64,
    out: &mut Vec<Span>,
) -> bool {
    let n = entries.len();
    // best[j]: the least cost of covering entries[..j], and where its last span starts. A
    // table that cannot be allocated drops the candidate (the sweep's plans stand).
    let mut best: Vec<(f64, usize)> = Vec::new();
    if best.try_reserve_exact(n + 1).is_err() {
        return false;
    }
    best.resize(n + 1, (f64::INFINITY, 0));
    best[0].0 = 0.0;
    for i in 0..n {
        let paid = best[i].0 + prices.transfer;
        let mut open = Open::new(&entries[i], policy);
        let mut j = i + 1;
        // Reads added since the span last kept the amplification guard.
        let mut over = 0;
        loop {
            // A read alone is a transfer whatever the guards say (as in the sweep).
            if j == i + 1 || open.amplified_within() {
                over = 0;
                let cost = paid + open.length() as f64 * prices.byte;
                if cost < best[j].0 {
                    best[j] = (cost, i);
                }
            } else {
                over += 1;
                if over > SLACK {
                    break;
                }
            }
            let Some(e) = entries.get(j) else { break };
            if !open.reaches(e, gap, policy) {
                break;
            }
            if *budget == 0 {
                return false;
            }
            *budget -= 1;
            open.join(e, policy);
            j += 1;
        }
    }
    let first = out.len();
    let mut to = n;
    while to > 0 {
        let from = best[to].1;
        let run = &entries[from..to];
        let last = run
            .iter()
            .map(|e| e.offset + (e.length - 1))
            .max()
            .unwrap_or(entries[from].offset);
        out.push(Span {
            from,
            to,
            start: entries[from].offset,
            last,
        });
        to = from;
    }
    out[first..].reverse();
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locator::Locator;
    use crate::plan::{Prepared, Request, sweep};
    use proptest::prelude::*;

    fn entries(reads: &[(u64, u64)]) -> Vec<Entry> {
        let object = Locator::parse("https://example.com/data.bin").unwrap();
        let requests: Vec<Request> = reads
            .iter()
            .map(|&(offset, length)| Request {
                locator: &object,
                offset,
                length,
                if_match: None,
            })
            .collect();
        Prepared::new(&requests).entries
    }

    fn cost(spans: &[Span], prices: Prices) -> f64 {
        spans
            .iter()
            .map(|s| prices.transfer + s.length() as f64 * prices.byte)
            .sum()
    }

    /// Requests only count: one transfer costs what a byte never can.
    const COUNT: Prices = Prices {
        transfer: 1.0,
        byte: 1e-12,
    };

    #[test]
    fn a_read_that_would_end_a_span_starts_the_next_instead() {
        // Amplification 2: a span may be twice its reads' bytes. The sweep takes A and B (15
        // bytes for 11), cannot add C (25 for 12), and C alone cannot reach D (5 for 2): three
        // spans. Starting the second span at B, B's bytes pay for C's and D's gaps: two.
        let policy = Policy {
            gap: 100,
            limit: 1000,
            parts: 100,
            amplification: 2,
        };
        let e = entries(&[(0, 1), (5, 10), (24, 1), (28, 1)]);
        let mut swept = Vec::new();
        sweep(&e, Some(100), &policy, &mut swept);
        assert!(greed_may_cost(&e, 100, &policy));
        let (mut spans, mut budget) = (Vec::new(), 100);
        assert!(cheapest(&e, 100, &policy, COUNT, &mut budget, &mut spans));
        let cut = |s: &[Span]| {
            s.iter()
                .map(|s| (s.from, s.to, s.length()))
                .collect::<Vec<_>>()
        };
        assert_eq!(cut(&swept), [(0, 2, 15), (2, 3, 1), (3, 4, 1)]);
        assert_eq!(cut(&spans), [(0, 1, 1), (1, 4, 24)]);
        // Where bytes cost more than a request, the reads go alone (no gap is worth it).
        let dear = Prices {
            transfer: 1.0,
            byte: 1.0,
        };
        spans.clear();
        assert!(cheapest(&e, 100, &policy, dear, &mut budget, &mut spans));
        assert_eq!(cut(&spans), [(0, 1, 1), (1, 2, 10), (2, 3, 1), (3, 4, 1)]);
        // Contiguous reads: the sweep stops on the parts limit alone, and is already fewest.
        let e = entries(&[(0, 1), (1, 1), (2, 1)]);
        let two = Policy { parts: 2, ..policy };
        assert!(!greed_may_cost(&e, 100, &two));
    }

    #[test]
    fn a_budget_too_small_gives_up_and_appends_nothing() {
        let policy = Policy::default();
        let e = entries(&[(0, 10), (10, 10), (20, 10)]);
        let (mut spans, mut budget) = (Vec::new(), 2);
        assert!(!cheapest(&e, 100, &policy, COUNT, &mut budget, &mut spans));
        assert!(spans.is_empty());
    }

    proptest! {
        /// The spans cover every read once, in order; each keeps the guards as a transfer;
        /// and they cost no more than the sweep's.
        #[test]
        fn spans_keep_the_guards_and_cost_no_more_than_the_sweep(
            reads in prop::collection::vec((0..2_000u64, 1..300u64), 1..60),
            gap in 0..200u64,
            limit in prop_oneof![1..1_000u64, Just(u64::MAX)],
            parts in prop_oneof![1..8u64, Just(u64::MAX)],
            amplification in prop_oneof![1..6u64, Just(u64::MAX)],
            byte in prop_oneof![Just(1e-12), Just(1e-3), Just(1.0)],
        ) {
            let policy = Policy { gap, limit, parts, amplification };
            let e = entries(&reads);
            let prices = Prices { transfer: 1.0, byte };
            let (mut spans, mut budget) = (Vec::new(), u64::MAX);
            prop_assert!(cheapest(&e, gap, &policy, prices, &mut budget, &mut spans));
            let mut next = 0;
            for s in &spans {
                prop_assert_eq!(s.from, next);
                let run = &e[s.from..s.to];
                prop_assert!(!run.is_empty());
                let mut last = run[0].offset + (run[0].length - 1);
                for r in &run[1..] {
                    prop_assert!(r.offset <= last || r.offset - last - 1 <= gap, "{:?}", s);
                    last = last.max(r.offset + (r.length - 1));
                }
                let bytes: u128 = run.iter().map(|r| u128::from(r.length)).sum();
                prop_assert_eq!((s.start, s.last), (run[0].offset, last));
                if run.len() > 1 {
                    prop_assert!(last - s.start < limit && run.len() as u64 <= parts);
                    prop_assert!(u128::from(last - s.start) < bytes * u128::from(amplification));
                }
                next = s.to;
            }
            prop_assert_eq!(next, e.len());
            let mut swept = Vec::new();
            sweep(&e, Some(gap), &policy, &mut swept);
            prop_assert!(cost(&spans, prices) <= cost(&swept, prices) * (1.0 + 1e-9));
            if !greed_may_cost(&e, gap, &policy) && byte < 1e-6 {
                prop_assert_eq!(spans.len(), swept.len());
            }
        }
    }
}
