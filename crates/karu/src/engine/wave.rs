//! Learning within the first batch: a batch planned from priors (a cold link) sends a first
//! wave of transfers, two per concurrency slot, and keeps the rest of its reads back; once
//! half the wave (its first round) has ended, the rest is planned again from the estimates
//! and sent. The wave's second round keeps every slot busy meanwhile: a re-plan that waited
//! for more (the total rate needs bodies overlapping for 50 ms) left the slots of the ended
//! transfers idle for a round trip, which cost workload S 8–12 % under a 1 Gbit/s cap. A first
//! round too short to measure the total rate carried few bytes, so its plan is bound by round
//! trips, which it did measure (or the link's open window stands in, see `engine::link`).
//!
//! The priors' merges are a guess (a 20 ms round trip at 10 Gbit/s), so the wave fetches at
//! most [`COLD_WASTE`] bytes that no read asked for: on a short round trip under a slow link,
//! sparse reads merged by the priors cost a wave of 128 transfers 20 MB of gaps (workload R
//! at RTT 0 under 1 Gbit/s: 1.37× the unmerged plan's time; 1.17× with the cap).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::plan::Transfer;

/// Most bytes a first wave fetches that no read asked for (the gaps its merges cover). 8 MiB
/// is 67 ms at 1 Gbit/s: enough overlapping bodies for the re-plan to measure the total rate
/// there, and a few milliseconds of a 10 Gbit/s link where the priors are right.
pub(crate) const COLD_WASTE: u64 = 8 << 20;

/// How many of a cold plan's `transfers` its first wave sends: two per concurrency slot, at
/// least one, no more than [`COLD_WASTE`] bytes that no read asked for, and no split read left
/// half in it (its pieces are consecutive transfers).
pub(crate) fn size(transfers: &[Transfer], slots: usize) -> usize {
    let most = slots.max(1).saturating_mul(2).min(transfers.len());
    let mut waste = 0u64;
    let mut n = 0;
    while n < most {
        let t = &transfers[n];
        let asked = t.parts.iter().fold(0u64, |a, p| a.saturating_add(p.length));
        waste = waste.saturating_add(t.length.saturating_sub(asked));
        if n > 0 && waste > COLD_WASTE {
            break;
        }
        n += 1;
    }
    while n < transfers.len() && transfers[n].parts.first().is_some_and(|p| p.skip > 0) {
        n += 1;
    }
    n
}

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
    use crate::plan::Part;

    /// A transfer at `offset` of `length` bytes whose parts ask for `parts` (length, skip).
    fn transfer(offset: u64, length: u64, parts: &[(u64, u64)]) -> Transfer {
        Transfer {
            index: 0,
            offset,
            length,
            parts: parts
                .iter()
                .map(|&(length, skip)| Part {
                    index: 0,
                    offset,
                    length,
                    skip,
                })
                .collect(),
            remote: true,
        }
    }

    #[test]
    fn a_wave_is_two_transfers_per_slot_and_fetches_little_that_no_read_asked_for() {
        // Whole reads: two per slot.
        let whole: Vec<Transfer> = (0..100)
            .map(|i| transfer(i << 20, 4096, &[(4096, 0)]))
            .collect();
        assert_eq!(size(&whole, 8), 16);
        assert_eq!(size(&whole, 64), 100);
        // Merged transfers of 1 MiB for two 4 KiB reads: the gaps stop the wave at 8 MiB.
        let merged: Vec<Transfer> = (0..100)
            .map(|i| transfer(i << 20, 1 << 20, &[(4096, 0), (4096, 0)]))
            .collect();
        let n = size(&merged, 64);
        assert_eq!(n, (COLD_WASTE / ((1 << 20) - 8192)) as usize);
        // One transfer goes whatever its gaps.
        assert_eq!(size(&[transfer(0, 1 << 40, &[(1, 0), (1, 0)])], 64), 1);
        // A split read's pieces stay together.
        let pieces: Vec<Transfer> = (0..4)
            .map(|i| transfer(i << 23, 8 << 20, &[(8 << 20, i << 23)]))
            .collect();
        assert_eq!(size(&pieces, 1), 4);
    }

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
