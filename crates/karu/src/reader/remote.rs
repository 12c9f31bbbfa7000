//! A remote object behind a [`Reader`](super::Reader): versions seen so far (each with its
//! own block cache and readahead), and block fetches as one planned batch pinned to the
//! version.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;

use super::ReaderOptions;
use super::cache::{BlockCache, Claims, Lookup, Outcome};
use super::readahead::Readahead;
use crate::batch::{Batch, Shared};
use crate::client::Client;
use crate::dest::no_memory;
use crate::error::{Error, Result, Status};
use crate::locator::Locator;
use crate::probe::Ends;
use crate::read::Read;
use crate::validate::condition::Condition;

/// Readahead's cap in blocks (a sweep's requests then grow to this many blocks).
const MAX_READAHEAD_BLOCKS: u64 = 64;

/// Most blocks a second miss in a small object fetches to read the whole rest of it (see
/// `Remote::read_rest`): at 1 MiB blocks, what fsspec's 5 MiB block cache reads in one or two
/// misses.
const SMALL_REST_BLOCKS: u64 = 8;

/// One version of the object: what open (or a refresh) saw, and the blocks read from it.
pub(super) struct Version {
    pub(super) len: u64,
    pub(super) etag: Option<String>,
    /// What every request for this version carries: `If-Match`, or for an object without a
    /// strong ETag its `Last-Modified` and size.
    pin: Option<Condition>,
    cache: BlockCache,
    readahead: Mutex<Readahead>,
    /// Readahead's cap in blocks: the most a miss fetches ahead.
    window_cap: u64,
    /// Reads that missed in this version so far (each counted once, however many blocks
    /// it missed).
    missed_reads: AtomicU64,
    /// The version a refresh found after this one (versions only grow, so a `&Version`
    /// lent out stays valid for the reader's life).
    next: OnceLock<Box<Version>>,
}

impl Version {
    fn new(ends: &Ends, options: &ReaderOptions) -> Version {
        let pin = match &ends.info.etag {
            Some(tag) => Some(Condition::IfMatch(tag.clone())),
            None => ends.date_pin.clone(),
        };
        let window = (options.cache_bytes / options.block_size / 2).min(MAX_READAHEAD_BLOCKS);
        Version {
            len: ends.info.size,
            etag: ends.info.etag.clone(),
            pin,
            cache: BlockCache::new(options.cache_bytes),
            readahead: Mutex::new(Readahead::new(window)),
            window_cap: window,
            missed_reads: AtomicU64::new(0),
            next: OnceLock::new(),
        }
    }

    fn same(&self, ends: &Ends) -> bool {
        let pin = match &ends.info.etag {
            Some(tag) => Some(Condition::IfMatch(tag.clone())),
            None => ends.date_pin.clone(),
        };
        self.len == ends.info.size && self.etag == ends.info.etag && self.pin == pin
    }
}

pub(super) struct Remote {
    client: Client,
    locator: Locator,
    options: ReaderOptions,
    first: Version,
    requests: AtomicU64,
    bytes: AtomicU64,
}

/// `read_ends` of `head` bytes with its request count and bytes received.
async fn probe(client: &Client, locator: &Locator, head: u64) -> Result<(Ends, u64, u64)> {
    let stats = Batch {
        shared: Shared::new(0, false),
        _engine: None,
    };
    let ends = client
        .read_ends_counted(locator, head, 0, Arc::clone(&stats.shared))
        .await?;
    let s = stats.stats();
    Ok((ends, 1 + s.retries, s.received_bytes))
}

impl Remote {
    /// One request: the first block, size and version.
    pub(super) async fn open(
        client: &Client,
        locator: &Locator,
        options: ReaderOptions,
    ) -> Result<Remote> {
        let (ends, requests, bytes) = probe(client, locator, options.block_size).await?;
        let first = Version::new(&ends, &options);
        if !ends.head.is_empty() {
            let mut claims = Claims::new(&first.cache);
            if claims.lookup(0, false).is_none() {
                let head = Bytes::from(ends.head);
                claims.settle(|_| Outcome::Done(Ok(head.clone())));
            }
        }
        Ok(Remote {
            client: client.clone(),
            locator: locator.clone(),
            options,
            first,
            requests: AtomicU64::new(requests),
            bytes: AtomicU64::new(bytes),
        })
    }

    /// The latest version seen.
    pub(super) fn current(&self) -> &Version {
        let mut v = &self.first;
        while let Some(next) = v.next.get() {
            v = next;
        }
        v
    }

    /// Requests and bytes received so far.
    pub(super) fn counts(&self) -> (u64, u64) {
        (
            self.requests.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }

    /// Hits and misses over every version.
    pub(super) fn cache_counts(&self) -> (u64, u64) {
        let mut v = Some(&self.first);
        let (mut hits, mut misses) = (0, 0);
        while let Some(version) = v {
            let c = version.cache.counts();
            hits += c.hits;
            misses += c.misses;
            v = version.next.get().map(|b| &**b);
        }
        (hits, misses)
    }

    fn count(&self, requests: u64, bytes: u64) {
        self.requests.fetch_add(requests, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Asks the object's size and version again (one request); a change starts a new
    /// version with an empty cache, and the old version's blocks are dropped.
    pub(super) async fn refresh(&self) -> Result<()> {
        let (ends, requests, bytes) = probe(&self.client, &self.locator, 1).await?;
        self.count(requests, bytes);
        let mut v = self.current();
        if v.same(&ends) {
            return Ok(());
        }
        let mut new = Box::new(Version::new(&ends, &self.options));
        // A concurrent refresh may have appended first: append after the latest.
        while let Err(back) = v.next.set(new) {
            new = back;
            v = self.current();
        }
        let mut old = Some(&self.first);
        while let Some(version) = old.filter(|o| o.next.get().is_some()) {
            version.cache.clear();
            old = version.next.get().map(|b| &**b);
        }
        Ok(())
    }

    /// The bytes of each range (already clamped to `v.len`), from the cache or from one
    /// batch for every missing block. `sweep` lets a sequential sweep read ahead.
    pub(super) async fn read(
        &self,
        v: &Version,
        ranges: &[Range<u64>],
        sweep: bool,
    ) -> Result<Vec<Bytes>> {
        let bs = self.options.block_size;
        let mut wanted: Vec<u64> = ranges
            .iter()
            .filter(|r| !r.is_empty())
            .flat_map(|r| r.start / bs..=(r.end - 1) / bs)
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        let mut got: HashMap<u64, Bytes> = HashMap::with_capacity(wanted.len());
        let mut todo = wanted.clone();
        let mut first_pass = true;
        while !todo.is_empty() {
            let mut claims = Claims::new(&v.cache);
            let mut waits = Vec::new();
            for &b in &todo {
                match claims.lookup(b, first_pass) {
                    Some(Lookup::Hit(data)) => {
                        got.insert(b, data);
                    }
                    Some(Lookup::Wait(flight)) => waits.push((b, flight)),
                    Some(Lookup::Claimed(_)) | None => {}
                }
            }
            let missed = claims.blocks();
            if sweep && first_pass {
                let (first, last) = (todo[0], todo[todo.len() - 1]);
                let window = v
                    .readahead
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .on_read(first, last, !missed.is_empty());
                if !missed.is_empty() {
                    let nth = v.missed_reads.fetch_add(1, Ordering::Relaxed) + 1;
                    let last_block = v.len.div_ceil(bs).saturating_sub(1);
                    let ahead = if self.read_rest(v, nth) {
                        0..=last_block
                    } else {
                        last + 1..=last.saturating_add(window).min(last_block)
                    };
                    for b in ahead {
                        claims.lookup(b, false);
                    }
                }
            }
            if !claims.is_empty() {
                match self.fetch(v, &claims.blocks()).await {
                    Ok(fetched) => {
                        for b in missed {
                            if let Some(data) = fetched.get(&b) {
                                got.insert(b, data.clone());
                            }
                        }
                        claims.settle(|b| match fetched.get(&b) {
                            Some(data) => Outcome::Done(Ok(data.clone())),
                            None => Outcome::Abandoned,
                        });
                    }
                    Err(e) => {
                        claims.settle(|_| Outcome::Done(Err(e.clone())));
                        return Err(e);
                    }
                }
            }
            todo.clear();
            for (b, flight) in waits {
                match flight.wait().await {
                    Outcome::Done(Ok(data)) => {
                        got.insert(b, data);
                    }
                    Outcome::Done(Err(e)) => return Err(e),
                    // Its owner gave up (a cancelled read): fetch it ourselves.
                    Outcome::Abandoned | Outcome::Pending => todo.push(b),
                }
            }
            first_pass = false;
        }
        ranges.iter().map(|r| assemble(r, bs, &got)).collect()
    }

    /// True when the `nth` read to miss in `v` should fetch every block of `v` not yet
    /// cached. The object must fit in the readahead's cap, and then either:
    ///
    /// - by the client's estimate of the link ([`Client::link_estimate`]) one connection
    ///   carries the missing bytes within a round trip: a format reader that missed once in
    ///   a small object usually misses again (a Parquet projection reads a column chunk per
    ///   row group, one by one), and each later miss would cost a round trip, more than the
    ///   bytes that avoid it;
    /// - or this is at least the second miss and at most [`SMALL_REST_BLOCKS`] blocks are
    ///   missing: a reader that missed twice keeps missing, and on a fast link, where the
    ///   round-trip rule does not fire, each miss is still a request (which stores bill)
    ///   while the rest costs only a few blocks of bytes, once.
    fn read_rest(&self, v: &Version, nth: u64) -> bool {
        if v.len > v.window_cap.saturating_mul(self.options.block_size) {
            return false;
        }
        let rest = v.len.saturating_sub(v.cache.bytes());
        if nth >= 2 && rest <= SMALL_REST_BLOCKS.saturating_mul(self.options.block_size) {
            return true;
        }
        let link = self.client.link_estimate(&self.locator).model;
        let carry = rest as f64 / link.connection_rate.max(1) as f64;
        carry <= (link.rtt + link.per_request).as_secs_f64()
    }

    /// Fetches `blocks` (ascending) of version `v` in one batch: a read per run of adjacent
    /// blocks, pinned to the version, which the planner coalesces further.
    async fn fetch(&self, v: &Version, blocks: &[u64]) -> Result<HashMap<u64, Bytes>> {
        let bs = self.options.block_size;
        let mut runs: Vec<Range<u64>> = Vec::new();
        for &b in blocks {
            match runs.last_mut() {
                Some(run) if run.end == b => run.end = b + 1,
                _ => runs.push(b..b + 1),
            }
        }
        let reads = runs
            .iter()
            .enumerate()
            .map(|(i, run)| {
                let start = run.start * bs;
                let end = run.end.saturating_mul(bs).min(v.len);
                let read = Read::new(&self.locator, start, end - start).tag(i as u64);
                match &v.pin {
                    Some(pin) => read.pinned(pin.clone()),
                    None => read,
                }
            })
            .collect();
        let batch = self.client.submit(reads)?;
        let mut bufs: Vec<Option<Vec<u8>>> = vec![None; runs.len()];
        let mut first_error = None;
        while let Some(done) = batch.next_async().await {
            let i = done.tag as usize;
            match done.into_result() {
                Ok(buf) => bufs[i] = Some(buf),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        let s = batch.stats();
        self.count(s.transfers + s.retries, s.received_bytes);
        if let Some(e) = first_error {
            return Err(e);
        }
        let mut out = HashMap::with_capacity(blocks.len());
        for (run, buf) in runs.iter().zip(bufs) {
            let start = run.start * bs;
            let want = run.end.saturating_mul(bs).min(v.len) - start;
            let buf = Bytes::from(buf.unwrap_or_default());
            if buf.len() as u64 != want {
                return Err(Error::new(
                    Status::Http,
                    format!(
                        "{}: got {} bytes at {start}, asked {want}",
                        self.locator.display(),
                        buf.len()
                    ),
                ));
            }
            for b in run.clone() {
                let s = ((b - run.start) * bs) as usize;
                let e = (s as u64).saturating_add(bs).min(want) as usize;
                out.insert(b, buf.slice(s..e));
            }
        }
        Ok(out)
    }
}

/// The bytes of `range` from its blocks in `got` (one block: a slice of it, no copy).
fn assemble(range: &Range<u64>, bs: u64, got: &HashMap<u64, Bytes>) -> Result<Bytes> {
    if range.is_empty() {
        return Ok(Bytes::new());
    }
    let (first, last) = (range.start / bs, (range.end - 1) / bs);
    let missing = || Error::new(Status::Http, format!("block {first}..={last} was not read"));
    let part = |b: u64| -> Result<Bytes> {
        let data = got.get(&b).ok_or_else(missing)?;
        let base = b * bs;
        let s = range.start.max(base) - base;
        let e = range.end.min(base + data.len() as u64) - base;
        if s > e {
            return Err(missing());
        }
        Ok(data.slice(s as usize..e as usize))
    };
    if first == last {
        return part(first);
    }
    let len = usize::try_from(range.end - range.start).map_err(|_| no_memory(usize::MAX))?;
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|_| no_memory(len))?;
    for b in first..=last {
        out.extend_from_slice(&part(b)?);
    }
    if out.len() != len {
        return Err(missing());
    }
    Ok(Bytes::from(out))
}
