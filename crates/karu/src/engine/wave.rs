//! Learning within the first batch: a batch planned from priors (a cold link) sends a first
//! wave of transfers, two per concurrency slot, and keeps the rest of its reads back; once
//! half the wave (its first round) has ended, the rest is planned again from the estimates
//! and sent. The wave's second round keeps every slot busy meanwhile: a re-plan that waited
//! for more (the total rate needs bodies overlapping for 50 ms) left the slots of the ended
//! transfers idle for a round trip, which cost workload S 8–12 % under a 1 Gbit/s cap. A first
//! round too short to measure the total rate carried few bytes, so its plan is bound by round
//! trips, which it did measure.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What re-plans and sends the reads held back.
pub(crate) type Replan = Box<dyn FnOnce() + Send>;

/// A first wave of `size` transfers: once half of them have ended, the re-plan runs (once) on
/// the thread that ended the last of those.
pub(crate) struct Wave {
    trigger: usize,
    ended: AtomicUsize,
    replan: Mutex<Stage>,
}

/// Where the re-plan is.
enum Stage {
    /// Not given yet; `due` once the wave asked for it.
    Unarmed {
        due: bool,
    },
    Armed(Replan),
    Done,
}

impl Wave {
    /// A wave whose re-plan is given later ([`Wave::arm`]): the re-plan takes the reads the
    /// wave's own transfers left, which are known only once its tickets are handed out.
    pub(crate) fn new(size: usize) -> Arc<Wave> {
        Arc::new(Wave {
            trigger: size.div_ceil(2).max(1),
            ended: AtomicUsize::new(0),
            replan: Mutex::new(Stage::Unarmed { due: false }),
        })
    }

    /// Gives the re-plan; it runs now if the wave already asked for it.
    pub(crate) fn arm(&self, replan: Replan) {
        let mut stage = self.replan.lock().unwrap_or_else(|e| e.into_inner());
        match *stage {
            Stage::Unarmed { due: false } => *stage = Stage::Armed(replan),
            Stage::Unarmed { due: true } => {
                *stage = Stage::Done;
                drop(stage);
                replan();
            }
            // Armed once only: a second re-plan would send the held reads twice.
            Stage::Armed(_) | Stage::Done => {}
        }
    }

    /// The wave asks for its re-plan: runs it if armed, else marks it due.
    fn fire(&self) {
        let mut stage = self.replan.lock().unwrap_or_else(|e| e.into_inner());
        match std::mem::replace(&mut *stage, Stage::Done) {
            Stage::Armed(replan) => {
                drop(stage);
                replan();
            }
            Stage::Unarmed { .. } => *stage = Stage::Unarmed { due: true },
            Stage::Done => {}
        }
    }

    /// The ticket of one transfer of the wave.
    pub(crate) fn ticket(self: &Arc<Self>) -> Ticket {
        Ticket(Arc::clone(self))
    }
}

/// A transfer's place in a wave: it counts as ended when dropped, whichever way the transfer
/// ends (done, failed, or discarded with a cancelled batch; the re-plan then finds the batch
/// cancelled and sends nothing).
pub(crate) struct Ticket(Arc<Wave>);

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ticket")
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let wave = &self.0;
        if wave.ended.fetch_add(1, Ordering::AcqRel) + 1 >= wave.trigger {
            wave.fire();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replan_runs_once_half_the_wave_has_ended() {
        let ran = Arc::new(AtomicUsize::new(0));
        let wave = Wave::new(5);
        let r = Arc::clone(&ran);
        wave.arm(Box::new(move || {
            r.fetch_add(1, Ordering::SeqCst);
        }));
        let mut tickets: Vec<Ticket> = (0..5).map(|_| wave.ticket()).collect();
        drop(tickets.pop());
        drop(tickets.pop());
        assert_eq!(ran.load(Ordering::SeqCst), 0, "two of five ended");
        drop(tickets.pop());
        assert_eq!(ran.load(Ordering::SeqCst), 1, "three of five ended");
        drop(tickets);
        assert_eq!(ran.load(Ordering::SeqCst), 1, "once");
    }

    #[test]
    fn a_re_plan_asked_for_before_it_is_given_runs_when_given() {
        let ran = Arc::new(AtomicUsize::new(0));
        let wave = Wave::new(1);
        drop(wave.ticket());
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        let r = Arc::clone(&ran);
        wave.arm(Box::new(move || {
            r.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        // Once: a later ticket's end asks again and nothing runs.
        drop(wave.ticket());
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }
}
