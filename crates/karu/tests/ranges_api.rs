//! The object_store-shaped API: `get_range`/`get_ranges` (blocking and async) with every byte
//! checked, one batch from one version, `Bytes` handed out without a copy, and errors that
//! keep their I/O or transport cause.

mod common;

use std::error::Error as _;

use karu::{Locator, Status};
use karu_testkit::content;
use karu_testkit::server::{RangeServer, etag, versioned_name};

fn check(name: &str, ranges: &[std::ops::Range<u64>], got: &[bytes::Bytes]) {
    assert_eq!(got.len(), ranges.len());
    for (r, b) in ranges.iter().zip(got) {
        assert_eq!(b.len() as u64, r.end - r.start, "{r:?}");
        content::check(name, r.start, b).unwrap();
    }
}

#[test]
fn get_ranges_reads_far_ranges_at_once_and_checks_they_are_one_version() {
    let server = RangeServer::start();
    let size = 8 << 20;
    server.register("far.bin", size);
    let object = common::object(&server, "ok/far.bin");
    let client = common::client(&[]);
    // Far apart (more than the 1 MiB gap): three transfers; given out of order, one empty.
    let ranges = [6_000_000..6_000_100, 10..20, 3_000_000..3_000_005, 0..0];
    let got = client.get_ranges(&object, &ranges).unwrap();
    check("far.bin", &ranges, &got);
    let log = server.take_log();
    assert_eq!(log.len(), 3, "no stat, one GET per transfer: {log:?}");
    assert!(
        log.iter().all(|l| l.header("if-match").is_none()),
        "{log:?}"
    );

    let got = client.get_range(&object, 100..164).unwrap();
    content::check("far.bin", 100, &got).unwrap();
    server.clear_log();
    let near = [100..200, 300..400];
    check(
        "far.bin",
        &near,
        &client.get_ranges(&object, &near).unwrap(),
    );
    assert_eq!(server.take_log().len(), 1, "near ranges share one transfer");
}

#[test]
fn ranges_answered_by_two_versions_are_read_again_from_one() {
    let server = RangeServer::start();
    let size = 8 << 20;
    server.register("moving.bin", size);
    // The first request sees version 0, every later one version 1.
    let object = common::object(&server, "etag-change/moving.bin?at=1");
    let client = common::client(&[]);
    let ranges = [0..10, 7_000_000..7_000_010];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let got = rt
        .block_on(client.get_ranges_async(&object, &ranges))
        .unwrap();
    let v1 = versioned_name("moving.bin", 1);
    check(&v1, &ranges, &got);
    let log = server.take_log();
    // Two transfers (two versions), a stat, and the two transfers again pinned to v1.
    assert_eq!(log.len(), 5, "{log:?}");
    let pin = etag("moving.bin", size, 1);
    let pinned = log
        .iter()
        .filter(|l| l.header("if-match") == Some(pin.as_str()));
    assert_eq!(pinned.count(), 2, "{log:?}");

    // The blocking call does the same.
    let object = common::object(&server, "etag-change/again.bin?at=1&size=8388608");
    let got = client.get_ranges(&object, &ranges).unwrap();
    check(&versioned_name("again.bin", 1), &ranges, &got);
}

#[test]
fn get_ranges_async_matches_the_blocking_call() {
    let server = RangeServer::start();
    server.register("async.bin", 4 << 20);
    let object = common::object(&server, "ok/async.bin");
    let client = common::client(&[]);
    let ranges = [3_500_000..3_600_000, 5..6, 1_000..1_000];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let got = rt
        .block_on(client.get_ranges_async(&object, &ranges))
        .unwrap();
    check("async.bin", &ranges, &got);
    let one = rt.block_on(client.get_range_async(&object, 7..11)).unwrap();
    content::check("async.bin", 7, &one).unwrap();
}

#[test]
fn reversed_and_past_the_end_ranges_fail_with_their_status() {
    let server = RangeServer::start();
    server.register("short.bin", 100);
    let object = common::object(&server, "ok/short.bin");
    let client = common::client(&[]);
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = 9..3;
    let e = client.get_range(&object, reversed.clone()).unwrap_err();
    assert_eq!(e.status(), Status::Invalid);
    let e = client.get_ranges(&object, &[0..1, reversed]).unwrap_err();
    assert_eq!(e.status(), Status::Invalid);
    let e = client.get_range(&object, 90..110).unwrap_err();
    assert_eq!(e.status(), Status::Range);
}

#[test]
fn completions_hand_out_their_buffer_as_bytes_without_a_copy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.bin");
    content::write_file(&path, "data.bin", 4096).unwrap();
    let object = Locator::parse(path.to_str().unwrap()).unwrap();
    let client = common::client(&[]);
    let buffer = Vec::with_capacity(512);
    let batch = client
        .submit(vec![karu::Read::new(&object, 100, 512).into_buffer(buffer)])
        .unwrap();
    let done = batch.next().unwrap();
    let at = done.buffer.as_ref().unwrap().as_ptr();
    let bytes = done.into_bytes().unwrap();
    assert_eq!(bytes.as_ptr(), at, "the vector became the Bytes");
    content::check("data.bin", 100, &bytes).unwrap();
}

#[test]
fn errors_keep_their_io_and_transport_cause() {
    let client = common::client(&[("KARU_MAX_ATTEMPTS", "1")]);
    let missing = Locator::parse("/nonexistent/karu/missing.bin").unwrap();
    let e = client.get_range(&missing, 0..1).unwrap_err();
    assert_eq!(e.status(), Status::Io);
    let cause = e.source().expect("an I/O cause");
    let io = cause
        .downcast_ref::<std::io::Error>()
        .expect("an io::Error");
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);

    // A port nobody listens on: connection refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let object = Locator::parse(&format!("http://127.0.0.1:{port}/x.bin")).unwrap();
    let e = client.get_range(&object, 0..1).unwrap_err();
    assert_eq!(e.status(), Status::Network);
    assert!(e.source().is_some(), "{e}");
    assert_eq!(e.clone(), e, "the cause does not change equality");
}
