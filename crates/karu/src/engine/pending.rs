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

/// A queued transfer: its batch, the work, and the gate of its endpoint when it is bulk.
pub(crate) type Queued = (Arc<Shared>, Work, Option<Arc<Gate>>);

/// How far past held bulk transfers a loop looks for one it may start. Bounded, so that a
/// deep queue behind many held transfers costs each pick at most this many looks.
const LOOKAHEAD: usize = 256;

/// What a loop may do next.
pub(crate) enum Next {
    /// Start this transfer (with its place at its gate when bulk).
    Start(Queued, Option<Admitted>),
    /// Nothing to start now; a cold gate may admit at the instant given.
    Wait(Option<Instant>),
}

/// Takes the oldest transfer that may start at `now`: one that is not bulk, belongs to a
/// cancelled batch (the loop discards it), or whose gate admits it. A gate that refused is
/// not asked again in the same pick, so the transfers behind it on its endpoint stay queued.
pub(crate) fn next(pending: &mut VecDeque<Queued>, now: Instant) -> Next {
    let mut refused: Vec<Arc<Gate>> = Vec::new();
    let mut wake: Option<Instant> = None;
    for i in 0..pending.len().min(LOOKAHEAD) {
        let (batch, _, gate) = &pending[i];
        let admitted = match gate.as_ref().filter(|_| !batch.is_cancelled()) {
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
        return match pending.remove(i) {
            Some(q) => Next::Start(q, admitted),
            None => Next::Wait(wake),
        };
    }
    Next::Wait(wake)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dest::Dest;
    use crate::locator::Locator;

    fn queued(batch: &Arc<Shared>, tag: u64, gate: Option<&Arc<Gate>>) -> Queued {
        let work = Work {
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
        };
        (Arc::clone(batch), work, gate.map(Arc::clone))
    }

    /// The tags of what successive picks start, until one waits.
    fn started(q: &mut VecDeque<Queued>, now: Instant) -> (Vec<u64>, Option<Instant>) {
        let mut tags = Vec::new();
        loop {
            match next(q, now) {
                // The place at the gate is kept: these transfers are still running.
                Next::Start((_, w, _), admitted) => {
                    tags.push(w.parts[0].tag);
                    std::mem::forget(admitted);
                }
                Next::Wait(at) => return (tags, at),
            }
        }
    }

    #[test]
    fn a_held_endpoint_holds_only_its_own_later_transfers() {
        let batch = Shared::new(8, false);
        let (a, b) = (Arc::new(Gate::new(64)), Arc::new(Gate::new(64)));
        let mut q: VecDeque<Queued> = [
            queued(&batch, 1, Some(&a)),
            queued(&batch, 2, Some(&a)),
            queued(&batch, 3, Some(&a)), // a cold gate runs 2: held
            queued(&batch, 4, None),     // small: never waits
            queued(&batch, 5, Some(&b)), // another endpoint's gate
            queued(&batch, 6, Some(&a)), // behind 3 on its endpoint: stays behind it
            queued(&batch, 7, None),
        ]
        .into();
        let now = Instant::now();
        let (tags, wake) = started(&mut q, now);
        assert_eq!(tags, [1, 2, 4, 5, 7]);
        // The cold gate may open once its first admission is 2 ms old.
        assert_eq!(wake, Some(now + super::super::gate::SHORT));
        let left: Vec<u64> = q.iter().map(|(_, w, _)| w.parts[0].tag).collect();
        assert_eq!(left, [3, 6]);
    }

    #[test]
    fn a_cancelled_batch_s_transfers_are_taken_past_their_gate() {
        let live = Shared::new(8, false);
        let gone = Shared::new(8, false);
        gone.cancel();
        let a = Arc::new(Gate::new(64));
        let mut q: VecDeque<Queued> = (1..=3)
            .map(|t| queued(&live, t, Some(&a)))
            .chain([queued(&gone, 4, Some(&a))])
            .collect();
        let (tags, _) = started(&mut q, Instant::now());
        assert_eq!(tags, [1, 2, 4]);
    }

    #[test]
    fn a_pick_looks_a_bounded_way_past_held_transfers() {
        let batch = Shared::new(8, false);
        let a = Arc::new(Gate::new(64));
        let mut q: VecDeque<Queued> = (0..LOOKAHEAD as u64 + 2)
            .map(|t| queued(&batch, t, Some(&a)))
            .chain([queued(&batch, 999, None)])
            .collect();
        // Two admitted, the rest held; the small transfer sits past the look-ahead.
        let (tags, _) = started(&mut q, Instant::now());
        assert_eq!(tags, [0, 1]);
        assert_eq!(q.len(), LOOKAHEAD + 1);
    }
}
