//! `Client`: the entry point. Holds a frozen settings snapshot and starts its engine on first
//! use; submits batches, runs blocking and async reads and probes.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::batch::{Batch, Completion, Counters, Shared};
use crate::config::{Config, Settings};
use crate::dest::Dest;
use crate::engine::remote::LoopState;
use crate::engine::split::SplitRead;
use crate::engine::wave::{self, Wave};
use crate::engine::{Engine, PartRead, Remote, Work, link};
use crate::error::{Error, Result, Status};
use crate::locator::Locator;
use crate::plan::{self, LinkEstimate, Mode, Overrides, Part, Policy, Transfer};
use crate::probe::{self, Ends, ObjectInfo};
use crate::read::Read;
use crate::validate::condition::Condition;

struct Inner {
    settings: Settings,
    policy: Policy,
    mode: Mode,
    /// The engine and the pid that started it: a forked child builds its own (spec §1.10).
    engine: Mutex<Option<(u32, Arc<Engine>)>>,
}

/// A karu client: `Send + Sync + Clone`, cheap to clone (shared inside).
///
/// ```
/// # let path = std::env::temp_dir().join("karu-doc-client.bin");
/// # std::fs::write(&path, b"hello, ranges").unwrap();
/// let client = karu::Client::new(&karu::Config::empty()).unwrap();
/// let object = karu::Locator::parse(path.to_str().unwrap()).unwrap();
/// assert_eq!(client.read(&object, 7, 6).unwrap(), b"ranges");
/// assert_eq!(client.size(&object).unwrap(), 13);
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

impl Client {
    /// Freezes `config` (validating every layer; `Config` errors name the bad value) into a
    /// client. The config may be dropped or changed afterwards.
    pub fn new(config: &Config) -> Result<Client> {
        let settings = config.freeze()?;
        let policy = Policy {
            gap: settings.coalesce_gap(),
            limit: settings.coalesce_limit(),
            parts: settings.coalesce_parts(),
            amplification: settings.coalesce_amplification(),
        };
        let mode = match settings.option("KARU_COALESCE_MODE", "") {
            Some(v) if v.eq_ignore_ascii_case("guards") => Mode::Guards,
            _ => Mode::Cost,
        };
        Ok(Client {
            inner: Arc::new(Inner {
                settings,
                policy,
                mode,
                engine: Mutex::new(None),
            }),
        })
    }

    /// The frozen settings.
    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// The planner policy of this client (before per-batch overrides).
    pub fn policy(&self) -> Policy {
        self.inner.policy
    }

    /// What this client has measured of the link to `locator`'s endpoint (scheme, host,
    /// port): the estimates its cost-model plans assume, the priors until transfers have
    /// completed there. A local file has no link: the priors.
    pub fn link_estimate(&self, locator: &Locator) -> LinkEstimate {
        self.estimate_in(&self.engine(), locator)
    }

    fn estimate_in(&self, engine: &Engine, locator: &Locator) -> LinkEstimate {
        let endpoint = link::locator_endpoint(&self.inner.settings, locator);
        self.estimate_at(engine, endpoint.as_deref())
    }

    /// The estimate for `endpoint` (the priors for none: a locator no request is built for).
    fn estimate_at(&self, engine: &Engine, endpoint: Option<&str>) -> LinkEstimate {
        let concurrency = self.inner.settings.concurrency();
        match endpoint {
            Some(endpoint) => engine.estimate(endpoint, concurrency),
            None => LinkEstimate::priors(concurrency),
        }
    }

    /// True when `config` would build a client with exactly these settings. No I/O.
    pub fn matches(&self, config: &Config) -> Result<bool> {
        self.inner.settings.matches(config)
    }

    fn engine(&self) -> Arc<Engine> {
        let pid = std::process::id();
        let mut slot = self.inner.engine.lock().unwrap_or_else(|e| e.into_inner());
        match slot.as_ref() {
            Some((p, e)) if *p == pid => Arc::clone(e),
            _ => {
                if let Some(inherited) = slot.take() {
                    // The parent's worker threads do not exist in a forked child: abandon
                    // its engine without running destructors that would wait for them.
                    std::mem::forget(inherited);
                }
                let engine = Arc::new(Engine::start(&self.inner.settings));
                *slot = Some((pid, Arc::clone(&engine)));
                engine
            }
        }
    }

    /// Submits reads and returns at once. Each read completes on its own; bad reads complete
    /// at once with their own error and the rest still run.
    pub fn submit(&self, reads: Vec<Read>) -> Result<Batch> {
        self.submit_with(reads, &Overrides::default())
    }

    /// As [`submit`](Client::submit), with per-batch planner overrides (`Invalid` for values
    /// out of range).
    pub fn submit_with(&self, reads: Vec<Read>, overrides: &Overrides) -> Result<Batch> {
        let mode = overrides.mode.unwrap_or(self.inner.mode);
        self.submit_inner(reads, self.inner.policy.with(overrides)?, mode, false, None)
    }

    /// As [`submit`](Client::submit), planned by cost for the link `model` (whatever the
    /// mode and the measurements): merges and splits on demand for tests.
    #[cfg(test)]
    pub(crate) fn submit_modelled(
        &self,
        reads: Vec<Read>,
        model: plan::CostModel,
    ) -> Result<Batch> {
        self.submit_inner(reads, self.inner.policy, Mode::Cost, false, Some(model))
    }

    /// Submits one download chunk, its adjacent sub-reads back to back: planned with
    /// [`CHUNK_POLICY`] (not the client's guards), so they are one transfer, one request,
    /// whatever coalescing options the client has. A throttled answer ends it at once (the
    /// download's window paces the retry) instead of waiting inside the exchange.
    pub(crate) fn submit_chunk(&self, reads: Vec<Read>) -> Result<Batch> {
        // The download paces its own parallelism: a chunk keeps its size.
        self.submit_inner(reads, CHUNK_POLICY, Mode::Guards, true, None)
    }

    fn submit_inner(
        &self,
        reads: Vec<Read>,
        policy: Policy,
        mode: Mode,
        hand_back: bool,
        model: Option<plan::CostModel>,
    ) -> Result<Batch> {
        let engine = self.engine();
        // The endpoint whose estimate the plan assumes (found once: it prepares a request).
        let mut endpoint = None;
        let estimate = match (model, mode) {
            (Some(model), _) => Some(LinkEstimate {
                model,
                rtt_samples: 1,
                rate_samples: 1,
                total_samples: 1,
            }),
            (None, Mode::Cost) => reads.iter().find(|r| r.locator.is_remote()).map(|r| {
                endpoint = link::locator_endpoint(&self.inner.settings, &r.locator);
                self.estimate_at(&engine, endpoint.as_deref())
            }),
            _ => None,
        };
        let mut planned = plan_reads(&reads, &policy, estimate.as_ref());
        // A cold link's endpoint: a first wave from the priors, the rest planned again once
        // the endpoint's total rate is measured (after a lone probe if the batch is long, see
        // `engine::wave`).
        let cold = endpoint.filter(|_| estimate.is_some_and(|e| e.is_cold()));
        let long =
            cold.is_some() && estimate.is_some_and(|e| wave::worth_a_probe(&e.model, &planned));
        let raw = reads.iter().any(|r| matches!(r.dest, Dest::Raw(_)));
        let shared = Shared::new(reads.len(), raw);
        if hand_back {
            shared.hand_back_throttling();
        }
        shared.assume(estimate.map(|e| e.model));
        Counters::add(&shared.counters.requested_bytes, planned.requested_bytes);

        let mut slots: Vec<Option<Read>> = reads.into_iter().map(Some).collect();
        let rejected: Vec<Completion> = std::mem::take(&mut planned.rejected)
            .into_iter()
            .map(|(i, error)| {
                let read = slots[i].take().expect("a read is rejected once");
                Completion {
                    tag: read.tag,
                    result: Err(error),
                    got: 0,
                    buffer: read.dest.into_vec(),
                    etag: None,
                }
            })
            .collect();
        shared.complete(rejected);

        // The first wave's transfers, and the gap bytes they fetch.
        let (wave, spent) = match estimate {
            Some(e) if e.is_cold() => wave::size(&planned, e.model.concurrency as usize),
            _ => (planned.transfers.len(), 0),
        };
        let mut transfers = std::mem::take(&mut planned.transfers);
        let later = transfers.split_off(wave);
        Counters::add(&shared.counters.transfers, transfers.len() as u64);
        let mut work = work(&mut slots, transfers, &planned.parts);
        // The probe: the wave's shortest remote transfer of whole reads (a split read's
        // pieces complete it together, so none of them goes alone).
        let probe = (long && !later.is_empty())
            .then(|| {
                (0..work.len())
                    .filter(|&i| work[i].pieces.is_empty() && work[i].locator.is_remote())
                    .min_by_key(|&i| work[i].length)
            })
            .flatten()
            .filter(|_| work.len() > 1)
            .map(|i| work.remove(i));
        let extend = cold.is_some();
        let wave = (!later.is_empty()).then(|| match cold {
            Some(endpoint) => {
                let engine = Arc::clone(&engine);
                Wave::until(work.len(), Box::new(move || engine.total_known(&endpoint)))
            }
            None => Wave::new(work.len()),
        });
        for w in &mut work {
            w.wave = wave.as_ref().map(Wave::ticket);
        }
        if let Some(wave) = wave {
            let mut held = Held {
                slots,
                later: later.into_iter(),
                parts: std::mem::take(&mut planned.parts),
                waste: wave::COLD_WASTE.saturating_sub(spent),
            };
            // A wave whose re-plan waits at most for half of it, or whose first plan has no
            // transfer to give, keeps none of that plan.
            let extend = extend && held.fits().is_some();
            if !extend {
                held.drop_plan();
            }
            let held = Arc::new(Mutex::new(held));
            if extend {
                // While the re-plan waits for the total rate, the first plan's transfers
                // that fetch no more gaps than the wave may keep the slots busy.
                let (engine, batch, held) =
                    (Arc::clone(&engine), Arc::clone(&shared), Arc::clone(&held));
                wave.extend_with(Arc::new(move |wave: &Arc<Wave>| {
                    if batch.is_cancelled() {
                        return;
                    }
                    let next = held.lock().unwrap_or_else(|e| e.into_inner()).next(wave);
                    if let Some(work) = next {
                        Counters::add(&batch.counters.transfers, 1);
                        engine.dispatch(&batch, vec![work]);
                    }
                }));
            }
            let client = self.clone();
            let batch = Arc::clone(&shared);
            wave.arm(Box::new(move || {
                let reads = held.lock().unwrap_or_else(|e| e.into_inner()).take();
                if !batch.is_cancelled() {
                    client.send_held(&batch, reads, &policy);
                }
            }));
        }
        match probe {
            Some(mut probe) => {
                let alone = Wave::probe();
                probe.wave = Some(alone.ticket());
                let (sender, batch) = (Arc::clone(&engine), Arc::clone(&shared));
                alone.arm(Box::new(move || {
                    // A cancelled batch's work is dropped unsent, as its held reads are.
                    if !batch.is_cancelled() {
                        sender.dispatch(&batch, work);
                    }
                }));
                engine.dispatch(&shared, vec![probe]);
            }
            None => engine.dispatch(&shared, work),
        }
        Ok(Batch {
            shared,
            _engine: Some(engine),
        })
    }

    /// Plans the reads a first wave held back, from what it measured, and sends them.
    fn send_held(&self, shared: &Arc<Shared>, reads: Vec<Read>, policy: &Policy) {
        let engine = self.engine();
        let estimate = reads
            .iter()
            .find(|r| r.locator.is_remote())
            .map(|r| self.estimate_in(&engine, &r.locator));
        let planned = plan_reads(&reads, policy, estimate.as_ref());
        shared.assume(estimate.map(|e| e.model));
        Counters::add(&shared.counters.transfers, planned.transfers.len() as u64);
        let mut slots: Vec<Option<Read>> = reads.into_iter().map(Some).collect();
        let work = work(&mut slots, planned.transfers, &planned.parts);
        engine.dispatch(shared, work);
    }

    /// Runs reads to the end and returns their buffers in the order given, or the first
    /// failure in completion order.
    pub fn fetch(&self, reads: Vec<Read>) -> Result<Vec<Vec<u8>>> {
        self.fetch_with(reads, &Overrides::default())
    }

    /// As [`fetch`](Client::fetch), with per-batch planner overrides.
    pub fn fetch_with(&self, reads: Vec<Read>, overrides: &Overrides) -> Result<Vec<Vec<u8>>> {
        let n = reads.len();
        let batch = self.submit_with(positional(reads), overrides)?;
        drain(&batch, n)
    }

    /// Reads straight into borrowed buffers, each read's length being its buffer's length.
    /// Does not return before every worker is done with the buffers.
    ///
    /// ```
    /// # let path = std::env::temp_dir().join("karu-doc-into.bin");
    /// # std::fs::write(&path, b"0123456789").unwrap();
    /// let client = karu::Client::new(&karu::Config::empty()).unwrap();
    /// let object = karu::Locator::parse(path.to_str().unwrap()).unwrap();
    /// let (mut a, mut b) = ([0u8; 3], [0u8; 4]);
    /// client.fetch_into(vec![(&object, 1, &mut a[..]), (&object, 6, &mut b[..])]).unwrap();
    /// assert_eq!((&a, &b), (b"123", b"6789"));
    /// ```
    pub fn fetch_into(&self, reads: Vec<(&Locator, u64, &mut [u8])>) -> Result<()> {
        let n = reads.len();
        let reads = reads
            .into_iter()
            .enumerate()
            .map(|(i, (locator, offset, buf))| {
                let read = Read::new(locator, offset, buf.len() as u64).tag(i as u64);
                // SAFETY: the batch below is dropped (cancelled, and waited for until no
                // worker holds a buffer) before this function returns, unwinding included,
                // and the `&mut` borrows outlive the call.
                unsafe { read.with_raw_buffer(buf.as_mut_ptr()) }
            })
            .collect();
        let batch = self.submit(reads)?;
        drain::<Vec<u8>>(&batch, n).map(|_| ())
    }

    /// Reads one range, blocking. A read passing the end of the object fails with `Range`.
    pub fn read(&self, locator: &Locator, offset: u64, length: u64) -> Result<Vec<u8>> {
        let batch = self.submit(vec![Read::new(locator, offset, length)])?;
        let done = batch.next().expect("one read gives one completion");
        done.into_result()
    }

    /// The async twin of [`read`](Client::read): awaits the completion without blocking a
    /// thread (any executor). Dropping it unfinished cancels the read without blocking.
    pub async fn read_async(&self, locator: &Locator, offset: u64, length: u64) -> Result<Vec<u8>> {
        let batch = self.submit(vec![Read::new(locator, offset, length)])?;
        let done = batch.next_async().await;
        done.expect("one read gives one completion").into_result()
    }

    /// The async twin of [`fetch`](Client::fetch). Dropping it unfinished cancels the reads,
    /// without blocking unless some read has a raw buffer (see [`Batch`]).
    pub async fn fetch_async(&self, reads: Vec<Read>) -> Result<Vec<Vec<u8>>> {
        let n = reads.len();
        let batch = self.submit(positional(reads))?;
        let mut out = vec![Vec::new(); n];
        let mut first_error = None;
        while let Some(done) = batch.next_async().await {
            collect(done, &mut out, &mut first_error);
        }
        first_error.map_or(Ok(out), Err)
    }

    /// The bytes of `range` (relative to the locator's window), blocking; the name and shape
    /// of `object_store`'s `get_range`. A range passing the end of the object fails with
    /// `Range`, a reversed one with `Invalid`; an empty one gives empty bytes without I/O.
    ///
    /// ```
    /// # let path = std::env::temp_dir().join(format!("karu-doc-get-range-{}.bin", std::process::id()));
    /// # std::fs::write(&path, b"0123456789").unwrap();
    /// let client = karu::Client::new(&karu::Config::empty())?;
    /// let object = karu::Locator::parse(path.to_str().unwrap())?;
    /// assert_eq!(client.get_range(&object, 2..5)?, &b"234"[..]);
    /// let parts = client.get_ranges(&object, &[8..10, 0..2])?;
    /// assert_eq!(parts, [&b"89"[..], &b"01"[..]]);
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), karu::Error>(())
    /// ```
    pub fn get_range(&self, locator: &Locator, range: Range<u64>) -> Result<Bytes> {
        match crate::read::range_length(&range)? {
            0 => Ok(Bytes::new()),
            length => self.read(locator, range.start, length).map(Bytes::from),
        }
    }

    /// The async twin of [`get_range`](Client::get_range).
    pub async fn get_range_async(&self, locator: &Locator, range: Range<u64>) -> Result<Bytes> {
        match crate::read::range_length(&range)? {
            0 => Ok(Bytes::new()),
            length => Ok(Bytes::from(
                self.read_async(locator, range.start, length).await?,
            )),
        }
    }

    /// The bytes of each range, in the order given, read as one batch (coalesced by the
    /// planner) from one version of the object: the transfers run at once, unpinned, and
    /// every answer must carry the same strong ETag. When two answers show two versions
    /// (the object was replaced meanwhile), the ranges are read again, pinned with
    /// `If-Match` to the version a `stat` then sees; an object without a strong ETag cannot
    /// be pinned and fails with `Precondition`. The first failure fails the call.
    pub fn get_ranges(&self, locator: &Locator, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let batch = self.submit(Read::of_ranges(locator, ranges)?)?;
        let mut got = Ranged::new(ranges.len());
        for done in &batch {
            got.add(done);
        }
        match got.finish() {
            Err(Mixed) => {
                let reads = pin(
                    locator,
                    Read::of_ranges(locator, ranges)?,
                    self.stat(locator)?,
                )?;
                drain(&self.submit(reads)?, ranges.len())
            }
            Ok(out) => out,
        }
    }

    /// The async twin of [`get_ranges`](Client::get_ranges).
    pub async fn get_ranges_async(
        &self,
        locator: &Locator,
        ranges: &[Range<u64>],
    ) -> Result<Vec<Bytes>> {
        let batch = self.submit(Read::of_ranges(locator, ranges)?)?;
        let mut got = Ranged::new(ranges.len());
        while let Some(done) = batch.next_async().await {
            got.add(done);
        }
        let reads = match got.finish() {
            Ok(out) => return out,
            Err(Mixed) => {
                let info = self.stat_async(locator).await?;
                pin(locator, Read::of_ranges(locator, ranges)?, info)?
            }
        };
        let batch = self.submit(reads)?;
        let mut out = vec![Bytes::new(); ranges.len()];
        let mut first_error = None;
        while let Some(done) = batch.next_async().await {
            collect(done, &mut out, &mut first_error);
        }
        first_error.map_or(Ok(out), Err)
    }

    /// The visible size of an object: a bounded window's length with no I/O; otherwise the
    /// object's size past the window offset (for a remote object, one one-byte GET).
    pub fn size(&self, locator: &Locator) -> Result<u64> {
        match locator.window_length() {
            Some(len) => Ok(len),
            None => self.stat(locator).map(|i| i.size),
        }
    }

    /// Size and strong ETag in one round trip (local files have no ETag). A bounded remote
    /// window is probed too, for its ETag.
    pub fn stat(&self, locator: &Locator) -> Result<ObjectInfo> {
        if !locator.is_remote() {
            return probe::local_stat(locator);
        }
        let locator = locator.clone();
        self.remote()?
            .run(move |st| Box::pin(async move { probe::remote::stat(&st, &locator).await }))
    }

    /// The first `head` and last `tail` bytes of the visible object, with its size and
    /// ETag; for a remote object, both ends are requested together in one round trip.
    pub fn read_ends(&self, locator: &Locator, head: u64, tail: u64) -> Result<Ends> {
        if !locator.is_remote() {
            return probe::local_read_ends(locator, head, tail);
        }
        let locator = locator.clone();
        self.remote()?.run(move |st| {
            Box::pin(async move { probe::remote::read_ends(&st, &locator, head, tail, None).await })
        })
    }

    /// The async twin of [`size`](Client::size).
    pub async fn size_async(&self, locator: &Locator) -> Result<u64> {
        match locator.window_length() {
            Some(len) => Ok(len),
            None => self.stat_async(locator).await.map(|i| i.size),
        }
    }

    /// The async twin of [`stat`](Client::stat).
    pub async fn stat_async(&self, locator: &Locator) -> Result<ObjectInfo> {
        if !locator.is_remote() {
            return probe::local_stat(locator);
        }
        let owned = locator.clone();
        self.remote()?
            .run_async(move |st| Box::pin(async move { probe::remote::stat(&st, &owned).await }))
            .await
    }

    /// The async twin of [`read_ends`](Client::read_ends).
    pub async fn read_ends_async(&self, locator: &Locator, head: u64, tail: u64) -> Result<Ends> {
        if !locator.is_remote() {
            return probe::local_read_ends(locator, head, tail);
        }
        let owned = locator.clone();
        self.remote()?
            .run_async(move |st| {
                Box::pin(
                    async move { probe::remote::read_ends(&st, &owned, head, tail, None).await },
                )
            })
            .await
    }

    /// [`read_ends_async`](Client::read_ends_async) whose exchanges count into `counters`.
    pub(crate) async fn read_ends_counted(
        &self,
        locator: &Locator,
        head: u64,
        tail: u64,
        counters: Arc<Shared>,
    ) -> Result<Ends> {
        if !locator.is_remote() {
            return probe::local_read_ends(locator, head, tail);
        }
        let owned = locator.clone();
        self.run_remote(move |st| {
            Box::pin(async move {
                probe::remote::read_ends(&st, &owned, head, tail, Some(&counters)).await
            })
        })
        .await
    }

    /// Runs `job` on an IO loop and awaits it (a download's one-stream read).
    pub(crate) async fn run_remote<T, F>(&self, job: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(std::rc::Rc<LoopState>) -> std::pin::Pin<Box<dyn Future<Output = Result<T>>>>
            + Send
            + 'static,
    {
        self.remote()?.run_async(job).await
    }

    /// The engine's remote loops.
    fn remote(&self) -> Result<RemoteHandle> {
        let engine = self.engine();
        engine.remote()?;
        Ok(RemoteHandle(engine))
    }
}

/// Keeps the engine alive while a probe uses its loops.
struct RemoteHandle(Arc<Engine>);

impl std::ops::Deref for RemoteHandle {
    type Target = Remote;
    fn deref(&self) -> &Remote {
        self.0.remote().expect("checked when the handle was made")
    }
}

/// The guards a download chunk is planned with: adjacent reads of one object and version
/// always merge (no span, part or amplification limit stops them, and a chunk's sub-reads
/// leave no gap to fetch), so the chunk stays the one request it was as a single read.
const CHUNK_POLICY: Policy = Policy {
    gap: 1,
    limit: u64::MAX,
    parts: u64::MAX,
    amplification: 1,
};

/// The plan of `reads`: by cost when an estimate of the link is given, else by the guards.
fn plan_reads(reads: &[Read], policy: &Policy, estimate: Option<&LinkEstimate>) -> plan::Plan {
    let requests: Vec<plan::Request<'_>> = reads
        .iter()
        .map(|r| plan::Request {
            locator: &r.locator,
            offset: r.offset,
            length: r.length,
            if_match: r.pin.as_deref().and_then(Condition::if_match),
        })
        .collect();
    match estimate {
        Some(e) => plan::plan_cost(&requests, policy, &e.model),
        None => plan::plan(&requests, policy),
    }
}

/// A read's version condition, as a transfer carries it.
type Pinned = Option<Box<Condition>>;

/// What a first wave holds back: the reads it left, and the rest of the first plan, from
/// which transfers may still go while the re-plan waits for the link's total rate (see
/// `engine::wave`).
struct Held {
    slots: Vec<Option<Read>>,
    later: std::vec::IntoIter<Transfer>,
    parts: Vec<Part>,
    /// Gap bytes the first plan's transfers may still fetch ([`wave::COLD_WASTE`] less the
    /// wave's).
    waste: u64,
}

impl Held {
    /// The first plan's next transfer, as work of `wave`, if it fetches no more gap bytes
    /// than are left and reads only whole reads (a split read's pieces go together, with the
    /// re-plan). In the plan's order, stopping at the first that does not: a wave stopped by
    /// its gaps grows by nothing, as the rest of such a plan is what the re-plan must price.
    fn next(&mut self, wave: &Arc<Wave>) -> Option<Work> {
        let unasked = self.fits()?;
        let t = self.later.next()?;
        self.waste -= unasked;
        let mut work = work(&mut self.slots, vec![t], &self.parts).pop()?;
        work.wave = Some(wave.grow());
        Some(work)
    }

    /// The gap bytes of the first plan's next transfer, if it may go (see [`Held::next`]).
    fn fits(&self) -> Option<u64> {
        let t = self.later.as_slice().first()?;
        let unasked = wave::unasked(&self.parts, t);
        let whole = self.parts[t.parts.clone()]
            .iter()
            .all(|p| whole(&self.slots, p));
        (unasked <= self.waste && whole).then_some(unasked)
    }

    /// Lets the first plan go: nothing more is sent from it.
    fn drop_plan(&mut self) {
        self.later = Vec::new().into_iter();
        self.parts = Vec::new();
    }

    /// The reads still held, for the re-plan; nothing more goes from the first plan. They
    /// are collected into the slots' own buffer: `filter_map` collects in place (`flatten`
    /// does not), so the batch's reads are not copied.
    fn take(&mut self) -> Vec<Read> {
        // The first plan goes now (nothing more is sent from it), not after the re-plan that
        // takes its place.
        self.drop_plan();
        #[allow(clippy::filter_map_identity)]
        std::mem::take(&mut self.slots)
            .into_iter()
            .filter_map(|r| r)
            .collect()
    }
}

/// Whether part `p` is a whole read still in `slots` (not a piece of a split one).
fn whole(slots: &[Option<Read>], p: &Part) -> bool {
    p.skip == 0
        && slots[p.index]
            .as_ref()
            .is_some_and(|r| r.length == p.length)
}

/// Turns planned transfers into work, taking each read from `slots` (a read split into
/// pieces once, into the destination its pieces share); a wave's tickets are the caller's.
fn work(slots: &mut [Option<Read>], transfers: Vec<Transfer>, parts: &[Part]) -> Vec<Work> {
    let mut split: HashMap<usize, (Arc<SplitRead>, Locator, Pinned)> = HashMap::new();
    let mut out = Vec::with_capacity(transfers.len());
    for t in transfers {
        // An empty `If-Match` is no condition.
        let of = |r: &Read| {
            (
                r.locator.clone(),
                r.pin.clone().filter(|p| p.if_match() != Some("")),
            )
        };
        let (locator, pin) = match (&slots[t.index], split.get(&t.index)) {
            (Some(r), _) => of(r),
            (None, Some((_, l, p))) => (l.clone(), p.clone()),
            (None, None) => unreachable!("a transfer's read is planned once"),
        };
        let mut reads = Vec::with_capacity(t.parts.len());
        let mut pieces = Vec::new();
        for p in &parts[t.parts] {
            if whole(slots, p) {
                let read = slots[p.index].take().expect("a read is planned once");
                reads.push(PartRead {
                    offset: p.offset,
                    length: p.length,
                    tag: read.tag,
                    dest: read.dest,
                });
                continue;
            }
            let (read, _, _) = split.entry(p.index).or_insert_with(|| {
                let read = slots[p.index].take().expect("a split read is taken once");
                let (l, pin) = of(&read);
                let start = p.offset - p.skip;
                (
                    SplitRead::new(read.tag, start, read.length, read.dest),
                    l,
                    pin,
                )
            });
            pieces.push(read.add_piece(p.offset, p.length, p.skip));
        }
        out.push(Work {
            locator,
            offset: t.offset,
            length: t.length,
            parts: reads,
            pieces,
            wave: None,
            pin,
            access: Default::default(),
        });
    }
    out
}

/// Tags become input positions, so buffers can be returned in input order.
fn positional(reads: Vec<Read>) -> Vec<Read> {
    reads
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.tag(i as u64))
        .collect()
}

/// The reads pinned to the version `info` names; `Precondition` when it has no strong ETag
/// (a replaced object without one cannot be read from one version).
fn pin(locator: &Locator, reads: Vec<Read>, info: ObjectInfo) -> Result<Vec<Read>> {
    let Some(etag) = info.etag else {
        return Err(Error::new(
            Status::Precondition,
            format!(
                "{}: the object changed during the read and has no strong ETag to pin it",
                locator.display()
            ),
        ));
    };
    Ok(reads.into_iter().map(|r| r.if_match(&etag)).collect())
}

/// Two answers of one `get_ranges` showed two versions of the object.
struct Mixed;

/// The completions of a `get_ranges` batch, in input order, and whether their answers
/// agree on one version.
struct Ranged {
    out: Vec<Bytes>,
    first_error: Option<Error>,
    etag: Option<String>,
    mixed: bool,
}

impl Ranged {
    fn new(n: usize) -> Ranged {
        Ranged {
            out: vec![Bytes::new(); n],
            first_error: None,
            etag: None,
            mixed: false,
        }
    }

    fn add(&mut self, mut done: Completion) {
        if let Some(tag) = done.etag.take() {
            match &self.etag {
                Some(seen) => self.mixed |= *seen != tag,
                None => self.etag = Some(tag),
            }
        }
        collect(done, &mut self.out, &mut self.first_error);
    }

    /// The bytes or the first failure; `Mixed` when the answers showed two versions.
    fn finish(self) -> std::result::Result<Result<Vec<Bytes>>, Mixed> {
        match (self.first_error, self.mixed) {
            (Some(e), _) => Ok(Err(e)),
            (None, true) => Err(Mixed),
            (None, false) => Ok(Ok(self.out)),
        }
    }
}

/// Drains a batch whose tags are input positions.
fn drain<T: Clone + From<Vec<u8>>>(batch: &Batch, n: usize) -> Result<Vec<T>> {
    let mut out = vec![T::from(Vec::new()); n];
    let mut first_error = None;
    for done in batch {
        collect(done, &mut out, &mut first_error);
    }
    first_error.map_or(Ok(out), Err)
}

/// Puts a completion's buffer at its position (moved: a `Bytes` takes the vector as is).
fn collect<T: From<Vec<u8>>>(done: Completion, out: &mut [T], first_error: &mut Option<Error>) {
    let i = done.tag as usize;
    match done.result {
        Ok(()) => out[i] = T::from(done.buffer.unwrap_or_default()),
        Err(e) => {
            first_error.get_or_insert(e);
        }
    }
}
