//! A Parquet `AsyncFileReader` for one karu object (feature `parquet`): its footer and
//! metadata with one suffix read where they fit, its column chunks as one karu batch per
//! call, and every read after the footer pinned to the version the footer came from.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use karu::{Client, Locator, Read};
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::{AsyncFileReader, MetadataFetch};
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};

/// The default suffix read for the metadata: most files' footers fit in it, so one round trip
/// gets them; a larger one costs one more read.
pub const DEFAULT_METADATA_SIZE_HINT: u64 = 512 << 10;

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
#[derive(Clone, Debug)]
pub struct KaruParquetReader {
    client: Client,
    object: Locator,
    hint: u64,
    /// The strong ETag the footer came with: later reads must find the same version.
    etag: Option<String>,
}

impl KaruParquetReader {
    /// A reader of `object` through `client`.
    pub fn new(client: Client, object: Locator) -> KaruParquetReader {
        KaruParquetReader {
            client,
            object,
            hint: DEFAULT_METADATA_SIZE_HINT,
            etag: None,
        }
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
        let Some(etag) = &self.etag else {
            return self.client.get_ranges_async(&self.object, ranges).await;
        };
        let mut reads = Vec::with_capacity(ranges.len());
        for (i, r) in ranges.iter().enumerate() {
            let length = r.end.checked_sub(r.start).ok_or_else(|| {
                karu::Error::new(
                    karu::Status::Invalid,
                    format!("range {}..{} ends before it starts", r.start, r.end),
                )
            })?;
            if length > 0 {
                reads.push(
                    Read::new(&self.object, r.start, length)
                        .tag(i as u64)
                        .if_match(etag),
                );
            }
        }
        let batch = self.client.submit(reads)?;
        let mut out = vec![Bytes::new(); ranges.len()];
        while let Some(done) = batch.next_async().await {
            let i = done.tag as usize;
            out[i] = done.into_bytes()?;
        }
        Ok(out)
    }
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
        async move { self.ranges(&ranges).await.map_err(external) }.boxed()
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
            Ok(Arc::new(reader.load_and_finish(fetch, size).await?))
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
