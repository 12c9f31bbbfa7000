//! The object_store-shaped API: `get_range`/`get_ranges` (blocking and async) with every byte
//! checked, one batch pinned to one version, `Bytes` handed out without a copy, and errors that
//! keep their I/O or transport cause.

mod common;

use std::error::Error as _;

use karu::{Locator, Status};
use karu_testkit::content;
use karu_testkit::server::{RangeServer, etag};

fn check(name: &str, ranges: &[std::ops::Range<u64>], got: &[bytes::Bytes]) {
    assert_eq!(got.len(), ranges.len());
    for (r, b) in ranges.iter().zip(got) {
        assert_eq!(b.len() as u64, r.end - r.start, "{r:?}");
        content::check(name, r.start, b).unwrap();
    }
}

#[test]
fn get_ranges_reads_far_ranges_pinned_to_the_version_a_stat_saw() {
    let server = RangeServer::start();
    let size = 8 << 20;
    server.register("far.bin", size);
    let object = common::object(&server, "ok/far.bin");
    let client = common::client(&[]);
    // Far apart (more than the 1 MiB gap): two transfers, so pinned; given out of order.
    let ranges = [6_000_000..6_000_100, 10..20, 3_000_000..3_000_005, 0..0];
    let got = client.get_ranges(&object, &ranges).unwrap();
    check("far.bin", &ranges, &got);
    let log = server.take_log();
    let pin = etag("far.bin", size, 0);
    let gets: Vec<_> = log
        .iter()
        .filter(|l| l.range.as_deref() != Some("bytes=0-0"))
        .collect();
    assert_eq!(log.len() - gets.len(), 1, "one stat: {log:?}");
    assert_eq!(gets.len(), 3, "{log:?}");
    for l in gets {
        assert_eq!(l.header("if-match"), Some(pin.as_str()), "{l:?}");
    }

    let got = client.get_range(&object, 100..164).unwrap();
    content::check("far.bin", 100, &got).unwrap();
    server.clear_log();
    // Near ranges make one transfer: one answer is one version, so no stat and no pin.
    let near = [100..200, 300..400];
    check(
        "far.bin",
        &near,
        &client.get_ranges(&object, &near).unwrap(),
    );
    let log = server.take_log();
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0].header("if-match"), None);
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
fn a_replaced_object_fails_a_pinned_batch() {
    let server = RangeServer::start();
    let size = 8 << 20;
    server.register("moving.bin", size);
    // Each answer waits 400 ms (then is judged): the stat's at about 400 ms, the reads' at
    // about 800 ms, and the object changes in between.
    let object = common::object(&server, "ok/moving.bin?delay_ms=400");
    let client = common::client(&[]);
    let got = std::thread::scope(|s| {
        let h = s.spawn(|| client.get_ranges(&object, &[0..10, 7_000_000..7_000_010]));
        std::thread::sleep(std::time::Duration::from_millis(600));
        server.set_version("moving.bin", 1);
        h.join().unwrap()
    });
    assert_eq!(got.unwrap_err().status(), Status::Precondition);
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
