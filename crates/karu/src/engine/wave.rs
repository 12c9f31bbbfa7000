//! Learning within the first batch: a batch planned from priors (a cold link) sends a first
//! wave of transfers and keeps the rest of its reads back; once half the wave has ended (and
//! so measured the link), the rest is planned again from the estimates and sent.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What re-plans and sends the reads held back.
pub(crate) type Replan = Box<dyn FnOnce() + Send>;

/// A first wave: after `trigger` of its transfers have ended, `replan` runs (once) on the
/// thread that ended the last of them.
pub(crate) struct Wave {
    trigger: usize,
    ended: AtomicUsize,
    replan: Mutex<Option<Replan>>,
}

impl Wave {
    pub(crate) fn new(trigger: usize, replan: Replan) -> Arc<Wave> {
        Arc::new(Wave {
            trigger: trigger.max(1),
            ended: AtomicUsize::new(0),
            replan: Mutex::new(Some(replan)),
        })
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
        if wave.ended.fetch_add(1, Ordering::AcqRel) + 1 == wave.trigger {
            let replan = wave.replan.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(replan) = replan {
                replan();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replan_runs_once_when_the_trigger_is_reached() {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&runs);
        let wave = Wave::new(
            2,
            Box::new(move || {
                counted.fetch_add(1, Ordering::SeqCst);
            }),
        );
        let tickets: Vec<Ticket> = (0..4).map(|_| wave.ticket()).collect();
        let mut tickets = tickets.into_iter();
        drop(tickets.next());
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        drop(tickets.next());
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        drop(tickets);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }
}
