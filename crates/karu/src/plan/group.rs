//! Merge groups (backend, identity, `if_match`): numbered as reads arrive, then put in order
//! so that reads sort by offset within a group instead of by strings.

use std::collections::HashMap;

use super::Entry;
use crate::locator::{Backend, Locator};

/// Assigns group ids in order of first appearance.
#[derive(Default)]
pub(super) struct Groups<'a> {
    /// The previous read's locator, condition and group: runs of reads on one shared
    /// locator skip hashing.
    last: Option<(&'a Locator, Option<&'a str>, usize)>,
    objects: HashMap<(Backend, &'a str), usize>,
    ids: HashMap<(usize, Option<&'a str>), usize>,
    keys: Vec<(Backend, &'a str, Option<&'a str>)>,
}

/// Groups in (backend, identity, `if_match`) order.
pub(super) struct Order {
    /// The sorted position of each group id.
    rank: Vec<usize>,
    /// Whether the group at each sorted position is remote.
    pub remote: Vec<bool>,
}

impl<'a> Groups<'a> {
    /// The group id of a read.
    #[inline]
    pub fn id(&mut self, locator: &'a Locator, if_match: Option<&'a str>) -> usize {
        if let Some((l, m, id)) = self.last
            && l.ptr_eq(locator)
            && m == if_match
        {
            return id;
        }
        let next = self.objects.len();
        let object = *self
            .objects
            .entry((locator.backend(), locator.identity()))
            .or_insert(next);
        let next = self.keys.len();
        let id = *self.ids.entry((object, if_match)).or_insert_with(|| {
            self.keys
                .push((locator.backend(), locator.identity(), if_match));
            next
        });
        self.last = Some((locator, if_match, id));
        id
    }

    /// Puts the groups in order.
    pub fn finish(self) -> Order {
        let mut sorted: Vec<usize> = (0..self.keys.len()).collect();
        sorted.sort_unstable_by_key(|&id| self.keys[id]);
        let mut rank = vec![0; sorted.len()];
        for (position, &id) in sorted.iter().enumerate() {
            rank[id] = position;
        }
        let remote = sorted
            .iter()
            .map(|&id| self.keys[id].0.is_remote())
            .collect();
        Order { rank, remote }
    }
}

impl Order {
    /// Moves entries (in request order, with their group ids, or no ids when all are in
    /// group 0) into group order, keeping request order within each group. Returns the
    /// entries and the boundaries of each group: group `r` is `bounds[r]..bounds[r + 1]`.
    pub fn partition(&self, entries: Vec<Entry>, ids: &[usize]) -> (Vec<Entry>, Vec<usize>) {
        if ids.is_empty() {
            let bounds = if entries.is_empty() {
                vec![0]
            } else {
                vec![0, entries.len()]
            };
            return (entries, bounds);
        }
        let mut bounds = vec![0; self.rank.len() + 1];
        for &id in ids {
            bounds[self.rank[id] + 1] += 1;
        }
        for r in 1..bounds.len() {
            bounds[r] += bounds[r - 1];
        }
        let mut next = bounds.clone();
        let mut sorted = vec![Entry::default(); entries.len()];
        for (e, &id) in entries.iter().zip(ids) {
            let slot = &mut next[self.rank[id]];
            sorted[*slot] = *e;
            *slot += 1;
        }
        (sorted, bounds)
    }
}
