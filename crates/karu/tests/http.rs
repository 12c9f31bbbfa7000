//! Remote reads against the test kit's range server: every fault route gives the status the
//! spec names, the right `got`, and never a wrong byte; retried faults succeed with exact
//! counters; request plans are asserted from the server's log.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{client, collect, object, read_all};
use karu::plan::{self, Policy};
use karu::{BatchStats, Client, Completion, Locator, Read, Status};
use karu_testkit::content;
use karu_testkit::server::{RangeServer, etag};

/// Reads one range and returns its completion and the batch counters.
fn read_one(c: &Client, l: &Locator, offset: u64, length: u64) -> (Completion, BatchStats) {
    let batch = c.submit(vec![Read::new(l, offset, length)]).unwrap();
    let done = batch.next().unwrap();
    (done, batch.stats())
}

#[test]
fn random_reads_plan_into_the_logged_requests_and_every_byte_is_right() {
    let server = RangeServer::start();
    let size = 64u64 << 20;
    let l = object(&server, &format!("/ok/random?size={size}"));
    // The guards plan, which the test restates with `plan::plan`.
    let c = client(&[
        ("KARU_COALESCE_LIMIT", "1048576"),
        ("KARU_COALESCE_MODE", "guards"),
    ]);
    let mut rng = 7u64;
    let spans: Vec<(u64, u64)> = (0..1000)
        .map(|_| {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((rng >> 16) % (size - 10_000), 1 + (rng >> 40) % 8192)
        })
        .collect();
    let stats = read_all(&c, &l, "random", &spans);
    // The server saw exactly the planned transfers, no more.
    let requests: Vec<plan::Request> = spans
        .iter()
        .map(|&(offset, length)| plan::Request {
            locator: &l,
            offset,
            length,
            if_match: None,
        })
        .collect();
    let policy = Policy {
        limit: 1 << 20,
        ..Policy::default()
    };
    let planned = plan::plan(&requests, &policy);
    let mut expected: Vec<String> = planned
        .transfers
        .iter()
        .map(|t| format!("bytes={}-{}", t.offset, t.offset + t.length - 1))
        .collect();
    let mut logged: Vec<String> = server.log().into_iter().filter_map(|r| r.range).collect();
    expected.sort();
    logged.sort();
    assert_eq!(logged, expected);
    assert_eq!(stats.transfers, planned.transfers.len() as u64);
    assert_eq!(stats.transfers_finished, stats.transfers);
    assert_eq!(stats.received_bytes, planned.fetched_bytes());
    assert_eq!(stats.retries, 0);
}

#[test]
fn sparse_reads_make_sixteen_requests_with_defaults_and_one_per_read_with_gap_zero() {
    let server = RangeServer::start();
    let l = object(&server, &format!("/ok/sparse?size={}", 1u64 << 30));
    let reads = |n: u64| -> Vec<Read> {
        (0..n)
            .map(|i| Read::new(&l, i << 20, 64 << 10).tag(i))
            .collect()
    };
    // 1,000 reads of 64 KiB at 1 MiB stride: 16 transfers with the guards' defaults (spec
    // §8)...
    let batch = client(&[("KARU_COALESCE_MODE", "guards")])
        .submit(reads(1000))
        .unwrap();
    for d in collect(&batch) {
        content::check("sparse", d.tag << 20, d.bytes()).unwrap();
    }
    assert_eq!(server.log().len(), 16);
    assert_eq!(batch.stats().transfers, 16);
    server.clear_log();
    // ... and one request per read with gap 0.
    let batch = client(&[("KARU_COALESCE_GAP", "0")])
        .submit(reads(200))
        .unwrap();
    assert!(collect(&batch).iter().all(|d| d.result.is_ok()));
    assert_eq!(server.log().len(), 200);
}

#[test]
fn overlapping_and_duplicate_reads_share_one_transfer() {
    let server = RangeServer::start();
    let l = object(&server, "/ok/overlap?size=100000");
    let spans = [
        (100u64, 500u64),
        (300, 500),
        (300, 500),
        (5000, 10),
        (90_000, 20_000),
    ];
    let reads = spans
        .iter()
        .enumerate()
        .map(|(i, &(o, n))| Read::new(&l, o, n).tag(i as u64))
        .collect();
    let batch = client(&[("KARU_COALESCE_MODE", "guards")])
        .submit(reads)
        .unwrap();
    let all = collect(&batch);
    for d in &all[..4] {
        let (o, n) = spans[d.tag as usize];
        assert_eq!(d.got, n);
        content::check("overlap", o, d.bytes()).unwrap();
    }
    // The last read runs past the end of the 100,000-byte object: RANGE with its prefix.
    assert_eq!(all[4].status(), Status::Range);
    assert_eq!(all[4].got, 10_000);
    content::check("overlap", 90_000, all[4].bytes()).unwrap();
    assert_eq!(server.log().len(), 1);
}

#[test]
fn a_server_that_ignores_range_is_handled_by_the_prefix_skip_fallback() {
    let server = RangeServer::start();
    let l = object(&server, "/ignore-range/whole?size=200000");
    let c = client(&[]);
    let (d, s) = read_one(&c, &l, 0, 1000);
    content::check("whole", 0, d.bytes()).unwrap();
    assert_eq!(s.retries, 0);
    let (d, _) = read_one(&c, &l, 150_000, 1000);
    content::check("whole", 150_000, d.bytes()).unwrap();
    let strict = client(&[("KARU_RANGE_FALLBACK_LIMIT", "100")]);
    let (d, s) = read_one(&strict, &l, 150_000, 1000);
    assert_eq!(d.status(), Status::Http);
    assert!(
        d.result
            .unwrap_err()
            .message()
            .contains("server ignored Range")
    );
    assert_eq!((d.got, s.retries), (0, 0));
}

#[test]
fn truncated_and_reset_bodies_resume_with_exact_counters() {
    let server = RangeServer::start();
    let c = client(&[]);
    for fault in ["truncate", "reset"] {
        // Every answer breaks after 1,000 body bytes: 5,000 bytes need 5 attempts, each
        // resuming where the last one stopped (pinned by the strong ETag).
        let l = object(&server, &format!("/{fault}/cut?size=100000&k=1000"));
        let (d, s) = read_one(&c, &l, 10, 5000);
        assert!(d.result.is_ok(), "{fault}: {:?}", d.result);
        content::check("cut", 10, d.bytes()).unwrap();
        assert_eq!((s.retries, s.resumed), (4, 4), "{fault}");
        let log = server.log();
        let resumed = log.last().unwrap();
        assert_eq!(resumed.range.as_deref(), Some("bytes=4010-5009"));
        assert_eq!(
            resumed.header("if-match"),
            Some(etag("cut", 100_000, 0).as_str())
        );
        server.clear_log();
    }
}

#[test]
fn content_range_violations_fail_without_retrying() {
    let server = RangeServer::start();
    let c = client(&[]);
    for (fault, text) in [
        (
            "no-content-range",
            "missing Content-Range for requested [10, 19]",
        ),
        ("garbled-content-range", "malformed Content-Range"),
        ("wrong-content-range", "does not satisfy requested [10, 19]"),
    ] {
        let l = object(&server, &format!("/{fault}/cr?size=1000"));
        let (d, s) = read_one(&c, &l, 10, 10);
        let e = d.result.unwrap_err();
        assert_eq!(e.status(), Status::Http, "{fault}");
        assert!(e.message().contains(text), "{fault}: {e}");
        assert_eq!((d.got, s.retries), (0, 0));
    }
    server.clear_log();
    let (d, s) = read_one(&c, &object(&server, "/416/x?size=1000"), 0, 10);
    assert_eq!(d.status(), Status::Range);
    assert!(d.result.unwrap_err().message().ends_with("HTTP 416"));
    assert_eq!((d.got, s.retries), (0, 0));
}

#[test]
fn statuses_map_to_their_errors_and_only_transient_ones_retry() {
    let server = RangeServer::start();
    let c = client(&[]);
    let cases = [
        (401, Status::Auth),
        (403, Status::Auth),
        (404, Status::NotFound),
        (412, Status::Precondition),
        (418, Status::Http),
    ];
    for (code, status) in cases {
        let l = object(
            &server,
            &format!("/status/s{code}?size=100&code={code}&times=1"),
        );
        let (d, s) = read_one(&c, &l, 0, 10);
        assert_eq!(d.status(), status, "{code}");
        assert_eq!(s.retries, 0, "{code}");
        let e = d.result.unwrap_err();
        assert!(e.message().contains(&format!("HTTP {code}")), "{e}");
        assert!(e.message().contains("?<redacted>"), "URL redacted: {e}");
    }
    // 500 twice, then success; 400 naming RequestTimeout is transient too.
    for path in [
        "/status/t500?size=100&code=500&times=2",
        "/status/t400?size=100&code=400&times=2&body=%3CCode%3ERequestTimeout%3C%2FCode%3E",
    ] {
        let (d, s) = read_one(&c, &object(&server, path), 5, 50);
        assert!(d.result.is_ok(), "{path}: {:?}", d.result);
        content::check(
            path.split('/').nth(2).unwrap().split('?').next().unwrap(),
            5,
            d.bytes(),
        )
        .unwrap();
        assert_eq!((s.retries, s.throttled), (2, 0), "{path}");
    }
}

#[test]
fn throttling_honours_retry_after_and_counts_throttled() {
    let server = RangeServer::start();
    let c = client(&[]);
    let l = object(
        &server,
        "/status/busy?size=100&code=503&times=2&retry_after=0",
    );
    let (d, s) = read_one(&c, &l, 0, 100);
    content::check("busy", 0, d.bytes()).unwrap();
    assert_eq!((s.retries, s.throttled), (2, 2));
    let l = object(
        &server,
        "/status/later?size=100&code=429&times=1&retry_after_date=1",
    );
    let t = Instant::now();
    let (d, s) = read_one(&c, &l, 0, 100);
    assert!(d.result.is_ok());
    assert_eq!((s.retries, s.throttled), (1, 1));
    // An HTTP-date Retry-After one second ahead is waited for (HTTP dates have whole seconds).
    assert!(
        t.elapsed() >= Duration::from_millis(100),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn attempts_run_out_after_max_attempts() {
    let server = RangeServer::start();
    let c = client(&[("KARU_MAX_ATTEMPTS", "3")]);
    let l = object(
        &server,
        "/status/down?size=100&code=503&times=100&retry_after=0",
    );
    let (d, s) = read_one(&c, &l, 0, 10);
    assert_eq!(d.status(), Status::Http);
    assert_eq!((s.retries, s.throttled), (2, 3));
    assert_eq!(server.log().len(), 3);
}

#[test]
fn unreachable_hosts_stop_after_three_attempts() {
    // A port nothing listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let l = Locator::parse(&format!("http://127.0.0.1:{port}/x")).unwrap();
    let (d, s) = read_one(&client(&[]), &l, 0, 10);
    assert_eq!(d.status(), Status::Network);
    assert_eq!(s.retries, 2);
}

#[test]
fn the_deadline_is_not_exceeded_by_more_than_one_backoff_step() {
    let server = RangeServer::start();
    let c = client(&[("KARU_REQUEST_TIMEOUT", "1")]);
    let l = object(&server, "/status/slow?size=100&code=500&times=100");
    let t = Instant::now();
    let (d, _) = read_one(&c, &l, 0, 10);
    assert_eq!(d.status(), Status::Timeout);
    // The backoff steps before the deadline are 200–400 ms and 400–800 ms; the check before
    // sleeping fails the read rather than sleeping past the deadline.
    assert!(
        t.elapsed() < Duration::from_millis(1000 + 800),
        "{:?}",
        t.elapsed()
    );
    let e = d.result.unwrap_err();
    assert!(e.message().contains("request timeout"), "{e}");
}

#[test]
fn a_trickling_body_is_aborted_by_the_low_speed_rule() {
    let server = RangeServer::start();
    let c = client(&[
        ("KARU_LOW_SPEED_TIME", "1"),
        ("KARU_LOW_SPEED_LIMIT", "100000"),
        ("KARU_MAX_ATTEMPTS", "1"),
    ]);
    let l = object(&server, "/trickle/drip?size=100000&rate=2000");
    let t = Instant::now();
    let (d, _) = read_one(&c, &l, 0, 50_000);
    assert_eq!(d.status(), Status::Network);
    assert!(d.result.unwrap_err().message().contains("slower than"));
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn redirects_are_followed_within_limits_and_origin_rules() {
    let server = RangeServer::start();
    let c = client(&[]);
    for path in [
        "/redirect/r?size=1000&hops=3",
        "/redirect/r?size=1000&hops=2&cross=1",
        "/redirect/r?size=1000&hops=1&relative=1&code=307",
    ] {
        let (d, _) = read_one(&c, &object(&server, path), 10, 100);
        assert!(d.result.is_ok(), "{path}: {:?}", d.result);
        content::check("r", 10, d.bytes()).unwrap();
    }
    let (d, s) = read_one(&c, &object(&server, "/redirect/r?size=1000&hops=11"), 0, 10);
    assert_eq!((d.status(), s.retries), (Status::Network, 0));
    // Custom headers allow same-origin redirects only.
    let strict = client(&[("KARU_HTTP_HEADERS", "X-Team: a")]);
    let (d, _) = read_one(
        &strict,
        &object(&server, "/redirect/r?size=1000&hops=1"),
        0,
        10,
    );
    assert!(d.result.is_ok(), "{:?}", d.result);
    let (d, _) = read_one(
        &strict,
        &object(&server, "/redirect/r?size=1000&cross=1"),
        0,
        10,
    );
    assert_eq!(d.status(), Status::Http);
    assert!(
        d.result
            .unwrap_err()
            .message()
            .contains("cross-origin redirect blocked")
    );
    assert!(server.log().iter().any(|r| r.header("x-team") == Some("a")));
}

#[test]
fn transformed_bodies_are_rejected() {
    let server = RangeServer::start();
    let c = client(&[]);
    // A body gzipped on the way (its length no longer matches Content-Range) and one marked
    // as transformed by a proxy are refused, never retried, and deliver no byte.
    for path in ["/gzip/g?size=1000", "/warning-214/g?size=1000"] {
        let (d, s) = read_one(&c, &object(&server, path), 0, 100);
        assert_eq!(d.status(), Status::Http, "{path}: {:?}", d.result);
        assert_eq!((d.got, s.retries), (0, 0));
    }
    // An object stored with Content-Encoding: gzip is served as stored: its ranges are the
    // stored bytes (only GCS says what was stored, and that check is the GCS backend's).
    let (d, _) = read_one(&c, &object(&server, "/gzip/g?size=1000&raw=1"), 0, 100);
    content::check("g", 0, d.bytes()).unwrap();
}

#[test]
fn a_changed_object_fails_a_pinned_read_with_precondition() {
    let server = RangeServer::start();
    let c = client(&[]);
    let l = object(&server, "/ok/pinned?size=1000");
    let info = c.stat(&l).unwrap();
    assert_eq!(info.etag.as_deref(), Some(etag("pinned", 1000, 0).as_str()));
    let ok = c
        .submit(vec![
            Read::new(&l, 0, 10).if_match(info.etag.as_deref().unwrap()),
        ])
        .unwrap();
    assert!(ok.next().unwrap().result.is_ok());
    server.set_version("pinned", 1);
    let batch = c
        .submit(vec![
            Read::new(&l, 0, 10).if_match(info.etag.as_deref().unwrap()),
        ])
        .unwrap();
    assert_eq!(batch.next().unwrap().status(), Status::Precondition);
    // A server that ignores If-Match but reports the new ETag is caught before any byte.
    let l = object(
        &server,
        "/etag-change/moving?size=1000&if_match=ignore&at=1",
    );
    let first = c.stat(&l).unwrap().etag.unwrap();
    let batch = c
        .submit(vec![Read::new(&l, 0, 10).if_match(&first)])
        .unwrap();
    let d = batch.next().unwrap();
    assert_eq!(d.status(), Status::Precondition);
    assert!(
        d.result
            .unwrap_err()
            .message()
            .contains("server ignored If-Match")
    );
}

#[test]
fn probes_size_stat_and_read_ends() {
    let server = RangeServer::start();
    let c = client(&[]);
    let l = object(&server, "/ok/probe?size=123456");
    assert_eq!(c.size(&l).unwrap(), 123_456);
    let info = c.stat(&l).unwrap();
    assert_eq!(
        info.etag.as_deref(),
        Some(etag("probe", 123_456, 0).as_str())
    );
    let empty = object(&server, "/ok/empty?size=0");
    assert_eq!(c.size(&empty).unwrap(), 0);
    let ends = c.read_ends(&empty, 100, 100).unwrap();
    assert_eq!(
        (ends.head.len(), ends.tail.len(), ends.info.size),
        (0, 0, 0)
    );
    server.clear_log();
    let ends = c.read_ends(&l, 1000, 500).unwrap();
    assert_eq!(ends.info.size, 123_456);
    content::check("probe", 0, &ends.head).unwrap();
    content::check("probe", 123_456 - 500, &ends.tail).unwrap();
    let mut ranges: Vec<String> = server.log().into_iter().filter_map(|r| r.range).collect();
    ranges.sort();
    assert_eq!(ranges, ["bytes=-500", "bytes=0-999"]);
    // A short object: both ends overlap.
    let short = object(&server, "/ok/short?size=300");
    let ends = c.read_ends(&short, 1000, 200).unwrap();
    assert_eq!(ends.head, content::bytes("short", 0, 300));
    assert_eq!(ends.tail, content::bytes("short", 100, 200));
    // A server that ignores suffix ranges: the tail comes by offset, pinned to the head's tag.
    server.clear_log();
    let ign = object(&server, "/ignore-suffix/ign?size=50000");
    let ends = c.read_ends(&ign, 100, 100).unwrap();
    content::check("ign", 50_000 - 100, &ends.tail).unwrap();
    let log = server.log();
    let by_offset = log
        .iter()
        .find(|r| r.range.as_deref() == Some("bytes=49900-49999"))
        .expect("tail fetched by offset");
    assert_eq!(
        by_offset.header("if-match"),
        Some(etag("ign", 50_000, 0).as_str())
    );
    // A bounded window: both ends by absolute offset, size without I/O.
    let w = Locator::parse(&format!(
        "{}#bytes=1000-1999",
        server.url("/ok/probe?size=123456")
    ))
    .unwrap();
    assert_eq!(c.size(&w).unwrap(), 1000);
    let ends = c.read_ends(&w, 10, 10).unwrap();
    assert_eq!(ends.head, content::bytes("probe", 1000, 10));
    assert_eq!(ends.tail, content::bytes("probe", 1990, 10));
    // Errors carry their status.
    let missing = object(&server, "/ok/missing");
    assert_eq!(c.stat(&missing).unwrap_err().status(), Status::NotFound);
}

#[test]
fn probes_and_a_batch_side_by_side_on_a_long_round_trip() {
    let server = RangeServer::start();
    let c = client(&[("KARU_CONCURRENCY", "6")]);
    // Slow answers: no first byte comes soon, so the endpoint's gate opens, and every probe
    // overlaps the others.
    let l = object(&server, "/ok/probes?size=1000000&delay_ms=20");
    let reads = (0..40u64)
        .map(|i| Read::new(&l, i * 20_000, 100).tag(i))
        .collect();
    let batch = c.submit(reads).unwrap();
    std::thread::scope(|s| {
        for i in 0..30u64 {
            let (c, l) = (&c, &l);
            s.spawn(move || {
                if i % 3 == 0 {
                    assert_eq!(c.stat(l).unwrap().size, 1_000_000);
                } else {
                    // Head and tail side by side: two exchanges.
                    let ends = c.read_ends(l, 100 + i, 50).unwrap();
                    assert_eq!(ends.head, content::bytes("probes", 0, 100 + i as usize));
                    assert_eq!(ends.tail, content::bytes("probes", 999_950, 50));
                }
            });
        }
        for d in collect(&batch) {
            content::check("probes", d.tag * 20_000, d.bytes()).unwrap();
        }
    });
    // Probes take none of the batch's places (KARU_CONCURRENCY bounds transfers).
    assert!(server.max_in_flight() > 6, "{}", server.max_in_flight());
}

#[test]
fn concurrency_never_exceeds_the_limit_and_connections_are_reused() {
    let server = RangeServer::start();
    let c = client(&[("KARU_CONCURRENCY", "8"), ("KARU_COALESCE_GAP", "0")]);
    let l = object(&server, "/ok/busy?size=10000000&delay_ms=20");
    let reads = || {
        (0..100u64)
            .map(|i| Read::new(&l, i * 50_000, 100).tag(i))
            .collect()
    };
    let batch = c.submit(reads()).unwrap();
    for d in collect(&batch) {
        content::check("busy", d.tag * 50_000, d.bytes()).unwrap();
    }
    assert!(server.max_in_flight() <= 8, "{}", server.max_in_flight());
    assert!(batch.stats().new_connections <= 8);
    let opened = server.connections_accepted();
    assert!(opened <= 8);
    // A later batch reuses them: no loop opens more than its share over both batches.
    let again = c.submit(reads()).unwrap();
    assert_eq!(collect(&again).len(), 100);
    assert!(server.max_in_flight() <= 8);
    let total = opened + again.stats().new_connections;
    assert_eq!(server.connections_accepted(), total);
    assert!(total <= 8, "{total}");
}

#[test]
fn sixty_four_concurrent_reads_open_at_most_sixty_four_connections() {
    let server = RangeServer::start();
    let c = client(&[("KARU_COALESCE_GAP", "0")]);
    let l = object(&server, "/ok/many?size=10000000&delay_ms=10");
    let reads = || {
        (0..64u64)
            .map(|i| Read::new(&l, i * 100_000, 64).tag(i))
            .collect()
    };
    let batch = c.submit(reads()).unwrap();
    assert_eq!(collect(&batch).len(), 64);
    assert!(server.connections_accepted() <= 64);
    let first = batch.stats().new_connections;
    assert!(first <= 64 && first > 0);
    // Later batches reuse them: still at most 64 connections after three batches.
    let mut total = first;
    for _ in 0..2 {
        let again = c.submit(reads()).unwrap();
        assert_eq!(collect(&again).len(), 64);
        total += again.stats().new_connections;
    }
    assert!(total <= 64, "{total}");
    assert_eq!(server.connections_accepted(), total);
}

#[test]
fn serial_reads_reuse_one_connection() {
    let server = RangeServer::start();
    let c = client(&[]);
    let l = object(&server, "/ok/serial?size=100000");
    for i in 0..20u64 {
        content::check("serial", i * 1000, &c.read(&l, i * 1000, 100).unwrap()).unwrap();
    }
    assert_eq!(server.connections_accepted(), 1);
}

#[test]
fn dropping_a_batch_mid_flight_returns_promptly_and_frees_its_buffers() {
    let server = RangeServer::start();
    let c = client(&[("KARU_COALESCE_GAP", "0")]);
    let l = object(&server, "/trickle/slow?size=10000000&rate=10000");
    // Raw destinations (the C ABI's contract): after the drop returns, nobody may write them.
    let mut buffers = vec![vec![0u8; 30_000]; 200];
    let reads = buffers
        .iter_mut()
        .enumerate()
        .map(|(i, b)| {
            let read = Read::new(&l, i as u64 * 40_000, 30_000);
            // SAFETY: the buffers outlive the batch, which is dropped below before they are
            // touched again.
            unsafe { read.with_raw_buffer(b.as_mut_ptr()) }
        })
        .collect();
    let batch = c.submit(reads).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    drop(batch);
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    for b in &mut buffers {
        b.fill(0xAB);
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(buffers.iter().all(|b| b.iter().all(|&x| x == 0xAB)));
    // The client still works, on the same loops.
    let ok = object(&server, "/ok/after?size=1000");
    content::check("after", 0, &c.read(&ok, 0, 1000).unwrap()).unwrap();
}

#[test]
fn requests_carry_the_user_agent_and_configured_headers() {
    let server = RangeServer::start();
    let l = object(&server, "/ok/ua?size=100");
    client(&[]).read(&l, 0, 10).unwrap();
    let ua = format!("karu/{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(server.log()[0].header("user-agent"), Some(ua.as_str()));
    server.clear_log();
    let c = client(&[
        ("KARU_HTTP_USER_AGENT", ""),
        ("KARU_HTTP_HEADERS", "X-A: 1\nX-B: two"),
    ]);
    c.read(&l, 0, 10).unwrap();
    let log = server.log();
    assert_eq!(log[0].header("user-agent"), None);
    assert_eq!(log[0].header("x-a"), Some("1"));
    // Karu-managed headers cannot be overridden; a malformed setting fails every read.
    for (headers, text) in [
        (
            "Range: bytes=0-1",
            "cannot override Karu-managed header 'Range'",
        ),
        (
            "no colon here",
            "KARU_HTTP_HEADERS contains a malformed header",
        ),
    ] {
        let c = client(&[("KARU_HTTP_HEADERS", headers)]);
        let (d, _) = read_one(&c, &l, 0, 10);
        assert_eq!(d.status(), Status::Config);
        assert!(d.result.unwrap_err().message().contains(text));
    }
}

#[test]
fn several_threads_drain_one_remote_batch() {
    let server = RangeServer::start();
    let c = client(&[("KARU_COALESCE_GAP", "0")]);
    let l = object(&server, "/ok/drain?size=10000000");
    let reads = (0..500u64)
        .map(|i| Read::new(&l, i * 10_000, 100).tag(i))
        .collect();
    let batch = Arc::new(c.submit(reads).unwrap());
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let b = Arc::clone(&batch);
            std::thread::spawn(move || {
                let mut tags = Vec::new();
                while let Some(d) = b.next() {
                    content::check("drain", d.tag * 10_000, d.bytes()).unwrap();
                    tags.push(d.tag);
                }
                tags
            })
        })
        .collect();
    let mut all: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort();
    assert_eq!(all, (0..500).collect::<Vec<_>>());
}

#[test]
fn an_object_that_changes_while_a_body_is_resumed_restarts_from_the_new_version() {
    let server = RangeServer::start();
    let c = client(&[]);
    // Request 0 sees version 0 and breaks after 600 bytes; the resume pinned to version 0
    // gets 412 (the object changed), so karu restarts: version 1 breaks after 600 bytes
    // again, and the resume pinned to version 1 completes. Every byte is version 1's.
    let l = object(&server, "/etag-change/moving?size=100000&at=1&k=600");
    let (d, s) = read_one(&c, &l, 0, 1000);
    assert!(d.result.is_ok(), "{:?}", d.result);
    let v1 = karu_testkit::server::versioned_name("moving", 1);
    content::check(&v1, 0, d.bytes()).unwrap();
    // The kept prefix grew twice (0 → 600 of version 0, then 0 → 600 of version 1).
    assert_eq!((s.retries, s.resumed), (3, 2));
    let log = server.log();
    let statuses: Vec<u16> = log.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [206, 412, 206, 206]);
    assert_eq!(log[3].range.as_deref(), Some("bytes=600-999"));
    // When every request sees a new version, attempts run out with the spec's message.
    let l = object(&server, "/etag-change/churn?size=100000&every=1&k=600");
    let (d, _) = read_one(&client(&[("KARU_MAX_ATTEMPTS", "4")]), &l, 0, 1000);
    assert_eq!(d.status(), Status::Http);
    let e = d.result.unwrap_err();
    assert!(
        e.message()
            .contains("the object changed while an interrupted read"),
        "{e}"
    );
}

/// A batch's `Overrides::mode` replaces the client's `KARU_COALESCE_MODE`: a cold cost-mode
/// client cuts a 40 MiB read into pieces (its link is unmeasured), and the same read
/// submitted with the guards mode is one request. Every byte is checked both ways.
#[test]
fn a_batch_may_be_planned_by_the_guards_on_a_cost_client() {
    let server = RangeServer::start();
    let l = object(&server, "/ok/mode?size=67108864");
    let c = client(&[("KARU_COALESCE_MODE", "cost")]);
    let length = 40u64 << 20;
    let run = |overrides: &plan::Overrides| {
        server.clear_log();
        let batch = c
            .submit_with(vec![Read::new(&l, 1000, length)], overrides)
            .unwrap();
        let done = batch.next().unwrap();
        assert!(done.result.is_ok(), "{:?}", done.result);
        content::check("mode", 1000, done.bytes()).unwrap();
        (batch.stats().transfers, server.log().len())
    };
    let (transfers, requests) = run(&plan::Overrides::default());
    assert!(
        transfers > 1 && requests as u64 == transfers,
        "{transfers}, {requests}"
    );
    let guards = plan::Overrides {
        mode: Some(plan::Mode::Guards),
        ..plan::Overrides::default()
    };
    assert_eq!(run(&guards), (1, 1));
}
