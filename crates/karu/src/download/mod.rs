//! `Client::download`: one object into one file, read as parallel ranged chunks that are all
//! pinned to the ETag a first probe saw, written positionally into a temporary file beside
//! the destination and published atomically (spec §6, plus throttling-aware parallelism,
//! resume across calls and a choice of what to do when the object changes).

mod sidecar;
mod temp;
mod window;

use std::collections::{BTreeSet, VecDeque};
use std::future::{Future, poll_fn};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use crate::batch::{Batch, BatchStats, Completion};
use crate::client::Client;
use crate::error::{Error, Result, Status};
use crate::locator::Locator;
use crate::probe::Ends;
use crate::read::Read;
use sidecar::Sidecar;
use temp::{Temp, io_error};
use window::Aimd;

/// Default chunk size: 8 MiB (`KARU_DOWNLOAD_CHUNK_SIZE_DEFAULT`).
pub const DEFAULT_CHUNK_SIZE: u64 = 8 << 20;
/// Default number of chunks in flight (`KARU_DOWNLOAD_PARALLELISM_DEFAULT`).
pub const DEFAULT_PARALLELISM: u64 = 8;
/// The probe reads at most this much (and at most one chunk).
const PROBE_MAX: u64 = 1 << 20;
/// How often one chunk may be put back in the queue after its retries ran out on a
/// throttling store (each time the window is cut first).
const THROTTLE_REQUEUES: u32 = 3;

/// The prefix of argument errors, shared with the C ABI's `karu_client_download`.
const FUNCTION: &str = "karu_client_download";

/// What a download does when the object changes under it (a 412 on a pinned chunk).
///
/// ```
/// let options = karu::DownloadOptions { on_change: karu::OnChange::Restart, ..Default::default() };
/// assert_eq!(options.on_change, karu::OnChange::Restart);
/// assert_eq!(karu::OnChange::default(), karu::OnChange::Fail);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnChange {
    /// Fail with `Precondition`; nothing is published.
    #[default]
    Fail,
    /// Start over once against the new version, as a cold read of the changed object would.
    Restart,
}

/// The progress callback: `(completed, total)` bytes; returning `false` cancels.
pub type Progress<'a> = Box<dyn FnMut(u64, u64) -> bool + Send + 'a>;

/// How to download. `Default` gives 8 MiB chunks, 8 in flight, no overwrite, no resume,
/// fail on change and no progress callback.
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
    /// Replace an existing destination (atomically); otherwise it is refused.
    pub overwrite: bool,
    /// Keep an interrupted download's temporary file and `<dest>.karu.resume` sidecar, and
    /// continue from them on the next call if the object still has the same ETag (objects
    /// without a strong ETag, local files included, always start over).
    pub resume: bool,
    /// What to do when the object changes mid-download.
    pub on_change: OnChange,
    /// Called after the probe and after each chunk with `(completed, total)`; `false`
    /// cancels the download with `Cancelled`.
    pub progress: Option<Progress<'a>>,
}

impl Default for DownloadOptions<'_> {
    fn default() -> Self {
        DownloadOptions {
            chunk_size: DEFAULT_CHUNK_SIZE,
            parallelism: DEFAULT_PARALLELISM,
            overwrite: false,
            resume: false,
            on_change: OnChange::Fail,
            progress: None,
        }
    }
}

impl std::fmt::Debug for DownloadOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DownloadOptions")
            .field("chunk_size", &self.chunk_size)
            .field("parallelism", &self.parallelism)
            .field("overwrite", &self.overwrite)
            .field("resume", &self.resume)
            .field("on_change", &self.on_change)
            .field("progress", &self.progress.is_some())
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

/// The parallelism a download used: the window's smallest, largest and last value.
/// Without throttling all three are the requested parallelism.
///
/// ```
/// let p = karu::ParallelismStats { min: 2, max: 8, final_: 6 };
/// assert!(p.min <= p.final_ && p.final_ <= p.max);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParallelismStats {
    /// The lowest window (after throttling cut it).
    pub min: u64,
    /// The highest window.
    pub max: u64,
    /// The window when the download ended.
    pub final_: u64,
}

/// What a finished download did. Counters are summed over the probe and every chunk (the
/// probe counts as one request; its own retries are not visible to the download).
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
    /// without one).
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

    async fn run(&mut self) -> Result<DownloadResult> {
        let dest = self.dest;
        if !self.options.overwrite && dest.symlink_metadata().is_ok() {
            return Err(Error::new(
                Status::Io,
                format!("{}: destination already exists", dest.display()),
            ));
        }
        let chunk = self.options.chunk_size;
        let ends = match self
            .client
            .read_ends_async(self.locator, chunk.min(PROBE_MAX), 0)
            .await
        {
            Ok(ends) => ends,
            // A remote head read of an empty object is answered 416, which `read_ends`
            // reports as `Range`; `stat` reads that 416 as size 0. Any other size means the
            // `Range` was real.
            Err(e) if e.status() == Status::Range && self.locator.is_remote() => {
                let info = self.client.stat_async(self.locator).await?;
                if info.size != 0 {
                    return Err(e);
                }
                Ends {
                    head: Vec::new(),
                    tail: Vec::new(),
                    info,
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
            received_bytes: layout.probe,
            requests: 1,
            ..DownloadResult::default()
        };

        let (mut temp, done, mut sidecar) = self.prepare(&layout, etag.as_deref())?;
        let outcome = self
            .fill(
                &mut temp,
                sidecar.as_mut(),
                &layout,
                &ends.head,
                &done,
                etag.as_deref(),
                &mut result,
            )
            .await;
        drop(sidecar);
        if let Err(e) = outcome {
            // A changed object leaves nothing worth resuming.
            if self.options.resume && e.status() != Status::Precondition {
                temp.keep();
            } else {
                sidecar::remove(dest);
            }
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

    /// Writes the probe's bytes, then runs the chunk window until every chunk is written.
    #[allow(clippy::too_many_arguments)]
    async fn fill(
        &mut self,
        temp: &mut Temp,
        mut sidecar: Option<&mut Sidecar>,
        layout: &Layout,
        head: &[u8],
        done: &BTreeSet<u64>,
        etag: Option<&str>,
        result: &mut DownloadResult,
    ) -> Result<()> {
        let dest = self.dest;
        let write_err = |e| io_error(dest, "cannot write temporary output", e);
        temp.write_at(head, 0).map_err(write_err)?;
        result.downloaded = layout.probe;
        for &i in done {
            result.downloaded += layout.span(i).1;
        }
        result.resumed_chunks = done.len() as u64;
        if layout.probe > 0 {
            self.progress(result.downloaded, layout.size)?;
        }

        let mut queue: VecDeque<u64> = (0..layout.count()).filter(|i| !done.contains(i)).collect();
        let mut requeued = vec![0u32; layout.count() as usize];
        let mut aimd = Aimd::new(self.options.parallelism);
        let mut in_flight: Vec<InFlight> = Vec::new();
        let mut buffers: Vec<Vec<u8>> = Vec::new();
        while !queue.is_empty() || !in_flight.is_empty() {
            while (in_flight.len() as u64) < aimd.window()
                && let Some(index) = queue.pop_front()
            {
                let (offset, length) = layout.span(index);
                let mut read = Read::new(self.locator, offset, length)
                    .into_buffer(buffers.pop().unwrap_or_default());
                if let Some(tag) = etag {
                    read = read.if_match(tag);
                }
                let batch = self.client.submit(vec![read])?;
                in_flight.push(InFlight {
                    index,
                    seq: aimd.submit(),
                    batch,
                });
            }
            let (at, completion) = next_of(&in_flight).await;
            let InFlight { index, seq, batch } = in_flight.swap_remove(at);
            let stats = batch.stats();
            drop(batch);
            result.add(&stats);
            aimd.finished(seq, stats.throttled > 0);
            let (offset, length) = layout.span(index);
            if let Err(e) = &completion.result {
                let retry = stats.throttled > 0
                    && matches!(e.status(), Status::Http | Status::Network)
                    && requeued[index as usize] < THROTTLE_REQUEUES;
                if !retry {
                    return Err(e.clone());
                }
                // The store throttled this chunk past its retries: the window was just cut,
                // so try it again later instead of failing the whole download.
                requeued[index as usize] += 1;
                queue.push_back(index);
                continue;
            }
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
            self.progress(result.downloaded, layout.size)?;
        }
        result.parallelism = aimd.stats();
        Ok(())
    }
}

/// The first completion of any chunk in flight, with the chunk's position.
async fn next_of(in_flight: &[InFlight]) -> (usize, Completion) {
    poll_fn(|cx| {
        for (i, f) in in_flight.iter().enumerate() {
            if let Poll::Ready(done) = Pin::new(&mut f.batch.next_async()).poll(cx) {
                return Poll::Ready((i, done.expect("a batch of one read completes once")));
            }
        }
        Poll::Pending
    })
    .await
}

/// Runs a future on this thread, parking between wake-ups.
fn block_on<F: Future>(f: F) -> F::Output {
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
