//! A ~50 MB Parquet file (20 row groups × 10 columns of mixed types, written at test time),
//! served by nginx and by s3s-fs, read with a projection of 2 columns and 5 row groups three
//! ways: `ParquetObjectReader` over `KaruStore`, karu's own `KaruParquetReader`, and
//! `ParquetObjectReader` over object_store's `HttpStore`/`AmazonS3`. The record batches
//! must be equal (and hold exactly the rows written), and karu must not send more requests
//! than object_store, as counted by a proxy in front of the server.

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
    let small = KaruParquetReader::new(client, karu_file).with_metadata_size_hint(1024);
    assert_eq!(read(small).await, own);
    assert_eq!(count(before), own_requests + 1);

    let before = proxy.requests();
    let peer_batches = read(ParquetObjectReader::new(peer, path.clone())).await;
    let peer_requests = count(before);

    check(&peer_batches);
    assert_eq!(over_store, peer_batches);
    assert_eq!(own, peer_batches);
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

#[test]
fn three_readers_agree_over_nginx_and_karu_sends_fewer_requests() {
    let Some(started) = support::common::started("KARU_TEST_NGINX_URL", "nginx") else {
        return;
    };
    let dir = started.require("KARU_TEST_NGINX_DIR");
    let name = format!("karu-os-{}.parquet", std::process::id());
    let on_disk = std::path::Path::new(&dir).join("www").join(&name);
    std::fs::write(&on_disk, file()).unwrap();
    let proxy = LatencyProxy::start(addr(&started.url), ProxyOptions::default());
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
