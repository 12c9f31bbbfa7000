//! Learning within the first batch: a batch planned from priors (a cold link) sends a first
//! wave of transfers, two per concurrency slot, and keeps the rest of its reads back; once
//! half the wave (its first round) has ended, the rest is planned again from the estimates
//! and sent. The wave's second round keeps every slot busy meanwhile: a re-plan that waited
//! for more (the total rate needs bodies overlapping for 50 ms) left the slots of the ended
//! transfers idle for a round trip, which cost workload S 8–12 % under a 1 Gbit/s cap; the
//! link's open window stands in for the total rate (see `engine::link`).
//!
//! But the re-plan waits past the first round until the total rate is measured, or the wave has
//! ended: without it the re-plan prices bytes at the prior's 10 Gbit/s. A round of small bodies
//! may measure none (on a link they do not fill, each is owed for little more than the one read
//! it arrives in, so no window fills), and the first transfers of a wave to end are its small
//! ones. In a test kit harness (server, proxy and client in one process, workload R's reads, a
//! cold client per batch, 2026-12-06), 5 of 10 batches at RTT 0 under 1 Gbit/s were re-planned
//! on the prior and took 587–1,035 ms (66–126 MB fetched) against 448–491 ms (49 MB), and 3 of
//! 4 at 20 ms under 1 Gbit/s took 3.89 s (479 MB) against 2.39 s; waiting, 0 of 10 and 0 of 4
//! were, at 441–479 ms and 2.38–2.40 s. Where no window fills before the wave ends, the wait
//! cost little: at RTT 0 uncapped medians of 335 against 325 ms (10 batches each, 258–421 ms),
//! at 20 ms the same 2,465 transfers in 979–989 against 974–998 ms (4 each).
//!
//! While the re-plan waits, a slot whose transfer has ended would idle until the wave's last
//! one ends: workload S at 20 ms (250 reads of 64 KiB, a wave of 128 on 64 slots) sent its
//! third round only once the slowest of its second had ended (the 129th request reached the
//! test kit server 94–104 ms after the batch began, against 79–102 for object_store's
//! `get_range` ×64), 148 against 143 ms (21 runs, 2026-12-07). So once half the wave has
//! ended, each end sends the first plan's next transfer as part of the wave (which then ends
//! later), in the plan's order for as long as each fetches no more gap bytes than
//! [`COLD_WASTE`] has left and reads only whole reads: transfers the re-plan could not price
//! wrongly. S at 20 ms then took 139 against 140 ms. A wave stopped by its gaps grows by
//! nothing: its rest is what the re-plan must price. Taking any transfer that fits instead
//! (workload R's isolated 4 KiB reads after its merged ones) kept the slots busy with small
//! bodies until the open window read their requests' cost as a low total (236 MB/s), and the
//! re-plan sent 4,400 transfers in 1.9 s where the wave's end had sent 2,100 in 1.05.
//!
//! The priors' merges are a guess (a 20 ms round trip at 10 Gbit/s), so the wave fetches at
//! most [`COLD_WASTE`] bytes that no read asked for: on a short round trip under a slow link,
//! sparse reads merged by the priors cost a wave of 128 transfers 20 MB of gaps (workload R
//! at RTT 0 under 1 Gbit/s: 1.37× the unmerged plan's time; 1.17× with the cap).
//!
//! The round trip the re-plan assumes is the smallest sampled, and a cold wave's answers all
//! wait: behind each other's connection setup on the client and the server, and, on a link
//! its bodies fill, behind those bodies in the bottleneck's queue. Of workload R's cold
//! batches on the test kit server at RTT 0 under 1 Gbit/s (2026-12-06), no answer of the
//! whole batch came within 2.1 ms, where a batch started on the idle link measured 0.16 ms;
//! re-planned on 2.2–4.3 ms, the rest merged gaps the capped link paid for. So a cold batch
//! long enough to afford it ([`PROBE_ROUNDS`]) first sends one transfer alone (its smallest
//! whole one), and the rest of the wave once that one has ended or [`PATIENCE`] has passed:
//! its answer, on an idle link, is the round trip of the path.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::plan::{CostModel, Part, Plan, Transfer};

/// How many round trips a cold plan must be predicted to take (under the priors) for its
/// first wave to wait for a lone probe: the wait (at most [`PATIENCE`], about a round trip
/// where the link is short) is then a few per cent of the batch at most.
pub(crate) const PROBE_ROUNDS: u32 = 32;

/// The longest the rest of a wave waits for its probe: a first byte later than this shows a
/// long round trip (as the gate's `SHORT` does), beside which the wave's own queueing is
/// small, so its answers can be samples. At 20 and 50 ms, waiting for the probe's end (two
/// round trips on a new connection) cost workload R 5–7 % where the plan was the guards'.
pub(crate) const PATIENCE: Duration = super::gate::SHORT;

/// Whether a cold `plan` is long enough under `model` to send a probe first.
pub(crate) fn worth_a_probe(model: &CostModel, plan: &Plan) -> bool {
    model.predict(plan) >= model.rtt.saturating_mul(PROBE_ROUNDS)
}

/// Most bytes a first wave fetches that no read asked for (the gaps its merges cover). 8 MiB
/// is 67 ms at 1 Gbit/s: enough overlapping bodies for the re-plan to measure the total rate
/// there, and a few milliseconds of a 10 Gbit/s link where the priors are right.
pub(crate) const COLD_WASTE: u64 = 8 << 20;

/// How many of a cold plan's transfers its first wave sends (two per concurrency slot, at
/// least one, no more than [`COLD_WASTE`] bytes that no read asked for, and no split read left
/// half in it: its pieces are consecutive transfers), and the bytes no read asked for that
/// they fetch.
pub(crate) fn size(plan: &Plan, slots: usize) -> (usize, u64) {
    let transfers = &plan.transfers;
    let most = slots.max(1).saturating_mul(2).min(transfers.len());
    let mut waste = 0u64;
    let mut n = 0;
    while n < most {
        let more = waste.saturating_add(unasked(&plan.parts, &transfers[n]));
        if n > 0 && more > COLD_WASTE {
            break;
        }
        waste = more;
        n += 1;
    }
    while n < transfers.len()
        && plan
            .parts_of(&transfers[n])
            .first()
            .is_some_and(|p| p.skip > 0)
    {
        waste = waste.saturating_add(unasked(&plan.parts, &transfers[n]));
        n += 1;
    }
    (n, waste)
}

/// The bytes a transfer fetches that none of its reads asked for (its gaps), `parts` being
/// its plan's.
pub(crate) fn unasked(parts: &[Part], t: &Transfer) -> u64 {
    let asked = parts[t.parts.clone()]
        .iter()
        .fold(0u64, |a, p| a.saturating_add(p.length));
    t.length.saturating_sub(asked)
}

/// What re-plans and sends the reads held back.
pub(crate) type Replan = Box<dyn FnOnce() + Send>;

/// What sends one more transfer of the first plan, with a ticket of the wave it is given
/// ([`Wave::grow`]), while the re-plan waits for the total rate.
pub(crate) type Extend = Arc<dyn Fn(&Arc<Wave>) + Send + Sync>;

/// A first wave of `size` transfers: once half of them have ended, the re-plan runs (once) on
/// the thread that ended the last of those.
pub(crate) struct Wave {
    trigger: usize,
    /// Transfers in the wave: its first ones and those it grew by ([`Wave::grow`]).
    size: AtomicUsize,
    ended: AtomicUsize,
    replan: Mutex<Stage>,
    /// What keeps the slots busy while the re-plan waits for the total rate, if anything;
    /// dropped once the re-plan runs.
    extend: Mutex<Option<Extend>>,
    /// Whether the link's total rate is measured (see [`Wave::until`]).
    measured: Option<Measured>,
    /// How long a running transfer of the wave counts as running at most (a probe's).
    patience: Option<Duration>,
}

/// Tells whether the link's total rate has been measured.
pub(crate) type Measured = Box<dyn Fn() -> bool + Send + Sync>;

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
        Arc::new(Wave::of(size, None))
    }

    /// As [`Wave::new`], but once half the wave has ended the re-plan also waits until
    /// `measured` says the link's total rate is known, or the whole wave has ended.
    pub(crate) fn until(size: usize, measured: Measured) -> Arc<Wave> {
        Arc::new(Wave::of(size, Some(measured)))
    }

    fn of(size: usize, measured: Option<Measured>) -> Wave {
        Wave {
            trigger: size.div_ceil(2).max(1),
            size: AtomicUsize::new(size),
            ended: AtomicUsize::new(0),
            replan: Mutex::new(Stage::Unarmed { due: false }),
            extend: Mutex::new(None),
            measured,
            patience: None,
        }
    }

    /// A probe's wave: one transfer, which counts as ended when it ends or [`PATIENCE`]
    /// after it started, whichever comes first.
    pub(crate) fn probe() -> Arc<Wave> {
        Arc::new(Wave {
            patience: Some(PATIENCE),
            ..Wave::of(1, None)
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

    /// Gives what keeps the slots busy while the re-plan waits for the total rate: once
    /// half the wave has ended, each later end of one of its transfers calls it.
    pub(crate) fn extend_with(&self, extend: Extend) {
        *self.extend.lock().unwrap_or_else(|e| e.into_inner()) = Some(extend);
    }

    /// The ticket of a transfer the wave grows by (sent by its [`Extend`]): the wave ends
    /// once it has ended too.
    pub(crate) fn grow(self: &Arc<Self>) -> Ticket {
        self.size.fetch_add(1, Ordering::AcqRel);
        self.ticket()
    }

    /// Calls the extension, if any, without holding its lock: what it sends may end at once
    /// (a transfer that cannot be sent fails where it is given) and come back here.
    fn extend(self: &Arc<Self>) {
        let extend = self
            .extend
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(extend) = extend {
            extend(self);
        }
    }

    /// The wave asks for its re-plan: runs it if armed, else marks it due.
    fn fire(&self) {
        // The extension holds the batch: it goes with the wait it served, dropped once the
        // lock is released (what it holds may end a transfer of this wave, which comes here).
        let extend = self.extend.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(extend);
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

impl Ticket {
    /// Holds the ticket while its transfer runs (on an IO loop): a probe's ticket is also
    /// given up once its wave's patience has passed.
    pub(crate) fn hold(self) -> Held {
        let patience = self.0.patience;
        let held = Rc::new(Cell::new(Some(self)));
        if let Some(patience) = patience {
            let timer = Rc::clone(&held);
            tokio::task::spawn_local(async move {
                tokio::time::sleep(patience).await;
                drop(timer.take());
            });
        }
        Held(held)
    }
}

/// A ticket held by a running transfer ([`Ticket::hold`]); dropped when the transfer ends.
pub(crate) struct Held(Rc<Cell<Option<Ticket>>>);

impl Drop for Held {
    fn drop(&mut self) {
        // The timer keeps the cell, not the ticket: the ticket ends with the transfer.
        drop(self.0.take());
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let wave = &self.0;
        let ended = wave.ended.fetch_add(1, Ordering::AcqRel) + 1;
        if ended < wave.trigger {
            return;
        }
        if ended >= wave.size.load(Ordering::Acquire)
            || wave.measured.as_ref().is_none_or(|known| known())
        {
            wave.fire();
        } else {
            wave.extend();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan of `n` transfers: the `i`th at `offset(i)` of `length` bytes, whose parts ask
    /// for `parts(i)` (length, skip).
    fn plan(n: u64, offset: impl Fn(u64) -> u64, length: u64, parts: &[(u64, u64)]) -> Plan {
        plan_of(n, offset, length, |_| parts.to_vec())
    }

    fn plan_of(
        n: u64,
        offset: impl Fn(u64) -> u64,
        length: u64,
        parts: impl Fn(u64) -> Vec<(u64, u64)>,
    ) -> Plan {
        let mut plan = Plan::default();
        for i in 0..n {
            let (offset, first) = (offset(i), plan.parts.len());
            plan.parts
                .extend(parts(i).into_iter().map(|(length, skip)| Part {
                    index: 0,
                    offset,
                    length,
                    skip,
                }));
            plan.transfers.push(Transfer {
                index: 0,
                offset,
                length,
                parts: first..plan.parts.len(),
                remote: true,
            });
        }
        plan
    }

    #[test]
    fn a_wave_is_two_transfers_per_slot_and_fetches_little_that_no_read_asked_for() {
        // Whole reads: two per slot.
        let whole = plan(100, |i| i << 20, 4096, &[(4096, 0)]);
        assert_eq!(size(&whole, 8).0, 16);
        assert_eq!(size(&whole, 64).0, 100);
        // Merged transfers of 1 MiB for two 4 KiB reads: the gaps stop the wave at 8 MiB.
        let merged = plan(100, |i| i << 20, 1 << 20, &[(4096, 0), (4096, 0)]);
        let n = size(&merged, 64).0;
        assert_eq!(n, (COLD_WASTE / ((1 << 20) - 8192)) as usize);
        // One transfer goes whatever its gaps.
        assert_eq!(size(&plan(1, |_| 0, 1 << 40, &[(1, 0), (1, 0)]), 64).0, 1);
        // A split read's pieces stay together.
        let pieces = plan_of(4, |i| i << 23, 8 << 20, |i| vec![(8 << 20, i << 23)]);
        assert_eq!(size(&pieces, 1).0, 4);
    }

    #[test]
    fn only_a_plan_of_many_round_trips_is_worth_a_probe() {
        let plan = |n: u64| plan(n, |i| i << 20, 4096, &[(4096, 0)]);
        // Under the priors (20 ms, 64 slots): 250 transfers take 4 round trips of slots and
        // 25 ms of requests, 8,000 take 125 round trips of slots.
        let priors = CostModel::priors(64);
        assert!(!worth_a_probe(&priors, &plan(250)));
        assert!(worth_a_probe(&priors, &plan(8_000)));
        // 300 on 8 slots: 38 round trips of slots and 30 ms of requests.
        assert!(worth_a_probe(&CostModel::priors(8), &plan(300)));
    }

    #[test]
    fn a_probe_counts_as_ended_when_it_ends_or_once_its_patience_has_passed() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let probe = || {
            let ran = Arc::new(AtomicUsize::new(0));
            let wave = Wave::probe();
            let r = Arc::clone(&ran);
            wave.arm(Box::new(move || {
                r.fetch_add(1, Ordering::SeqCst);
            }));
            (wave.ticket(), ran)
        };
        tokio::task::LocalSet::new().block_on(&runtime, async {
            // A probe still running: the rest goes once the patience has passed.
            let (ticket, ran) = probe();
            let held = ticket.hold();
            assert_eq!(ran.load(Ordering::SeqCst), 0, "held");
            tokio::time::sleep(PATIENCE * 10).await;
            assert_eq!(ran.load(Ordering::SeqCst), 1, "the patience passed");
            drop(held);
            assert_eq!(ran.load(Ordering::SeqCst), 1, "once");
            // A probe that ends first: the rest goes then, and the timer does nothing.
            let (ticket, ran) = probe();
            drop(ticket.hold());
            assert_eq!(ran.load(Ordering::SeqCst), 1, "the probe ended");
            tokio::time::sleep(PATIENCE * 10).await;
            assert_eq!(ran.load(Ordering::SeqCst), 1, "once");
        });
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
    fn the_replan_waits_for_the_total_rate_or_the_waves_end() {
        use std::sync::atomic::AtomicBool;
        let run = |measured_after: Option<usize>| {
            let known = Arc::new(AtomicBool::new(false));
            let k = Arc::clone(&known);
            let wave = Wave::until(6, Box::new(move || k.load(Ordering::SeqCst)));
            let ran = Arc::new(AtomicUsize::new(0));
            let r = Arc::clone(&ran);
            wave.arm(Box::new(move || {
                r.fetch_add(1, Ordering::SeqCst);
            }));
            let mut tickets: Vec<Ticket> = (0..6).map(|_| wave.ticket()).collect();
            // How many had ended when the re-plan ran.
            let mut at = None;
            for ended in 1..=6 {
                if measured_after == Some(ended) {
                    known.store(true, Ordering::SeqCst);
                }
                drop(tickets.pop());
                if at.is_none() && ran.load(Ordering::SeqCst) == 1 {
                    at = Some(ended);
                }
            }
            assert_eq!(ran.load(Ordering::SeqCst), 1, "once");
            at
        };
        // Measured from the start: at half the wave, as `Wave::new`.
        assert_eq!(run(Some(1)), Some(3));
        // Measured later: at the next end after it.
        assert_eq!(run(Some(5)), Some(5));
        // Never measured: at the wave's end.
        assert_eq!(run(None), Some(6));
    }

    /// An `until` wave of `size` armed with a counter, whose extension hands out at most
    /// `more` grown tickets into the returned list.
    #[allow(clippy::type_complexity)]
    fn growing(
        size: usize,
        more: usize,
        known: &Arc<std::sync::atomic::AtomicBool>,
    ) -> (Arc<Wave>, Arc<AtomicUsize>, Arc<Mutex<Vec<Ticket>>>) {
        let k = Arc::clone(known);
        let wave = Wave::until(size, Box::new(move || k.load(Ordering::SeqCst)));
        let ran = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&ran);
        wave.arm(Box::new(move || {
            r.fetch_add(1, Ordering::SeqCst);
        }));
        let grown: Arc<Mutex<Vec<Ticket>>> = Arc::default();
        let (g, left) = (Arc::clone(&grown), AtomicUsize::new(more));
        wave.extend_with(Arc::new(move |wave: &Arc<Wave>| {
            let one = left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            if one.is_ok() {
                g.lock().unwrap().push(wave.grow());
            }
        }));
        (wave, ran, grown)
    }

    #[test]
    fn while_the_replan_waits_each_end_after_half_the_wave_grows_it_until_the_first_plan_runs_out()
    {
        let known = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (wave, ran, grown) = growing(4, 3, &known);
        let count = |g: &Mutex<Vec<Ticket>>| g.lock().unwrap().len();
        let mut tickets: Vec<Ticket> = (0..4).map(|_| wave.ticket()).collect();
        drop(tickets.pop());
        assert_eq!(
            count(&grown),
            0,
            "before half the wave, its own second round runs"
        );
        drop(tickets.pop());
        drop(tickets.pop());
        assert_eq!(count(&grown), 2, "one more per end");
        drop(tickets.pop());
        assert_eq!(count(&grown), 3);
        assert_eq!(
            ran.load(Ordering::SeqCst),
            0,
            "the grown transfers are the wave's"
        );
        // The first plan has nothing more to give: the re-plan runs as the last one ends.
        let mut more = std::mem::take(&mut *grown.lock().unwrap());
        drop(more.pop());
        drop(more.pop());
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        drop(more.pop());
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        assert_eq!(count(&grown), 0);
    }

    #[test]
    fn once_the_total_rate_is_measured_the_replan_runs_and_the_wave_grows_no_more() {
        let known = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (wave, ran, grown) = growing(4, 100, &known);
        let mut tickets: Vec<Ticket> = (0..4).map(|_| wave.ticket()).collect();
        drop(tickets.pop());
        drop(tickets.pop());
        assert_eq!(grown.lock().unwrap().len(), 1);
        known.store(true, Ordering::SeqCst);
        drop(tickets.pop());
        assert_eq!(ran.load(Ordering::SeqCst), 1, "measured");
        // The extension went with the wait: later ends neither grow the wave nor re-plan.
        assert!(wave.extend.lock().unwrap().is_none());
        drop(tickets);
        assert_eq!(
            grown.lock().unwrap().len(),
            1,
            "no growth after the re-plan"
        );
        drop(std::mem::take(&mut *grown.lock().unwrap()));
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
