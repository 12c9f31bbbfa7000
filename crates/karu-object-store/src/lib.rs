//! karu behind [`object_store::ObjectStore`]: [`KaruStore`] reads through a [`karu::Client`]
//! (its planner, its guards, one version per batch) and hands every other operation to an
//! optional inner store. With the `parquet` feature, [`KaruParquetReader`] is a Parquet
//! `AsyncFileReader` of its own.
//!
//! ```no_run
//! use std::sync::Arc;
//! use object_store::{ObjectStore, ObjectStoreExt, path::Path};
//! # async fn run() -> object_store::Result<()> {
//! let client = karu::Client::new(&karu::Config::from_env()).expect("valid options");
//! let store: Arc<dyn ObjectStore> = Arc::new(KaruStore::new(client, "s3://bucket/tables")?);
//! let footer = store.get_range(&Path::from("t/part-0.parquet"), 0..8).await?;
//! # let _ = footer; Ok(()) }
//! # use karu_object_store::KaruStore;
//! ```

#![warn(missing_docs)]

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::{self, BoxStream, StreamExt};
use karu::{Client, Locator, ObjectInfo, Read, Status};
use object_store::path::Path;
use object_store::{
    Attributes, CopyOptions, GetOptions, GetRange, GetResult, GetResultPayload, ListResult,
    MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload,
    PutResult, RenameOptions, Result,
};

mod error;
#[cfg(feature = "parquet")]
mod parquet;

pub use error::to_object_store;
#[cfg(feature = "parquet")]
pub use parquet::{
    DEFAULT_METADATA_SIZE_HINT, DEFAULT_READ_AHEAD_BYTES, DEFAULT_READ_AHEAD_ROW_GROUPS,
    KaruParquetReader,
};

/// The name this store gives in errors (`Generic { store, .. }`, `NotImplemented`).
const STORE: &str = "KaruStore";

/// Bytes a `get` streams per piece: the first answer (which also tells the object's size,
/// ETag and date) and each later read pinned to that ETag.
const CHUNK: u64 = 8 << 20;

/// Later pieces of one `get` in flight at once: one being consumed, one arriving.
const AHEAD: usize = 2;

/// An [`ObjectStore`] whose reads go through karu, below a base URI (`s3://bucket/prefix`,
/// `https://host/dir`, `gs://…`, `az://…`, a local directory). Writes, listing, deletes and
/// copies go to the inner store given with [`with_inner`](KaruStore::with_inner); without one
/// they fail with `NotImplemented`, naming the operation.
#[derive(Clone)]
pub struct KaruStore {
    client: Client,
    /// The base URI without a trailing `/`.
    base: String,
    /// HTTP(S) bases take percent-encoded path segments; cloud keys are taken verbatim.
    http: bool,
    inner: Option<Arc<dyn ObjectStore>>,
}

impl fmt::Debug for KaruStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(STORE)
            .field("base", &self.base)
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for KaruStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{STORE}({})", self.base)
    }
}

impl KaruStore {
    /// A store reading through `client` below `base`; fails (`Generic`) when a path below
    /// `base` would not be a karu locator.
    pub fn new(client: Client, base: &str) -> Result<KaruStore> {
        let base = base.trim_end_matches('/').to_owned();
        Locator::parse(&format!("{base}/probe")).map_err(error::generic)?;
        let http = base.starts_with("http://") || base.starts_with("https://");
        Ok(KaruStore {
            client,
            base,
            http,
            inner: None,
        })
    }

    /// The same store, handing writes, listing, deletes and copies to `inner`.
    pub fn with_inner(mut self, inner: Arc<dyn ObjectStore>) -> KaruStore {
        self.inner = Some(inner);
        self
    }

    /// The karu client reads go through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The URI of `path` below the base.
    pub fn uri(&self, path: &Path) -> String {
        let mut uri = self.base.clone();
        for part in path.parts() {
            uri.push('/');
            if self.http {
                uri.extend(percent_encoding::utf8_percent_encode(
                    part.as_ref(),
                    SEGMENT,
                ));
            } else {
                uri.push_str(part.as_ref());
            }
        }
        uri
    }

    /// The karu locator of `path`.
    pub fn locator(&self, path: &Path) -> Result<Locator> {
        Locator::parse(&self.uri(path)).map_err(|e| error::to_object_store(path, e))
    }

    fn inner(&self, operation: &str) -> Result<&Arc<dyn ObjectStore>> {
        self.inner
            .as_ref()
            .ok_or_else(|| error::not_implemented(operation))
    }

    /// The first answer of a `get`: the object's description, the range to return, and the
    /// bytes of it that came with the answer (from `at`).
    async fn first(
        &self,
        path: &Path,
        object: &Locator,
        range: Option<&GetRange>,
    ) -> Result<First> {
        let err = |e| error::to_object_store(path, e);
        if let Some(r) = range {
            r.is_valid().map_err(error::generic)?;
        }
        let (info, at, got) = match range {
            Some(GetRange::Suffix(n)) => {
                let ends = self
                    .client
                    .read_ends_async(object, 0, (*n).min(CHUNK))
                    .await
                    .map_err(err)?;
                let at = ends.info.size - ends.tail.len() as u64;
                (ends.info, at, ends.tail)
            }
            _ => {
                let (start, want) = match range {
                    Some(GetRange::Bounded(r)) => (r.start, (r.end - r.start).min(CHUNK)),
                    Some(GetRange::Offset(o)) => (*o, CHUNK),
                    _ => (0, CHUNK),
                };
                // A window from `start`: one ranged GET that also tells the size past it.
                let window = match start {
                    0 => object.clone(),
                    _ => Locator::parse(&format!("{}#bytes={start}-", self.uri(path)))
                        .map_err(err)?,
                };
                let ends = self
                    .client
                    .read_ends_async(&window, want, 0)
                    .await
                    .map_err(err)?;
                let mut info = ends.info;
                info.size = info.size.saturating_add(start);
                (info, start, ends.head)
            }
        };
        let want = match range {
            Some(r) => r.as_range(info.size).map_err(error::generic)?,
            None => 0..info.size,
        };
        // The answer may hold more than asked (an open read of a short object): keep the range.
        let mut got = Bytes::from(got);
        let keep = want.end.saturating_sub(at).min(got.len() as u64);
        got.truncate(keep as usize);
        Ok(First {
            info,
            want,
            at,
            got,
        })
    }
}

/// What the first answer of a `get` gave.
struct First {
    info: ObjectInfo,
    want: Range<u64>,
    at: u64,
    got: Bytes,
}

/// Path segments in an HTTP URL: everything but the RFC 3986 unreserved characters.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The object's description as object_store gives it. A missing date is the epoch: date
/// conditions refuse to judge it (see [`check`]).
fn meta(path: &Path, info: &ObjectInfo) -> ObjectMeta {
    ObjectMeta {
        location: path.clone(),
        last_modified: DateTime::<Utc>::from(info.last_modified.unwrap_or(SystemTime::UNIX_EPOCH)),
        size: info.size,
        e_tag: info.etag.clone(),
        version: None,
    }
}

/// The caller's conditions judged against the answer the bytes come from (so a condition
/// and the bytes always concern one version). Without a `Last-Modified`, date conditions
/// cannot be judged: `NotSupported`.
fn check(options: &GetOptions, info: &ObjectInfo, meta: &ObjectMeta) -> Result<()> {
    let dated = options.if_modified_since.is_some() || options.if_unmodified_since.is_some();
    if dated && info.last_modified.is_none() {
        return Err(object_store::Error::NotSupported {
            source: format!(
                "{}: the server gave no Last-Modified to compare",
                meta.location
            )
            .into(),
        });
    }
    options.check_preconditions(meta)
}

/// `range` in pieces of at most [`CHUNK`] bytes.
fn pieces(range: Range<u64>) -> impl Iterator<Item = Range<u64>> {
    let Range { start, end } = range;
    (start..end)
        .step_by(CHUNK as usize)
        .map(move |at| at..(at + CHUNK).min(end))
}

/// One piece of a `get`, pinned to the first answer's ETag when it had one.
async fn piece(
    client: Client,
    object: Locator,
    path: Path,
    range: Range<u64>,
    etag: Option<String>,
) -> Result<Bytes> {
    let mut read = Read::new(&object, range.start, range.end - range.start);
    if let Some(etag) = &etag {
        read = read.if_match(etag);
    }
    let failed = |e| error::to_object_store(&path, e);
    let batch = client.submit(vec![read]).map_err(failed)?;
    let done = batch.next_async().await.ok_or_else(|| {
        failed(karu::Error::new(
            Status::Cancelled,
            "the read ended without a completion",
        ))
    })?;
    done.into_bytes().map_err(failed)
}

#[async_trait]
impl ObjectStore for KaruStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.inner("put")?.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner("put_multipart")?
            .put_multipart_opts(location, opts)
            .await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if options.version.is_some() {
            return Err(error::not_implemented("get_opts with a version"));
        }
        let object = self.locator(location)?;
        if options.head {
            let info = self
                .client
                .stat_async(&object)
                .await
                .map_err(|e| error::to_object_store(location, e))?;
            let meta = meta(location, &info);
            check(&options, &info, &meta)?;
            return Ok(GetResult {
                payload: GetResultPayload::Stream(stream::empty().boxed()),
                range: 0..meta.size,
                meta,
                attributes: Attributes::default(),
                extensions: Default::default(),
            });
        }
        let first = self
            .first(location, &object, options.range.as_ref())
            .await?;
        let meta = meta(location, &first.info);
        check(&options, &first.info, &meta)?;
        let got_end = first.at + first.got.len() as u64;
        let before = pieces(first.want.start..first.at.max(first.want.start));
        let after = pieces(got_end.max(first.want.start)..first.want.end);
        let (client, path, etag) = (self.client.clone(), location.clone(), meta.e_tag.clone());
        let reads = stream::iter(before.map(Some).chain([None]).chain(after.map(Some)));
        let got = first.got;
        let payload = reads
            .map(move |r| {
                let (client, object, path, etag) =
                    (client.clone(), object.clone(), path.clone(), etag.clone());
                let got = got.clone();
                async move {
                    match r {
                        Some(r) => piece(client, object, path, r, etag).await,
                        None => Ok(got),
                    }
                }
            })
            .buffered(AHEAD)
            .filter(|b| futures::future::ready(!matches!(b, Ok(b) if b.is_empty())))
            .boxed();
        Ok(GetResult {
            payload: GetResultPayload::Stream(payload),
            range: first.want,
            meta,
            attributes: Attributes::default(),
            extensions: Default::default(),
        })
    }

    /// One karu batch: coalesced by karu's planner and, when it takes more than one
    /// transfer, pinned to one version of the object.
    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let object = self.locator(location)?;
        self.client
            .get_ranges_async(&object, ranges)
            .await
            .map_err(|e| error::to_object_store(location, e))
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        match self.inner("delete") {
            Ok(inner) => inner.delete_stream(locations),
            Err(e) => stream::once(futures::future::ready(Err(e))).boxed(),
        }
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        match self.inner("list") {
            Ok(inner) => inner.list(prefix),
            Err(e) => stream::once(futures::future::ready(Err(e))).boxed(),
        }
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        match self.inner("list_with_offset") {
            Ok(inner) => inner.list_with_offset(prefix, offset),
            Err(e) => stream::once(futures::future::ready(Err(e))).boxed(),
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner("list_with_delimiter")?
            .list_with_delimiter(prefix)
            .await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner("copy")?.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner("rename")?.rename_opts(from, to, options).await
    }
}
