//! A ~50 MB Parquet file (20 row groups × 10 columns of mixed types, written at test time),
//! served by nginx and by s3s-fs, read with a projection of 2 columns and 5 row groups three
//! ways: `ParquetObjectReader` over `KaruStore`, karu's own `KaruParquetReader`, and
//! `ParquetObjectReader` over object_store's `HttpStore`/`AmazonS3`. The record batches
//! must be equal (and hold exactly the rows written), and karu must not send more requests
//! than object_store, as counted by a proxy in front of the server. A full scan, which
//! `KaruParquetReader` reads ahead, is compared the same way, and the read-ahead's requests
//! are followed one by one.

// ParquetObjectReader is deprecated in parquet 60 (in favour of readers such as karu's own),
// but it is what object_store users run today: the peer these tests compare against.
#![allow(deprecated)]

mod support;

use std::sync::{Arc, OnceLock};

use arrow_array::{Int64Array, RecordBatch, StringArray};
use bytes::Bytes;
use futures::TryStreamExt;
use karu_object_store::{KaruParquetReader, KaruStore};
use karu_testkit::parquet::{COLUMNS, ROW_GROUPS, ROWS, SELECTED, text};
use karu_testkit::{LatencyProxy, ProxyOptions};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::async_reader::{AsyncFileReader, ParquetObjectReader};
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};

/// The file's bytes (the test kit's Parquet file at full size), written once per test binary.
fn file() -> &'static Bytes {
    static FILE: OnceLock<Bytes> = OnceLock::new();
    FILE.get_or_init(|| {
        let out = karu_testkit::parquet::file(ROWS);
        assert!(
            (40 << 20..64 << 20).contains(&out.len()),
            "{} bytes",
            out.len()
        );
        Bytes::from(out)
    })
}

/// The projection of the selected row groups through `reader`.
async fn read<R: AsyncFileReader + Unpin + Send + 'static>(reader: R) -> Vec<RecordBatch> {
    let builder = ParquetRecordBatchStreamBuilder::new(reader).await.unwrap();
    assert_eq!(builder.metadata().num_row_groups(), ROW_GROUPS as usize);
    let mask = ProjectionMask::roots(builder.parquet_schema(), COLUMNS);
    let stream = builder
        .with_projection(mask)
        .with_row_groups(SELECTED.to_vec())
        .build()
        .unwrap();
    stream.try_collect().await.unwrap()
}

/// Every column of every row group through `reader`.
async fn scan<R: AsyncFileReader + Unpin + Send + 'static>(reader: R) -> Vec<RecordBatch> {
    let builder = ParquetRecordBatchStreamBuilder::new(reader).await.unwrap();
    builder.build().unwrap().try_collect().await.unwrap()
}

/// Every value read is the one written.
fn check(batches: &[RecordBatch]) {
    let rows = SELECTED
        .iter()
        .flat_map(|&g| g as u64 * ROWS..(g as u64 + 1) * ROWS);
    let mut rows = rows.peekable();
    for b in batches {
        assert_eq!(b.num_columns(), 2);
        let ids = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let texts = b.column(1).as_any().downcast_ref::<StringArray>().unwrap();
        for i in 0..b.num_rows() {
            let row = rows.next().expect("no more rows than selected");
            assert_eq!(ids.value(i), row as i64);
            assert_eq!(texts.value(i), text(row));
        }
    }
    assert!(rows.peek().is_none(), "every selected row read");
}

/// Reads the file three ways through `proxy` and compares batches and request counts.
async fn three_ways(
    proxy: &LatencyProxy,
    karu_store: Arc<dyn ObjectStore>,
    karu_file: karu::Locator,
    client: karu::Client,
    peer: Arc<dyn ObjectStore>,
    path: &Path,
) {
    let count = |before: u64| proxy.requests() - before;

    let before = proxy.requests();
    let over_store = read(ParquetObjectReader::new(karu_store, path.clone())).await;
    let store_requests = count(before);

    let before = proxy.requests();
    let own = read(KaruParquetReader::new(client.clone(), karu_file.clone())).await;
    let own_requests = count(before);

    // Metadata larger than the suffix read: exactly one more read.
    let before = proxy.requests();
    let small =
        KaruParquetReader::new(client.clone(), karu_file.clone()).with_metadata_size_hint(1024);
    assert_eq!(read(small).await, own);
    assert_eq!(count(before), own_requests + 1);

    let before = proxy.requests();
    let peer_batches = read(ParquetObjectReader::new(peer.clone(), path.clone())).await;
    let peer_requests = count(before);

    check(&peer_batches);
    assert_eq!(over_store, peer_batches);
    assert_eq!(own, peer_batches);

    // A full scan, which karu's reader reads ahead: the same batches, no more requests.
    let before = proxy.requests();
    let own_scan = scan(KaruParquetReader::new(client.clone(), karu_file.clone())).await;
    let own_scan_requests = count(before);
    let before = proxy.requests();
    let peer_scan = scan(ParquetObjectReader::new(peer.clone(), path.clone())).await;
    let peer_scan_requests = count(before);
    let rows: usize = peer_scan.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(rows as u64, ROWS * ROW_GROUPS);
    assert!(own_scan == peer_scan, "the scans differ");
    assert!(
        own_scan_requests <= peer_scan_requests,
        "scan requests: {own_scan_requests} > {peer_scan_requests}"
    );
    eprintln!(
        "requests: ParquetObjectReader over KaruStore {store_requests}, KaruParquetReader \
         {own_requests}, ParquetObjectReader over object_store {peer_requests}"
    );
    assert!(
        store_requests <= peer_requests,
        "{store_requests} > {peer_requests}"
    );
    assert!(
        own_requests < peer_requests,
        "{own_requests} >= {peer_requests}"
    );
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn addr(url: &str) -> std::net::SocketAddr {
    let host = url.trim_start_matches("http://");
    host.split('/').next().unwrap().parse().unwrap()
}

/// The file written into nginx's `www/` as `STEM-PID.parquet` (its path and name), and a
/// counting proxy in front of nginx.
fn on_nginx(
    started: &support::common::Started,
    stem: &str,
) -> (std::path::PathBuf, String, LatencyProxy) {
    let dir = started.require("KARU_TEST_NGINX_DIR");
    let name = format!("{stem}-{}.parquet", std::process::id());
    let on_disk = std::path::Path::new(&dir).join("www").join(&name);
    std::fs::write(&on_disk, file()).unwrap();
    let proxy = LatencyProxy::start(addr(&started.url), ProxyOptions::default());
    (on_disk, name, proxy)
}

#[test]
fn three_readers_agree_over_nginx_and_karu_sends_fewer_requests() {
    let Some(started) = support::common::started("KARU_TEST_NGINX_URL", "nginx") else {
        return;
    };
    let (on_disk, name, proxy) = on_nginx(&started, "karu-os");
    let base = proxy.url("");
    let client = support::common::client(&[]);
    let karu_store = Arc::new(KaruStore::new(client.clone(), &base).unwrap());
    let karu_file = karu_store.locator(&Path::from(name.as_str())).unwrap();
    let peer = object_store::http::HttpBuilder::new()
        .with_url(base.trim_end_matches('/'))
        .with_client_options(object_store::ClientOptions::new().with_allow_http(true))
        .build()
        .unwrap();
    runtime().block_on(three_ways(
        &proxy,
        karu_store,
        karu_file,
        client,
        Arc::new(peer),
        &Path::from(name.as_str()),
    ));
    std::fs::remove_file(on_disk).unwrap();
}

#[test]
fn three_readers_agree_over_s3s_fs_and_karu_sends_fewer_requests() {
    let Some(direct) = support::s3s() else {
        return;
    };
    let started = support::common::started("KARU_TEST_S3S_URL", "s3").unwrap();
    let path = Path::from(format!(
        "karu-object-store/parquet-{}.parquet",
        std::process::id()
    ));
    let rt = runtime();
    rt.block_on(direct.s3.put(&path, file().clone().into()))
        .unwrap();

    // The same stores, reached through the counting proxy.
    let proxy = LatencyProxy::start(addr(&started.url), ProxyOptions::default());
    let endpoint = proxy.url("").trim_end_matches('/').to_owned();
    let key = started.require("KARU_TEST_S3S_ACCESS_KEY_ID");
    let secret = started.require("KARU_TEST_S3S_SECRET_ACCESS_KEY");
    let client = support::common::client(&[
        ("AWS_S3_ENDPOINT", &endpoint),
        ("AWS_VIRTUAL_HOSTING", "NO"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", &key),
        ("AWS_SECRET_ACCESS_KEY", &secret),
    ]);
    let base = format!("s3://{}", direct.bucket);
    let karu_store = Arc::new(KaruStore::new(client.clone(), &base).unwrap());
    let karu_file = karu_store.locator(&path).unwrap();
    let peer = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(&endpoint)
        .with_bucket_name(&direct.bucket)
        .with_region("us-east-1")
        .with_access_key_id(key)
        .with_secret_access_key(secret)
        .with_virtual_hosted_style_request(false)
        .with_client_options(object_store::ClientOptions::new().with_allow_http(true))
        .build()
        .unwrap();
    rt.block_on(three_ways(
        &proxy,
        karu_store,
        karu_file,
        client,
        Arc::new(peer),
        &path,
    ));
    rt.block_on(direct.s3.delete(&path)).unwrap();
}

/// The column chunks of row group `g`, every column.
fn chunks(meta: &parquet::file::metadata::ParquetMetaData, g: usize) -> Vec<std::ops::Range<u64>> {
    meta.row_group(g)
        .columns()
        .iter()
        .map(|c| {
            let (start, len) = c.byte_range();
            start..start + len
        })
        .collect()
}

/// Waits (at most 10 s) until the proxy has counted `n` requests.
fn wait_for(proxy: &LatencyProxy, n: u64) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while proxy.requests() < n && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(proxy.requests(), n, "requests sent");
}

/// A scan's next row groups are sent for before the decoder asks and served from what
/// arrived; a skip, a partial chunk, or reading ahead turned off sends nothing ahead. Every
/// byte is compared with the file's.
#[test]
fn a_sequential_scan_is_read_ahead_and_served_from_it() {
    let Some(started) = support::common::started("KARU_TEST_NGINX_URL", "nginx") else {
        return;
    };
    let (on_disk, name, proxy) = on_nginx(&started, "karu-ahead");
    let client = support::common::client(&[]);
    let locator = karu::Locator::parse(&proxy.url(&format!("/{name}"))).unwrap();
    let bytes = |ranges: &[std::ops::Range<u64>]| -> Vec<Bytes> {
        ranges
            .iter()
            .map(|r| file().slice(r.start as usize..r.end as usize))
            .collect()
    };
    runtime().block_on(async {
        let mut reader = KaruParquetReader::new(client.clone(), locator.clone());
        let meta = reader.get_metadata(None).await.unwrap();
        assert!(reader.etag().is_some(), "nginx gives a strong ETag");
        // One request per row group: its column chunks are adjacent, so one transfer.
        let mut sent = proxy.requests();
        let ask = async |reader: &mut KaruParquetReader, g: usize| {
            let ranges = chunks(&meta, g);
            let got = reader.get_byte_ranges(ranges.clone()).await.unwrap();
            assert!(got == bytes(&ranges), "row group {g}");
        };
        ask(&mut reader, 0).await;
        sent += 1;
        wait_for(&proxy, sent);
        // The second in a row: row groups 2 and 3 are sent for with it.
        ask(&mut reader, 1).await;
        sent += 3;
        wait_for(&proxy, sent);
        ask(&mut reader, 2).await; // served ahead; row group 4 sent for
        sent += 1;
        wait_for(&proxy, sent);
        ask(&mut reader, 3).await; // served ahead; row group 5 sent for
        ask(&mut reader, 4).await; // served ahead; row group 6 sent for
        sent += 2;
        wait_for(&proxy, sent);
        // A skip: row group 10 is read now, nothing ahead (5 and 6 are dropped unread).
        ask(&mut reader, 10).await;
        sent += 1;
        wait_for(&proxy, sent);
        // Part of a chunk (a page-level read) is read as asked and predicts nothing.
        let part = chunks(&meta, 11)[0].start..chunks(&meta, 11)[0].start + 1000;
        let got = reader.get_byte_ranges(vec![part.clone()]).await.unwrap();
        assert!(got == bytes(&[part]));
        sent += 1;
        wait_for(&proxy, sent);
        // The last two row groups: nothing past the end is sent for.
        let last = meta.num_row_groups() - 1;
        ask(&mut reader, last - 1).await;
        ask(&mut reader, last).await;
        sent += 2;
        wait_for(&proxy, sent);

        // Turned off: every row group is read when it is asked for, none before.
        let mut off = KaruParquetReader::new(client, locator).with_read_ahead(0, 0);
        let meta = off.get_metadata(None).await.unwrap();
        let mut sent = proxy.requests();
        for g in 0..4 {
            let ranges = chunks(&meta, g);
            assert!(off.get_byte_ranges(ranges.clone()).await.unwrap() == bytes(&ranges));
            sent += 1;
            wait_for(&proxy, sent);
        }
    });
    std::fs::remove_file(on_disk).unwrap();
}
