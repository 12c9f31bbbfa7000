//! Batches: one completion per read, from a queue that several threads (or tasks) may drain.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::error::{Error, Status};
use crate::plan::CostModel;

/// The finished read: its tag, its status, how many bytes at the start of its buffer are
/// defined, and the buffer itself when it was owned (karu's or a moved-in vector).
///
/// On success `got` equals the requested length. On failure `got` is 0, except for a
/// `Range` failure where the object ends inside the read: `got` is then the valid prefix.
///
/// ```
/// # let path = std::env::temp_dir().join(format!("karu-doc-completion-{}.bin", std::process::id()));
/// # std::fs::write(&path, b"0123456789").unwrap();
/// let client = karu::Client::new(&karu::Config::empty())?;
/// let object = karu::Locator::parse(path.to_str().unwrap())?;
/// let batch = client.submit(vec![karu::Read::new(&object, 8, 4).tag(5)])?;
/// let done = batch.next().unwrap();
/// assert_eq!(done.tag, 5);
/// assert_eq!(done.status(), karu::Status::Range); // the file ends inside the read
/// assert_eq!(done.got, 2);
/// assert_eq!(done.bytes(), b"89");               // the valid prefix
/// assert!(done.into_result().is_err());
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Completion {
    /// The tag given to [`Read::tag`](crate::Read::tag).
    pub tag: u64,
    /// `Ok` or the read's own error.
    pub result: Result<(), Error>,
    /// Defined bytes at the start of the buffer.
    pub got: u64,
    /// The owned destination: the read's bytes on success; a failed read's holds its `got`
    /// defined bytes and may end after them (`None` for borrowed or raw destinations, and
    /// for reads that failed before any buffer was allocated).
    pub buffer: Option<Vec<u8>>,
    /// The strong ETag of the answer the bytes came from (remote reads; `None` for local
    /// files and for answers with a weak or no ETag): reads whose tags agree come from one
    /// version.
    pub etag: Option<String>,
}

impl Completion {
    /// The defined bytes (`got` of them); empty for borrowed destinations.
    pub fn bytes(&self) -> &[u8] {
        match &self.buffer {
            Some(b) => &b[..(self.got as usize).min(b.len())],
            None => &[],
        }
    }

    /// The status: `Ok` or the error's status.
    pub fn status(&self) -> Status {
        match &self.result {
            Ok(()) => Status::Ok,
            Err(e) => e.status(),
        }
    }

    /// The buffer on success, the error otherwise.
    pub fn into_result(self) -> Result<Vec<u8>, Error> {
        self.result.map(|()| self.buffer.unwrap_or_default())
    }

    /// The buffer as [`Bytes`] on success, the error otherwise. The vector karu filled
    /// becomes the `Bytes` itself: no copy.
    pub fn into_bytes(self) -> Result<Bytes, Error> {
        self.into_result().map(Bytes::from)
    }
}

/// The nine counters of a batch (`karu_batch_stats`), read independently.
///
/// ```
/// # let path = std::env::temp_dir().join(format!("karu-doc-stats-{}.bin", std::process::id()));
/// # std::fs::write(&path, vec![1u8; 1000]).unwrap();
/// let client = karu::Client::new(&karu::Config::empty())?;
/// let object = karu::Locator::parse(path.to_str().unwrap())?;
/// let batch = client.submit(vec![
///     karu::Read::new(&object, 0, 100),
///     karu::Read::new(&object, 500, 200),
/// ])?;
/// for done in &batch {
///     assert_eq!(done.status(), karu::Status::Ok);
/// }
/// let stats = batch.stats();
/// assert_eq!(stats.requested_bytes, 300);
/// assert_eq!(stats.transfers_finished, stats.transfers);
/// assert_eq!((stats.retries, stats.new_connections), (0, 0)); // local: no network
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchStats {
    /// Transfers left after coalescing.
    pub transfers: u64,
    /// Transfers completed.
    pub transfers_finished: u64,
    /// Sum of valid request lengths.
    pub requested_bytes: u64,
    /// Local bytes read plus accepted 2xx body bytes (gaps, skipped prefixes and retries
    /// included; error bodies excluded).
    pub received_bytes: u64,
    /// Ordinary retries.
    pub retries: u64,
    /// Attempts answered with HTTP 429 or 503.
    pub throttled: u64,
    /// Connections opened rather than reused.
    pub new_connections: u64,
    /// Retries that kept more bytes of a partial body.
    pub resumed: u64,
    /// Credential refreshes triggered by an authentication failure.
    pub credential_refreshes: u64,
    /// Transfers that handed the unread end of their range to a new transfer once their
    /// stream proved slower than the link (each new transfer also counts in `transfers`).
    pub tails_cut: u64,
    /// The link the plan assumed (`KARU_COALESCE_MODE=cost`, the default, with remote
    /// reads; after a first wave, the link the rest was planned for); `None` for a guards
    /// plan.
    pub assumed: Option<CostModel>,
}

impl std::fmt::Display for BatchStats {
    /// One line of `name=value` pairs, in the C struct's field order, then the tails cut and
    /// the link the plan assumed, if any.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "transfers={} transfers_finished={} requested_bytes={} received_bytes={} retries={} \
             throttled={} new_connections={} resumed={} credential_refreshes={} tails_cut={}",
            self.transfers,
            self.transfers_finished,
            self.requested_bytes,
            self.received_bytes,
            self.retries,
            self.throttled,
            self.new_connections,
            self.resumed,
            self.credential_refreshes,
            self.tails_cut
        )?;
        if let Some(m) = &self.assumed {
            write!(
                f,
                " assumed_rtt_us={} assumed_per_request_us={} assumed_connection_rate={} \
                 assumed_total_rate={} assumed_concurrency={}",
                m.rtt.as_micros(),
                m.per_request.as_micros(),
                m.connection_rate,
                m.total_rate,
                m.concurrency
            )?;
        }
        Ok(())
    }
}

/// Atomic twins of [`BatchStats`], updated by the engine.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) transfers: AtomicU64,
    pub(crate) transfers_finished: AtomicU64,
    pub(crate) requested_bytes: AtomicU64,
    pub(crate) received_bytes: AtomicU64,
    pub(crate) retries: AtomicU64,
    pub(crate) throttled: AtomicU64,
    pub(crate) new_connections: AtomicU64,
    pub(crate) resumed: AtomicU64,
    pub(crate) credential_refreshes: AtomicU64,
    pub(crate) tails_cut: AtomicU64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn snapshot(&self, assumed: Option<CostModel>) -> BatchStats {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        BatchStats {
            transfers: r(&self.transfers),
            transfers_finished: r(&self.transfers_finished),
            requested_bytes: r(&self.requested_bytes),
            received_bytes: r(&self.received_bytes),
            retries: r(&self.retries),
            throttled: r(&self.throttled),
            new_connections: r(&self.new_connections),
            resumed: r(&self.resumed),
            credential_refreshes: r(&self.credential_refreshes),
            tails_cut: r(&self.tails_cut),
            assumed,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    ready: VecDeque<Completion>,
    /// Reads not yet completed.
    pending: usize,
    /// Workers currently holding this batch's destinations.
    busy: usize,
    wakers: Vec<Waker>,
    /// Threads blocked on `ready` and on `idle`: a condvar is notified only when one
    /// waits, since every notify is a system call and workers release once per transfer.
    waiting: usize,
    waiting_idle: usize,
}

/// The wakers of remote work awaiting cancellation, one slot per live [`Cancelled`] future,
/// freed when that future is dropped: a finished transfer leaves nothing behind.
#[derive(Debug, Default)]
struct CancelWakers {
    slots: Vec<Option<Waker>>,
    free: Vec<usize>,
}

impl CancelWakers {
    fn insert(&mut self, waker: Waker) -> usize {
        match self.free.pop() {
            Some(key) => {
                self.slots[key] = Some(waker);
                key
            }
            None => {
                self.slots.push(Some(waker));
                self.slots.len() - 1
            }
        }
    }

    fn remove(&mut self, key: usize) {
        if let Some(slot) = self.slots.get_mut(key)
            && slot.take().is_some()
        {
            self.free.push(key);
        }
    }
}

/// Completions a batch that paces itself may hold before its transfers stop reading: none,
/// so a download chunk in flight holds the sub-read being filled and at most one written
/// next. Without a bound a consumer that fell behind (a burst of window-bound streams, or a
/// server's bursts, arriving faster than one thread writes them) let the chunks' buffers
/// pile up: 22-53 MiB of peak RSS for a split 256 MiB download against 9 for one stream. A
/// bound of four sub-reads per chunk gave 17-18 MiB, one 15, none 14, with the same walls:
/// the consumer still has a completion of every other chunk to write meanwhile.
const PACED_BACKLOG: usize = 0;

/// What the engine shares with a batch: the completion queue, counters and cancellation.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Signalled when a completion arrives or the batch ends.
    ready: Condvar,
    /// Signalled when the last busy worker lets go of the batch.
    idle: Condvar,
    cancelled: AtomicBool,
    /// Remote work to wake on cancellation (its own lock: completions never wait for it).
    cancel_wakers: Mutex<CancelWakers>,
    /// Some destination is caller memory (a raw buffer): dropping the batch must wait until
    /// no worker writes it. Owned buffers need no wait: the workers free them.
    raw: bool,
    /// Unique per batch, so per-batch caches never confuse two batches.
    pub(crate) id: u64,
    pub(crate) counters: Counters,
    /// Regions learnt by S3 region correction, per canonical identity, for the batch's
    /// later transfers (spec §5.5).
    regions: Mutex<HashMap<String, String>>,
    /// Set for download chunks, whose window paces throttled retries itself: a 429 or 503
    /// then ends the exchange at once instead of waiting inside it.
    hand_back: AtomicBool,
    /// The `Retry-After` of a throttled answer handed back (`Some(None)` without one).
    handed: Mutex<Option<Option<Duration>>>,
    /// Signalled when the consumer takes a completion of a batch that paces itself, whose
    /// transfers wait for room (see [`Shared::room`]).
    consumed: tokio::sync::Notify,
    /// The link the plan assumed, for the stats.
    assumed: Mutex<Option<CostModel>>,
}

impl Shared {
    /// A batch of `pending` reads; `raw` when any of them writes caller memory.
    pub(crate) fn new(pending: usize, raw: bool) -> Arc<Shared> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let shared = Shared {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            raw,
            ..Shared::default()
        };
        shared.lock().pending = pending;
        Arc::new(shared)
    }

    /// The region a transfer of this batch learnt for `identity`.
    pub(crate) fn region(&self, identity: &str) -> Option<String> {
        let regions = self.regions.lock().unwrap_or_else(|e| e.into_inner());
        regions.get(identity).cloned()
    }

    /// Remembers a corrected region for the batch's later transfers of `identity`.
    pub(crate) fn remember_region(&self, identity: &str, region: &str) {
        let mut regions = self.regions.lock().unwrap_or_else(|e| e.into_inner());
        regions.insert(identity.to_owned(), region.to_owned());
    }

    /// Records the link the batch's plan assumed.
    pub(crate) fn assume(&self, model: Option<CostModel>) {
        *self.assumed.lock().unwrap_or_else(|e| e.into_inner()) = model;
    }

    /// Whether the batch was planned by cost (`KARU_COALESCE_MODE=cost`): its transfers then
    /// reason from the link as they run too (see `engine::cut`); a guards plan's run as
    /// planned.
    pub(crate) fn planned_by_cost(&self) -> bool {
        self.assumed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// The counters so far, with the link the plan assumed.
    pub(crate) fn stats(&self) -> BatchStats {
        let assumed = *self.assumed.lock().unwrap_or_else(|e| e.into_inner());
        self.counters.snapshot(assumed)
    }

    /// Makes throttled answers end this batch's exchanges at once (before any dispatch).
    pub(crate) fn hand_back_throttling(&self) {
        self.hand_back.store(true, Ordering::Release);
    }

    /// True for a download chunk's batch (it hands throttling back): the download paces its
    /// own parallelism, so its transfers do not wait at an endpoint's gate.
    pub(crate) fn paces_itself(&self) -> bool {
        self.hand_back.load(Ordering::Acquire)
    }

    /// Whether a transfer of this batch should stop reading its body until the consumer
    /// catches up: only a batch that paces itself (a download's chunk, whose consumer writes
    /// each completion into the file at once) holding more than [`PACED_BACKLOG`]
    /// completions. Other batches' completions wait for their callers, who may drain them
    /// only at the end.
    pub(crate) fn backlogged(&self) -> bool {
        self.paces_itself() && self.lock().ready.len() > PACED_BACKLOG
    }

    /// Resolves once the batch holds at most [`PACED_BACKLOG`] completions, or is cancelled.
    pub(crate) async fn room(&self) {
        loop {
            let taken = self.consumed.notified();
            let mut taken = std::pin::pin!(taken);
            // Registered before the check, so a completion taken in between is not missed.
            taken.as_mut().enable();
            if !self.backlogged() || self.is_cancelled() {
                return;
            }
            taken.await;
        }
    }

    /// The consumer took a completion: a transfer waiting for room may go on.
    fn taken(&self) {
        if self.paces_itself() {
            self.consumed.notify_waiters();
        }
    }

    /// True when a throttled answer should end the exchange; it then records `retry_after`.
    pub(crate) fn hands_back(&self, retry_after: Option<Duration>) -> bool {
        let yes = self.hand_back.load(Ordering::Acquire);
        if yes {
            *self.handed.lock().unwrap_or_else(|e| e.into_inner()) = Some(retry_after);
        }
        yes
    }

    /// The throttled answer an exchange handed back, with its `Retry-After`.
    pub(crate) fn handed_back(&self) -> Option<Option<Duration>> {
        self.handed.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave State inconsistent (plain pushes and
        // counts), so poisoning is ignored.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True once the batch was dropped: queued work must be discarded unread.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// A worker asks to use the batch's destinations; `None` when the batch is cancelled.
    pub(crate) fn begin(&self) -> Option<Busy<'_>> {
        let mut st = self.lock();
        if self.is_cancelled() {
            return None;
        }
        st.busy += 1;
        Some(Busy { shared: self })
    }

    /// A worker lets go of the destinations, handing over its completions.
    fn release(&self, done: impl IntoIterator<Item = Completion>) {
        let mut st = self.lock();
        st.busy = st.busy.saturating_sub(1);
        self.hand_over(&mut st, done);
        let idle = st.waiting_idle > 0 && st.busy == 0;
        self.wake(st);
        if idle {
            self.idle.notify_all();
        }
    }

    /// Queues a worker's completions for the consumer (dropped once the batch is cancelled).
    fn hand_over(&self, st: &mut State, done: impl IntoIterator<Item = Completion>) {
        if !self.is_cancelled() {
            for c in done {
                st.pending = st.pending.saturating_sub(1);
                st.ready.push_back(c);
            }
        }
    }

    /// Completions that need no worker (planner rejections, unsupported backends).
    pub(crate) fn complete(&self, done: impl IntoIterator<Item = Completion>) {
        let mut st = self.lock();
        for c in done {
            st.pending -= 1;
            st.ready.push_back(c);
        }
        self.wake(st);
    }

    fn wake(&self, mut st: MutexGuard<'_, State>) {
        let wakers = std::mem::take(&mut st.wakers);
        let waiting = st.waiting > 0;
        drop(st);
        if waiting {
            self.ready.notify_all();
        }
        for w in wakers {
            w.wake();
        }
    }

    fn ended(&self, st: &State) -> bool {
        st.ready.is_empty() && (st.pending == 0 || self.is_cancelled())
    }

    /// The next completion for an async consumer, registering its waker otherwise.
    fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Option<Completion>> {
        let mut st = self.lock();
        if let Some(c) = st.ready.pop_front() {
            drop(st);
            self.taken();
            return Poll::Ready(Some(c));
        }
        if self.ended(&st) {
            return Poll::Ready(None);
        }
        if !st.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            st.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    fn cancel_wakers(&self) -> MutexGuard<'_, CancelWakers> {
        self.cancel_wakers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ready once no worker holds the batch; registers the waker otherwise (a worker letting
    /// go wakes it). Lets an async caller wait for workers without blocking a thread.
    pub(crate) fn poll_idle(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = self.lock();
        if st.busy == 0 {
            return Poll::Ready(());
        }
        if !st.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            st.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Cancels the batch; with raw destinations, waits until no worker holds them.
    pub(crate) fn cancel(&self) {
        let mut st = self.lock();
        self.cancelled.store(true, Ordering::Release);
        // Wake remote work first: it holds `busy` until it notices the cancellation. A
        // `Cancelled` registering after this sees the flag under the same lock.
        let wakers: Vec<Waker> = self
            .cancel_wakers()
            .slots
            .iter_mut()
            .filter_map(Option::take)
            .collect();
        for w in wakers {
            w.wake();
        }
        while self.raw && st.busy > 0 {
            st.waiting_idle += 1;
            st = self.idle.wait(st).unwrap_or_else(|e| e.into_inner());
            st.waiting_idle -= 1;
        }
        st.ready.clear();
        self.wake(st);
        self.consumed.notify_waiters();
    }

    /// Resolves once the batch is cancelled: remote work races it to stop promptly.
    pub(crate) fn cancelled(&self) -> Cancelled<'_> {
        Cancelled {
            shared: self,
            registered: None,
        }
    }
}

/// A worker's hold on a batch's destinations, from [`Shared::begin`]. [`finish`](Busy::finish)
/// hands over the completions; dropped without it (a panic unwinding), it still lets go, so
/// dropping the batch never waits for a worker that is gone.
pub(crate) struct Busy<'a> {
    shared: &'a Shared,
}

impl Busy<'_> {
    /// Hands over completions of reads that ended while the worker goes on with the rest.
    pub(crate) fn deliver(&self, done: impl IntoIterator<Item = Completion>) {
        let mut st = self.shared.lock();
        self.shared.hand_over(&mut st, done);
        self.shared.wake(st);
    }

    /// The worker is done with the destinations and hands over its completions.
    pub(crate) fn finish(self, done: impl IntoIterator<Item = Completion>) {
        let shared = self.shared;
        std::mem::forget(self);
        shared.release(done);
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.shared.release(std::iter::empty());
    }
}

/// Future of [`Shared::cancelled`]. It registers its waker once per task (the batch lock is
/// not taken again while the task's waker stays the same) and frees it when dropped.
pub(crate) struct Cancelled<'a> {
    shared: &'a Shared,
    /// Its slot in the batch's cancel wakers, and the waker stored there.
    registered: Option<(usize, Waker)>,
}

impl Future for Cancelled<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.shared.is_cancelled() {
            return Poll::Ready(());
        }
        if let Some((_, w)) = &self.registered
            && w.will_wake(cx.waker())
        {
            return Poll::Pending;
        }
        let shared = self.shared;
        let mut wakers = shared.cancel_wakers();
        if shared.is_cancelled() {
            return Poll::Ready(());
        }
        if let Some((key, _)) = self.registered.take() {
            wakers.remove(key);
        }
        let key = wakers.insert(cx.waker().clone());
        drop(wakers);
        self.registered = Some((key, cx.waker().clone()));
        Poll::Pending
    }
}

impl Drop for Cancelled<'_> {
    fn drop(&mut self) {
        if let Some((key, _)) = self.registered.take() {
            self.shared.cancel_wakers().remove(key);
        }
    }
}

/// What [`Batch::next_timeout`] found.
///
/// ```
/// use std::time::Duration;
/// use karu::Next;
/// # let path = std::env::temp_dir().join(format!("karu-doc-next-{}.bin", std::process::id()));
/// # std::fs::write(&path, b"abcdef").unwrap();
/// let client = karu::Client::new(&karu::Config::empty())?;
/// let object = karu::Locator::parse(path.to_str().unwrap())?;
/// let batch = client.submit(vec![karu::Read::new(&object, 2, 3)])?;
/// match batch.next_timeout(Duration::from_secs(30)) {
///     Next::Done(done) => assert_eq!(done.bytes(), b"cde"),
///     other => panic!("expected a completion, got {other:?}"),
/// }
/// assert!(matches!(batch.next_timeout(Duration::ZERO), Next::End));
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Debug)]
pub enum Next {
    /// One completion.
    Done(Completion),
    /// Every read has completed and been taken (or the batch was cancelled).
    End,
    /// The wait expired first.
    Timeout,
}

/// Submitted reads. Completions come one per read, in completion order; several threads may
/// drain one batch (each completion goes to exactly one of them, and all see the end).
///
/// Dropping a batch cancels its queued work. When it has raw destinations (caller memory,
/// [`Read::with_raw_buffer`](crate::Read::with_raw_buffer)), the drop waits until no worker
/// touches them: that wait is the contract. Otherwise it never blocks (so an async task may
/// drop a batch, or an unfinished `read_async` future, on an executor thread): workers still
/// busy free their own buffers when they stop.
///
/// ```
/// # let dir = std::env::temp_dir().join("karu-doc-batch");
/// # std::fs::create_dir_all(&dir).unwrap();
/// # let path = dir.join("data.bin");
/// # std::fs::write(&path, vec![7u8; 8192]).unwrap();
/// let client = karu::Client::new(&karu::Config::empty()).unwrap();
/// let object = karu::Locator::parse(path.to_str().unwrap()).unwrap();
/// let batch = client.submit(vec![
///     karu::Read::new(&object, 0, 4096).tag(1),
///     karu::Read::new(&object, 4096, 4096).tag(2),
/// ]).unwrap();
/// let mut tags = Vec::new();
/// for done in &batch {
///     assert_eq!(done.bytes(), &[7u8; 4096][..]);
///     tags.push(done.tag);
/// }
/// tags.sort();
/// assert_eq!(tags, [1, 2]);
/// assert_eq!(batch.stats().requested_bytes, 8192);
/// ```
#[derive(Debug)]
pub struct Batch {
    pub(crate) shared: Arc<Shared>,
    /// Keeps the engine (and so its workers) alive while the batch lives.
    pub(crate) _engine: Option<Arc<crate::engine::Engine>>,
}

impl Batch {
    /// Waits for the next completion; `None` at the end.
    pub fn next(&self) -> Option<Completion> {
        match self.wait(None) {
            Next::Done(c) => Some(c),
            Next::End | Next::Timeout => None,
        }
    }

    /// Waits at most `timeout` (zero polls) for the next completion.
    pub fn next_timeout(&self, timeout: Duration) -> Next {
        self.wait(Some(Instant::now() + timeout))
    }

    fn wait(&self, deadline: Option<Instant>) -> Next {
        let shared = &self.shared;
        let mut st = shared.lock();
        loop {
            if let Some(c) = st.ready.pop_front() {
                drop(st);
                shared.taken();
                return Next::Done(c);
            }
            if shared.ended(&st) {
                return Next::End;
            }
            let left = match deadline {
                None => None,
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Next::Timeout,
                },
            };
            st.waiting += 1;
            st = match left {
                None => shared.ready.wait(st).unwrap_or_else(|e| e.into_inner()),
                Some(left) => {
                    let waited = shared.ready.wait_timeout(st, left);
                    waited.unwrap_or_else(|e| e.into_inner()).0
                }
            };
            st.waiting -= 1;
        }
    }

    /// The next completion, awaited without blocking a thread; `None` at the end.
    pub fn next_async(&self) -> NextAsync<'_> {
        NextAsync { batch: self }
    }

    /// The completions as an async stream (ends with the batch).
    pub fn stream(&self) -> Completions<'_> {
        Completions { batch: self }
    }

    /// The counters so far (each read independently).
    pub fn stats(&self) -> BatchStats {
        self.shared.stats()
    }

    /// Reads not yet completed.
    pub fn pending(&self) -> usize {
        self.shared.lock().pending
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.shared.cancel();
    }
}

impl Iterator for &Batch {
    type Item = Completion;
    fn next(&mut self) -> Option<Completion> {
        Batch::next(self)
    }
}

/// Future of [`Batch::next_async`]: resolves to the next completion, or `None` at the end.
/// It works on any executor; here a minimal `block_on` drives it.
///
/// ```
/// use std::sync::Arc;
/// use std::task::{Context, Poll, Wake, Waker};
/// struct Unpark(std::thread::Thread);
/// impl Wake for Unpark {
///     fn wake(self: Arc<Self>) { self.0.unpark() }
/// }
/// fn block_on<F: std::future::Future>(f: F) -> F::Output {
///     let mut f = std::pin::pin!(f);
///     let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
///     loop {
///         match f.as_mut().poll(&mut Context::from_waker(&waker)) {
///             Poll::Ready(out) => return out,
///             Poll::Pending => std::thread::park(),
///         }
///     }
/// }
/// # let path = std::env::temp_dir().join(format!("karu-doc-next-async-{}.bin", std::process::id()));
/// # std::fs::write(&path, b"async bytes").unwrap();
/// let client = karu::Client::new(&karu::Config::empty())?;
/// let object = karu::Locator::parse(path.to_str().unwrap())?;
/// let batch = client.submit(vec![karu::Read::new(&object, 6, 5)])?;
/// let done = block_on(batch.next_async()).expect("one completion");
/// assert_eq!(done.bytes(), b"bytes");
/// assert!(block_on(batch.next_async()).is_none());
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Debug)]
pub struct NextAsync<'a> {
    batch: &'a Batch,
}

impl Future for NextAsync<'_> {
    type Output = Option<Completion>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Completion>> {
        self.batch.shared.poll_next(cx)
    }
}

/// The completions of a batch as an async [`Stream`](futures_core::Stream), from
/// [`Batch::stream`]. Several streams (and threads) may drain one batch.
///
/// ```
/// use std::pin::Pin;
/// use std::task::{Context, Poll, Waker};
/// # let path = std::env::temp_dir().join(format!("karu-doc-stream-{}.bin", std::process::id()));
/// # std::fs::write(&path, [5u8; 64]).unwrap();
/// let client = karu::Client::new(&karu::Config::empty()).unwrap();
/// let object = karu::Locator::parse(path.to_str().unwrap()).unwrap();
/// let batch = client.submit(vec![karu::Read::new(&object, 0, 8).tag(3)]).unwrap();
/// let mut stream = batch.stream();
/// let mut cx = Context::from_waker(Waker::noop());
/// let mut seen = Vec::new();
/// loop {
///     match futures_core::Stream::poll_next(Pin::new(&mut stream), &mut cx) {
///         Poll::Ready(Some(done)) => seen.push((done.tag, done.got)),
///         Poll::Ready(None) => break,
///         // A real executor would park here until the waker fires.
///         Poll::Pending => std::thread::yield_now(),
///     }
/// }
/// assert_eq!(seen, [(3, 8)]);
/// # std::fs::remove_file(&path).unwrap();
/// ```
#[derive(Debug)]
pub struct Completions<'a> {
    batch: &'a Batch,
}

impl futures_core::Stream for Completions<'_> {
    type Item = Completion;
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Completion>> {
        self.batch.shared.poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    /// A waker that records being woken.
    #[derive(Default)]
    struct Flag(AtomicBool);

    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn poll(f: &mut Pin<Box<Cancelled<'_>>>, flag: &Arc<Flag>) -> Poll<()> {
        let waker = Waker::from(Arc::clone(flag));
        f.as_mut().poll(&mut Context::from_waker(&waker))
    }

    fn live_wakers(shared: &Shared) -> usize {
        shared.cancel_wakers().slots.iter().flatten().count()
    }

    #[test]
    fn cancellation_keeps_a_waker_only_while_its_future_lives() {
        let shared = Shared::new(0, false);
        // Ten thousand finished transfers in turn leave no waker behind, and one slot serves
        // them all.
        for _ in 0..10_000 {
            let flag = Arc::new(Flag::default());
            let mut f = Box::pin(shared.cancelled());
            assert!(poll(&mut f, &flag).is_pending());
            assert!(poll(&mut f, &flag).is_pending());
            assert_eq!(live_wakers(&shared), 1);
        }
        assert_eq!(live_wakers(&shared), 0);
        assert_eq!(shared.cancel_wakers().slots.len(), 1);
        // Live futures are woken by the cancellation, then ready.
        let flags: Vec<Arc<Flag>> = (0..3).map(|_| Arc::default()).collect();
        let mut futures: Vec<_> = flags.iter().map(|_| Box::pin(shared.cancelled())).collect();
        for (f, flag) in futures.iter_mut().zip(&flags) {
            assert!(poll(f, flag).is_pending());
        }
        assert_eq!(live_wakers(&shared), 3);
        shared.cancel();
        for (f, flag) in futures.iter_mut().zip(&flags) {
            assert!(flag.0.load(Ordering::SeqCst));
            assert!(poll(f, flag).is_ready());
        }
        assert_eq!(live_wakers(&shared), 0);
    }

    #[test]
    fn a_paced_batch_holds_its_transfers_until_the_consumer_takes_its_completions() {
        let done = |tag| Completion {
            tag,
            result: Ok(()),
            got: 0,
            buffer: None,
            etag: None,
        };
        let n = PACED_BACKLOG as u64 + 2;
        // An ordinary batch is never backlogged: its caller may drain it only at the end.
        let plain = Shared::new(n as usize, false);
        plain.complete((0..n).map(done));
        assert!(!plain.backlogged());
        let paced = Shared::new(n as usize, false);
        paced.hand_back_throttling();
        paced.complete((0..n).map(done));
        assert!(paced.backlogged());
        let flag = Arc::new(Flag::default());
        let waker = Waker::from(Arc::clone(&flag));
        let mut cx = Context::from_waker(&waker);
        let mut room = Box::pin(paced.room());
        assert!(room.as_mut().poll(&mut cx).is_pending());
        // One taken: still one too many.
        assert!(matches!(paced.poll_next(&mut cx), Poll::Ready(Some(_))));
        assert!(flag.0.swap(false, Ordering::SeqCst));
        assert!(room.as_mut().poll(&mut cx).is_pending());
        // Two taken: room.
        assert!(matches!(paced.poll_next(&mut cx), Poll::Ready(Some(_))));
        assert!(flag.0.load(Ordering::SeqCst));
        assert!(room.as_mut().poll(&mut cx).is_ready());
        // A cancelled batch has room at once.
        let cancelled = Shared::new(n as usize, false);
        cancelled.hand_back_throttling();
        cancelled.complete((0..n).map(done));
        let mut room = Box::pin(cancelled.room());
        assert!(room.as_mut().poll(&mut cx).is_pending());
        cancelled.cancel();
        assert!(room.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn a_worker_that_unwinds_still_lets_the_batch_go() {
        let shared = Shared::new(1, true);
        let busy = shared.begin().unwrap();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _held = busy;
            panic!("worker bug");
        }));
        assert!(unwound.is_err());
        shared.cancel(); // returns: nobody holds the destinations
        assert!(shared.begin().is_none());
    }
}
