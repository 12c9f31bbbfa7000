//! `Client::download`: one object into one file, written positionally into a temporary file
//! beside the destination and published atomically (spec §6, plus throttling-aware
//! parallelism, resume across calls and a choice of what to do when the object changes).
//!
//! The first request is both the probe and the first stream: it asks for the object from
//! its first byte (or from the resume point), its headers give the size and the version
//! (strong ETag, else `Last-Modified` and size), and its body goes straight into the file.
//! Where one stream is as fast as the link, that one request is the whole download. Where
//! it proves slower (its measured rate, or the client's link estimate), parallel chunks
//! take the tail beside it, each pinned to the version the stream's answer proved
//! (`If-Match`, else `If-Unmodified-Since`; with neither validator, one stream only), and
//! the stream stops where they begin. With [`Chunking::Always`], or a link estimate that
//! says one stream is slower than the link, chunks go out as soon as the first answer's
//! headers arrive, or with the first request when the size is already known (a window, or
//! a [`DownloadOptions::stat`]).

mod chunks;
mod sidecar;
mod stream;
mod temp;
mod tick;
mod window;

use std::future::{Future, poll_fn};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use crate::batch::{Batch, BatchStats, Completion, Shared};
use crate::client::Client;
use crate::error::{Error, Result, Status};
use crate::locator::Locator;
use crate::plan::LinkEstimate;
use crate::probe::ObjectInfo;
use crate::validate::condition::Condition;
use chunks::{Chunks, InFlight, settle, sub_read_length};
use sidecar::{Saved, Sidecar};
use stream::{Head, Line};
use temp::{Temp, io_error};
use tick::Ticker;

/// Default chunk size: 8 MiB (`KARU_DOWNLOAD_CHUNK_SIZE_DEFAULT`).
pub const DEFAULT_CHUNK_SIZE: u64 = 8 << 20;
/// Default number of chunks in flight (`KARU_DOWNLOAD_PARALLELISM_DEFAULT`).
pub const DEFAULT_PARALLELISM: u64 = 8;
/// How often progress is reported (and deadlines and pauses are checked) while chunks run.
const TICK: Duration = Duration::from_millis(100);
/// The longest `Retry-After` a throttled chunk waits (as the exchange's own retries do).
const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);

/// The prefix of argument errors, shared with the C ABI's `karu_client_download`.
const FUNCTION: &str = "karu_client_download";

/// What a download does when the object changes under it (a 412 on a pinned chunk, or an
/// answer that does not prove the pinned version).
///
/// ```
/// let options = karu::DownloadOptions { on_change: karu::OnChange::Restart, ..Default::default() };
/// assert_eq!(options.on_change, karu::OnChange::Restart);
/// assert_eq!(karu::OnChange::default(), karu::OnChange::Fail);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnChange {
    /// Fail with `Precondition`; nothing is published.
    #[default]
    Fail,
    /// Start over once against the new version, as a cold read of the changed object would.
    Restart,
}

/// How a download with a version pin (a strong ETag or a `Last-Modified`) splits into
/// parallel chunks.
///
/// ```
/// let options = karu::DownloadOptions { chunking: karu::Chunking::Always, ..Default::default() };
/// assert_eq!(karu::Chunking::default(), karu::Chunking::Measured);
/// # let _ = options;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Chunking {
    /// One stream, straight into the file (its first answer is the probe); parallel chunks
    /// take the rest of the object beside it only where one stream is slower than the link:
    /// at once when the client's link estimate says so, else once the stream's measured
    /// rate shows it (a stream keeping up with the link gains nothing from chunks but round
    /// trips, buffers and copies; one the estimate shows keeping up is never split).
    #[default]
    Measured,
    /// Parallel chunks from the start, whatever one stream could do: the first request reads
    /// the first chunk, and the others go out once its headers arrived, or with it when the
    /// size is already known (a window, or [`DownloadOptions::stat`] with a strong ETag).
    Always,
}

/// The progress callback: `(received, total)` bytes; returning `false` cancels.
pub type Progress<'a> = Box<dyn FnMut(u64, u64) -> bool + Send + 'a>;

/// How to download. `Default` gives 8 MiB chunks, 8 in flight, measured chunking, no
/// overwrite, no resume, fail on change and no progress callback.
///
/// ```
/// let mut calls = 0;
/// let options = karu::DownloadOptions {
///     chunk_size: 1 << 20,
///     parallelism: 4,
///     progress: Some(Box::new(|done, total| {
///         calls += 1;
///         done <= total // keep going
///     })),
///     ..Default::default()
/// };
/// assert_eq!(options.parallelism, 4);
/// assert!(!options.overwrite && !options.resume);
/// ```
pub struct DownloadOptions<'a> {
    /// Bytes per ranged request (default 8 MiB); nonzero and below `u64::MAX`.
    pub chunk_size: u64,
    /// Most chunks in flight (default 8); nonzero. Throttling lowers it for a while.
    pub parallelism: u64,
    /// Whether the bytes after the probe go as one measured stream or as chunks at once.
    pub chunking: Chunking,
    /// Replace an existing destination (atomically); otherwise it is refused.
    pub overwrite: bool,
    /// Keep an interrupted download's temporary file and `<dest>.karu.resume` sidecar, and
    /// continue from them on the next call if the object still has the same ETag (objects
    /// without a strong ETag, local files included, always start over).
    pub resume: bool,
    /// What to do when the object changes mid-download.
    pub on_change: OnChange,
    /// Called once the first answer told the size (with the bytes a resume already has),
    /// then every 100 ms with the bytes received so far (counted as
    /// they arrive, never decreasing), and once at the end with `(total, total)`; `false`
    /// cancels the download with `Cancelled` (waiting for its requests to stop).
    pub progress: Option<Progress<'a>>,
    /// The whole download's time budget; past it the download fails with `Timeout`. `None`
    /// derives it from the size and the configured timeouts: `KARU_REQUEST_TIMEOUT` times
    /// one plus the rounds of chunks (`ceil(chunks / parallelism)`), and no budget when that
    /// timeout is disabled (or the budget is too far to represent).
    pub deadline: Option<Duration>,
    /// Most answers 429 or 503 the whole download accepts before failing with `Http` ("the
    /// store keeps throttling the download"); `0` means `16 + 2 × parallelism + chunks`.
    /// Independently, `16 + 2 × parallelism` throttled answers in a row without a chunk
    /// finishing fail it too.
    pub max_throttled: u64,
    /// What the caller already knows of the object, from [`Client::stat`]: its size lets
    /// chunks go out with the first request instead of after its answer, and its strong
    /// ETag pins every request, the first one included (an object changed since is
    /// `Precondition`, or a restart without the stat with [`OnChange::Restart`]). A stat
    /// without a strong ETag gives the size only, and chunks wait for the first answer's
    /// validator.
    pub stat: Option<ObjectInfo>,
}

impl Default for DownloadOptions<'_> {
    fn default() -> Self {
        DownloadOptions {
            chunk_size: DEFAULT_CHUNK_SIZE,
            parallelism: DEFAULT_PARALLELISM,
            chunking: Chunking::Measured,
            overwrite: false,
            resume: false,
            on_change: OnChange::Fail,
            progress: None,
            deadline: None,
            max_throttled: 0,
            stat: None,
        }
    }
}

impl std::fmt::Debug for DownloadOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DownloadOptions")
            .field("chunk_size", &self.chunk_size)
            .field("parallelism", &self.parallelism)
            .field("chunking", &self.chunking)
            .field("overwrite", &self.overwrite)
            .field("resume", &self.resume)
            .field("on_change", &self.on_change)
            .field("progress", &self.progress.is_some())
            .field("deadline", &self.deadline)
            .field("max_throttled", &self.max_throttled)
            .field("stat", &self.stat)
            .finish()
    }
}

impl DownloadOptions<'_> {
    /// Checks the options as spec §6.1 does (`Invalid`, messages shared with the C ABI).
    ///
    /// ```
    /// let zero = karu::DownloadOptions { chunk_size: 0, ..Default::default() };
    /// assert_eq!(
    ///     zero.validate().unwrap_err().to_string(),
    ///     "karu_client_download: chunk_size must be nonzero and finite"
    /// );
    /// assert!(karu::DownloadOptions::default().validate().is_ok());
    /// ```
    pub fn validate(&self) -> Result<()> {
        let invalid = |what: &str| Err(Error::new(Status::Invalid, format!("{FUNCTION}: {what}")));
        if self.chunk_size == 0 || self.chunk_size == u64::MAX {
            return invalid("chunk_size must be nonzero and finite");
        }
        if self.parallelism == 0 || usize::try_from(self.parallelism).is_err() {
            return invalid("parallelism is outside the supported range");
        }
        let fits = usize::try_from(self.chunk_size)
            .ok()
            .and_then(|c| c.checked_mul(self.parallelism as usize))
            .is_some();
        if !fits {
            return invalid("chunk_size times parallelism is too large");
        }
        Ok(())
    }
}

/// The parallelism a download used: the window's smallest, largest and last value, and how
/// often throttling cut it. Without throttling the three values are the requested
/// parallelism and `cuts` is 0; an object with no validator, read in one stream, has 1.
///
/// ```
/// let p = karu::ParallelismStats::default(); // what a download reports, before it runs
/// assert!(p.min <= p.final_ && p.final_ <= p.max && p.cuts == 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParallelismStats {
    /// The lowest window (after throttling cut it).
    pub min: u64,
    /// The highest window.
    pub max: u64,
    /// The window when the download ended.
    pub final_: u64,
    /// Times throttling cut the window (answers to chunks in flight together count once).
    pub cuts: u64,
}

/// What a finished download did. Counters are summed over the stream (whose first answer is
/// the probe: its retries, throttled answers and connections included) and every chunk.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("karu-doc-download-result-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// # let source = dir.join("source.bin");
/// # std::fs::write(&source, vec![3u8; 10_000]).unwrap();
/// # let dest = dir.join("copy.bin");
/// # let _ = std::fs::remove_file(&dest);
/// let client = karu::Client::new(&karu::Config::empty())?;
/// let object = karu::Locator::parse(source.to_str().unwrap())?;
/// let options = karu::DownloadOptions { chunk_size: 4096, ..Default::default() };
/// let result = client.download(&object, &dest, options)?;
/// assert_eq!((result.size, result.downloaded), (10_000, 10_000));
/// assert_eq!(result.requests, 3); // three 4096-byte chunks (the size is the file's)
/// assert_eq!(result.etag, None);  // local files have no ETag
/// assert_eq!(std::fs::read(&dest).unwrap(), vec![3u8; 10_000]);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DownloadResult {
    /// The visible size of the object.
    pub size: u64,
    /// Bytes in the published file (equal to `size`), including chunks an earlier call
    /// left for resume.
    pub downloaded: u64,
    /// Bytes received by this call (local bytes read plus accepted body bytes).
    pub received_bytes: u64,
    /// Retries (throttled ones included).
    pub retries: u64,
    /// Attempts answered with 429 or 503.
    pub throttled: u64,
    /// Connections opened rather than reused.
    pub new_connections: u64,
    /// Retries that kept part of a body.
    pub resumed: u64,
    /// Credential refreshes after an authentication failure.
    pub credential_refreshes: u64,
    /// The strong ETag every chunk was pinned to (`None` for local files and servers
    /// without one, whose chunks were pinned by `Last-Modified` or read in one stream).
    pub etag: Option<String>,
    /// The parallelism over time.
    pub parallelism: ParallelismStats,
    /// HTTP requests (or local reads) made: the stream's and each chunk's transfers and
    /// retries (and a `stat` where no answer stated the size).
    pub requests: u64,
    /// Chunks skipped because an earlier interrupted call had written them.
    pub resumed_chunks: u64,
}

impl DownloadResult {
    fn add(&mut self, s: &BatchStats) {
        let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        add(&mut self.received_bytes, s.received_bytes);
        add(&mut self.retries, s.retries);
        add(&mut self.throttled, s.throttled);
        add(&mut self.new_connections, s.new_connections);
        add(&mut self.resumed, s.resumed);
        add(&mut self.credential_refreshes, s.credential_refreshes);
        add(&mut self.requests, s.transfers.saturating_add(s.retries));
    }
}

impl Client {
    /// Downloads the whole visible object (a window downloads exactly its bytes) into
    /// `destination`, blocking; see [`DownloadOptions`] and spec §6.
    ///
    /// The first request asks for the object from its first byte (or from the resume point)
    /// and is the download's probe: its headers give the size and the version (strong ETag,
    /// else `Last-Modified` and size; no HEAD), and its body streams into the file as it
    /// arrives. Chunks that take the rest beside it carry `If-Match` with that ETag, or
    /// `If-Unmodified-Since` with that date, and each answer must repeat that date and the
    /// object size; with neither validator the object is read in one stream.
    /// The file is `<destination>.karu.part.<pid>.<n>`, published by hard link (never
    /// replacing a file) or, with `overwrite`, by atomic rename. Any failure or
    /// cancellation removes the temporary file (unless `resume` keeps it) and leaves the
    /// destination untouched.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("karu-doc-download-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # let source = dir.join("source.bin");
    /// # std::fs::write(&source, b"0123456789").unwrap();
    /// # let dest = dir.join("window.bin");
    /// # let _ = std::fs::remove_file(&dest);
    /// let client = karu::Client::new(&karu::Config::empty())?;
    /// let window = karu::Locator::parse(&format!("/vsisubfile/2_5,{}", source.display()))?;
    /// client.download(&window, &dest, karu::DownloadOptions::default())?;
    /// assert_eq!(std::fs::read(&dest).unwrap(), b"23456");
    /// // The destination exists now: without overwrite it is refused.
    /// let again = client.download(&window, &dest, karu::DownloadOptions::default());
    /// assert_eq!(again.unwrap_err().status(), karu::Status::Io);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), karu::Error>(())
    /// ```
    pub fn download(
        &self,
        locator: &Locator,
        destination: &Path,
        options: DownloadOptions<'_>,
    ) -> Result<DownloadResult> {
        block_on(self.download_async(locator, destination, options))
    }

    /// The async twin of [`download`](Client::download): awaits chunks without blocking a
    /// thread (any executor). Writes to the temporary file are plain positional writes.
    pub async fn download_async(
        &self,
        locator: &Locator,
        destination: &Path,
        mut options: DownloadOptions<'_>,
    ) -> Result<DownloadResult> {
        if destination.as_os_str().is_empty() {
            return Err(Error::new(
                Status::Invalid,
                format!("{FUNCTION}: destination is empty"),
            ));
        }
        options.validate()?;
        let mut restarted = false;
        loop {
            let mut job = Job {
                client: self,
                locator,
                dest: destination,
                options: &mut options,
            };
            match job.run().await {
                Err(e)
                    if e.status() == Status::Precondition
                        && options.on_change == OnChange::Restart
                        && !restarted =>
                {
                    restarted = true;
                    // The caller's stat described the old version.
                    options.stat = None;
                }
                other => return other,
            }
        }
    }
}

/// One attempt at a download.
struct Job<'j, 'a> {
    client: &'j Client,
    locator: &'j Locator,
    dest: &'j Path,
    options: &'j mut DownloadOptions<'a>,
}

/// Where chunk `i` lies: `chunk`-byte pieces of the visible object, back to back from its
/// first byte (the stream covers the first ones).
#[derive(Clone, Copy)]
struct Layout {
    size: u64,
    chunk: u64,
}

impl Layout {
    fn count(&self) -> u64 {
        self.size.div_ceil(self.chunk)
    }

    /// The first chunk starting at or after visible offset `at`, if any.
    fn first_chunk_from(&self, at: u64) -> Option<u64> {
        let i = at.div_ceil(self.chunk);
        (i < self.count()).then_some(i)
    }

    fn span(&self, i: u64) -> (u64, u64) {
        let start = i * self.chunk;
        (start, self.chunk.min(self.size - start))
    }
}

/// What the wait in [`Job::drive`] saw.
enum Event {
    /// The stream ended (its outcome is in [`Stream::outcome`]).
    Streamed,
    /// The chunk at this position in flight completed.
    Chunk(usize, Completion),
    Tick,
}

/// The stream in flight: its future, counters and shared line.
struct Stream<'f> {
    run: Pin<Box<dyn Future<Output = Result<u64>> + Send + 'f>>,
    counters: Batch,
    line: Arc<Line>,
    /// First visible byte it asked for.
    from: u64,
    /// One past the last visible byte it asked for (`u64::MAX`: to the object's end).
    until: u64,
    /// Whether it ended.
    done: bool,
    /// Its outcome, from when it ended until [`Job::drive`] takes it in.
    outcome: Option<Result<u64>>,
    /// The chunk the sidecar records next as written by the stream.
    marked: u64,
}

impl Stream<'_> {
    /// Starts `job` (on its first poll) as the stream from `from` to `until`.
    fn new<'f>(
        client: &'f Client,
        job: impl FnOnce(
            std::rc::Rc<crate::engine::remote::LoopState>,
        ) -> Pin<Box<dyn Future<Output = Result<u64>>>>
        + Send
        + 'static,
        counters: Batch,
        line: Arc<Line>,
        (from, until): (u64, u64),
        chunk: u64,
    ) -> Stream<'f> {
        Stream {
            run: Box::pin(client.run_remote(job)),
            counters,
            line,
            from,
            until,
            done: false,
            outcome: None,
            marked: from / chunk,
        }
    }

    /// Cancels the stream and waits until its requests are over.
    async fn finish(&mut self) {
        self.counters.shared.cancel();
        if !self.done {
            self.outcome = Some(self.run.as_mut().await);
            self.done = true;
        }
    }
}

/// How the stream goes on once the version is known.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// Alone to the end, measured: chunks take the tail if it proves slow.
    Measure,
    /// Alone to the end.
    Alone,
    /// Chunks take everything after the stream's first chunk.
    Split,
}

impl Job<'_, '_> {
    fn cancelled(&self) -> Error {
        Error::new(
            Status::Cancelled,
            format!(
                "{}: download cancelled by progress callback",
                self.dest.display()
            ),
        )
    }

    /// Calls the progress callback; `false` from it becomes `Cancelled`.
    fn progress(&mut self, done: u64, total: u64) -> Result<()> {
        let keep_going = match &mut self.options.progress {
            Some(f) => f(done, total),
            None => true,
        };
        if keep_going {
            Ok(())
        } else {
            Err(self.cancelled())
        }
    }

    /// The whole download's time budget, from the options or from the request timeout.
    fn time_budget(&self, chunks: u64) -> Option<Duration> {
        if let Some(d) = self.options.deadline {
            return Some(d);
        }
        let rounds = chunks.div_ceil(self.options.parallelism).saturating_add(1);
        let timeout = self.client.settings().request_timeout()?;
        Some(timeout.saturating_mul(u32::try_from(rounds).unwrap_or(u32::MAX)))
    }

    fn budget(&self, started: Instant, layout: &Layout) -> Budget {
        let streak_limit = 16 + 2 * self.options.parallelism.min(1 << 20);
        Budget {
            deadline: self
                .time_budget(layout.count())
                .and_then(|d| started.checked_add(d)),
            max_throttled: match self.options.max_throttled {
                0 => streak_limit.saturating_add(layout.count()),
                n => n,
            },
            streak_limit,
            streak: 0,
        }
    }

    async fn run(&mut self) -> Result<DownloadResult> {
        let started = Instant::now();
        let dest = self.dest;
        if !self.options.overwrite && dest.symlink_metadata().is_ok() {
            return Err(Error::new(
                Status::Io,
                format!("{}: destination already exists", dest.display()),
            ));
        }
        // Temporary files of killed downloads; the one a sidecar names waits for a resume.
        temp::remove_stale(dest, sidecar::load(dest).map(|s| s.temp_id).as_deref());
        if !self.locator.is_remote() {
            return self.local(started).await;
        }
        // A resume whose saved state the first answer contradicts starts over once, fresh.
        match self.remote(started).await? {
            Some(result) => Ok(result),
            None => Ok(self.remote(started).await?.ok_or_else(|| {
                Error::new(
                    Status::Io,
                    format!("{}: the resume state keeps changing", dest.display()),
                )
            })?),
        }
    }

    /// A local file: its size from its metadata, then positional chunk reads.
    async fn local(&mut self, started: Instant) -> Result<DownloadResult> {
        let info = crate::probe::local_stat(self.locator)?;
        let layout = Layout {
            size: info.size,
            chunk: self.options.chunk_size,
        };
        let mut result = DownloadResult {
            size: layout.size,
            ..DownloadResult::default()
        };
        let mut budget = self.budget(started, &layout);
        let ticker = Ticker::start(TICK)?;
        let mut temp = self.prepare(&layout)?;
        let mut chunks = Chunks::new(self.options.parallelism);
        chunks.take_from(0, &layout);
        if layout.size > 0 {
            self.progress(0, layout.size)?;
        }
        let outcome = self
            .drive(
                &mut temp,
                None,
                &layout,
                None,
                &mut chunks,
                None,
                Plan::Alone,
                &ticker,
                &mut budget,
                &mut result,
            )
            .await;
        settle(&chunks.in_flight).await;
        outcome?;
        temp.publish(self.dest, self.options.overwrite)?;
        Ok(result)
    }

    /// A remote object: the stream that is also the probe, and chunks beside it. `None`
    /// when a saved resume state turned out stale (it is removed: the caller starts over).
    async fn remote(&mut self, started: Instant) -> Result<Option<DownloadResult>> {
        let dest = self.dest;
        let locator = self.locator;
        let client = self.client;
        let chunk = self.options.chunk_size;
        let woff = locator.window_offset();
        let stat = self.options.stat.clone();
        let known_size = locator.window_length().or(stat.as_ref().map(|s| s.size));
        if known_size == Some(0) {
            Temp::create(dest)?.publish(dest, self.options.overwrite)?;
            return Ok(Some(DownloadResult {
                etag: stat.and_then(|s| s.etag),
                ..DownloadResult::default()
            }));
        }
        // A stat's strong ETag pins every request, the first one included.
        let known_pin = stat
            .as_ref()
            .and_then(|s| s.etag.clone())
            .map(Condition::IfMatch);
        let stated = match (locator.window_length(), &stat) {
            (None, Some(s)) => Some(woff.saturating_add(s.size)),
            _ => None,
        };
        let (mut temp, resumed, mut sidecar) =
            self.resume_state(known_size, stat.as_ref().and_then(|s| s.etag.as_deref()))?;
        let mut chunks = Chunks::new(self.options.parallelism);
        // The resume point: the first chunk not written yet (the last one, if all were).
        let from = match &resumed {
            Some(r) => {
                chunks.skip = r.done.clone();
                let layout = Layout {
                    size: r.size,
                    chunk,
                };
                let first = (0..layout.count()).find(|i| !r.done.contains(i));
                layout.span(first.unwrap_or(layout.count() - 1)).0
            }
            None => 0,
        };
        let verdict = match self.options.chunking {
            Chunking::Always => Some(true),
            Chunking::Measured => self.estimate_verdict(),
        };
        let split_now = verdict == Some(true);
        // Chunks go out with the stream when the size is known, unless a stat without an
        // ETag already told that nothing would prove their version before the first answer.
        let early = split_now
            && known_size.is_some_and(|s| from.saturating_add(chunk) < s)
            && (known_pin.is_some() || stat.is_none());
        // A stream that chunks follow asks for its first chunk only.
        let end = if split_now {
            from.checked_add(chunk)
                .map(|e| known_size.map_or(e, |s| e.min(s)))
        } else {
            known_size
        };
        let line = Line::new(from);
        let counters = Batch {
            shared: Shared::new(0, false),
            _engine: None,
        };
        let file = temp
            .try_clone_file()
            .map_err(|e| io_error(dest, "cannot write temporary output", e))?;
        let job = stream::job(
            locator.clone(),
            file,
            (from, end),
            known_pin.clone(),
            stated,
            Arc::clone(&counters.shared),
            Arc::clone(&line),
        );
        let mut stream = Stream::new(
            client,
            job,
            counters,
            line,
            (from, end.unwrap_or(u64::MAX)),
            chunk,
        );
        let mut result = DownloadResult::default();
        let ticker = Ticker::start(TICK)?;
        let first = async {
            // The stream goes out first, then the chunks the known size allows.
            if let Poll::Ready(r) = poll_fn(|cx| Poll::Ready(stream.run.as_mut().poll(cx))).await {
                stream.done = true;
                stream.outcome = Some(r);
            }
            if early && let Some(size) = known_size {
                let layout = Layout { size, chunk };
                chunks.take_from(from + 1, &layout);
                chunks.beside = true;
                chunks.submit(client, locator, &layout, known_pin.as_ref())?;
            }
            let head = match self.head(&mut stream, &ticker, started).await {
                Ok(head) => head,
                // An empty object is answered 416, which the stream reports as `Range`.
                Err(e) if e.status() == Status::Range => return Ok(Err(e)),
                Err(e) => return Err(e),
            };
            let size = match (locator.window_length(), head.total) {
                (Some(wlen), Some(total)) if total < woff.saturating_add(wlen) => {
                    return Err(Error::new(
                        Status::Range,
                        format!("{}: object ended at byte {total}", locator.display()),
                    ));
                }
                (Some(wlen), _) => wlen,
                (None, Some(total)) => total.saturating_sub(woff),
                (None, None) => {
                    // No answer stated the size: ask for it.
                    let info = client.stat_async(locator).await?;
                    result.requests = result.requests.saturating_add(1);
                    if info.etag != head.etag {
                        return Err(stream::changed(&locator.display()));
                    }
                    info.size
                }
            };
            if stat.as_ref().is_some_and(|s| s.size != size) {
                return Err(stream::changed(&locator.display()));
            }
            Ok(Ok((head, size)))
        }
        .await;
        let (head, size) = match first {
            Ok(Ok(found)) => found,
            Ok(Err(range)) => {
                settle(&chunks.in_flight).await;
                stream.finish().await;
                sidecar::remove(dest);
                let stats = stream.counters.stats();
                return self.empty(range, &stats, temp).await.map(Some);
            }
            Err(e) => {
                settle(&chunks.in_flight).await;
                stream.finish().await;
                return Err(self.kept(e, temp, sidecar.is_some()));
            }
        };
        let layout = Layout { size, chunk };
        if let Some(r) = &resumed
            && (head.etag.as_deref() != Some(r.etag.as_str()) || r.size != size)
        {
            // Saved for another version: start over without it.
            settle(&chunks.in_flight).await;
            stream.finish().await;
            drop(sidecar);
            sidecar::remove(dest);
            drop(temp);
            return Ok(None);
        }
        result.size = size;
        result.etag = head.etag.clone();
        let mut budget = self.budget(started, &layout);
        let pin = head.pin();
        let outcome = async {
            if resumed.is_none() {
                temp.set_len(size)
                    .map_err(|e| io_error(dest, "cannot size temporary output", e))?;
                // Without a strong ETag a later call could not tell the version: no sidecar.
                if self.options.resume
                    && let Some(tag) = &head.etag
                {
                    sidecar = Some(
                        Sidecar::create(dest, tag, size, chunk, &temp.id())
                            .map_err(|e| io_error(dest, "cannot write resume state", e))?,
                    );
                }
            }
            if pin.is_none() && (stream.until < size || early) {
                // No validator, and the stream does not cover the object: chunks could come
                // from two versions. One stream of the whole object instead.
                settle(&chunks.in_flight).await;
                for f in chunks.in_flight.drain(..) {
                    result.add(&f.batch.stats());
                }
                chunks.queue.clear();
                return self
                    .whole(
                        &mut temp,
                        &layout,
                        &mut stream,
                        &ticker,
                        &mut budget,
                        &mut result,
                    )
                    .await;
            }
            for &i in &chunks.skip {
                result.downloaded += layout.span(i).1;
            }
            result.resumed_chunks = chunks.skip.len() as u64;
            self.progress(result.downloaded.min(size), size)?;
            let plan = match verdict {
                Some(true) => Plan::Split,
                Some(false) => Plan::Alone,
                None if pin.is_none() => Plan::Alone,
                None => Plan::Measure,
            };
            if plan == Plan::Split && !early && stream.until < size {
                stream.line.stop_at(stream.until);
                chunks.take_from(stream.until, &layout);
            }
            let proven = head.etag.as_deref();
            self.drive(
                &mut temp,
                sidecar.as_mut(),
                &layout,
                pin.as_ref(),
                &mut chunks,
                Some((&mut stream, proven)),
                plan,
                &ticker,
                &mut budget,
                &mut result,
            )
            .await
        }
        .await;
        settle(&chunks.in_flight).await;
        stream.finish().await;
        let resumable = sidecar.is_some();
        drop(sidecar);
        if let Err(e) = outcome {
            return Err(self.kept(e, temp, resumable));
        }
        temp.publish(dest, self.options.overwrite)?;
        sidecar::remove(dest);
        Ok(Some(result))
    }

    /// The error of a failed download, after keeping its files for a resume (when
    /// `resumable` and the object did not change) or removing them.
    fn kept(&self, e: Error, mut temp: Temp, resumable: bool) -> Error {
        let dest = self.dest;
        // A changed object leaves nothing worth resuming.
        if resumable && e.status() != Status::Precondition {
            temp.keep();
            let kept = format!(
                "{e}; kept {} and {} to resume",
                temp.path().display(),
                sidecar::path(dest).display()
            );
            return Error::new(e.status(), kept);
        }
        sidecar::remove(dest);
        e
    }

    /// Waits for the stream's first answer and returns its headers; the stream's error
    /// when it ended without one.
    async fn head(
        &mut self,
        stream: &mut Stream<'_>,
        ticker: &Ticker,
        started: Instant,
    ) -> Result<Head> {
        enum Wait {
            Head(Head),
            Ended,
            Tick,
        }
        loop {
            let wait = poll_fn(|cx| {
                if let Poll::Ready(head) = stream.line.poll_head(cx) {
                    return Poll::Ready(Wait::Head(head));
                }
                if !stream.done
                    && let Poll::Ready(r) = stream.run.as_mut().poll(cx)
                {
                    stream.done = true;
                    stream.outcome = Some(r);
                }
                if stream.done {
                    return Poll::Ready(Wait::Ended);
                }
                ticker.poll_tick(cx).map(|()| Wait::Tick)
            })
            .await;
            match wait {
                Wait::Head(head) => return Ok(head),
                Wait::Ended => {
                    // The answer is published before its bytes: look once more.
                    if let Poll::Ready(head) =
                        poll_fn(|cx| Poll::Ready(stream.line.poll_head(cx))).await
                    {
                        return Ok(head);
                    }
                    return Err(match stream.outcome.take() {
                        Some(Err(e)) => e,
                        _ => Error::new(
                            Status::Http,
                            format!(
                                "{}: no answer with the object's bytes",
                                self.locator.display()
                            ),
                        ),
                    });
                }
                Wait::Tick => {
                    if let Some(d) = self.options.deadline
                        && started.elapsed() >= d
                    {
                        return Err(Error::new(
                            Status::Timeout,
                            format!(
                                "{}: the download's deadline passed before the first answer",
                                self.dest.display()
                            ),
                        ));
                    }
                }
            }
        }
    }

    /// The stream failed with `Range` before any answer: an empty object (confirmed by
    /// `stat`, which reads the 416 as size 0) is published as an empty file; anything else
    /// fails with the stream's error.
    async fn empty(&mut self, e: Error, stats: &BatchStats, temp: Temp) -> Result<DownloadResult> {
        let info = self.client.stat_async(self.locator).await?;
        if info.size != 0 {
            return Err(e);
        }
        let mut result = DownloadResult {
            etag: info.etag,
            ..DownloadResult::default()
        };
        result.add(stats);
        result.requests = result.requests.saturating_add(2);
        temp.publish(self.dest, self.options.overwrite)?;
        sidecar::remove(self.dest);
        Ok(result)
    }

    /// The object in one unpinned stream from its first byte, replacing `stream` (which did
    /// not cover it).
    async fn whole(
        &mut self,
        temp: &mut Temp,
        layout: &Layout,
        stream: &mut Stream<'_>,
        ticker: &Ticker,
        budget: &mut Budget,
        result: &mut DownloadResult,
    ) -> Result<()> {
        stream.finish().await;
        result.add(&stream.counters.stats());
        result.requests = result.requests.saturating_add(1);
        let file = temp
            .try_clone_file()
            .map_err(|e| io_error(self.dest, "cannot write temporary output", e))?;
        let line = Line::new(0);
        let counters = Batch {
            shared: Shared::new(0, false),
            _engine: None,
        };
        let total = match self.locator.window_length() {
            Some(_) => None,
            None => Some(layout.size + self.locator.window_offset()),
        };
        let job = stream::job(
            self.locator.clone(),
            file,
            (0, Some(layout.size)),
            None,
            total,
            Arc::clone(&counters.shared),
            Arc::clone(&line),
        );
        let mut whole = Stream::new(
            self.client,
            job,
            counters,
            line,
            (0, layout.size),
            layout.chunk,
        );
        self.progress(0, layout.size)?;
        let mut chunks = Chunks::new(1);
        let outcome = self
            .drive(
                temp,
                None,
                layout,
                None,
                &mut chunks,
                Some((&mut whole, None)),
                Plan::Alone,
                ticker,
                budget,
                result,
            )
            .await;
        whole.finish().await;
        outcome
    }

    /// A saved resume state that fits (the same size and ETag as already known, when they
    /// are): the temporary file, what was saved, and the sidecar to record new chunks in.
    /// Otherwise a fresh temporary file (and any saved state removed).
    fn resume_state(
        &self,
        size: Option<u64>,
        etag: Option<&str>,
    ) -> Result<(Temp, Option<Saved>, Option<Sidecar>)> {
        let dest = self.dest;
        if self.options.resume
            && let Some(saved) = sidecar::load(dest)
        {
            let old = temp::part_path(dest, &saved.temp_id);
            let fits = saved.chunk_size == self.options.chunk_size
                && saved.size > 0
                && size.is_none_or(|s| s == saved.size)
                && etag.is_none_or(|t| t == saved.etag);
            if fits
                && let Ok(temp) = Temp::reopen(old.clone())
                && temp.len().ok() == Some(saved.size)
                && let Ok(sidecar) = Sidecar::append(dest)
            {
                return Ok((temp, Some(saved), Some(sidecar)));
            }
            // Another version (or a layout that no longer fits): start over cleanly.
            let _ = std::fs::remove_file(&old);
            sidecar::remove(dest);
        }
        Ok((Temp::create(dest)?, None, None))
    }

    /// A fresh temporary file of the layout's size for a local file, after removing any
    /// saved resume state (a local file has no ETag: a later call could not tell its version).
    fn prepare(&self, layout: &Layout) -> Result<Temp> {
        let dest = self.dest;
        if let Some(saved) = sidecar::load(dest).filter(|_| self.options.resume) {
            let _ = std::fs::remove_file(temp::part_path(dest, &saved.temp_id));
            sidecar::remove(dest);
        }
        let temp = Temp::create(dest)?;
        temp.set_len(layout.size)
            .map_err(|e| io_error(dest, "cannot size temporary output", e))?;
        Ok(temp)
    }

    /// What the link estimate says before a byte is read: `Some(true)` when one stream is
    /// slower than the link (split at once), `Some(false)` when one stream keeps up with it
    /// (never split), `None` when it cannot tell (measure the stream).
    fn estimate_verdict(&self) -> Option<bool> {
        verdict(&self.client.link_estimate(self.locator))
    }

    /// Runs the stream (when given, with the ETag its answer proved) and the chunks until
    /// every byte is written, reporting progress on each tick. With [`Plan::Measure`], chunks
    /// take the rest beside the stream once its rate shows that one stream is slower than
    /// the link (see [`split`]); the stream then stops where they begin.
    #[allow(clippy::too_many_arguments)]
    async fn drive(
        &mut self,
        temp: &mut Temp,
        mut sidecar: Option<&mut Sidecar>,
        layout: &Layout,
        pin: Option<&Condition>,
        chunks: &mut Chunks,
        mut stream: Option<(&mut Stream<'_>, Option<&str>)>,
        plan: Plan,
        ticker: &Ticker,
        budget: &mut Budget,
        result: &mut DownloadResult,
    ) -> Result<()> {
        let dest = self.dest;
        let size = layout.size;
        let mut reported = result.downloaded.min(size);
        // The stream's received bytes at the first tick with bytes flowing: the rate over
        // `SAMPLE` from there decides (not the first tick's, which includes the request's
        // round trip).
        let mut sample: Option<(Instant, u64)> = None;
        let mut measuring = plan == Plan::Measure;
        loop {
            if let Some((s, _)) = stream.as_mut()
                && let Some(outcome) = s.outcome.take()
            {
                let at = outcome.map_err(|e| e.context(dest.display()))?;
                // The stream must have reached where it stops (chunks take the rest), or the
                // object's end: an earlier end means the object is shorter than it said.
                if at < s.line.stop().min(s.until).min(size) {
                    return Err(stream::changed(&self.locator.display()));
                }
                result.add(&s.counters.stats());
                result.requests = result.requests.saturating_add(1);
                result.downloaded += at.min(size).saturating_sub(s.from);
                self.mark(&mut sidecar, s, layout, at)?;
            }
            let running = stream.as_ref().is_some_and(|(s, _)| !s.done);
            if !running && chunks.queue.is_empty() && chunks.in_flight.is_empty() {
                break;
            }
            chunks.beside = running;
            chunks.submit(self.client, self.locator, layout, pin)?;
            let event = poll_fn(|cx| {
                if let Some((s, _)) = stream.as_mut()
                    && !s.done
                    && let Poll::Ready(r) = s.run.as_mut().poll(cx)
                {
                    s.done = true;
                    s.outcome = Some(r);
                    return Poll::Ready(Event::Streamed);
                }
                for (i, f) in chunks.in_flight.iter().enumerate() {
                    // A chunk stays in flight until its last sub-read completed (or it failed):
                    // its batch has a completion to come.
                    if let Poll::Ready(Some(done)) = Pin::new(&mut f.batch.next_async()).poll(cx) {
                        return Poll::Ready(Event::Chunk(i, done));
                    }
                }
                ticker.poll_tick(cx).map(|()| Event::Tick)
            })
            .await;
            match event {
                // Taken in at the top of the loop.
                Event::Streamed => {}
                Event::Chunk(at, completion) => {
                    let proven = stream.as_ref().and_then(|(_, tag)| *tag);
                    self.chunk_read(
                        temp,
                        &mut sidecar,
                        layout,
                        chunks,
                        at,
                        completion,
                        proven,
                        budget,
                        result,
                    )?;
                    reported = reported.max(result.downloaded.min(size));
                }
                Event::Tick => {
                    budget.check_time(dest, reported, size)?;
                    let mut streamed = 0;
                    if let Some((s, _)) = stream.as_mut()
                        && !s.done
                    {
                        let reached = s.line.reached();
                        self.mark(&mut sidecar, s, layout, reached)?;
                        streamed = reached.saturating_sub(s.from);
                    }
                    reported = reported
                        .max((result.downloaded + streamed + chunks.live(layout)).min(size));
                    self.progress(reported, size)?;
                    if measuring
                        && let Some((s, _)) = stream.as_mut()
                        && !s.done
                    {
                        let now = Instant::now();
                        let received = s.counters.stats().received_bytes;
                        match sample {
                            Some((then, before)) if before > 0 && now - then >= SAMPLE => {
                                measuring = false;
                                if split(received - before, now - then)
                                    && let Some(first) =
                                        layout.first_chunk_from(s.from + received + layout.chunk)
                                {
                                    // Chunks from `first` on, beside the stream, which stops
                                    // where they begin.
                                    let at = layout.span(first).0;
                                    s.line.stop_at(at);
                                    chunks.take_from(at, layout);
                                }
                            }
                            Some((_, before)) if before > 0 => {}
                            _ => sample = Some((now, received)),
                        }
                    }
                }
            }
        }
        result.downloaded = size;
        result.parallelism = if chunks.used {
            chunks.window.stats()
        } else {
            ParallelismStats {
                min: 1,
                max: 1,
                final_: 1,
                cuts: 0,
            }
        };
        if size == 0 {
            return Ok(());
        }
        self.progress(size, size)
    }

    /// Records in the sidecar the chunks the stream has written in full, up to visible
    /// offset `reached` (never past where it stops).
    fn mark(
        &self,
        sidecar: &mut Option<&mut Sidecar>,
        stream: &mut Stream<'_>,
        layout: &Layout,
        reached: u64,
    ) -> Result<()> {
        let upto = reached.min(stream.line.stop());
        while stream.marked < layout.count() {
            let (start, length) = layout.span(stream.marked);
            if start + length > upto {
                break;
            }
            if let Some(s) = sidecar.as_deref_mut() {
                s.done(stream.marked)
                    .map_err(|e| io_error(self.dest, "cannot write resume state", e))?;
            }
            stream.marked += 1;
        }
        Ok(())
    }

    /// Handles the completion of one sub-read of the chunk at `at` in flight: written into
    /// the file at its offset at once (its buffer freed with the completion), and the chunk
    /// recorded once all its sub-reads are; the whole chunk sent again when throttled (or
    /// when its answer could not prove the version); or the download's failure. A failing
    /// chunk stays in flight, so the caller's `settle` waits until its transfer is over.
    #[allow(clippy::too_many_arguments)]
    fn chunk_read(
        &mut self,
        temp: &mut Temp,
        sidecar: &mut Option<&mut Sidecar>,
        layout: &Layout,
        chunks: &mut Chunks,
        at: usize,
        completion: Completion,
        proven: Option<&str>,
        budget: &mut Budget,
        result: &mut DownloadResult,
    ) -> Result<()> {
        let dest = self.dest;
        let f = &mut chunks.in_flight[at];
        f.left = f.left.saturating_sub(1);
        let (offset, length) = layout.span(f.index);
        if let Err(e) = &completion.result {
            // A failed sub-read completes with its transfer's end (a throttled answer has
            // been recorded by then), unless its own buffer could not be had.
            let Some(retry_after) = f.batch.shared.handed_back() else {
                return Err(e.clone());
            };
            let InFlight {
                index, seq, batch, ..
            } = chunks.in_flight.swap_remove(at);
            result.add(&batch.stats());
            drop(batch);
            // Throttled: the whole chunk goes back to the front, holding no slot, and waits
            // for `Retry-After` or for the lowered window to have room (sub-reads written
            // before are written again, with the same version's bytes).
            let now = Instant::now();
            chunks.window.throttled(seq, chunks.requests(), now);
            chunks.queue.push_front(index);
            // Sent again as a new transfer: a retry, though not one of the exchange's.
            result.retries = result.retries.saturating_add(1);
            budget.throttled(self.locator, result, layout.size)?;
            let pause = match retry_after {
                Some(wait) => Some(wait.min(RETRY_AFTER_CAP)),
                // Nothing else is served: back off, doubling, so an idle store is not
                // hammered by one chunk.
                None if chunks.in_flight.is_empty() => Some(idle_pause(budget.streak)),
                None => None,
            };
            if let Some(p) = pause.filter(|p| !p.is_zero()) {
                chunks.hold = Some(chunks.hold.map_or(now + p, |h| h.max(now + p)));
            }
            return Ok(());
        }
        if f.unproven && self.locator.is_remote() {
            match (proven, completion.etag.as_deref()) {
                (Some(want), Some(got)) if want == got => {}
                (Some(_), Some(_)) => return Err(stream::changed(&self.locator.display())),
                // Nothing proves this answer's version: the chunk is read again, pinned,
                // once its transfer is over (its counters are then final).
                _ => f.redo = true,
            }
        }
        if !f.redo {
            // The tag is the sub-read's place in the chunk.
            let skip = completion.tag;
            let want = sub_read_length(length, skip);
            if completion.got != want {
                return Err(Error::new(
                    Status::Io,
                    format!(
                        "{}: download completed {} of {want} bytes at offset {}",
                        dest.display(),
                        completion.got,
                        offset + skip
                    ),
                ));
            }
            temp.write_at(completion.bytes(), offset + skip)
                .map_err(|e| io_error(dest, "cannot write temporary output", e))?;
        }
        // Its buffer goes back to the allocator now, not when the chunk ends: this is what
        // keeps a chunk in flight down to about one sub-read of memory.
        drop(completion);
        if f.left > 0 {
            return Ok(());
        }
        let InFlight {
            index, batch, redo, ..
        } = chunks.in_flight.swap_remove(at);
        result.add(&batch.stats());
        drop(batch);
        if redo {
            chunks.queue.push_front(index);
            return Ok(());
        }
        budget.streak = 0;
        chunks.window.clean(Instant::now());
        if let Some(s) = sidecar.as_deref_mut() {
            s.done(index)
                .map_err(|e| io_error(dest, "cannot write resume state", e))?;
        }
        result.downloaded += length;
        Ok(())
    }
}

/// How long a stream's rate is watched before `split` decides: one tick after the first
/// tick that saw bytes. The earlier chunks start, the more of the object they carry (a
/// 300 ms look left a 50 ms link's stream alone for 40 % of a 256 MiB object); a stream
/// held up for one tick on a busy machine may be split when it need not be, which costs
/// requests, not bytes.
const SAMPLE: Duration = Duration::from_millis(100);

/// A stream whose body arrives faster than this keeps up with the link: parallel chunks
/// beside it lose to their own round trips, buffers and copies. Measured on loopback
/// (`karu-bench --workloads D`, 2026-12-05): one stream over 100 ms ran at 1.4 GB/s at RTT
/// 0, 690–720 MB/s at 20 ms, where 8 chunks took 1.5–2× its wall, and 270–330 MB/s at
/// 50 ms (window-bound), where they took 0.6–0.9×; an s3s-fs stream (4 KiB blocking reads
/// per step) ran at 90–260 MB/s, where they took 0.5–0.8×.
const FAST_STREAM: f64 = 400e6;

/// Whether to split the rest of a pinned download into parallel chunks beside its stream,
/// from the stream's body rate: `bytes` in `elapsed`. Parallel chunks pay off where one
/// stream is slow (a store that serves each request slowly, or a window-limited path);
/// where a stream already moves bytes about as fast as the client takes them, chunks only
/// add round trips, buffers and copies.
fn split(bytes: u64, elapsed: Duration) -> bool {
    let secs = elapsed.as_secs_f64();
    secs <= 0.0 || (bytes as f64) / secs < FAST_STREAM
}

/// How much more than one connection the link must carry for chunks to go out at once.
const SPLIT_GAIN: f64 = 1.5;

/// The link estimate's word on splitting, before a byte is read: `Some(false)` when its
/// measured connections run at [`FAST_STREAM`] or more and no measurement shows the link
/// carrying [`SPLIT_GAIN`] times more (one stream keeps up), `Some(true)` when they are
/// slower and parallel bodies were measured to carry that much more, `None` (measure the
/// stream) otherwise.
fn verdict(e: &LinkEstimate) -> Option<bool> {
    if e.rate_samples == 0 {
        return None;
    }
    let connection = e.model.connection_rate as f64;
    let more = e.total_samples > 0 && e.model.total_rate as f64 >= SPLIT_GAIN * connection;
    match (connection >= FAST_STREAM, more) {
        (true, false) => Some(false),
        (false, true) => Some(true),
        _ => None,
    }
}

/// The pause before resubmitting when every chunk in flight was throttled and the store gave
/// no `Retry-After`: 100 ms, doubling with the throttled answers in a row, at most 1.6 s.
fn idle_pause(streak: u64) -> Duration {
    Duration::from_millis(100 << streak.saturating_sub(1).min(4))
}

/// One budget for the whole download: a deadline and caps on throttled answers.
struct Budget {
    deadline: Option<Instant>,
    /// Most throttled answers in all.
    max_throttled: u64,
    /// Most throttled answers in a row without a chunk finishing.
    streak_limit: u64,
    streak: u64,
}

impl Budget {
    /// `Timeout` once the deadline has passed.
    fn check_time(&self, dest: &Path, done: u64, size: u64) -> Result<()> {
        match self.deadline {
            Some(d) if Instant::now() >= d => Err(Error::new(
                Status::Timeout,
                format!(
                    "{}: the download's deadline passed with {done} of {size} bytes written",
                    dest.display()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Counts one more throttled chunk; fails once the store refused too often.
    fn throttled(&mut self, locator: &Locator, result: &DownloadResult, size: u64) -> Result<()> {
        self.streak += 1;
        if result.throttled <= self.max_throttled && self.streak <= self.streak_limit {
            return Ok(());
        }
        Err(Error::new(
            Status::Http,
            format!(
                "{}: the store keeps throttling the download: {} answers 429 or 503 ({} in a \
                 row), {} of {size} bytes written",
                locator.display(),
                result.throttled,
                self.streak,
                result.downloaded
            ),
        ))
    }
}

/// Runs a future on this thread, parking between wake-ups.
pub(crate) fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let mut f = std::pin::pin!(f);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(out) => return out,
            Poll::Pending => std::thread::park(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fast_stream_stays_alone_and_a_slow_one_gets_chunks() {
        let ms = Duration::from_millis;
        // 50 MiB in a 100 ms tick (~520 MB/s): the stream keeps up with the link.
        assert!(!split(50 << 20, ms(100)));
        // 30 MB in 100 ms: a window-bound stream (50 ms away) or a slow store.
        assert!(split(30_000_000, ms(100)));
        // A store serving ~80 MB/s a stream, or a stalled one.
        assert!(split(8 << 20, ms(100)));
        assert!(split(0, ms(100)));
        assert!(split(1 << 20, Duration::ZERO));
    }

    #[test]
    fn chunks_lie_on_a_grid_from_the_first_byte() {
        let l = Layout {
            size: 100,
            chunk: 20,
        };
        assert_eq!(l.count(), 5);
        assert_eq!(l.first_chunk_from(0), Some(0));
        assert_eq!(l.first_chunk_from(1), Some(1));
        assert_eq!(l.first_chunk_from(20), Some(1));
        assert_eq!(l.first_chunk_from(80), Some(4));
        assert_eq!(l.first_chunk_from(81), None);
        assert_eq!(l.span(4), (80, 20));
        let short = Layout {
            size: 90,
            chunk: 20,
        };
        assert_eq!(short.span(4), (80, 10));
    }

    #[test]
    fn the_link_estimate_splits_only_with_samples_that_show_a_slow_stream() {
        let estimate = |connection: u64, total: u64, rate_samples, total_samples| {
            let mut e = LinkEstimate::priors(8);
            e.model.connection_rate = connection;
            e.model.total_rate = total;
            e.rate_samples = rate_samples;
            e.total_samples = total_samples;
            e
        };
        // Nothing measured: measure the stream.
        assert_eq!(verdict(&estimate(10_000_000, 1_000_000_000, 0, 0)), None);
        // Connections at 500 MB/s keep up with the link: never split.
        assert_eq!(
            verdict(&estimate(500_000_000, 600_000_000, 4, 4)),
            Some(false)
        );
        assert_eq!(verdict(&estimate(500_000_000, 0, 4, 0)), Some(false));
        // Fast connections on a link measured to carry far more: measure the stream.
        assert_eq!(verdict(&estimate(500_000_000, 2_000_000_000, 4, 4)), None);
        // 60 MB/s connections on a link measured at 400 MB/s: split at once.
        assert_eq!(
            verdict(&estimate(60_000_000, 400_000_000, 4, 2)),
            Some(true)
        );
        // Slow connections, but nothing shows the link carrying more: measure.
        assert_eq!(verdict(&estimate(60_000_000, 70_000_000, 4, 2)), None);
        assert_eq!(verdict(&estimate(60_000_000, 400_000_000, 4, 0)), None);
    }
}
