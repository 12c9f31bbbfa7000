//! Remote IO loops: `KARU_IO_THREADS` threads, each with a single-threaded tokio runtime and
//! its own HTTP client (connection pool). One pending queue feeds them; a loop takes work only
//! while the client's running transfers are below `KARU_CONCURRENCY`, so a million queued
//! reads are a million small queue entries, not a million futures, sockets or buffers.
//! One-off jobs (probes, a download's stream) go to the least busy loop and do not wait for
//! room; a probe's exchanges do pass their endpoint's gate ([`Gates`]).
//!
//! A loop takes work while it runs fewer transfers than its share of `KARU_CONCURRENCY` (so
//! each keeps a steady set of connections), and beyond its share while the bytes it has in
//! flight are below [`PACK`]: transfers whose cost is the request and not its bytes then
//! share the first loop, where one wake-up serves many answers, instead of waking every loop
//! for a few each. Before either, a loop with an idle pooled connection takes the
//! next transfer, so the loops together keep about `KARU_CONCURRENCY` connections.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::credentials::{CredentialStage, Lookups, Resolver, Scope};
use super::cut::{self, Cutter};
use super::exchange::{Env, RangeRead};
use super::gate::{Admit, Admitted, Gate};
use super::link::{self, LinkTable, Meter};
use super::parts::Parts;
use super::pending::{self, Next, Pending};
use super::{Work, exchange};
use crate::backends;
use crate::batch::{Completion, Counters, Shared};
use crate::config::Settings;
use crate::credentials::{Auth, CredentialCache, CredentialHttp, Resolved};
use crate::error::{Error, Result, Status};
use crate::locator::Locator;
use crate::transport::{HttpClient, POOL_IDLE_TIMEOUT, Transport, TransportOptions};

/// Threads that resolve credentials for signed backends.
const CREDENTIAL_WORKERS: usize = 4;

/// Bytes in flight below which a loop takes work beyond its share: transfers averaging under
/// 256 KiB at a concurrency of 64 (short reads, H's 61 KB chunks, R's merged transfers) all
/// share the first loop, where one wake-up serves many answers; only longer bodies, whose
/// copying is the work, spread over the loops. With 512 KiB, R's merged transfers woke four
/// loops, one answer each, on a server that answers slowly: on s3s-fs (10 alternating runs)
/// 0.52 CPU s and 1.09 s against 0.40 and 0.95 with 16 MiB, and R at RTT 0 on the test kit
/// server 162 ms against 135; no cell of R, S, C, H or E on the three servers ran slower
/// beyond its spread. (A loop that took more once opened connections the other loops held
/// idle, and H at gap 0 ran 20 % slower; loops now prefer idle connections, see `packer`.)
const PACK: u64 = 16 << 20;

/// A probe or other one-off job run on a loop: builds its future there.
type Task = Box<dyn FnOnce(Rc<LoopState>) + Send>;

/// What one loop owns.
pub(crate) struct LoopState {
    pub(crate) client: HttpClient,
    pub(crate) settings: Settings,
    seen: RefCell<HashSet<u64>>,
    rng: RefCell<fastrand::Rng>,
    lookups: Lookups,
    profiles: backends::Profiles,
    /// The client's link estimates, which every exchange feeds.
    links: Arc<LinkTable>,
    /// The client's endpoint gates, which a probe's exchanges pass.
    gates: Gates,
}

impl LoopState {
    /// The attempt loop's environment, for a batch or (without one) for a probe.
    pub(crate) fn env<'a>(&'a self, batch: Option<&'a Shared>) -> Env<'a> {
        Env {
            client: &self.client,
            settings: &self.settings,
            counters: batch.map(|b| &b.counters),
            batch,
            seen: &self.seen,
            rng: &self.rng,
            lookups: &self.lookups,
            profiles: &self.profiles,
            meter: Meter::new(Some(&self.links)),
            gates: None,
        }
    }

    /// [`env`](LoopState::env) for a probe: each exchange first passes its endpoint's gate,
    /// as a batch's small transfer does, so that a short link is not given a connection per
    /// probe (64 `read_ends` at once opened 128 connections to a loopback server).
    pub(crate) fn probe_env<'a>(&'a self, counters: Option<&'a Shared>) -> Env<'a> {
        Env {
            gates: Some(&self.gates),
            ..self.env(counters)
        }
    }
}

/// The client's endpoint gates, as a probe's exchange meets them.
pub(crate) struct Gates(Arc<Inner>);

impl Gates {
    /// Waits until `locator`'s gate lets a probe go (see [`Gate::enter_probe`]).
    pub(crate) async fn enter(&self, locator: &Locator) -> Entry {
        let inner = &self.0;
        let Some(gate) = inner.gate(locator) else {
            return Entry::default();
        };
        // Counted as waiting before it first asks, so an end after that tells it.
        let _waiting = Waiting::new(&inner.probes_waiting);
        loop {
            // Listening before asking, so an end in between is not missed.
            let ended = inner.ended.notified();
            let mut ended = std::pin::pin!(ended);
            ended.as_mut().enable();
            match gate.enter_probe(Instant::now()) {
                None => return Entry(Some(Pass::Uncounted(gate))),
                Some(Admit::Yes) => {
                    let admitted = Admitted::new(gate, false);
                    return Entry(Some(Pass::Counted(admitted, Arc::clone(inner))));
                }
                Some(Admit::No) => ended.await,
                Some(Admit::Until(at)) => {
                    tokio::select! {
                        () = ended => {}
                        () = tokio::time::sleep_until(at.into()) => {}
                    }
                }
            }
        }
    }
}

/// A probe counted among those waiting at a gate while it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Waiting<'a> {
        count.fetch_add(1, Ordering::SeqCst);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A probe's exchange's pass through its gate (none where the endpoint has no gate), given
/// back when dropped.
#[derive(Default)]
pub(crate) struct Entry(Option<Pass>);

/// How a gate let a probe go.
enum Pass {
    /// Uncounted, where the gate is open: its answer may still show a short round trip.
    Uncounted(Arc<Gate>),
    /// Admitted as a small transfer.
    Counted(Admitted, Arc<Inner>),
}

impl Entry {
    /// The answer to the request that went out at `sent` arrived: its round trip tells the
    /// gate as a transfer's first byte does.
    pub(crate) fn answered(&mut self, sent: Option<Instant>) {
        match (&mut self.0, sent) {
            (Some(Pass::Counted(admitted, _)), _) => admitted.received(0, sent),
            (Some(Pass::Uncounted(gate)), Some(sent)) => gate.first_byte(sent, Instant::now()),
            _ => {}
        }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        if let Some(Pass::Counted(admitted, inner)) = self.0.take() {
            // The gate learns the end first; then whoever waits for it asks again: probes,
            // and the loop whose transfers it held.
            drop(admitted);
            inner.tell_probes();
            inner.wake_packer();
        }
    }
}

struct Slot {
    /// Transfers running on this loop.
    active: AtomicUsize,
    /// Most transfers this loop ran at once: about the connections its pool keeps, so
    /// `active` below it means a pooled connection is idle.
    peak: AtomicUsize,
    /// When its last transfer ended, in nanoseconds since [`Inner::epoch`]: its idle
    /// connections went idle then or before, so the pool has closed them once
    /// [`POOL_IDLE_TIMEOUT`] has passed since.
    ended: AtomicU64,
    /// This loop's share of the client's concurrency.
    share: usize,
    /// The bytes its transfers were planned to fetch.
    bytes: AtomicU64,
    wake: Notify,
    tasks: Mutex<Vec<Task>>,
    /// Jobs given to this loop and not yet ended (probes, a download's stream).
    jobs: AtomicUsize,
}

struct Inner {
    pending: Mutex<Pending>,
    slots: Vec<Slot>,
    /// Transfers running on all loops, and the most that may (`KARU_CONCURRENCY`).
    running: AtomicUsize,
    concurrency: usize,
    shutdown: AtomicBool,
    settings: Settings,
    /// Admission per endpoint (see [`super::gate`]).
    gates: Mutex<HashMap<String, Arc<Gate>>>,
    /// Told when a transfer or a gated probe ends while probes wait (see [`Gates::enter`]).
    ended: Notify,
    /// Probes waiting at a gate.
    probes_waiting: AtomicUsize,
    /// What the loops' `ended` times count from.
    epoch: Instant,
}

impl Inner {
    /// Idle loops with the shares of [`Settings::loop_shares`], and an empty queue.
    fn new(settings: &Settings) -> Inner {
        Inner {
            pending: Mutex::new(Pending::default()),
            slots: settings
                .loop_shares()
                .iter()
                .map(|&share| Slot {
                    active: AtomicUsize::new(0),
                    peak: AtomicUsize::new(0),
                    ended: AtomicU64::new(0),
                    share: share as usize,
                    bytes: AtomicU64::new(0),
                    wake: Notify::new(),
                    tasks: Mutex::new(Vec::new()),
                    jobs: AtomicUsize::new(0),
                })
                .collect(),
            running: AtomicUsize::new(0),
            concurrency: settings.concurrency().max(1) as usize,
            shutdown: AtomicBool::new(false),
            settings: settings.clone(),
            gates: Mutex::new(HashMap::new()),
            ended: Notify::new(),
            probes_waiting: AtomicUsize::new(0),
            epoch: Instant::now(),
        }
    }

    fn pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The gate of the endpoint `locator`'s requests go to.
    fn gate(&self, locator: &Locator) -> Option<Arc<Gate>> {
        let endpoint = link::locator_endpoint(&self.settings, locator)?;
        let mut gates = self.gates.lock().unwrap_or_else(|e| e.into_inner());
        let gate = gates
            .entry(endpoint)
            .or_insert_with(|| Arc::new(Gate::new(self.settings.concurrency())));
        Some(Arc::clone(gate))
    }

    /// Queues transfers and wakes the loop that takes them first (see [`Inner::packs`]).
    fn enqueue(&self, batch: &Arc<Shared>, work: Vec<Work>) {
        if work.is_empty() {
            return;
        }
        // Gates are found before the queue's lock is taken, once per run of transfers to one
        // object: finding an endpoint prepares a request (0.4–0.7 µs measured, where a
        // transfer costs the client tens of µs), and a list for many small reads is one
        // transfer per read, mostly of one object.
        let gates = (!batch.paces_itself()).then(|| {
            let mut last: Option<(&Locator, Option<Arc<Gate>>)> = None;
            work.iter()
                .map(|w| match &last {
                    Some((locator, gate)) if *locator == &w.locator => gate.clone(),
                    _ => {
                        let gate = self.gate(&w.locator);
                        last = Some((&w.locator, gate.clone()));
                        gate
                    }
                })
                .collect()
        });
        self.pending().push(batch, work, gates);
        self.wake_packer();
    }

    /// The loop the next transfer goes to. A loop with an idle pooled connection goes
    /// first, preferring one that [packs](Inner::packs) the transfer; only when no loop has
    /// one does the first that packs open a connection. So the loops hold about as many
    /// connections as the client's concurrency: on R at 1 Gbit/s, where a few longer merged
    /// bodies push the first loop past [`PACK`], loops that opened connections of their own
    /// while the first kept its idle ones held 137-172 against 64. None when no loop packs
    /// and none has an idle connection.
    fn packer(&self) -> Option<usize> {
        let loops = 0..self.slots.len();
        let mut idle = loops.clone().filter(|&i| self.idle(i));
        let first = idle.next();
        first
            .filter(|&i| self.packs(i))
            .or_else(|| idle.find(|&i| self.packs(i)))
            .or(first)
            .or_else(|| loops.clone().find(|&i| self.packs(i)))
    }

    /// Whether loop `index` runs fewer transfers than it ran at its busiest: one of its
    /// pooled connections waits.
    fn idle(&self, index: usize) -> bool {
        self.idle_at(index, || self.epoch.elapsed())
    }

    /// [`Inner::idle`], `now` giving the time since [`Inner::epoch`] (read only when the
    /// loop runs below its peak: this is asked for every transfer taken). Once the pool's
    /// idle timeout has passed since the loop's last transfer ended, its waiting connections
    /// are closed: the loop's peak falls to what it runs, and it is not idle.
    fn idle_at(&self, index: usize, now: impl FnOnce() -> Duration) -> bool {
        let slot = &self.slots[index];
        let active = slot.active.load(Ordering::Acquire);
        let peak = slot.peak.load(Ordering::Acquire);
        if active >= peak {
            return false;
        }
        let ended = Duration::from_nanos(slot.ended.load(Ordering::Acquire));
        if now().saturating_sub(ended) < POOL_IDLE_TIMEOUT {
            return true;
        }
        // A transfer that started meanwhile raised the peak again: it stays.
        let _ = slot
            .peak
            .compare_exchange(peak, active, Ordering::AcqRel, Ordering::Acquire);
        false
    }

    /// Whether loop `index` has room for the next transfer: it runs fewer than its share, or
    /// its bytes in flight are below [`PACK`].
    fn packs(&self, index: usize) -> bool {
        let slot = &self.slots[index];
        slot.active.load(Ordering::Acquire) < slot.share
            || slot.bytes.load(Ordering::Acquire) < PACK
    }

    fn wake_packer(&self) {
        if let Some(i) = self.packer() {
            self.slots[i].wake.notify_one();
        }
    }

    /// Takes one of the client's `KARU_CONCURRENCY` places, if one is free.
    fn reserve(&self) -> bool {
        self.running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.concurrency).then_some(n + 1)
            })
            .is_ok()
    }

    fn release(&self) {
        self.running.fetch_sub(1, Ordering::AcqRel);
    }

    /// Tells the probes waiting at a gate that a transfer or probe left its gate (after it
    /// did), so they ask again. Every transfer's end calls it: the `Notify`'s lock, shared
    /// by the loops, is taken only while a probe waits. A probe counts itself waiting before
    /// it asks its gate, and the gate's lock orders that ask against the leave, so an end
    /// that finds none waiting left before the probe asked, which then saw it.
    fn tell_probes(&self) {
        if self.probes_waiting.load(Ordering::SeqCst) > 0 {
            self.ended.notify_waiters();
        }
    }
}

/// The credential room behind the stage: the engine's cache with the client's settings.
struct CacheResolver {
    cache: CredentialCache,
    settings: Settings,
}

impl Resolver for CacheResolver {
    fn resolve(&self, locator: &Locator, deadline: Option<Instant>) -> Result<Auth> {
        self.cache.resolve(&self.settings, locator, deadline)
    }

    fn invalidate(&self, locator: &Locator, rejected: &Arc<Resolved>) {
        self.cache.invalidate(&self.settings, locator, rejected);
    }

    fn scope(&self, locator: &Locator) -> Option<Scope> {
        CredentialCache::scope(&self.settings, locator)
    }

    fn deadline_from(&self, start: Instant) -> Option<Instant> {
        self.settings.request_timeout().map(|t| start + t)
    }
    fn cached(&self, locator: &Locator) -> Option<Auth> {
        self.cache.cached(&self.settings, locator)
    }
}

/// The remote half of the engine.
pub(crate) struct Remote {
    inner: Arc<Inner>,
    credentials: CredentialStage,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Remote")
    }
}

/// The transport options a client's settings ask for.
fn transport_options(settings: &Settings) -> TransportOptions {
    TransportOptions {
        http_version: settings.http_version(),
        ca_bundle: settings.ca_bundle().map(Into::into),
        ca_path: settings.ca_path().map(Into::into),
        system_ca: settings.discovery(),
        proxy: settings.proxy().map(str::to_owned),
        proxy_credentials: settings.proxy_credentials().map(str::to_owned),
        connect_timeout: settings.connect_timeout(),
        user_agent: settings.user_agent().map(str::to_owned),
        // Any loop may carry all of the client's transfers (short ones share the first).
        pool_max_idle_per_host: settings.concurrency().max(1) as usize,
    }
}

impl Remote {
    /// Starts the loops; `Config` errors (a bad proxy) fail every remote read of the client
    /// (unreadable CA options fail its `https://` reads, when they connect).
    pub(crate) fn start(settings: &Settings, links: &Arc<LinkTable>) -> Result<Remote> {
        let transport = Transport::new(transport_options(settings))?;
        let inner = Arc::new(Inner::new(settings));
        let loops = inner.slots.len();
        let forward = Arc::clone(&inner);
        let resolver = Arc::new(CacheResolver {
            cache: CredentialCache::new(CredentialHttp::new(Arc::clone(&transport))),
            settings: settings.clone(),
        });
        let credentials = CredentialStage::start(
            CREDENTIAL_WORKERS,
            resolver,
            Box::new(move |batch: &Arc<Shared>, run: Vec<Work>| forward.enqueue(batch, run)),
        )?;
        // Every runtime is built before any loop starts, so a failure is this call's error
        // rather than a loop that never serves its queue.
        let runtimes = (0..loops)
            .map(|_| runtime())
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| {
                Error::new(
                    Status::NoMem,
                    format!("cannot build an IO loop runtime: {e}"),
                )
            })?;
        // From here on, dropping `remote` (an early return) stops the loops already started.
        let remote = Remote { inner, credentials };
        for (i, rt) in runtimes.into_iter().enumerate() {
            let inner = Arc::clone(&remote.inner);
            let transport = Arc::clone(&transport);
            let settings = settings.clone();
            let lookups = remote.credentials.lookups();
            let links = Arc::clone(links);
            super::spawn(format!("karu-io-{i}"), move || {
                run_loop(&rt, &inner, i, &transport, settings, lookups, links);
            })?;
        }
        Ok(remote)
    }

    /// The small transfers `endpoint`'s gate lets run at once, if it limits them (see
    /// [`Gate::small_level`]).
    pub(crate) fn small_level(&self, endpoint: &str) -> Option<u32> {
        let gates = self.inner.gates.lock().unwrap_or_else(|e| e.into_inner());
        gates.get(endpoint)?.small_level()
    }

    /// Queues transfers: signed backends through the credential stage, the rest straight
    /// to the loops.
    pub(crate) fn submit(&self, batch: &Arc<Shared>, work: Vec<Work>) {
        let (signed, direct) =
            super::partition(work, |w| backends::needs_credentials(w.locator.backend()));
        self.credentials.submit(batch, signed);
        self.inner.enqueue(batch, direct);
    }

    /// Runs `job` on an IO loop (see [`Remote::spawn`]) and blocks the caller until it is
    /// done.
    pub(crate) fn run<T, F>(&self, job: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Rc<LoopState>) -> Pin<Box<dyn Future<Output = Result<T>>>> + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.spawn(replying(job, move |answer| {
            let _ = tx.send(answer);
        }));
        rx.recv().unwrap_or_else(|_| Err(job_lost()))
    }

    /// The async twin of [`run`](Remote::run): awaits the job without blocking a thread.
    pub(crate) async fn run_async<T, F>(&self, job: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Rc<LoopState>) -> Pin<Box<dyn Future<Output = Result<T>>>> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.spawn(replying(job, move |answer| {
            let _ = tx.send(answer);
        }));
        rx.await.unwrap_or_else(|_| Err(job_lost()))
    }

    /// Starts a job on the least busy loop (running transfers and jobs), so concurrent
    /// probes spread over the loops and their pools; the lowest wins a tie, so a serial
    /// caller's probes and reads share one loop and its connection.
    fn spawn(
        &self,
        job: impl FnOnce(Rc<LoopState>, JobEnded) -> Pin<Box<dyn Future<Output = ()>>> + Send + 'static,
    ) {
        let load = |s: &Slot| s.active.load(Ordering::Acquire) + s.jobs.load(Ordering::Acquire);
        // No loop (none is ever built so): the job is dropped, and its caller gets the
        // error of a job without an answer.
        let Some((index, slot)) = self
            .inner
            .slots
            .iter()
            .enumerate()
            .min_by_key(|(_, s)| load(s))
        else {
            return;
        };
        slot.jobs.fetch_add(1, Ordering::AcqRel);
        // Counted off when the job drops it, or however it ends (a panic unwinds through
        // it, and a job its loop never ran is dropped with it).
        let ended = JobEnded {
            inner: Arc::clone(&self.inner),
            index,
        };
        let task: Task = Box::new(move |state| {
            tokio::task::spawn_local(job(state, ended));
        });
        slot.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(task);
        slot.wake.notify_one();
    }
}

/// The job of [`Remote::run`] and [`Remote::run_async`]: runs `job`, counts itself off its
/// loop, then hands the answer to `reply` (so the caller's next job finds the loop idle).
fn replying<T: 'static>(
    job: impl FnOnce(Rc<LoopState>) -> Pin<Box<dyn Future<Output = Result<T>>>> + Send + 'static,
    reply: impl FnOnce(Result<T>) + Send + 'static,
) -> impl FnOnce(Rc<LoopState>, JobEnded) -> Pin<Box<dyn Future<Output = ()>>> + Send + 'static {
    move |state, ended| {
        Box::pin(async move {
            let answer = job(state).await;
            drop(ended);
            reply(answer);
        })
    }
}

/// Counts a job off its loop when dropped.
struct JobEnded {
    inner: Arc<Inner>,
    index: usize,
}

impl Drop for JobEnded {
    fn drop(&mut self) {
        if let Some(slot) = self.inner.slots.get(self.index) {
            slot.jobs.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A job whose answer never came: it panicked on its loop (tokio ends a panicking task,
/// dropping its reply).
fn job_lost() -> Error {
    Error::new(
        Status::NoMem,
        "internal failure: an IO loop job ended without an answer",
    )
}

/// A current-thread runtime for one loop.
fn runtime() -> std::io::Result<LoopRuntime> {
    #[cfg(test)]
    super::faults::runtime()?;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map(|rt| LoopRuntime(Some(rt)))
}

/// A loop's runtime, built on the thread that starts the engine. It is let go without
/// blocking: when its loop could not start, that thread may be an async task, where a plain
/// drop of a runtime panics.
struct LoopRuntime(Option<tokio::runtime::Runtime>);

impl Drop for LoopRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        // Loops finish queued and running work, then exit.
        self.inner.shutdown.store(true, Ordering::Release);
        for slot in &self.inner.slots {
            slot.wake.notify_one();
        }
    }
}

fn run_loop(
    rt: &LoopRuntime,
    inner: &Arc<Inner>,
    index: usize,
    transport: &Arc<Transport>,
    settings: Settings,
    lookups: Lookups,
    links: Arc<LinkTable>,
) {
    let Some(rt) = &rt.0 else {
        return;
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(rt, async {
        let state = Rc::new(LoopState {
            client: HttpClient::new(transport),
            settings,
            seen: RefCell::new(HashSet::new()),
            rng: RefCell::new(fastrand::Rng::new()),
            lookups,
            profiles: backends::Profiles::default(),
            links,
            gates: Gates(Arc::clone(inner)),
        });
        let here = Here {
            inner: Arc::clone(inner),
            state: Rc::clone(&state),
            index,
        };
        let slot = &inner.slots[index];
        // When this loop's gate timer fires, if one is set.
        let timer = Rc::new(Cell::new(None));
        loop {
            // Work only when woken: producers wake the loop that packs first, so a serial
            // reader stays on one loop and its connection.
            slot.wake.notified().await;
            let tasks = std::mem::take(&mut *slot.tasks.lock().unwrap_or_else(|e| e.into_inner()));
            for task in tasks {
                task(Rc::clone(&state));
            }
            let mut handed_on = false;
            loop {
                if inner.packer() != Some(index) {
                    handed_on = true;
                    break;
                }
                if !inner.reserve() {
                    break; // every place taken: a transfer's end wakes its loop
                }
                // A transfer waits at its endpoint's gate, with what is queued behind it for
                // that endpoint and kind; other work goes past it.
                let picked = pending::next(&mut inner.pending(), Instant::now());
                let (batch, work, admitted) = match picked {
                    Next::Start(batch, work, admitted) => (batch, work, admitted),
                    Next::Wait(at) => {
                        inner.release();
                        if let Some(at) = at {
                            wake_at(inner, index, at, &timer);
                        }
                        break;
                    }
                };
                if batch.is_cancelled() {
                    inner.release();
                    continue; // dropped batch: discard unread
                }
                here.start(batch, work, admitted);
            }
            let backlog = !inner.pending().is_empty();
            if backlog && handed_on {
                // Too much in flight here: the loop that packs next takes what waits.
                inner.wake_packer();
            }
            if inner.shutdown.load(Ordering::Acquire)
                && !backlog
                && slot.active.load(Ordering::Acquire) == 0
            {
                break;
            }
        }
    });
}

/// A loop, as a running transfer sees it: where it starts another (a tail it cut off).
#[derive(Clone)]
struct Here {
    inner: Arc<Inner>,
    state: Rc<LoopState>,
    index: usize,
}

impl Here {
    /// Runs a transfer that holds one of the client's places (taken by `reserve`) on this
    /// loop, and gives the place back when it ends.
    fn start(&self, batch: Arc<Shared>, work: Work, admitted: Option<Admitted>) {
        let slot = &self.inner.slots[self.index];
        let length = work.length;
        let active = slot.active.fetch_add(1, Ordering::AcqRel) + 1;
        slot.peak.fetch_max(active, Ordering::AcqRel);
        slot.bytes.fetch_add(length, Ordering::AcqRel);
        let here = self.clone();
        // Boxed: a transfer's future is large (every stage of the exchange), and the runtime
        // moves a spawned future several times before it first runs; a box makes each move a
        // pointer's instead of a copy of the whole state.
        tokio::task::spawn_local(Box::pin(async move {
            run_transfer(&here, batch, work, admitted).await;
            let inner = &here.inner;
            let slot = &inner.slots[here.index];
            let now = u64::try_from(inner.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
            slot.ended.store(now, Ordering::Release);
            slot.active.fetch_sub(1, Ordering::AcqRel);
            slot.bytes.fetch_sub(length, Ordering::AcqRel);
            inner.release();
            inner.tell_probes();
            slot.wake.notify_one();
        }));
    }

    /// Room for a tail cut off a bulk transfer through `gate`, which nothing else wants: no
    /// transfer is queued, a place is free, and the gate admits one more bulk transfer now.
    fn room(&self, gate: &Arc<Gate>, now: Instant) -> Option<Admitted> {
        let inner = &self.inner;
        if !inner.pending().is_empty() || !inner.reserve() {
            return None;
        }
        if gate.enter(now, true) != Admit::Yes {
            inner.release();
            return None;
        }
        Some(Admitted::new(Arc::clone(gate), true))
    }

    /// Gives back a place [`Remote::room`] found and a tail did not take.
    fn unroom(&self, room: Admitted) {
        drop(room);
        self.inner.release();
    }

    /// The link's total rate to `locator`'s endpoint, if measured.
    fn measured_total(&self, locator: &Locator) -> Option<u64> {
        let state = &self.state;
        link::locator_endpoint(&state.settings, locator)
            .and_then(|endpoint| state.links.total_rate(&endpoint))
    }
}

/// Wakes loop `index` at `at` (a gate that may admit then: see `Admit::Until`), unless its
/// `timer` already wakes it by then: a loop told to wait is woken by every transfer that
/// ends meanwhile, and each would otherwise leave one more timer behind.
fn wake_at(inner: &Arc<Inner>, index: usize, at: Instant, timer: &Rc<Cell<Option<Instant>>>) {
    if timer.get().is_some_and(|t| t <= at) {
        return;
    }
    timer.set(Some(at));
    let inner = Arc::clone(inner);
    let timer = Rc::clone(timer);
    tokio::task::spawn_local(async move {
        tokio::time::sleep_until(at.into()).await;
        // Clears its own claim only: an earlier timer may have replaced it meanwhile.
        if timer.get() == Some(at) {
            timer.set(None);
        }
        inner.slots[index].wake.notify_one();
    });
}

/// Runs one transfer and completes its reads; a panic on the way fails them instead (NOMEM:
/// in a release build the only panics left to reach here are failed allocations).
/// `admitted` is its place at its endpoint's gate, if it has one; a bulk one may cut its
/// unread tail off onto a transfer of its own (see `engine::cut`).
async fn run_transfer(here: &Here, batch: Arc<Shared>, work: Work, mut admitted: Option<Admitted>) {
    let state = &*here.state;
    let Some(busy) = batch.begin() else {
        return;
    };
    let Work {
        locator,
        offset,
        length,
        parts,
        pieces,
        wave,
        pin,
        access,
    } = work;
    let _wave = wave.map(super::wave::Ticket::hold);
    // A whole read's buffer is allocated when its first byte arrives (`Parts`); a split
    // read's when its transfer runs. A read whose buffer cannot be had fails alone (a split
    // read once all its pieces have ended).
    let mut done = Vec::new();
    let mut parts = Parts::new(parts);
    let mut slices = Vec::with_capacity(pieces.len());
    for p in pieces {
        match p.read.prepare() {
            Ok(()) => slices.push(p),
            Err(e) => done.extend(p.finish(&locator, &Err(e.context(locator.display())))),
        }
    }
    // The transfer's last read is handed over with `finish`, after the transfer's counters,
    // so a caller who has drained the batch sees its final stats.
    let mut ended = Vec::new();
    // The last byte to fetch, lowered when the tail is cut off.
    let last = Cell::new(offset + length - 1);
    let mut cutter = admitted
        .as_ref()
        .and_then(Admitted::bulk_gate)
        .filter(|_| batch.planned_by_cost())
        .map(|_| Cutter::default());
    let result = {
        let env = state.env(Some(&batch));
        let sink = |at: u64, data: &[u8], version: Option<&str>| {
            let sent = env.meter.sent_at();
            if let Some(a) = admitted.as_mut() {
                a.received(data.len(), sent);
            }
            parts.write(&locator, at, data, version, &mut ended);
            if !ended.is_empty() && (parts.any_open() || !slices.is_empty()) {
                busy.deliver(ended.drain(..));
            }
            for p in &slices {
                p.write(at, data);
            }
            let (Some(c), Some(gate)) = (
                cutter.as_mut(),
                admitted.as_ref().and_then(Admitted::bulk_gate),
            ) else {
                return;
            };
            if !parts.any_open() && slices.is_empty() {
                return; // only bytes between reads are left
            }
            let end = last.get() + 1;
            let now = Instant::now();
            let got = at..at + data.len() as u64;
            let link = CutLink {
                gate,
                meter: &env.meter,
                here,
                locator: &locator,
                now,
            };
            let Some(cut) = c.look(got, end, sent, now, gate.bulk_bytes(), &link) else {
                return;
            };
            // Places for the tails: a client slot and the gate's admission each.
            let mut rooms = Vec::new();
            while rooms.len() < cut.tails as usize
                && let Some(room) = here.room(gate, now)
            {
                rooms.push(room);
            }
            // Whole reads are cut between reads; pieces of split reads anywhere. The stream
            // keeps its bytes up to the first bound, each tail from its bound to the next.
            let mut bounds: Vec<u64> = u32::try_from(rooms.len())
                .ok()
                .and_then(|n| cut.bounds(n))
                .unwrap_or_default()
                .into_iter()
                .filter_map(|t| match parts.any_open() {
                    true => parts.boundary(t, end),
                    false => Some(t),
                })
                .filter(|&b| end - b >= cut::MIN_TAIL)
                .collect();
            bounds.dedup();
            for unused in rooms.drain(bounds.len()..) {
                here.unroom(unused);
            }
            let Some(&first) = bounds.first() else {
                c.no_room(now);
                return;
            };
            let tails = bounds.len();
            let mut tail_end = end;
            for (bound, room) in bounds.into_iter().rev().zip(rooms.into_iter().rev()) {
                // Pieces from the bound on go to this tail, a piece across it in two.
                let mut pieces = Vec::new();
                for mut p in std::mem::take(&mut slices) {
                    if p.offset >= bound {
                        pieces.push(p);
                    } else {
                        pieces.extend(p.cut(bound));
                        slices.push(p);
                    }
                }
                let tail = Work {
                    locator: locator.clone(),
                    offset: bound,
                    length: tail_end - bound,
                    parts: parts.split_off(bound),
                    pieces,
                    wave: None,
                    pin: pin.clone(),
                    access: access.clone(),
                };
                tail_end = bound;
                Counters::add(&batch.counters.transfers, 1);
                Counters::add(&batch.counters.tails_cut, 1);
                here.start(Arc::clone(&batch), tail, Some(room));
            }
            last.set(first - 1);
            gate.cut(now, tails as u32, cut.rate, cut.together, cut.settle());
        };
        let mut read = RangeRead::new(
            &state.settings,
            offset,
            offset + length - 1,
            pin.as_deref(),
            sink,
        )
        .cut_by(&last);
        let exchange = std::pin::pin!(async {
            #[cfg(test)]
            super::faults::transfer(&locator);
            exchange::run(&env, &locator, &access, &mut read).await
        });
        caught(exchange).await.unwrap_or_else(|panic| {
            Err(Error::new(
                Status::NoMem,
                format!(
                    "{}: internal failure: the transfer panicked ({panic})",
                    locator.display()
                ),
            ))
        })
    };
    // The gate learns this transfer's end before the loop looks for the next.
    drop(admitted);
    let fetched = result.map(|f| (f.end, (f.etag, f.last_modified)));
    // Every read of the transfer came from the answer that gave its last bytes (a split
    // read's pieces all came from one version, or the read failed).
    let etag = fetched
        .as_ref()
        .ok()
        .and_then(|(_, (etag, _))| etag.clone());
    let split: Vec<Completion> = slices
        .into_iter()
        .filter_map(|p| p.finish(&locator, &fetched))
        .collect();
    let whole = parts.finish(&locator, fetched.map(|(end, _)| end));
    done.extend(split.into_iter().chain(whole).map(|c| Completion {
        etag: etag.clone(),
        ..c
    }));
    done.extend(ended);
    Counters::add(&batch.counters.transfers_finished, 1);
    busy.finish(done);
}

/// A bulk transfer's endpoint, as its cutter asks of it (`cut::Link`, see `engine::cut`).
struct CutLink<'a> {
    gate: &'a Gate,
    meter: &'a Meter<'a>,
    here: &'a Here,
    locator: &'a Locator,
    now: Instant,
}

impl cut::Link for CutLink<'_> {
    /// On an open gate (a long round trip) a stream's first byte may hold its connection's
    /// handshake too: its rate is measured over round trips.
    fn rtt(&self) -> Option<Duration> {
        self.gate
            .is_open()
            .then(|| self.meter.round_trip())
            .flatten()
    }

    fn room(&self, rate: f64, together: f64) -> u32 {
        let measured = self.here.measured_total(self.locator);
        self.gate.tails(self.now, rate, together, measured)
    }
}

/// Awaits `fut`, turning a panic while it is polled into `Err` with the panic's message; the
/// caller then drops the future and keeps what it had lent it.
async fn caught<F: Future + Unpin>(mut fut: F) -> std::result::Result<F::Output, String> {
    std::future::poll_fn(|cx| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Pin::new(&mut fut).poll(cx)))
        {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(super::panic_message(&*payload).to_owned())),
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// The loop a job ran on, once `release` (if any) lets it end.
    async fn loop_of(
        remote: &Remote,
        started: Arc<Notify>,
        release: Option<Arc<Notify>>,
    ) -> String {
        remote
            .run_async(move |_| {
                Box::pin(async move {
                    let name = std::thread::current().name().unwrap_or("").to_owned();
                    started.notify_one();
                    if let Some(release) = release {
                        release.notified().await;
                    }
                    Ok(name)
                })
            })
            .await
            .unwrap()
    }

    /// [`PACK`] in the KiB that [`loaded`] takes.
    const PACK_KIB: u64 = PACK >> 10;

    /// An engine's bookkeeping with loops of share 2, each running `(transfers, KiB)`.
    fn loaded(loads: &[(usize, u64)]) -> Inner {
        let mut config = Config::empty();
        let loops = loads.len().to_string();
        let concurrency = (2 * loads.len()).to_string();
        config.set("KARU_IO_THREADS", Some(&loops)).unwrap();
        config.set("KARU_CONCURRENCY", Some(&concurrency)).unwrap();
        let inner = Inner::new(&config.freeze().unwrap());
        for (slot, &(n, kib)) in inner.slots.iter().zip(loads) {
            slot.active.store(n, Ordering::Release);
            slot.bytes.store(kib << 10, Ordering::Release);
        }
        inner
    }

    #[test]
    fn short_transfers_pack_onto_the_first_loop_and_long_ones_fill_the_shares() {
        // Idle: the first loop takes the next transfer.
        assert_eq!(loaded(&[(0, 0), (0, 0)]).packer(), Some(0));
        // Past its share with short transfers (under PACK in flight): still the first.
        let short = loaded(&[(40, 160), (0, 0)]);
        assert!(short.packs(0));
        assert_eq!(short.packer(), Some(0));
        // Past its share with long ones: the next loop with room.
        let long = loaded(&[(2, PACK_KIB), (1, 2 * PACK_KIB)]);
        assert!(!long.packs(0) && long.packs(1));
        assert_eq!(long.packer(), Some(1));
        // Within its share, a loop takes work whatever it carries.
        assert!(loaded(&[(1, 4 * PACK_KIB)]).packs(0));
        // Every loop past its share and PACK: none.
        assert_eq!(loaded(&[(2, PACK_KIB), (3, PACK_KIB)]).packer(), None);
    }

    #[test]
    fn a_loop_with_an_idle_connection_goes_before_one_that_would_open_one() {
        let peaks = |inner: Inner, peaks: &[usize]| {
            for (slot, &p) in inner.slots.iter().zip(peaks) {
                slot.peak.store(p, Ordering::Release);
            }
            inner
        };
        // The first loop is past its share and PACK but ran 5 at once: it takes the next
        // rather than the second loop opening a connection.
        let first = peaks(loaded(&[(3, PACK_KIB), (0, 0)]), &[5, 0]);
        assert!(first.idle(0) && !first.packs(0) && first.packs(1));
        assert_eq!(first.packer(), Some(0));
        // Of the loops with an idle connection, one that packs goes first.
        let both = peaks(
            loaded(&[(3, PACK_KIB), (1, 2 * PACK_KIB), (2, 100)]),
            &[5, 2, 4],
        );
        assert_eq!(both.packer(), Some(1));
        // No idle connection anywhere: the first that packs opens one.
        let none = peaks(loaded(&[(3, PACK_KIB), (1, 2 * PACK_KIB)]), &[3, 1]);
        assert_eq!(none.packer(), Some(1));
        // The pool's idle timeout passed since the first loop's last transfer ended: its
        // waiting connections are closed, its peak falls to what it runs, and the loop
        // that packs opens the connection.
        let stale = peaks(loaded(&[(3, PACK_KIB), (0, 0)]), &[5, 0]);
        stale.slots[0].ended.store(1_000_000_000, Ordering::Release);
        let within = Duration::from_secs(1) + POOL_IDLE_TIMEOUT / 2;
        assert!(stale.idle_at(0, || within));
        assert!(!stale.idle_at(0, || Duration::from_secs(1) + POOL_IDLE_TIMEOUT));
        assert_eq!(stale.slots[0].peak.load(Ordering::Acquire), 3);
        assert_eq!(stale.packer(), Some(1));
    }

    /// Whether `f` is still pending when polled once.
    async fn pending<F: Future + Unpin>(f: &mut F) -> bool {
        std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *f).poll(cx).is_pending())).await
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_probe_waits_at_its_gate_until_a_transfer_ends_or_the_gate_opens() {
        let inner = Arc::new(loaded(&[(0, 0)]));
        let gates = Gates(Arc::clone(&inner));
        let object = Locator::parse("http://127.0.0.1:1/probe.bin").unwrap();
        let gate = inner.gate(&object).unwrap();
        // Cold: the small transfers of a batch fill the gate's level (2, the client's
        // ceiling), so the probe waits.
        let t0 = Instant::now();
        let mut batch: Vec<Admitted> = (0..2)
            .map(|_| {
                assert_eq!(gate.enter(t0, false), Admit::Yes);
                Admitted::new(Arc::clone(&gate), false)
            })
            .collect();
        batch[0].received(10, Some(t0)); // a short round trip: the gate stays shut
        let probe = gates.enter(&object);
        let mut probe = std::pin::pin!(probe);
        assert!(pending(&mut probe).await);
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(pending(&mut probe).await, "no end yet");
        // A transfer ends (its loop tells the probes): the probe takes its slot.
        drop(batch.pop());
        inner.tell_probes();
        let mut entry = probe.await;
        assert!(entry.0.is_some(), "counted at its gate");
        entry.answered(Some(Instant::now()));
        drop(entry);
        // A gate opened by a long round trip lets probes go at once, uncounted.
        let far = Locator::parse("http://127.0.0.2:1/far.bin").unwrap();
        let far_gate = inner.gate(&far).unwrap();
        let earlier = Instant::now()
            .checked_sub(Duration::from_millis(3))
            .unwrap();
        assert_eq!(far_gate.enter(earlier, false), Admit::Yes);
        let mut entries = Vec::new();
        for _ in 0..4 {
            let entry = gates.enter(&far).await;
            assert!(matches!(entry.0, Some(Pass::Uncounted(_))));
            entries.push(entry);
        }
        // An uncounted probe answered at once: the round trip is short after all (the late
        // first byte was a busy machine's), and the next probe is counted again.
        entries[0].answered(Some(Instant::now()));
        assert!(matches!(gates.enter(&far).await.0, Some(Pass::Counted(..))));
    }

    #[test]
    fn places_are_the_clients_concurrency_across_loops() {
        let inner = loaded(&[(0, 0)]);
        assert!(inner.reserve() && inner.reserve());
        assert!(!inner.reserve(), "a third transfer over a concurrency of 2");
        inner.release();
        assert!(inner.reserve());
    }

    #[test]
    fn jobs_go_to_the_least_busy_loop_and_serial_ones_to_the_first() {
        let mut config = Config::empty();
        config.set("KARU_IO_THREADS", Some("4")).unwrap();
        let remote = Remote::start(&config.freeze().unwrap(), &Arc::default()).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let started = Arc::new(Notify::new());
            // One after another: each finds every loop idle and takes the first.
            for _ in 0..3 {
                let name = loop_of(&remote, Arc::clone(&started), None).await;
                assert_eq!(name, "karu-io-0");
            }
            // While a job holds the first loop, the next one goes to the second.
            // A fresh signal: the one above holds a permit from the serial jobs.
            let started = Arc::new(Notify::new());
            let release = Arc::new(Notify::new());
            let held = loop_of(&remote, Arc::clone(&started), Some(Arc::clone(&release)));
            let mut held = std::pin::pin!(held);
            tokio::select! {
                _ = &mut held => unreachable!("the held job waits for its release"),
                () = started.notified() => {}
            }
            let other = loop_of(&remote, Arc::clone(&started), None).await;
            assert_eq!(other, "karu-io-1");
            release.notify_one();
            assert_eq!(held.await, "karu-io-0");
        });
    }
}
