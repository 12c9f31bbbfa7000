//! The block cache: aligned blocks of one object version, kept in least-recently-used order
//! within a byte budget, with one flight per missing block so that concurrent misses on a
//! block cost one request.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::watch;

use crate::error::Result;

/// What waiters on a block in flight learn.
#[derive(Clone)]
pub(super) enum Outcome {
    /// Still being fetched.
    Pending,
    /// Fetched (or failed) by the flight's owner.
    Done(Result<Bytes>),
    /// The owner was dropped before finishing (a cancelled async read): fetch again.
    Abandoned,
}

/// One block being fetched: its owner sends the outcome, waiters watch for it.
pub(super) struct Flight {
    tx: watch::Sender<Outcome>,
}

impl Flight {
    fn new() -> Arc<Flight> {
        Arc::new(Flight {
            tx: watch::Sender::new(Outcome::Pending),
        })
    }

    /// Waits until the owner settles the block (executor-agnostic).
    pub(super) async fn wait(&self) -> Outcome {
        let mut rx = self.tx.subscribe();
        match rx.wait_for(|o| !matches!(o, Outcome::Pending)).await {
            Ok(o) => o.clone(),
            // The sender lives as long as this flight: unreachable, but harmless.
            Err(_) => Outcome::Abandoned,
        }
    }

    fn settle(&self, outcome: Outcome) {
        self.tx.send_replace(outcome);
    }
}

/// What a lookup found for one block.
pub(super) enum Lookup {
    /// Cached.
    Hit(Bytes),
    /// Another caller is fetching it.
    Wait(Arc<Flight>),
    /// Missing: the caller now owns its flight and must settle it.
    Claimed(Arc<Flight>),
}

enum Slot {
    Ready { data: Bytes, tick: u64 },
    Pending(Arc<Flight>),
}

struct State {
    slots: HashMap<u64, Slot>,
    /// Ready blocks by last use (tick -> block): the first is evicted first.
    order: BTreeMap<u64, u64>,
    bytes: u64,
    tick: u64,
    /// Bumped by `clear`: flights of an older generation do not fill the cache.
    generation: u64,
    hits: u64,
    misses: u64,
}

/// Blocks of one object version within `budget` bytes.
pub(super) struct BlockCache {
    budget: u64,
    state: Mutex<State>,
}

/// Hit and miss counts, in blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Counts {
    pub(super) hits: u64,
    pub(super) misses: u64,
}

impl BlockCache {
    pub(super) fn new(budget: u64) -> BlockCache {
        BlockCache {
            budget,
            state: Mutex::new(State {
                slots: HashMap::new(),
                order: BTreeMap::new(),
                bytes: 0,
                tick: 0,
                generation: 0,
                hits: 0,
                misses: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent at every unlock, so a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Looks `block` up; a miss is claimed for the caller. `count` says whether the lookup
    /// counts as a hit or miss (readahead lookups do not).
    pub(super) fn lookup(&self, block: u64, count: bool) -> (Lookup, u64) {
        let mut guard = self.lock();
        let s = &mut *guard;
        s.tick += 1;
        let tick = s.tick;
        let lookup = match s.slots.get_mut(&block) {
            Some(Slot::Ready { data, tick: last }) => {
                s.order.remove(last);
                s.order.insert(tick, block);
                *last = tick;
                Lookup::Hit(data.clone())
            }
            Some(Slot::Pending(f)) => Lookup::Wait(Arc::clone(f)),
            None => {
                let flight = Flight::new();
                s.slots.insert(block, Slot::Pending(Arc::clone(&flight)));
                Lookup::Claimed(flight)
            }
        };
        if count {
            // A wait shares another caller's request: it costs none, like a hit.
            match lookup {
                Lookup::Claimed(_) => s.misses += 1,
                _ => s.hits += 1,
            }
        }
        (lookup, s.generation)
    }

    /// Settles a claimed block: its data enters the cache (evicting the least recently used
    /// blocks to stay within the budget; a block larger than the budget is not kept) unless
    /// the cache was cleared since the claim; waiters get the outcome either way.
    pub(super) fn settle(
        &self,
        block: u64,
        flight: &Arc<Flight>,
        generation: u64,
        outcome: Outcome,
    ) {
        {
            let mut s = self.lock();
            let ours =
                matches!(s.slots.get(&block), Some(Slot::Pending(f)) if Arc::ptr_eq(f, flight));
            if ours {
                s.slots.remove(&block);
                if let (Outcome::Done(Ok(data)), true) = (&outcome, s.generation == generation) {
                    self.insert(&mut s, block, data.clone());
                }
            }
        }
        flight.settle(outcome);
    }

    fn insert(&self, s: &mut State, block: u64, data: Bytes) {
        let len = data.len() as u64;
        if len > self.budget {
            return;
        }
        while s.bytes + len > self.budget {
            let Some((_, victim)) = s.order.pop_first() else {
                break;
            };
            if let Some(Slot::Ready { data, .. }) = s.slots.remove(&victim) {
                s.bytes -= data.len() as u64;
            }
        }
        s.tick += 1;
        let tick = s.tick;
        s.order.insert(tick, block);
        s.bytes += len;
        s.slots.insert(block, Slot::Ready { data, tick });
    }

    /// Drops every cached block (a new version); blocks in flight finish without entering.
    pub(super) fn clear(&self) {
        let mut s = self.lock();
        s.generation += 1;
        s.slots.retain(|_, slot| matches!(slot, Slot::Pending(_)));
        s.order.clear();
        s.bytes = 0;
    }

    /// Hits and misses so far.
    pub(super) fn counts(&self) -> Counts {
        let s = self.lock();
        Counts {
            hits: s.hits,
            misses: s.misses,
        }
    }

    /// Bytes of cached blocks (never above the budget).
    pub(super) fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    /// True when `block` is cached.
    #[cfg(test)]
    pub(super) fn contains(&self, block: u64) -> bool {
        matches!(self.lock().slots.get(&block), Some(Slot::Ready { .. }))
    }
}

/// Claimed blocks not yet settled; dropping it (a cancelled read) abandons them, so that
/// waiters fetch them again instead of waiting forever.
pub(super) struct Claims<'a> {
    cache: &'a BlockCache,
    /// Block, its flight, and the cache generation it was claimed in.
    open: Vec<(u64, Arc<Flight>, u64)>,
}

impl<'a> Claims<'a> {
    pub(super) fn new(cache: &'a BlockCache) -> Claims<'a> {
        Claims {
            cache,
            open: Vec::new(),
        }
    }

    /// Looks `block` up; claims it when missing, and returns what else was found.
    pub(super) fn lookup(&mut self, block: u64, count: bool) -> Option<Lookup> {
        match self.cache.lookup(block, count) {
            (Lookup::Claimed(flight), generation) => {
                self.open.push((block, flight, generation));
                None
            }
            (other, _) => Some(other),
        }
    }

    /// The claimed blocks, in claim order.
    pub(super) fn blocks(&self) -> Vec<u64> {
        self.open.iter().map(|(b, _, _)| *b).collect()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Settles every claim with `outcome(block)`.
    pub(super) fn settle(mut self, mut outcome: impl FnMut(u64) -> Outcome) {
        for (block, flight, generation) in std::mem::take(&mut self.open) {
            let o = outcome(block);
            self.cache.settle(block, &flight, generation, o);
        }
    }
}

impl Drop for Claims<'_> {
    fn drop(&mut self) {
        for (block, flight, generation) in std::mem::take(&mut self.open) {
            self.cache
                .settle(block, &flight, generation, Outcome::Abandoned);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(cache: &BlockCache, block: u64, len: usize) {
        let (Lookup::Claimed(f), g) = cache.lookup(block, true) else {
            panic!("block {block} should be missing");
        };
        cache.settle(
            block,
            &f,
            g,
            Outcome::Done(Ok(Bytes::from(vec![block as u8; len]))),
        );
    }

    #[test]
    fn evicts_least_recently_used_within_budget() {
        let cache = BlockCache::new(300);
        fill(&cache, 0, 100);
        fill(&cache, 1, 100);
        fill(&cache, 2, 100);
        // Touch 0 so that 1 is the oldest.
        assert!(matches!(cache.lookup(0, true).0, Lookup::Hit(_)));
        fill(&cache, 3, 100);
        assert!(cache.contains(0) && !cache.contains(1) && cache.contains(2) && cache.contains(3));
        assert_eq!(cache.bytes(), 300);
        fill(&cache, 4, 250);
        assert_eq!(cache.bytes(), 250);
        assert!(cache.contains(4) && !cache.contains(0));
        assert_eq!(cache.counts(), Counts { hits: 1, misses: 5 });
    }

    #[test]
    fn block_larger_than_budget_is_not_kept() {
        let cache = BlockCache::new(10);
        fill(&cache, 0, 11);
        assert_eq!(cache.bytes(), 0);
        assert!(!cache.contains(0));
        // Missing again: claimed again.
        assert!(matches!(cache.lookup(0, true).0, Lookup::Claimed(_)));
    }

    #[test]
    fn second_miss_waits_for_the_first_flight() {
        let cache = BlockCache::new(100);
        let (Lookup::Claimed(f), g) = cache.lookup(7, true) else {
            panic!("missing")
        };
        let Lookup::Wait(w) = cache.lookup(7, true).0 else {
            panic!("the second lookup should wait")
        };
        cache.settle(7, &f, g, Outcome::Done(Ok(Bytes::from_static(b"x"))));
        let Outcome::Done(Ok(b)) = crate::download::block_on(w.wait()) else {
            panic!("settled")
        };
        assert_eq!(&b[..], b"x");
    }

    #[test]
    fn dropped_claims_are_abandoned_and_cleared_blocks_do_not_enter() {
        let cache = BlockCache::new(100);
        let mut claims = Claims::new(&cache);
        assert!(claims.lookup(1, true).is_none());
        let Lookup::Wait(w) = cache.lookup(1, true).0 else {
            panic!("waits")
        };
        drop(claims);
        assert!(matches!(
            crate::download::block_on(w.wait()),
            Outcome::Abandoned
        ));
        let (Lookup::Claimed(f), g) = cache.lookup(1, true) else {
            panic!("missing again")
        };
        cache.clear();
        cache.settle(1, &f, g, Outcome::Done(Ok(Bytes::from_static(b"old"))));
        assert!(!cache.contains(1));
    }
}
