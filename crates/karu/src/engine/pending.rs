//! The remote pending queue and how a loop picks its next transfer from it: the oldest one
//! it may start. A bulk transfer held at its endpoint's gate holds the later transfers of
//! that endpoint (each endpoint's transfers keep their order), but not what is queued for
//! other endpoints or what is not bulk: small transfers never wait at a gate, and a held
//! endpoint must not stall the rest of the client.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use super::Work;
use super::gate::{Admit, Admitted, Gate};
use crate::batch::Shared;

/// How far past held bulk transfers a loop looks for one it may start. Bounded, so that a
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
    /// Each transfer's endpoint gate when it is bulk, in step with `work`; `None` for a run
    /// without bulk transfers (most runs: a list for many small reads is one entry per read).
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
    /// Start this transfer of this batch (with its place at its gate when bulk).
    Start(Arc<Shared>, Work, Option<Admitted>),
    /// Nothing to start now; a gate may admit at the instant given (see `Admit::Until`).
    Wait(Option<Instant>),
}

/// Takes the oldest transfer that may start at `now`: one that is not bulk, belongs to a
/// cancelled batch (the loop discards it), or whose gate admits it. A gate that refused is
/// not asked again in the same pick, so the transfers behind it on its endpoint stay queued.
pub(crate) fn next(pending: &mut Pending, now: Instant) -> Next {
    let mut refused: Vec<Arc<Gate>> = Vec::new();
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
            let admitted = match gates.and_then(|g| g.get(i)).and_then(Option::as_ref) {
                None => None,
                Some(gate) if refused.iter().any(|r| Arc::ptr_eq(r, gate)) => continue,
                Some(gate) => match gate.enter(now) {
                    Admit::Yes => Some(Admitted::new(Arc::clone(gate))),
                    Admit::No => {
                        refused.push(Arc::clone(gate));
                        continue;
                    }
                    Admit::Until(at) => {
                        wake = Some(wake.map_or(at, |w| w.min(at)));
                        refused.push(Arc::clone(gate));
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

    fn work(tag: u64) -> Work {
        Work {
            locator: Locator::parse("http://a.example/o").unwrap(),
            offset: 0,
            length: 1,
            parts: vec![super::super::PartRead {
                offset: 0,
                length: 1,
                tag,
                dest: Dest::Alloc,
            }],
            pieces: Vec::new(),
            wave: None,
            pin: None,
            access: Default::default(),
        }
    }

    /// Queues one run of `batch`: a transfer per (tag, gate).
    fn push(q: &mut Pending, batch: &Arc<Shared>, run: &[(u64, Option<&Arc<Gate>>)]) {
        let gates = run.iter().map(|(_, g)| g.map(Arc::clone)).collect();
        q.push(
            batch,
            run.iter().map(|&(t, _)| work(t)).collect(),
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
    fn a_held_endpoint_holds_only_its_own_later_transfers() {
        let (one, two) = (Shared::new(8, false), Shared::new(8, false));
        let (a, b) = (Arc::new(Gate::new(64)), Arc::new(Gate::new(64)));
        let mut q = Pending::default();
        push(
            &mut q,
            &one,
            &[
                (1, Some(&a)), // a cold gate runs 1
                (2, Some(&a)), // held
                (3, Some(&a)),
                (4, None),     // small: never waits
                (5, Some(&b)), // another endpoint's gate
            ],
        );
        // Another batch's run: its transfer for `a` stays behind 2, its small one does not.
        push(&mut q, &two, &[(6, Some(&a)), (7, None)]);
        let now = Instant::now();
        let (tags, wake) = started(&mut q, now);
        assert_eq!(tags, [1, 4, 5, 7]);
        // The cold gate may open once its first admission is 2 ms old.
        assert_eq!(wake, Some(now + super::super::gate::SHORT));
        assert_eq!(left(&q), [2, 3, 6]);
        assert_eq!(q.runs.len(), 2);
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
            &[(1, Some(&a)), (2, Some(&a)), (3, Some(&a))],
        );
        push(&mut q, &gone, &[(4, Some(&a))]);
        let (tags, _) = started(&mut q, Instant::now());
        assert_eq!(tags, [1, 4]);
        assert_eq!(left(&q), [2, 3]);
    }

    #[test]
    fn a_run_keeps_the_planner_s_buffer_and_leaves_the_queue_when_empty() {
        let batch = Shared::new(8, false);
        let work: Vec<Work> = (0..3).map(work).collect();
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
        let held: Vec<(u64, Option<&Arc<Gate>>)> =
            (0..LOOKAHEAD as u64 + 1).map(|t| (t, Some(&a))).collect();
        push(&mut q, &batch, &held);
        push(&mut q, &batch, &[(999, None)]);
        // One admitted (a cold gate's start), the rest held; the small transfer sits past
        // the look-ahead.
        let (tags, _) = started(&mut q, Instant::now());
        assert_eq!(tags, [0]);
        assert_eq!(left(&q).len(), LOOKAHEAD + 1);
    }
}
