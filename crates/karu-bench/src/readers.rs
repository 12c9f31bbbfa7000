//! The readers, each run in a child process of its own so that its CPU time and peak RSS are
//! its own (the servers and proxies stay in the parent). The child prints one `RESULT` line.

use std::fs::File;
use std::io::{BufWriter, Read as _, Write as _};
use std::ops::Range;
use std::os::unix::fs::FileExt as _;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use karu::{Client, Config, DownloadOptions, Locator, Read, Status};
use karu_testkit::content;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{ClientOptions, GetOptions, GetRange, ObjectStore, ObjectStoreExt as _};

use crate::plain;
use crate::pq::{self, Via};
use crate::sigv4::{REGION, S3Access};
use crate::workload::{Kind, Workload};

/// Concurrency given to the readers that choose it themselves (object_store `get_range` per
/// read, and every reader's objects on E): karu's default `KARU_CONCURRENCY`, so that they run
/// under the same concurrency as karu.
pub const KARU_CONCURRENCY: usize = 64;

/// Chunk size of the chunked download readers (karu's default, and object_store's chunks).
pub const DOWNLOAD_CHUNK: u64 = karu::DEFAULT_CHUNK_SIZE;
/// Chunks in flight for the chunked download readers: karu's default download parallelism.
pub const DOWNLOAD_PARALLELISM: u64 = karu::DEFAULT_PARALLELISM;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Reader {
    KaruDefault,
    KaruGap0,
    /// karu with `KARU_COALESCE_MODE=guards`: the fixed guards, no cost model.
    KaruGuards,
    OsRanges,
    OsRange,
    Naive,
    Curl,
    OsGet,
    OsChunks,
    /// P (see [`pq`]): `KaruParquetReader`, the projection.
    PqOwn,
    /// P: `ParquetObjectReader` over `KaruStore`, the projection.
    PqKaruStore,
    /// P: `ParquetObjectReader` over object_store, the projection.
    PqObjectStore,
    /// P's full scans through the same three.
    PqOwnScan,
    PqKaruStoreScan,
    PqObjectStoreScan,
}

impl Reader {
    pub const ALL: [Reader; 15] = [
        Reader::KaruDefault,
        Reader::KaruGap0,
        Reader::KaruGuards,
        Reader::OsRanges,
        Reader::OsRange,
        Reader::Naive,
        Reader::Curl,
        Reader::OsGet,
        Reader::OsChunks,
        Reader::PqOwn,
        Reader::PqKaruStore,
        Reader::PqObjectStore,
        Reader::PqOwnScan,
        Reader::PqKaruStoreScan,
        Reader::PqObjectStoreScan,
    ];

    /// The readers that run a workload of this kind, karu first.
    pub fn for_kind(kind: Kind) -> &'static [Reader] {
        match kind {
            Kind::Reads | Kind::Ends(..) => &Reader::ALL[..6],
            Kind::Download => &[
                Reader::KaruDefault,
                Reader::Curl,
                Reader::OsGet,
                Reader::OsChunks,
            ],
            Kind::Parquet(_) => &Reader::ALL[9..],
        }
    }

    /// P's readers: which reader opens the file, and whether it scans all of it.
    pub fn parquet(self) -> Option<(Via, bool)> {
        Some(match self {
            Reader::PqOwn => (Via::Own, false),
            Reader::PqKaruStore => (Via::KaruStore, false),
            Reader::PqObjectStore => (Via::ObjectStore, false),
            Reader::PqOwnScan => (Via::Own, true),
            Reader::PqKaruStoreScan => (Via::KaruStore, true),
            Reader::PqObjectStoreScan => (Via::ObjectStore, true),
            _ => return None,
        })
    }

    pub fn key(self) -> &'static str {
        match self {
            Reader::KaruDefault => "karu",
            Reader::KaruGap0 => "karu-gap0",
            Reader::KaruGuards => "karu-guards",
            Reader::OsRanges => "os-ranges",
            Reader::OsRange => "os-range",
            Reader::Naive => "naive",
            Reader::Curl => "curl",
            Reader::OsGet => "os-get",
            Reader::OsChunks => "os-chunks",
            Reader::PqOwn => "pq-karu",
            Reader::PqKaruStore => "pq-karu-store",
            Reader::PqObjectStore => "pq-os",
            Reader::PqOwnScan => "pq-karu-scan",
            Reader::PqKaruStoreScan => "pq-karu-store-scan",
            Reader::PqObjectStoreScan => "pq-os-scan",
        }
    }

    pub fn from_key(k: &str) -> Reader {
        *Reader::ALL
            .iter()
            .find(|r| r.key() == k)
            .unwrap_or_else(|| panic!("unknown reader {k}"))
    }

    /// The column name in the headline tables.
    pub fn short(self) -> &'static str {
        match self {
            Reader::KaruDefault => "karu",
            Reader::KaruGap0 => "karu gap 0",
            Reader::KaruGuards => "karu guards",
            Reader::OsRanges => "os `get_ranges`",
            Reader::OsRange => "os `get_range` ×64",
            Reader::Naive => "naive",
            Reader::Curl => "curl",
            Reader::OsGet => "os `get`",
            Reader::OsChunks => "os chunks ×8",
            Reader::PqOwn | Reader::PqOwnScan => "`KaruParquetReader`",
            Reader::PqKaruStore | Reader::PqKaruStoreScan => {
                "`ParquetObjectReader` over `KaruStore`"
            }
            Reader::PqObjectStore | Reader::PqObjectStoreScan => {
                "`ParquetObjectReader` over object_store"
            }
        }
    }

    /// Whether this is one of object_store's readers (the peers of the CPU target).
    pub fn is_object_store(self) -> bool {
        matches!(
            self,
            Reader::OsRanges
                | Reader::OsRange
                | Reader::OsGet
                | Reader::OsChunks
                | Reader::PqObjectStore
                | Reader::PqObjectStoreScan
        )
    }

    pub fn label(self) -> &'static str {
        match self {
            Reader::KaruDefault => "karu (defaults)",
            Reader::KaruGap0 => "karu (gap 0)",
            Reader::KaruGuards => "karu (KARU_COALESCE_MODE=guards)",
            Reader::OsRanges => "object_store `get_ranges`",
            Reader::OsRange => "object_store `get_range` ×64",
            Reader::Naive => "naive sequential",
            Reader::Curl => "curl",
            Reader::OsGet => "object_store `get` (one stream)",
            Reader::OsChunks => "object_store `get_range` 8 MiB ×8",
            Reader::PqOwn => "karu `KaruParquetReader` (projection)",
            Reader::PqKaruStore => "`ParquetObjectReader` over `KaruStore` (projection)",
            Reader::PqObjectStore => "`ParquetObjectReader` over object_store (projection)",
            Reader::PqOwnScan => "karu `KaruParquetReader` (scan)",
            Reader::PqKaruStoreScan => "`ParquetObjectReader` over `KaruStore` (scan)",
            Reader::PqObjectStoreScan => "`ParquetObjectReader` over object_store (scan)",
        }
    }
}

/// What a child measured.
pub struct Measured {
    pub wall: Duration,
    pub cpu: f64,
    pub max_rss_kib: u64,
    /// Reads done; the naive reader may stop early (time budget) and is then extrapolated.
    pub done: usize,
}

impl Measured {
    pub fn line(&self) -> String {
        format!(
            "RESULT {} {} {} {}",
            self.wall.as_secs_f64(),
            self.cpu,
            self.max_rss_kib,
            self.done
        )
    }

    pub fn parse(text: &str) -> Option<Measured> {
        let line = text.lines().find_map(|l| l.strip_prefix("RESULT "))?;
        let f: Vec<&str> = line.split(' ').collect();
        Some(Measured {
            wall: Duration::from_secs_f64(f.first()?.parse().ok()?),
            cpu: f.get(1)?.parse().ok()?,
            max_rss_kib: f.get(2)?.parse().ok()?,
            done: f.get(3)?.parse().ok()?,
        })
    }
}

fn rusage(who: libc::c_int) -> libc::rusage {
    // SAFETY: getrusage only writes the struct it is given.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(who, &mut ru), 0);
        ru
    }
}

/// CPU seconds (user + system) and peak RSS (KiB) of this process and the programs it ran and
/// waited for (curl).
pub fn usage() -> (f64, u64) {
    let ru = rusage(libc::RUSAGE_SELF);
    let kids = rusage(libc::RUSAGE_CHILDREN);
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    // Not `ru_maxrss`: Linux carries it over from the parent through fork and exec, so a child
    // would report at least the parent's peak (the servers'). `VmHWM` belongs to the address
    // space exec made, so it is the reader's own.
    let hwm = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(ru.ru_maxrss as u64);
    // A program run from here (curl) has only its `ru_maxrss`, which also carries this
    // process's peak at the time it was started: a few MiB, before any reading.
    (
        t(ru.ru_utime) + t(ru.ru_stime) + t(kids.ru_utime) + t(kids.ru_stime),
        hwm.max(kids.ru_maxrss as u64),
    )
}

/// Where the objects are: `{base}/{prefix}{name}` on an HTTP server, or, with `s3`, the key
/// `{prefix}{name}` of its bucket behind the endpoint `base` (path style).
pub struct Target {
    pub base: String,
    pub prefix: String,
    pub s3: Option<S3Access>,
}

impl Target {
    /// What karu is given: the object's URL, or its `s3://` locator.
    pub fn url(&self, name: &str) -> String {
        match &self.s3 {
            Some(s3) => format!("s3://{}/{}{name}", s3.bucket, self.prefix),
            None => format!("{}{}", self.base, self.path(name)),
        }
    }

    /// The path of a request for the object.
    pub fn path(&self, name: &str) -> String {
        match &self.s3 {
            Some(s3) => format!("/{}/{}{name}", s3.bucket, self.prefix),
            None => format!("/{}{name}", self.prefix),
        }
    }

    /// The object's path in an object_store made by [`store`].
    pub fn store_path(&self, name: &str) -> Path {
        Path::from(format!("{}{name}", self.prefix))
    }

    /// A karu client with a hermetic configuration for this target; `gap` sets
    /// `KARU_COALESCE_GAP`.
    pub fn karu_client(&self, gap: Option<u64>) -> Client {
        self.karu_client_with(gap, None, None)
    }

    /// [`Target::karu_client`], with `concurrency` setting `KARU_CONCURRENCY` and `mode`
    /// setting `KARU_COALESCE_MODE`.
    pub fn karu_client_with(
        &self,
        gap: Option<u64>,
        concurrency: Option<u32>,
        mode: Option<&str>,
    ) -> Client {
        let mut config = Config::empty();
        let mut set = |name: &str, value: &str| {
            config.set(name, Some(value)).expect("a valid option");
        };
        if let Some(gap) = gap {
            set("KARU_COALESCE_GAP", &gap.to_string());
        }
        if let Some(concurrency) = concurrency {
            set("KARU_CONCURRENCY", &concurrency.to_string());
        }
        if let Some(mode) = mode {
            set("KARU_COALESCE_MODE", mode);
        }
        if let Some(s3) = &self.s3 {
            set("AWS_S3_ENDPOINT", &self.base);
            set("AWS_VIRTUAL_HOSTING", "NO");
            set("AWS_REGION", REGION);
            set("AWS_ACCESS_KEY_ID", &s3.key_id);
            set("AWS_SECRET_ACCESS_KEY", &s3.secret);
        }
        Client::new(&config).expect("a karu client")
    }

    /// karu's locators of `objects` (name, size).
    pub fn locators(&self, objects: &[(String, u64)]) -> Vec<Locator> {
        objects
            .iter()
            .map(|(name, _)| Locator::parse(&self.url(name)).expect("a locator"))
            .collect()
    }
}

/// The benchmark checks a few bytes of every read (the same for every reader, so it costs
/// them all alike and little): enough to catch a wrong range, not a full comparison.
pub fn check(name: &str, offset: u64, data: &[u8], len: u64) {
    assert_eq!(data.len() as u64, len, "{name}@{offset}: wrong length");
    let probe = &data[..data.len().min(64)];
    if let Err(e) = content::check(name, offset, probe) {
        panic!("{name}@{offset}: {e}");
    }
}

/// Runs `reader` on `w` and measures it. `budget` bounds the naive reader's time.
pub fn run(reader: Reader, w: &Workload, target: &Target, budget: Duration) -> Measured {
    // A download goes to a fresh file, checked byte for byte once the timing is over.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let dest = dir.path().join("download.bin");
    let (cpu0, _) = usage();
    let t = Instant::now();
    let mut decoded = None;
    let done = match (w.kind, reader) {
        (Kind::Parquet(_), _) => {
            let (via, scan) = reader
                .parquet()
                .unwrap_or_else(|| panic!("{} does not run workload {}", reader.key(), w.id));
            decoded = Some((scan, pq::read(w, target, via, scan)));
            1
        }
        (
            _,
            Reader::PqOwn
            | Reader::PqKaruStore
            | Reader::PqObjectStore
            | Reader::PqOwnScan
            | Reader::PqKaruStoreScan
            | Reader::PqObjectStoreScan,
        ) => panic!("{} reads only workload P", reader.key()),
        (Kind::Download, Reader::KaruDefault) => karu_download(w, target, &dest),
        (Kind::Download, Reader::Curl) => curl(w, target, &dest),
        (Kind::Download, Reader::OsGet | Reader::OsChunks) => {
            object_store_download(w, target, reader, &dest)
        }
        (Kind::Download, _) | (_, Reader::Curl | Reader::OsGet | Reader::OsChunks) => {
            panic!("{} does not run workload {}", reader.key(), w.id)
        }
        (_, Reader::KaruDefault) => karu(w, target, target.karu_client(None)),
        (_, Reader::KaruGap0) => karu(w, target, target.karu_client(Some(0))),
        (_, Reader::KaruGuards) => karu(
            w,
            target,
            target.karu_client_with(None, None, Some("guards")),
        ),
        (_, Reader::OsRanges | Reader::OsRange) => object_store(w, target, reader),
        (_, Reader::Naive) => naive(w, target, budget),
    };
    let wall = t.elapsed();
    let (cpu1, rss) = usage();
    if w.kind == Kind::Download {
        check_file(&w.objects[0].0, w.objects[0].1, &dest);
    }
    if let Some((scan, summary)) = decoded {
        pq::check(w, scan, summary);
    }
    Measured {
        wall,
        cpu: cpu1 - cpu0,
        max_rss_kib: rss,
        done,
    }
}

fn karu(w: &Workload, target: &Target, client: Client) -> usize {
    let objects = target.locators(&w.objects);
    if let Kind::Ends(head, tail) = w.kind {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let client = &client;
        rt.block_on(async {
            futures::stream::iter(objects.iter().zip(&w.objects))
                .map(|(loc, (name, size))| async move {
                    let ends = client
                        .read_ends_async(loc, head, tail)
                        .await
                        .expect("read_ends");
                    check(name, 0, &ends.head, head);
                    check(name, size - tail, &ends.tail, tail);
                })
                .buffer_unordered(KARU_CONCURRENCY)
                .collect::<Vec<()>>()
                .await;
        });
        return w.count();
    }
    let reads = w
        .reads
        .iter()
        .enumerate()
        .map(|(i, &(o, off, len))| Read::new(&objects[o], off, len).tag(i as u64))
        .collect();
    let batch = client.submit(reads).expect("submit");
    let mut n = 0;
    for done in &batch {
        assert_eq!(
            done.status(),
            Status::Ok,
            "read {}: {:?}",
            done.tag,
            done.result
        );
        let (o, off, len) = w.reads[done.tag as usize];
        check(&w.objects[o].0, off, done.bytes(), len);
        n += 1;
    }
    assert_eq!(n, w.reads.len(), "every read completes once");
    n
}

/// `Client::download` with its defaults (8 MiB chunks, 8 in flight).
fn karu_download(w: &Workload, target: &Target, dest: &std::path::Path) -> usize {
    let client = target.karu_client(None);
    let object = &target.locators(&w.objects[..1])[0];
    client
        .download(object, dest, DownloadOptions::default())
        .expect("the download");
    1
}

/// One `curl` stream into the file, as a user would fetch a whole object (signed with curl's
/// own SigV4 on S3).
fn curl(w: &Workload, target: &Target, dest: &std::path::Path) -> usize {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "--fail", "-o"]).arg(dest);
    if let Some(s3) = &target.s3 {
        // curl signs the x-amz- headers it is given, and this one it does not add itself.
        cmd.arg("--aws-sigv4")
            .arg(format!("aws:amz:{REGION}:s3"))
            .arg("--user")
            .arg(format!("{}:{}", s3.key_id, s3.secret))
            .args(["-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]);
    }
    let status = cmd
        .arg(format!("{}{}", target.base, target.path(&w.objects[0].0)))
        .status()
        .expect("curl runs");
    assert!(status.success(), "curl failed: {status}");
    1
}

/// object_store's store for `target`: its HTTP store, or its S3 store on the same endpoint,
/// bucket and keys as karu (path style). A generous timeout: one merged `get_ranges` request
/// can carry a whole GiB at 1 Gbit/s, and a benchmark run must not be cut by the peer's default
/// 30 s request timeout.
pub fn store(target: &Target) -> Arc<dyn ObjectStore> {
    let options = ClientOptions::new()
        .with_allow_http(true)
        .with_timeout(Duration::from_secs(600));
    match &target.s3 {
        Some(s3) => Arc::new(
            AmazonS3Builder::new()
                .with_endpoint(&target.base)
                .with_bucket_name(&s3.bucket)
                .with_region(REGION)
                .with_access_key_id(&s3.key_id)
                .with_secret_access_key(&s3.secret)
                .with_virtual_hosted_style_request(false)
                .with_client_options(options)
                .build()
                .expect("an object_store AmazonS3"),
        ),
        None => Arc::new(
            object_store::http::HttpBuilder::new()
                .with_url(target.base.clone())
                .with_client_options(options)
                .build()
                .expect("an object_store HttpStore"),
        ),
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// object_store's single `get` streamed into the file, or (`OsChunks`) a `head` for the size
/// and then `get_range` chunks of karu's download chunk size at karu's download parallelism,
/// each written at its offset.
fn object_store_download(
    w: &Workload,
    target: &Target,
    reader: Reader,
    dest: &std::path::Path,
) -> usize {
    let store = store(target);
    let path = target.store_path(&w.objects[0].0);
    runtime().block_on(async {
        if reader == Reader::OsGet {
            let mut stream = store.get(&path).await.expect("get").into_stream();
            let mut file = BufWriter::new(File::create(dest).expect("the destination"));
            while let Some(chunk) = stream.next().await {
                file.write_all(&chunk.expect("a chunk")).expect("a write");
            }
            file.flush().expect("a flush");
            return;
        }
        let size = store.head(&path).await.expect("head").size;
        let file = File::create(dest).expect("the destination");
        file.set_len(size).expect("the destination's size");
        let (store, path, file) = (&store, &path, &file);
        futures::stream::iter((0..size.div_ceil(DOWNLOAD_CHUNK)).map(|i| i * DOWNLOAD_CHUNK))
            .map(|start| async move {
                let end = (start + DOWNLOAD_CHUNK).min(size);
                let bytes = store.get_range(path, start..end).await?;
                file.write_all_at(&bytes, start).expect("a write");
                Ok::<(), object_store::Error>(())
            })
            .buffer_unordered(DOWNLOAD_PARALLELISM as usize)
            .try_collect::<Vec<()>>()
            .await
            .expect("get_range");
    });
    1
}

/// Checks every byte of a downloaded file.
pub fn check_file(name: &str, size: u64, path: &std::path::Path) {
    let mut file = File::open(path).expect("the downloaded file");
    assert_eq!(
        file.metadata().expect("metadata").len(),
        size,
        "{name}: size"
    );
    let mut buf = vec![0u8; 8 << 20];
    let mut offset = 0;
    while offset < size {
        let n = file.read(&mut buf).expect("a read");
        assert!(n > 0, "{name}: short file");
        if let Err(e) = content::check(name, offset, &buf[..n]) {
            panic!("{e}");
        }
        offset += n as u64;
    }
}

fn object_store(w: &Workload, target: &Target, reader: Reader) -> usize {
    let store = store(target);
    let paths: Vec<Path> = w
        .objects
        .iter()
        .map(|(n, _)| target.store_path(n))
        .collect();
    runtime().block_on(async {
        if let Kind::Ends(head, tail) = w.kind {
            let store = &store;
            futures::stream::iter(paths.iter().zip(&w.objects))
                .map(|(path, (name, size))| async move {
                    let (h, t) = if reader == Reader::OsRanges {
                        // `get_ranges` takes absolute ranges, so the size comes first (HEAD).
                        let meta = store.head(path).await.expect("head");
                        let s = meta.size;
                        let got = store
                            .get_ranges(path, &[0..head, s - tail..s])
                            .await
                            .expect("get_ranges");
                        (got[0].clone(), got[1].clone())
                    } else {
                        // A suffix request and a head request, side by side.
                        let suffix = GetOptions {
                            range: Some(GetRange::Suffix(tail)),
                            ..GetOptions::default()
                        };
                        let (t, h) = futures::try_join!(
                            async { store.get_opts(path, suffix).await?.bytes().await },
                            store.get_range(path, 0..head)
                        )
                        .expect("suffix and head");
                        (h, t)
                    };
                    check(name, 0, &h, head);
                    check(name, size - tail, &t, tail);
                })
                .buffer_unordered(KARU_CONCURRENCY)
                .collect::<Vec<()>>()
                .await;
            return;
        }
        match reader {
            Reader::OsRanges => {
                for (o, path) in paths.iter().enumerate() {
                    let mine: Vec<&(usize, u64, u64)> =
                        w.reads.iter().filter(|r| r.0 == o).collect();
                    let ranges: Vec<Range<u64>> = mine.iter().map(|r| r.1..r.1 + r.2).collect();
                    let got = store.get_ranges(path, &ranges).await.expect("get_ranges");
                    for (r, b) in mine.iter().zip(&got) {
                        check(&w.objects[o].0, r.1, b, r.2);
                    }
                }
            }
            _ => {
                let store = &store;
                let paths = &paths;
                futures::stream::iter(w.reads.iter())
                    .map(|&(o, off, len)| async move {
                        let b = store.get_range(&paths[o], off..off + len).await?;
                        check(&w.objects[o].0, off, &b, len);
                        Ok::<(), object_store::Error>(())
                    })
                    .buffer_unordered(KARU_CONCURRENCY)
                    .try_collect::<Vec<()>>()
                    .await
                    .expect("get_range");
            }
        }
    });
    w.count()
}

/// One connection, one GET per read, in order, until the reads or the budget run out.
fn naive(w: &Workload, target: &Target, budget: Duration) -> usize {
    let t = Instant::now();
    let mut conn = plain::Conn::open(plain::addr_of(&target.base), target.s3.as_ref());
    // Each read gets a buffer of its own, dropped once checked, as every other reader hands
    // its caller each read's bytes.
    let mut done = 0;
    if let Kind::Ends(head, tail) = w.kind {
        for (name, size) in &w.objects {
            let path = target.path(name);
            let mut body = Vec::new();
            conn.get(&path, &format!("0-{}", head - 1), &mut body);
            check(name, 0, &body, head);
            let mut body = Vec::new();
            conn.get(&path, &format!("-{tail}"), &mut body);
            check(name, size - tail, &body, tail);
            done += 2;
            if t.elapsed() > budget {
                break;
            }
        }
        return done;
    }
    for &(o, off, len) in &w.reads {
        let name = &w.objects[o].0;
        let mut body = Vec::new();
        conn.get(
            &target.path(name),
            &format!("{off}-{}", off + len - 1),
            &mut body,
        );
        check(name, off, &body, len);
        done += 1;
        if t.elapsed() > budget {
            break;
        }
    }
    done
}
