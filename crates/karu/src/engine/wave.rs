//! Learning within the first batch: a batch planned from priors (a cold link) sends a first
//! wave of transfers and keeps the rest of its reads back; once half the wave has ended and
//! the wave has measured the link (the round trip and the total rate, which needs bodies
//! overlapping for a while), or once all of it has ended, the rest is planned again from the
//! estimates and sent. Re-planning before the total rate is known would plan the rest from the
//! prior rate, which is what the wave was sent to replace.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What re-plans and sends the reads held back.
pub(crate) type Replan = Box<dyn FnOnce() + Send>;

/// Whether the wave has measured what the re-plan needs.
pub(crate) type Measured = Box<dyn Fn() -> bool + Send + Sync>;

/// A first wave of `size` transfers: once `trigger` of them have ended and `measured` holds,
/// or all have ended, the re-plan runs (once) on the thread that ended the last of them.
pub(crate) struct Wave {
    trigger: usize,
    size: usize,
    ended: AtomicUsize,
    measured: Measured,
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
    pub(crate) fn new(size: usize, measured: Measured) -> Arc<Wave> {
        Arc::new(Wave {
            trigger: size.div_ceil(2).max(1),
            size: size.max(1),
            ended: AtomicUsize::new(0),
            measured,
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
        let ended = wave.ended.fetch_add(1, Ordering::AcqRel) + 1;
        if ended >= wave.size || (ended >= wave.trigger && (wave.measured)()) {
            wave.fire();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wave of 4 whose link is measured once `measured_after` transfers have ended; the
    /// number of transfers ended when the re-plan ran.
    fn replanned_after(measured_after: usize) -> usize {
        let ended = Arc::new(AtomicUsize::new(0));
        let ran_at = Arc::new(AtomicUsize::new(0));
        let (seen, at) = (Arc::clone(&ended), Arc::clone(&ran_at));
        let wave = Wave::new(
            4,
            Box::new(move || seen.load(Ordering::SeqCst) + 1 >= measured_after),
        );
        wave.arm(Box::new(move || {
            assert_eq!(at.swap(1, Ordering::SeqCst), 0, "the re-plan ran twice");
        }));
        for t in (0..4).map(|_| wave.ticket()).collect::<Vec<_>>() {
            drop(t);
            if ran_at.load(Ordering::SeqCst) == 1 {
                ran_at.store(2 + ended.load(Ordering::SeqCst), Ordering::SeqCst);
            }
            ended.fetch_add(1, Ordering::SeqCst);
        }
        ran_at.load(Ordering::SeqCst) - 1
    }

    #[test]
    fn the_replan_waits_for_half_the_wave_and_a_measured_link() {
        // Measured from the start: at half the wave.
        assert_eq!(replanned_after(1), 2);
        // Measured later: as soon as it is.
        assert_eq!(replanned_after(3), 3);
        // Never measured: when the whole wave has ended.
        assert_eq!(replanned_after(usize::MAX), 4);
    }

    #[test]
    fn a_re_plan_asked_for_before_it_is_given_runs_when_given() {
        let ran = Arc::new(AtomicUsize::new(0));
        let wave = Wave::new(1, Box::new(|| true));
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
