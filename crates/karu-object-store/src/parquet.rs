//! A Parquet `AsyncFileReader` for one karu object (feature `parquet`): its footer and
//! metadata with one suffix read where they fit, its column chunks as one karu batch per
//! call, a sequential scan's next row groups read ahead, and every read after the footer
//! pinned to the version the footer came from.

mod read_ahead;

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use karu::plan::{Mode, Overrides};
use karu::{Batch, Client, Locator, Read};
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::{AsyncFileReader, MetadataFetch};
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};

use read_ahead::{Ahead, Layout, ReadAhead};

/// The default suffix read for the metadata: most files' footers fit in it, so one round trip
/// gets them; a larger one costs one more read.
pub const DEFAULT_METADATA_SIZE_HINT: u64 = 64 << 10;

/// Row groups a sequential scan is read ahead by default: with two, the next row groups'
/// fetches overlap the current one's decoding and each other.
pub const DEFAULT_READ_AHEAD_ROW_GROUPS: usize = 2;

/// The bytes a scan's read-ahead may hold by default; a row group larger than what is left
/// is not read ahead.
pub const DEFAULT_READ_AHEAD_BYTES: u64 = 64 << 20;

/// A Parquet file read through karu.
///
/// ```no_run
/// use futures::TryStreamExt;
/// use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = karu::Client::new(&karu::Config::from_env())?;
/// let file = karu::Locator::parse("s3://bucket/table/part-0.parquet")?;
/// let reader = karu_object_store::KaruParquetReader::new(client, file);
/// let builder = ParquetRecordBatchStreamBuilder::new(reader).await?;
/// let columns = ProjectionMask::roots(builder.parquet_schema(), [0, 3]);
/// let batches: Vec<_> = builder.with_projection(columns).build()?.try_collect().await?;
/// # let _ = batches; Ok(()) }
/// ```
///
/// Once two row groups in a row are asked for with the same whole column chunks (a scan),
/// the next [`DEFAULT_READ_AHEAD_ROW_GROUPS`] row groups' same chunks are sent for before the
/// decoder asks, within [`DEFAULT_READ_AHEAD_BYTES`]; [`with_read_ahead`] changes both.
/// Reading ahead needs the metadata this reader read (so that it knows the row groups) and a
/// version to pin to: a strong ETag, or a local file. Its batches are planned by the guards
/// (`KARU_COALESCE_MODE=guards`), so a row group's adjacent chunks are one request: the
/// parallelism comes from reading ahead.
///
/// [`with_read_ahead`]: KaruParquetReader::with_read_ahead
#[derive(Debug)]
pub struct KaruParquetReader {
    client: Client,
    object: Locator,
    hint: u64,
    /// The strong ETag the footer came with: later reads must find the same version.
    etag: Option<String>,
    read_ahead: ReadAhead<Batch>,
}

/// A clone reads the same object at the same version, with no read-ahead of its own yet.
impl Clone for KaruParquetReader {
    fn clone(&self) -> KaruParquetReader {
        KaruParquetReader {
            client: self.client.clone(),
            object: self.object.clone(),
            hint: self.hint,
            etag: self.etag.clone(),
            read_ahead: self.read_ahead.fresh(),
        }
    }
}

impl KaruParquetReader {
    /// A reader of `object` through `client`.
    pub fn new(client: Client, object: Locator) -> KaruParquetReader {
        KaruParquetReader {
            client,
            object,
            hint: DEFAULT_METADATA_SIZE_HINT,
            etag: None,
            read_ahead: ReadAhead::new(DEFAULT_READ_AHEAD_ROW_GROUPS, DEFAULT_READ_AHEAD_BYTES),
        }
    }

    /// How far a sequential scan is read ahead: `row_groups` row groups (0 turns reading
    /// ahead off), holding at most `bytes`.
    pub fn with_read_ahead(mut self, row_groups: usize, bytes: u64) -> KaruParquetReader {
        self.read_ahead.configure(row_groups, bytes);
        self
    }

    /// The size of the suffix read that should hold the footer and metadata (at least 8).
    pub fn with_metadata_size_hint(mut self, hint: u64) -> KaruParquetReader {
        self.hint = hint.max(8);
        self
    }

    /// The version reads are pinned to, once the metadata was read (none for local files
    /// and for servers without a strong ETag).
    pub fn etag(&self) -> Option<&str> {
        self.etag.as_deref()
    }

    /// The bytes of `ranges` as one batch: pinned to the footer's version once it is known,
    /// else from one version as [`Client::get_ranges_async`] reads them.
    async fn ranges(&self, ranges: &[Range<u64>]) -> karu::Result<Vec<Bytes>> {
        if self.etag.is_none() {
            return self.client.get_ranges_async(&self.object, ranges).await;
        }
        collect(&self.send(ranges)?, ranges.len()).await
    }

    /// Sends for `ranges` (tagged by index), pinned to the footer's version if it has one.
    fn send(&self, ranges: &[Range<u64>]) -> karu::Result<Batch> {
        let mut reads = Read::of_ranges(&self.object, ranges)?;
        if let Some(etag) = &self.etag {
            reads = reads.into_iter().map(|r| r.if_match(etag)).collect();
        }
        // The guards plan: a row group's adjacent chunks stay one request. The cost model
        // would cut it for parallelism that reading ahead already gives.
        let guards = Overrides {
            mode: Some(Mode::Guards),
            ..Overrides::default()
        };
        self.client.submit_with(reads, &guards)
    }

    /// A decoder's request: from what was read ahead for it where that arrived whole, else
    /// one batch; and the read-ahead its pattern calls for is sent first, so it overlaps.
    async fn decoder_ranges(&mut self, ranges: &[Range<u64>]) -> karu::Result<Vec<Bytes>> {
        let (taken, send) = self.read_ahead.asked(ranges);
        for (chunks, ahead) in send {
            // A read-ahead that cannot be sent is not made; the request will be read then.
            if let Ok(fetch) = self.send(&ahead) {
                self.read_ahead.sent(Ahead {
                    chunks,
                    ranges: ahead,
                    fetch,
                });
            }
        }
        if let Some(a) = taken
            && let Ok(bytes) = collect(&a.fetch, a.ranges.len()).await
        {
            let chunks: Vec<_> = a.ranges.into_iter().zip(bytes).collect();
            if let Some(out) = read_ahead::slices(ranges, &chunks) {
                return Ok(out);
            }
        }
        // Nothing ahead, or it failed: read now (an error that stays is this request's).
        self.ranges(ranges).await
    }
}

/// The bytes of a batch's reads, tagged by index into `n` ranges (empty where none was read).
async fn collect(batch: &Batch, n: usize) -> karu::Result<Vec<Bytes>> {
    let mut out = vec![Bytes::new(); n];
    while let Some(done) = batch.next_async().await {
        let i = done.tag as usize;
        let bytes = done.into_bytes()?;
        if let Some(slot) = out.get_mut(i) {
            *slot = bytes;
        }
    }
    Ok(out)
}

fn external(e: karu::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for KaruParquetReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, Result<Bytes>> {
        async move {
            let mut got = self.ranges(&[range]).await.map_err(external)?;
            Ok(got.pop().unwrap_or_default())
        }
        .boxed()
    }

    fn get_byte_ranges(&mut self, ranges: Vec<Range<u64>>) -> BoxFuture<'_, Result<Vec<Bytes>>> {
        async move { self.decoder_ranges(&ranges).await.map_err(external) }.boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, Result<Arc<ParquetMetaData>>> {
        async move {
            // One suffix read: the file's size, its version and (usually) the whole footer.
            let ends = self
                .client
                .read_ends_async(&self.object, 0, self.hint)
                .await
                .map_err(external)?;
            self.etag = ends.info.etag.clone();
            let size = ends.info.size;
            let tail = Bytes::from(ends.tail);
            let mut reader = ParquetMetaDataReader::new()
                .with_metadata_options(options.map(|o| o.metadata_options().clone()))
                .with_prefetch_hint(Some(tail.len()));
            if let Some(o) = options
                && (o.column_index_policy() != PageIndexPolicy::Skip
                    || o.offset_index_policy() != PageIndexPolicy::Skip)
            {
                reader = reader
                    .with_column_index_policy(o.column_index_policy())
                    .with_offset_index_policy(o.offset_index_policy());
            }
            let fetch = Tail {
                start: size - tail.len() as u64,
                tail,
                file: self,
            };
            let meta = reader.load_and_finish(fetch, size).await?;
            // Read-aheads are pinned to a version: a strong ETag, or a local file's.
            if self.etag.is_some() || !self.object.is_remote() {
                self.read_ahead.set_layout(Layout::new(&meta));
            }
            Ok(Arc::new(meta))
        }
        .boxed()
    }
}

/// The metadata reader's fetches: from the suffix already read where they fall inside it,
/// else one pinned read (metadata larger than the hint, page indexes before it).
struct Tail<'a> {
    start: u64,
    tail: Bytes,
    file: &'a KaruParquetReader,
}

impl MetadataFetch for Tail<'_> {
    fn fetch(&mut self, range: Range<u64>) -> BoxFuture<'_, Result<Bytes>> {
        async move {
            let end = self.start + self.tail.len() as u64;
            if range.start >= self.start && range.end <= end && range.start <= range.end {
                let at = (range.start - self.start) as usize;
                return Ok(self.tail.slice(at..at + (range.end - range.start) as usize));
            }
            let mut got = self.file.ranges(&[range]).await.map_err(external)?;
            Ok(got.pop().unwrap_or_default())
        }
        .boxed()
    }
}
