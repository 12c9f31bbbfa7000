//! The remote pending queue and how a loop picks its next transfer from it: the oldest one
//! it may start. A transfer held at its endpoint's gate holds the later transfers of that
//! endpoint and kind (bulk or small; each keeps its order), but not what is queued for other
//! endpoints or of the other kind: the gate counts the two apart, and a held endpoint must
//! not stall the rest of the client.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use super::Work;
use super::gate::{Admit, Admitted, BULK, Gate};
use crate::batch::Shared;

/// How far past held transfers a loop looks for one it may start. Bounded, so that a
/// deep queue behind many held transfers costs each pick at most this many looks.
const LOOKAHEAD: usize = 256;

/// The queue: runs of one batch's transfers, oldest first. A run keeps the vector the
/// planner built (a `VecDeque` made from a `Vec` reuses its buffer), so queueing a batch
/// copies none of its work and holds its batch once, not once per transfer.
#[derive(Default)]
pub(crate) struct Pending {
    runs: VecDeque<Run>,
}

/// Transfers of one batch, in plan order.
struct Run {
    batch: Arc<Shared>,
    work: VecDeque<Work>,
    /// Each transfer's endpoint gate, in step with `work`; `None` for a run that paces
    /// itself (a download's chunks).
    gates: Option<VecDeque<Option<Arc<Gate>>>>,
}

impl Pending {
    /// Queues a batch's transfers; `gates`, if given, holds one entry per transfer.
    pub(crate) fn push(
        &mut self,
        batch: &Arc<Shared>,
        work: Vec<Work>,
        gates: Option<Vec<Option<Arc<Gate>>>>,
    ) {
        if work.is_empty() {
            return;
        }
        self.runs.push_back(Run {
            batch: Arc::clone(batch),
            work: work.into(),
            gates: gates.map(VecDeque::from),
        });
    }

    /// True when nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Takes transfer `i` of run `r`, dropping the run once it is empty.
    fn take(&mut self, r: usize, i: usize) -> Option<(Arc<Shared>, Work)> {
        let run = self.runs.get_mut(r)?;
        let work = run.work.remove(i)?;
        if let Some(gates) = &mut run.gates {
            gates.remove(i);
        }
        let batch = if run.work.is_empty() {
            self.runs.remove(r)?.batch
        } else {
            Arc::clone(&run.batch)
        };
        Some((batch, work))
    }
}

/// What a loop may do next.
pub(crate) enum Next {
    /// Start this transfer of this batch (with its place at its gate, if it has one).
    Start(Arc<Shared>, Work, Option<Admitted>),
    /// Nothing to start now; a gate may admit at the instant given (see `Admit::Until`).
    Wait(Option<Instant>),
}

/// Takes the oldest transfer that may start at `now`: one without a gate, one of a
/// cancelled batch (the loop discards it), or one its gate admits. A gate that refused a
/// kind is not asked again for it in the same pick, so the transfers of that kind behind it
/// on its endpoint stay queued.
pub(crate) fn next(pending: &mut Pending, now: Instant) -> Next {
    let mut refused: Vec<(Arc<Gate>, bool)> = Vec::new();
    let mut wake: Option<Instant> = None;
    let mut looks = 0;
    for r in 0..pending.runs.len() {
        let run = &pending.runs[r];
        let gates = run.gates.as_ref().filter(|_| !run.batch.is_cancelled());
        for i in 0..run.work.len() {
            if looks == LOOKAHEAD {
                return Next::Wait(wake);
            }
            looks += 1;
            let bulk = run.work[i].length >= BULK;
            let admitted = match gates.and_then(|g| g.get(i)).and_then(Option::as_ref) {
                None => None,
                Some(gate)
                    if refused
                        .iter()
                        .any(|(r, b)| Arc::ptr_eq(r, gate) && *b == bulk) =>
                {
                    continue;
                }
                Some(gate) => match gate.enter(now, bulk) {
                    Admit::Yes => Some(Admitted::new(Arc::clone(gate), bulk)),
                    Admit::No => {
                        refused.push((Arc::clone(gate), bulk));
                        continue;
                    }
                    Admit::Until(at) => {
                        wake = Some(wake.map_or(at, |w| w.min(at)));
                        refused.push((Arc::clone(gate), bulk));
                        continue;
                    }
                },
            };
            return match pending.take(r, i) {
                Some((batch, work)) => Next::Start(batch, work, admitted),
                None => Next::Wait(wake),
            };
        }
    }
    Next::Wait(wake)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dest::Dest;
    use crate::locator::Locator;

    /// A transfer of `length` bytes whose one read is tagged `tag`.
    fn work(tag: u64, length: u64) -> Work {
        Work {
            locator: Locator::parse("http://a.example/o").unwrap(),
            offset: 0,
            length,
            parts: vec![super::super::PartRead {
                offset: 0,
                length,
                tag,
                dest: Dest::Alloc,
            }],
            pieces: Vec::new(),
            wave: None,
            pin: None,
            access: Default::default(),
        }
    }

    /// Queues one run of `batch`: a transfer per (tag, gate, bulk).
    fn push(q: &mut Pending, batch: &Arc<Shared>, run: &[(u64, Option<&Arc<Gate>>, bool)]) {
        let gates = run.iter().map(|(_, g, _)| g.map(Arc::clone)).collect();
        let length = |bulk| if bulk { BULK } else { 1 };
        q.push(
            batch,
            run.iter().map(|&(t, _, b)| work(t, length(b))).collect(),
            Some(gates),
        );
    }

    /// The tags of what successive picks start, until one waits.
    fn started(q: &mut Pending, now: Instant) -> (Vec<u64>, Option<Instant>) {
        let mut tags = Vec::new();
        loop {
            match next(q, now) {
                // The place at the gate is kept: these transfers are still running.
                Next::Start(_, w, admitted) => {
                    tags.push(w.parts[0].tag);
                    std::mem::forget(admitted);
                }
                Next::Wait(at) => return (tags, at),
            }
        }
    }

    fn left(q: &Pending) -> Vec<u64> {
        q.runs
            .iter()
            .flat_map(|r| r.work.iter().map(|w| w.parts[0].tag))
            .collect()
    }

    #[test]
    fn a_held_endpoint_holds_only_its_own_later_transfers_of_that_kind() {
        let (one, two) = (Shared::new(8, false), Shared::new(8, false));
        let (a, b) = (Arc::new(Gate::new(64)), Arc::new(Gate::new(64)));
        let mut q = Pending::default();
        push(
            &mut q,
            &one,
            &[
                (1, Some(&a), true), // a cold gate runs 1
                (2, Some(&a), true), // held
                (3, Some(&a), true),
                (4, Some(&a), false), // small: counted apart
                (5, Some(&b), true),  // another endpoint's gate
                (6, None, false),     // a transfer that paces itself
            ],
        );
        // Another batch's run: its bulk transfer for `a` stays behind 2, its small one not.
        push(&mut q, &two, &[(7, Some(&a), true), (8, Some(&a), false)]);
        let now = Instant::now();
        let (tags, wake) = started(&mut q, now);
        assert_eq!(tags, [1, 4, 5, 6, 8]);
        // The cold gate may open once its first admission is 2 ms old.
        assert_eq!(wake, Some(now + super::super::gate::SHORT));
        assert_eq!(left(&q), [2, 3, 7]);
        assert_eq!(q.runs.len(), 2);
    }

    #[test]
    fn a_cold_endpoint_runs_a_few_small_transfers_until_it_knows_the_round_trip() {
        let batch = Shared::new(8, false);
        let a = Arc::new(Gate::new(64));
        let mut q = Pending::default();
        let small: Vec<_> = (0..40).map(|t| (t, Some(&a), false)).collect();
        push(&mut q, &batch, &small);
        let now = Instant::now();
        let (tags, wake) = started(&mut q, now);
        assert_eq!(tags.len(), super::super::gate::SMALL as usize);
        assert_eq!(wake, Some(now + super::super::gate::SHORT));
        // No first byte by then: a long round trip, and the rest start.
        let (tags, _) = started(&mut q, now + super::super::gate::SHORT);
        assert_eq!(tags.len(), 40 - super::super::gate::SMALL as usize);
        assert!(q.is_empty());
    }

    #[test]
    fn a_cancelled_batch_s_transfers_are_taken_past_their_gate() {
        let live = Shared::new(8, false);
        let gone = Shared::new(8, false);
        gone.cancel();
        let a = Arc::new(Gate::new(64));
        let mut q = Pending::default();
        push(
            &mut q,
            &live,
            &[
                (1, Some(&a), true),
                (2, Some(&a), true),
                (3, Some(&a), true),
            ],
        );
        push(&mut q, &gone, &[(4, Some(&a), true)]);
        let (tags, _) = started(&mut q, Instant::now());
        assert_eq!(tags, [1, 4]);
        assert_eq!(left(&q), [2, 3]);
    }

    #[test]
    fn a_run_keeps_the_planner_s_buffer_and_leaves_the_queue_when_empty() {
        let batch = Shared::new(8, false);
        let work: Vec<Work> = (0..3).map(|t| work(t, 1)).collect();
        let buffer = work.as_ptr();
        let mut q = Pending::default();
        q.push(&batch, work, None);
        assert!(std::ptr::eq(q.runs[0].work.as_slices().0.as_ptr(), buffer));
        let (tags, _) = started(&mut q, Instant::now());
        assert_eq!(tags, [0, 1, 2]);
        assert!(q.is_empty());
        // Only the caller's handle is left: the queue held the batch once.
        assert_eq!(Arc::strong_count(&batch), 1);
    }

    #[test]
    fn a_pick_looks_a_bounded_way_past_held_transfers() {
        let batch = Shared::new(8, false);
        let a = Arc::new(Gate::new(64));
        let mut q = Pending::default();
        let held: Vec<_> = (0..LOOKAHEAD as u64 + 1)
            .map(|t| (t, Some(&a), true))
            .collect();
        push(&mut q, &batch, &held);
        push(&mut q, &batch, &[(999, None, false)]);
        // One admitted (a cold gate's start), the rest held; the ungated transfer sits past
        // the look-ahead.
        let (tags, _) = started(&mut q, Instant::now());
        assert_eq!(tags, [0]);
        assert_eq!(left(&q).len(), LOOKAHEAD + 1);
    }
}
