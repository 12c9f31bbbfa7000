//! `Client::download`: one object into one file, read as parallel ranged chunks that are all
//! pinned to the version a first probe saw (by its strong ETag with `If-Match`, else by its
//! `Last-Modified` and size with `If-Unmodified-Since`; with neither, one stream), written
//! positionally into a temporary file beside the destination and published atomically
//! (spec §6, plus throttling-aware parallelism, resume across calls and a choice of what to
//! do when the object changes).

mod sidecar;
mod stream;
mod temp;
mod tick;
mod window;

use std::collections::{BTreeSet, VecDeque};
use std::future::{Future, poll_fn};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use crate::batch::{Batch, BatchStats, Completion, Shared};
use crate::client::Client;
use crate::error::{Error, Result, Status};
use crate::locator::Locator;
use crate::probe::Ends;
use crate::read::Read;
use crate::validate::condition::Condition;
use sidecar::Sidecar;
use temp::{Temp, io_error};
use tick::Ticker;
use window::Window;

/// Default chunk size: 8 MiB (`KARU_DOWNLOAD_CHUNK_SIZE_DEFAULT`).
pub const DEFAULT_CHUNK_SIZE: u64 = 8 << 20;
/// Default number of chunks in flight (`KARU_DOWNLOAD_PARALLELISM_DEFAULT`).
pub const DEFAULT_PARALLELISM: u64 = 8;
/// The probe reads at most this much (and at most one chunk).
const PROBE_MAX: u64 = 1 << 20;
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

/// How a download with a version pin (a strong ETag or a `Last-Modified`) reads the bytes
/// after its probe.
///
/// ```
/// let options = karu::DownloadOptions { chunking: karu::Chunking::Always, ..Default::default() };
/// assert_eq!(karu::Chunking::default(), karu::Chunking::Measured);
/// # let _ = options;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Chunking {
    /// One pinned stream after the probe, straight into the file; parallel chunks take the
    /// rest of the object beside it only once the stream's measured rate shows it slower
    /// than the link (a stream keeping up with the link gains nothing from chunks but round
    /// trips, buffers and copies).
    #[default]
    Measured,
    /// Parallel chunks right after the probe, whatever one stream could do.
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
    /// Called after the probe, then every 100 ms with the bytes received so far (counted as
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

/// What a finished download did. Counters are summed over the probe (its retries,
/// throttled answers and connections included) and every chunk.
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
/// assert_eq!(result.requests, 3); // the 4096-byte probe, then two chunks
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
    /// HTTP requests (or local reads) made: the probe plus each chunk's transfers and retries.
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
    /// A probe of `min(chunk_size, 1 MiB)` bytes learns the size and strong ETag (no HEAD)
    /// and is the file's first bytes; every later chunk carries `If-Match` with that ETag.
    /// Without a strong ETag, every chunk carries `If-Unmodified-Since` with the probe's
    /// `Last-Modified`, and each answer must repeat that date and the probe's object size;
    /// with neither validator the object is read in one stream.
    /// Chunks go into `<destination>.karu.part.<pid>.<n>`, which is published by hard link
    /// (never replacing a file) or, with `overwrite`, by atomic rename. Any failure or
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

/// Where chunk `i` lies: chunks follow the probe's bytes back to back.
#[derive(Clone, Copy)]
struct Layout {
    size: u64,
    probe: u64,
    chunk: u64,
}

impl Layout {
    fn count(&self) -> u64 {
        (self.size - self.probe).div_ceil(self.chunk)
    }

    /// The first chunk starting at or after visible offset `at`, if any.
    fn first_chunk_from(&self, at: u64) -> Option<u64> {
        let i = at.saturating_sub(self.probe).div_ceil(self.chunk);
        (i < self.count()).then_some(i)
    }

    fn span(&self, i: u64) -> (u64, u64) {
        let start = self.probe + i * self.chunk;
        (start, self.chunk.min(self.size - start))
    }
}

/// A chunk in flight: its batch of one read.
struct InFlight {
    index: u64,
    seq: u64,
    batch: Batch,
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
        let chunk = self.options.chunk_size;
        let probe_stats = Batch {
            shared: Shared::new(0, false),
            _engine: None,
        };
        let mut probe_requests = 1;
        let ends = match self
            .client
            .read_ends_counted(
                self.locator,
                chunk.min(PROBE_MAX),
                0,
                Arc::clone(&probe_stats.shared),
            )
            .await
        {
            Ok(ends) => ends,
            // A remote head read of an empty object is answered 416, which `read_ends`
            // reports as `Range`; `stat` reads that 416 as size 0. Any other size means the
            // `Range` was real.
            Err(e) if e.status() == Status::Range && self.locator.is_remote() => {
                let info = self.client.stat_async(self.locator).await?;
                probe_requests += 1;
                if info.size != 0 {
                    return Err(e);
                }
                Ends {
                    head: Vec::new(),
                    tail: Vec::new(),
                    info,
                    date_pin: None,
                }
            }
            Err(e) => return Err(e),
        };
        let layout = Layout {
            size: ends.info.size,
            probe: ends.head.len() as u64,
            chunk,
        };
        let etag = ends.info.etag.clone();
        let mut result = DownloadResult {
            size: layout.size,
            etag: etag.clone(),
            ..DownloadResult::default()
        };
        result.add(&probe_stats.stats());
        result.requests = result.requests.saturating_add(probe_requests);
        if !self.locator.is_remote() {
            result.received_bytes = layout.probe;
        }
        let mut budget = Budget {
            deadline: self
                .time_budget(layout.count())
                .and_then(|d| started.checked_add(d)),
            max_throttled: match self.options.max_throttled {
                0 => {
                    (16 + 2 * self.options.parallelism.min(1 << 20)).saturating_add(layout.count())
                }
                n => n,
            },
            streak_limit: 16 + 2 * self.options.parallelism.min(1 << 20),
            streak: 0,
        };
        let ticker = Ticker::start(TICK)?;

        // Every chunk is pinned to the probe's version: by its strong ETag, else by its
        // `Last-Modified` and size.
        let pin = match (&etag, &ends.date_pin) {
            (Some(tag), _) => Some(Condition::IfMatch(tag.clone())),
            (None, date_pin) => date_pin.clone(),
        };
        if self.locator.is_remote() && pin.is_none() && layout.size > 0 {
            // No validator at all: chunks could come from two versions. One stream instead.
            let temp = Temp::create(dest)?;
            temp.set_len(layout.size)
                .map_err(|e| io_error(dest, "cannot size temporary output", e))?;
            let mut temp = temp;
            self.stream(
                &mut temp,
                None,
                &layout,
                None,
                &ticker,
                &mut budget,
                &mut result,
                &mut Vec::new(),
            )
            .await?;
            temp.publish(dest, self.options.overwrite)?;
            return Ok(result);
        }

        let (mut temp, done, mut sidecar) = self.prepare(&layout, etag.as_deref())?;
        let resumable = sidecar.is_some();
        let mut in_flight = Vec::new();
        let single = self.locator.is_remote()
            && self.options.chunking == Chunking::Measured
            && done.is_empty()
            && layout.count() > 1;
        let outcome = async {
            if single {
                // One stream after the probe, straight into the file; chunks join it only
                // where it proves slower than the link.
                temp.write_at(&ends.head, 0)
                    .map_err(|e| io_error(dest, "cannot write temporary output", e))?;
                result.downloaded = layout.probe;
                self.progress(layout.probe, layout.size)?;
                self.stream(
                    &mut temp,
                    sidecar.as_mut(),
                    &layout,
                    pin.as_ref(),
                    &ticker,
                    &mut budget,
                    &mut result,
                    &mut in_flight,
                )
                .await
            } else {
                let queue = self.start_chunks(&temp, &layout, &ends.head, &done, &mut result)?;
                self.fill(
                    &mut temp,
                    sidecar.as_mut(),
                    &layout,
                    queue,
                    pin.as_ref(),
                    &ticker,
                    &mut budget,
                    &mut result,
                    &mut in_flight,
                )
                .await
            }
        }
        .await;
        settle(in_flight).await;
        drop(sidecar);
        if let Err(e) = outcome {
            // A changed object leaves nothing worth resuming.
            if resumable && e.status() != Status::Precondition {
                temp.keep();
                let kept = format!(
                    "{e}; kept {} and {} to resume",
                    temp.path().display(),
                    sidecar::path(dest).display()
                );
                return Err(Error::new(e.status(), kept));
            }
            sidecar::remove(dest);
            return Err(e);
        }
        temp.publish(dest, self.options.overwrite)?;
        sidecar::remove(dest);
        Ok(result)
    }

    /// The temporary file, the chunks it already holds, and the sidecar to record new ones in.
    fn prepare(
        &self,
        layout: &Layout,
        etag: Option<&str>,
    ) -> Result<(Temp, BTreeSet<u64>, Option<Sidecar>)> {
        let dest = self.dest;
        if !self.options.resume {
            let temp = Temp::create(dest)?;
            temp.set_len(layout.size)
                .map_err(|e| io_error(dest, "cannot size temporary output", e))?;
            return Ok((temp, BTreeSet::new(), None));
        }
        if let Some(saved) = sidecar::load(dest) {
            let old = temp::part_path(dest, &saved.temp_id);
            let same = Some(saved.etag.as_str()) == etag
                && saved.size == layout.size
                && saved.chunk_size == layout.chunk;
            if same
                && let Ok(temp) = Temp::reopen(old.clone())
                && temp.len().ok() == Some(layout.size)
                && let Ok(sidecar) = Sidecar::append(dest)
            {
                let done = saved
                    .done
                    .into_iter()
                    .filter(|&i| i < layout.count())
                    .collect();
                return Ok((temp, done, Some(sidecar)));
            }
            // Another version (or a layout that no longer fits): start over cleanly.
            let _ = std::fs::remove_file(&old);
            sidecar::remove(dest);
        }
        let temp = Temp::create(dest)?;
        temp.set_len(layout.size)
            .map_err(|e| io_error(dest, "cannot size temporary output", e))?;
        // Without a strong ETag a later call could not tell the version: no sidecar.
        let sidecar = match etag {
            Some(tag) => Some(
                Sidecar::create(dest, tag, layout.size, layout.chunk, &temp.id())
                    .map_err(|e| io_error(dest, "cannot write resume state", e))?,
            ),
            None => None,
        };
        Ok((temp, BTreeSet::new(), sidecar))
    }

    /// Reads the object in one stream into `temp`, reporting progress on each tick: with
    /// `pin`, the rest after the probe's bytes (already in `temp`), pinned by it, handing
    /// the chunks past the stream to parallel pinned requests once its rate shows that one
    /// stream is slower than the link (see [`split`]); without, the whole object from its
    /// first byte.
    #[allow(clippy::too_many_arguments)]
    async fn stream(
        &mut self,
        temp: &mut Temp,
        sidecar: Option<&mut Sidecar>,
        layout: &Layout,
        pin: Option<&Condition>,
        ticker: &Ticker,
        budget: &mut Budget,
        result: &mut DownloadResult,
        in_flight: &mut Vec<InFlight>,
    ) -> Result<()> {
        let dest = self.dest;
        let size = layout.size;
        let file = temp
            .try_clone_file()
            .map_err(|e| io_error(dest, "cannot write temporary output", e))?;
        // Dropping this cancels the stream (a failure or cancellation here stops it).
        let counters = Batch {
            shared: Shared::new(0, false),
            _engine: None,
        };
        let total = match self.locator.window_length() {
            Some(_) => None,
            None => Some(size + self.locator.window_offset()),
        };
        let start = match pin {
            Some(_) => layout.probe,
            None => 0,
        };
        let stop = Arc::new(AtomicU64::new(size));
        let job = stream::job(
            self.locator.clone(),
            file,
            (start, size),
            pin.cloned(),
            total,
            Arc::clone(&counters.shared),
            Arc::clone(&stop),
        );
        let client = self.client;
        let mut run = std::pin::pin!(client.run_remote(job));
        let mut reported = start;
        // The stream's received bytes at the previous tick: two ticks give its body rate.
        let mut sample: Option<(Instant, u64)> = None;
        let mut decided = false;
        let mut steal = None;
        let mut outcome = loop {
            let done = poll_fn(|cx| match run.as_mut().poll(cx) {
                Poll::Ready(r) => Poll::Ready(Some(r)),
                Poll::Pending => ticker.poll_tick(cx).map(|()| None),
            })
            .await;
            if let Some(r) = done {
                break r;
            }
            budget.check_time(dest, reported, size)?;
            let received = counters.stats().received_bytes;
            reported = reported.max((start + received).min(size));
            self.progress(reported, size)?;
            if pin.is_some() && !decided {
                let now = Instant::now();
                match sample {
                    // The first tick with bytes flowing starts the sample; the rate over
                    // `SAMPLE` from there decides (a longer look than one tick, so that a
                    // stream held up for a moment on a busy machine is not taken for slow).
                    Some((then, before)) if before > 0 && now - then >= SAMPLE => {
                        decided = true;
                        if split(received - before, now - then) {
                            steal = layout.first_chunk_from(start + received + layout.chunk);
                            if steal.is_some() {
                                break Ok(());
                            }
                        }
                    }
                    Some((_, before)) if before > 0 => {}
                    _ => sample = Some((now, received)),
                }
            }
        };
        if let Some(first) = steal {
            // Chunks from `first` on, beside the stream, which stops where they begin.
            stop.store(layout.span(first).0, Ordering::Release);
            result.downloaded = reported;
            let queue = (first..layout.count()).collect();
            let fill = self.fill(
                temp, sidecar, layout, queue, pin, ticker, budget, result, in_flight,
            );
            let mut fill = std::pin::pin!(fill);
            let (mut streamed, mut filled) = (None, None);
            poll_fn(|cx| {
                if streamed.is_none()
                    && let Poll::Ready(r) = run.as_mut().poll(cx)
                {
                    streamed = Some(r);
                }
                if filled.is_none()
                    && let Poll::Ready(r) = fill.as_mut().poll(cx)
                {
                    filled = Some(r);
                }
                let failed = matches!(streamed, Some(Err(_))) || matches!(filled, Some(Err(_)));
                if failed || (streamed.is_some() && filled.is_some()) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            })
            .await;
            outcome = match (streamed, filled) {
                (_, Some(Err(e))) | (Some(Err(e)), _) => Err(e),
                _ => Ok(()),
            };
        }
        let stats = counters.stats();
        result.add(&stats);
        result.requests = result.requests.saturating_add(1);
        outcome.map_err(|e| e.context(dest.display()))?;
        result.downloaded = size;
        if steal.is_none() {
            result.parallelism = ParallelismStats {
                min: 1,
                max: 1,
                final_: 1,
                cuts: 0,
            };
        }
        self.progress(size, size)
    }

    /// Writes the probe's bytes and notes the chunks an earlier call left; returns the
    /// chunks still to read.
    fn start_chunks(
        &mut self,
        temp: &Temp,
        layout: &Layout,
        head: &[u8],
        done: &BTreeSet<u64>,
        result: &mut DownloadResult,
    ) -> Result<VecDeque<u64>> {
        temp.write_at(head, 0)
            .map_err(|e| io_error(self.dest, "cannot write temporary output", e))?;
        result.downloaded = layout.probe;
        for &i in done {
            result.downloaded += layout.span(i).1;
        }
        result.resumed_chunks = done.len() as u64;
        if layout.probe > 0 {
            self.progress(result.downloaded, layout.size)?;
        }
        Ok((0..layout.count()).filter(|i| !done.contains(i)).collect())
    }

    /// Runs the chunk window until every chunk of `queue` is written.
    #[allow(clippy::too_many_arguments)]
    async fn fill(
        &mut self,
        temp: &mut Temp,
        mut sidecar: Option<&mut Sidecar>,
        layout: &Layout,
        mut queue: VecDeque<u64>,
        pin: Option<&Condition>,
        ticker: &Ticker,
        budget: &mut Budget,
        result: &mut DownloadResult,
        in_flight: &mut Vec<InFlight>,
    ) -> Result<()> {
        let dest = self.dest;
        let write_err = |e| io_error(dest, "cannot write temporary output", e);
        let mut window = Window::new(self.options.parallelism);
        let mut buffers: Vec<Vec<u8>> = Vec::new();
        // No submission before this: a `Retry-After`, or a pause while nothing is served.
        let mut hold: Option<Instant> = None;
        let mut reported = result.downloaded;
        while !queue.is_empty() || !in_flight.is_empty() {
            let now = Instant::now();
            if hold.is_some_and(|h| h <= now) {
                hold = None;
            }
            while hold.is_none()
                && (in_flight.len() as u64) < window.window()
                && let Some(index) = queue.pop_front()
            {
                let (offset, length) = layout.span(index);
                let mut read = Read::new(self.locator, offset, length)
                    .into_buffer(buffers.pop().unwrap_or_default());
                if let Some(pin) = pin {
                    read = read.pinned(pin.clone());
                }
                let batch = self.client.submit_chunk(read)?;
                in_flight.push(InFlight {
                    index,
                    seq: window.submit(),
                    batch,
                });
            }
            let Some((at, completion)) = next_or_tick(in_flight, ticker).await else {
                budget.check_time(dest, reported, layout.size)?;
                let live: u64 = in_flight
                    .iter()
                    .map(|f| {
                        let length = layout.span(f.index).1;
                        f.batch.stats().received_bytes.min(length)
                    })
                    .sum();
                reported = reported.max(result.downloaded + live);
                self.progress(reported, layout.size)?;
                continue;
            };
            let InFlight { index, seq, batch } = in_flight.swap_remove(at);
            let stats = batch.stats();
            let handed_back = batch.shared.handed_back();
            drop(batch);
            result.add(&stats);
            let (offset, length) = layout.span(index);
            if let Some(retry_after) = handed_back {
                buffers.extend(completion.buffer);
                // Throttled: the chunk goes back to the front, holding no slot, and waits for
                // `Retry-After` or for the lowered window to have room.
                let now = Instant::now();
                window.throttled(seq, in_flight.len() as u64, now);
                queue.push_front(index);
                // Sent again as a new transfer: a retry, though not one of the exchange's.
                result.retries = result.retries.saturating_add(1);
                budget.throttled(self.locator, result, layout.size)?;
                let pause = match retry_after {
                    Some(wait) => Some(wait.min(RETRY_AFTER_CAP)),
                    // Nothing else is served: back off, doubling, so an idle store is not
                    // hammered by one chunk.
                    None if in_flight.is_empty() => Some(idle_pause(budget.streak)),
                    None => None,
                };
                if let Some(p) = pause.filter(|p| !p.is_zero()) {
                    hold = Some(hold.map_or(now + p, |h| h.max(now + p)));
                }
                continue;
            }
            if let Err(e) = &completion.result {
                return Err(e.clone());
            }
            budget.streak = 0;
            window.clean(Instant::now());
            if completion.got != length {
                return Err(Error::new(
                    Status::Io,
                    format!(
                        "{}: download completed {} of {length} bytes at offset {offset}",
                        dest.display(),
                        completion.got
                    ),
                ));
            }
            temp.write_at(completion.bytes(), offset)
                .map_err(write_err)?;
            if let Some(s) = sidecar.as_deref_mut() {
                s.done(index)
                    .map_err(|e| io_error(dest, "cannot write resume state", e))?;
            }
            buffers.extend(completion.buffer);
            result.downloaded += length;
            reported = reported.max(result.downloaded);
        }
        result.parallelism = window.stats();
        if layout.size == 0 {
            return Ok(());
        }
        self.progress(result.downloaded, layout.size)
    }
}

/// How long a stream's rate is watched before `split` decides.
const SAMPLE: Duration = Duration::from_millis(300);

/// A stream whose body arrives faster than this keeps up with the link: at this rate the
/// client's copies, not the network, bound a transfer.
const FAST_STREAM: f64 = 150e6;

/// Whether to split the rest of a pinned download into parallel chunks beside its stream,
/// from the stream's body rate: `bytes` in `elapsed`. Parallel chunks pay off where one
/// stream is slow (a store that serves each request slowly, or a window-limited path);
/// where a stream already moves bytes about as fast as the client takes them, chunks only
/// add round trips, buffers and copies. The one place to give the decision a link estimate.
fn split(bytes: u64, elapsed: Duration) -> bool {
    let secs = elapsed.as_secs_f64();
    secs <= 0.0 || (bytes as f64) / secs < FAST_STREAM
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

/// Cancels the chunks still in flight and waits until no worker holds them, so a download
/// that stops (failure, deadline, cancellation) returns only once its requests are over.
async fn settle(in_flight: Vec<InFlight>) {
    for f in &in_flight {
        f.batch.shared.cancel();
    }
    poll_fn(|cx| {
        for f in &in_flight {
            if f.batch.shared.poll_idle(cx).is_pending() {
                return Poll::Pending;
            }
        }
        Poll::Ready(())
    })
    .await
}

/// The first completion of any chunk in flight with the chunk's position, or `None` on a
/// tick.
async fn next_or_tick(in_flight: &[InFlight], ticker: &Ticker) -> Option<(usize, Completion)> {
    poll_fn(|cx| {
        for (i, f) in in_flight.iter().enumerate() {
            // A batch of one read completes exactly once.
            if let Poll::Ready(Some(done)) = Pin::new(&mut f.batch.next_async()).poll(cx) {
                return Poll::Ready(Some((i, done)));
            }
        }
        ticker.poll_tick(cx).map(|()| None)
    })
    .await
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
        // A store serving ~80 MB/s a stream, or a stalled one.
        assert!(split(8 << 20, ms(100)));
        assert!(split(0, ms(100)));
        assert!(split(1 << 20, Duration::ZERO));
    }

    #[test]
    fn chunks_start_on_the_grid_after_the_probe() {
        let l = Layout {
            size: 100,
            probe: 10,
            chunk: 20,
        };
        assert_eq!(l.count(), 5);
        assert_eq!(l.first_chunk_from(0), Some(0));
        assert_eq!(l.first_chunk_from(10), Some(0));
        assert_eq!(l.first_chunk_from(11), Some(1));
        assert_eq!(l.first_chunk_from(90), Some(4));
        assert_eq!(l.first_chunk_from(91), None);
        assert_eq!(l.span(4), (90, 10));
    }
}
