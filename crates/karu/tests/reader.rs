//! `karu::Reader` against the test kit's range server: open costs one request, reads are exact
//! and pinned to the version seen at open, the cache and readahead save requests, and every
//! adversarial storage (short bodies, a failing N-th request, 1-byte blocks, a cache smaller
//! than a block, an object replaced after open) gives exact data or an error, never wrong
//! data. Requests are counted from the server's log.

mod common;

use std::io::{Read as _, Seek, SeekFrom};
use std::ops::Range;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::{Rng, client, object};
use karu::{Reader, ReaderOptions, Status};
use karu_testkit::content;
use karu_testkit::server::{RangeServer, etag, versioned_name};

const MIB: u64 = 1 << 20;

fn open(server: &RangeServer, path: &str, options: ReaderOptions) -> Reader {
    Reader::open(&client(&[]), &object(server, path), options).unwrap()
}

fn check(name: &str, offset: u64, data: &[u8]) {
    content::check(name, offset, data).unwrap_or_else(|e| panic!("{name} at {offset}: {e}"));
}

#[test]
fn open_costs_one_request_and_every_read_is_exact_and_pinned() {
    let server = RangeServer::start();
    let size = 5 * MIB + 7;
    let r = open(
        &server,
        &format!("/ok/pinned?size={size}"),
        ReaderOptions::default(),
    );
    assert_eq!(server.log().len(), 1, "open is one request");
    assert_eq!(r.len(), size);
    let tag = etag("pinned", size, 0);
    assert_eq!(r.etag(), Some(tag.as_str()));
    // Inside the first block: no request.
    check("pinned", 100, &r.read_at(100, 5000).unwrap());
    assert_eq!(server.log().len(), 1);
    // Across blocks, and past the end (short there only).
    check("pinned", MIB - 10, &r.read_at(MIB - 10, 2 * MIB).unwrap());
    let tail = r.read_at(size - 3, 100).unwrap();
    assert_eq!(tail.len(), 3);
    check("pinned", size - 3, &tail);
    assert!(r.read_at(size + 1, 10).unwrap().is_empty());
    let mut buf = vec![0; 10];
    assert_eq!(r.read_into(size - 4, &mut buf).unwrap(), 4);
    check("pinned", size - 4, &buf[..4]);
    assert_eq!(
        r.read_at(u64::MAX, 2).unwrap_err().status(),
        Status::Invalid
    );
    let log = server.log();
    for req in &log[1..] {
        assert_eq!(req.header("if-match"), Some(tag.as_str()), "{req:?}");
    }
    let stats = r.stats();
    assert_eq!(stats.requests, log.len() as u64);
    assert!(stats.hits > 0 && stats.misses > 0, "{stats:?}");
}

#[test]
fn concurrent_misses_on_one_block_cost_one_request() {
    let server = RangeServer::start();
    let r = open(&server, "/ok/flight?size=4194304", ReaderOptions::default());
    server.set_delay(Duration::from_millis(300));
    let barrier = Arc::new(Barrier::new(4));
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let (r, barrier) = (r.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                let at = 2 * MIB + 1000 * i;
                check("flight", at, &r.read_at(at, 3000).unwrap());
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(server.log().len(), 2, "open, then one request for block 2");
    assert_eq!(r.stats().misses, 1);
}

#[test]
fn a_sequential_sweep_grows_its_readahead() {
    let server = RangeServer::start();
    let size = 32 * MIB;
    let r = open(
        &server,
        &format!("/ok/sweep?size={size}"),
        ReaderOptions::default(),
    );
    let chunk = 56 * 1024;
    let mut at = 0;
    while at < size {
        let data = r.read_at(at, chunk).unwrap();
        check("sweep", at, &data);
        at += data.len() as u64;
    }
    // 32 blocks without readahead; windows of 1, 2, 4, 8, 16 blocks cover them in a few.
    let requests = server.log().len();
    assert!(requests <= 7, "{requests} requests");
    assert_eq!(r.stats().requests, requests as u64);
}

#[test]
fn a_small_object_on_a_slow_link_is_read_whole_at_its_first_miss() {
    // A Parquet-like walk: the footer, then a chunk in every later block.
    let walk = |r: &Reader, name: &str, size: u64| {
        check(name, size - 5000, &r.read_at(size - 5000, 5000).unwrap());
        for b in 0..size.div_ceil(MIB) {
            let at = b * MIB + 4096;
            check(name, at, &r.read_at(at, 1000).unwrap());
        }
    };
    // Every answer 200 ms late: the link estimate's round trip (about 100 ms: the open's
    // exchange on a new connection counts as two) outlasts the 3 MiB after the first block
    // at any rate above 30 MB/s, so the footer's miss fetches all of them in one request.
    let slow = RangeServer::start();
    slow.set_delay(Duration::from_millis(200));
    let size = 4 * MIB + 100;
    let r = open(
        &slow,
        &format!("/ok/slowlink?size={size}"),
        ReaderOptions::default(),
    );
    walk(&r, "slowlink", size);
    let log = slow.log();
    assert_eq!(log.len(), 2, "open, then the rest of the object: {log:?}");
    assert_eq!(
        log[1].header("range"),
        Some(format!("bytes={MIB}-{}", size - 1).as_str())
    );
    assert_eq!(r.stats().bytes_fetched, size);

    // On loopback a round trip carries far less than the rest of a 30 MiB object: the footer
    // miss fetches its own block, and the walk then reads ahead as a sweep.
    let fast = RangeServer::start();
    let size = 30 * MIB;
    let r = open(
        &fast,
        &format!("/ok/fastlink?size={size}"),
        ReaderOptions::default(),
    );
    walk(&r, "fastlink", size);
    assert_eq!(
        fast.log()[1].header("range"),
        Some(format!("bytes={}-{}", 29 * MIB, size - 1).as_str())
    );
    assert!(fast.log().len() > 3, "{:?}", fast.log());
}

#[test]
fn a_second_miss_in_a_small_object_reads_its_rest_on_a_fast_link() {
    // The Parquet walk of pandas through karu.open on loopback: the footer, then column
    // chunks forward through the file. A round trip carries far less than the rest, so the
    // footer's miss fetches only its block; the next miss fetches the rest (5 blocks, at most
    // SMALL_REST_BLOCKS), and every later read hits. 4 MiB blocks keep the rest (20 MiB) far
    // beyond what a round trip carries even on a loaded machine, so the round-trip rule
    // cannot fire first.
    const BS: u64 = 4 * MIB;
    let options = ReaderOptions::default().block_size(BS);
    let server = RangeServer::start();
    let size = 6 * BS + 500_000;
    let r = open(&server, &format!("/ok/smallrest?size={size}"), options);
    check(
        "smallrest",
        size - 65_536,
        &r.read_at(size - 65_536, 65_536).unwrap(),
    );
    check("smallrest", 4, &r.read_at(4, 298_000).unwrap());
    for b in 1..6 {
        let at = b * BS + 1_330_000;
        check("smallrest", at, &r.read_at(at, 298_000).unwrap());
    }
    let log = server.log();
    assert_eq!(log.len(), 3, "open, footer, then the rest: {log:?}");
    assert_eq!(
        log[2].header("range"),
        Some(format!("bytes={BS}-{}", 6 * BS - 1).as_str())
    );
    assert_eq!(r.stats().bytes_fetched, size);

    // A larger object (more than SMALL_REST_BLOCKS missing at the second miss) is not read
    // whole.
    let server = RangeServer::start();
    let size = 30 * BS;
    let r = open(&server, &format!("/ok/largerest?size={size}"), options);
    check(
        "largerest",
        size - 65_536,
        &r.read_at(size - 65_536, 65_536).unwrap(),
    );
    check("largerest", 3 * BS, &r.read_at(3 * BS, 1000).unwrap());
    assert!(r.stats().bytes_fetched < 8 * BS, "{:?}", r.stats());
}

#[test]
fn read_ranges_is_one_batch_and_fills_the_cache() {
    let server = RangeServer::start();
    let size = 8 * MIB;
    let r = open(
        &server,
        &format!("/ok/ranges?size={size}"),
        ReaderOptions::default(),
    );
    let mut rng = Rng(3);
    let ranges: Vec<Range<u64>> = (0..200)
        .map(|_| {
            let start = rng.below(size - 70_000);
            start..start + 1 + rng.below(70_000)
        })
        .collect();
    let got = r.read_ranges(&ranges).unwrap();
    for (range, data) in ranges.iter().zip(&got) {
        assert_eq!(data.len() as u64, range.end - range.start);
        check("ranges", range.start, data);
    }
    let after = server.log().len();
    assert!(after <= 2, "open and one coalesced request, got {after}");
    // Now cached: reading them again costs nothing.
    for range in &ranges {
        check(
            "ranges",
            range.start,
            &r.read_at(range.start, range.end - range.start).unwrap(),
        );
    }
    assert_eq!(server.log().len(), after);
    assert_eq!(
        r.read_ranges(&[std::ops::Range { start: 5, end: 2 }])
            .unwrap_err()
            .status(),
        Status::Invalid
    );
}

#[test]
fn prefetch_fills_the_cache_in_the_background() {
    let server = RangeServer::start();
    let r = open(
        &server,
        "/ok/prefetch?size=6291456",
        ReaderOptions::default(),
    );
    let wanted = Range {
        start: 3 * MIB,
        end: 5 * MIB,
    };
    r.prefetch(&[wanted]);
    for _ in 0..100 {
        if server.log().len() == 2 && r.stats().misses == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Wait for the blocks to settle, then read them without a request.
    std::thread::sleep(Duration::from_millis(50));
    check("prefetch", 3 * MIB, &r.read_at(3 * MIB, 2 * MIB).unwrap());
    assert_eq!(server.log().len(), 2);
}

#[test]
fn cursor_reads_and_seeks() {
    let server = RangeServer::start();
    let size = 3 * MIB + 5;
    let r = open(
        &server,
        &format!("/ok/cursor?size={size}"),
        ReaderOptions::default(),
    );
    let mut c = r.cursor();
    let mut all = Vec::new();
    c.read_to_end(&mut all).unwrap();
    assert_eq!(all.len() as u64, size);
    check("cursor", 0, &all);
    assert_eq!(c.seek(SeekFrom::End(-5)).unwrap(), size - 5);
    let mut five = [0; 8];
    assert_eq!(c.read(&mut five).unwrap(), 5);
    check("cursor", size - 5, &five[..5]);
    assert_eq!(c.seek(SeekFrom::Current(-(size as i64))).unwrap(), 0);
    assert!(c.seek(SeekFrom::Current(-1)).is_err());
    assert_eq!(c.seek(SeekFrom::Start(size + 10)).unwrap(), size + 10);
    assert_eq!(c.read(&mut five).unwrap(), 0);
}

#[test]
fn object_replaced_after_open_gives_precondition_never_mixed_bytes() {
    let server = RangeServer::start();
    let size = 3 * MIB;
    server.register("replaced", size);
    let r = open(&server, "/ok/replaced", ReaderOptions::default());
    server.set_version("replaced", 1);
    // The first block came with open: still the version seen at open.
    check("replaced", 10, &r.read_at(10, 100).unwrap());
    // Anything else would need the new version's bytes: refused.
    let e = r.read_at(MIB, 100).unwrap_err();
    assert_eq!(e.status(), Status::Precondition, "{e}");
    let e = r.read_at(MIB - 50, 100).unwrap_err();
    assert_eq!(e.status(), Status::Precondition, "{e}");
    // refresh: the new version, whole.
    r.refresh().unwrap();
    let v1 = versioned_name("replaced", 1);
    assert_eq!(r.etag(), Some(etag("replaced", size, 1).as_str()));
    check(&v1, 0, &r.read_at(0, size).unwrap());
}

#[test]
fn a_server_that_stops_proving_the_version_gives_an_error_not_bytes() {
    let server = RangeServer::start();
    // After the first request the server serves the next version without ETag and ignores
    // If-Match.
    let r = open(
        &server,
        "/unproven/unproven?size=3145728",
        ReaderOptions::default(),
    );
    match r.read_at(MIB, MIB) {
        Ok(data) => check("unproven", MIB, &data),
        Err(e) => assert!(
            matches!(e.status(), Status::Precondition | Status::Http),
            "{e}"
        ),
    }
}

#[test]
fn short_bodies_give_exact_data_or_an_error() {
    let server = RangeServer::start();
    // Few attempts: each cut body costs one, with backoff between them.
    let c = client(&[("KARU_MAX_ATTEMPTS", "3")]);
    // Every body is cut after 100,000 bytes: a one-block request (64 KiB) passes; longer
    // ones are resumed by offset, pinned by ETag, until the attempts run out.
    let o = object(&server, "/truncate/short?size=4194304&k=100000");
    let options = ReaderOptions::default().block_size(64 * 1024);
    let r = Reader::open(&c, &o, options).unwrap();
    check("short", 0, &r.read_at(0, 1000).unwrap());
    let mut exact = 0;
    for at in [200_000, MIB - 7, 3 * MIB] {
        match r.read_at(at, 150_000) {
            Ok(data) => {
                check("short", at, &data);
                exact += 1;
            }
            Err(e) => assert!(matches!(e.status(), Status::Network | Status::Http), "{e}"),
        }
    }
    assert!(exact > 0, "resumed reads complete");
    // A first block longer than the cut: open fails, it does not return part of it.
    let e = Reader::open(&c, &o, ReaderOptions::default()).unwrap_err();
    assert_eq!(e.status(), Status::Network, "{e}");
    // An object shorter than its stated size ends inside a request.
    let o = object(&server, "/short-object/shorter?size=2097152");
    let r = Reader::open(&c, &o, ReaderOptions::default()).unwrap();
    check("shorter", MIB, &r.read_at(MIB, MIB).unwrap());
}

#[test]
fn an_error_on_the_nth_request_fails_that_read_only() {
    let server = RangeServer::start();
    // Every request after the first two gets 404 (not retried).
    let r = open(
        &server,
        "/throttle/nth?size=6291456&after=2&code=404",
        ReaderOptions::default(),
    );
    // Request 2: block 1, and block 2 read ahead.
    check("nth", MIB, &r.read_at(MIB, 10).unwrap());
    let e = r.read_at(3 * MIB, 10).unwrap_err(); // request 3
    assert_eq!(e.status(), Status::NotFound, "{e}");
    // What was read before is still served, exactly.
    check("nth", 0, &r.read_at(0, 3 * MIB).unwrap());
    assert_eq!(
        r.read_at(5 * MIB, 10).unwrap_err().status(),
        Status::NotFound
    );
    assert_eq!(server.log().len(), 4);
}

#[test]
fn one_byte_blocks_are_exact() {
    let server = RangeServer::start();
    let options = ReaderOptions::default().block_size(1).cache_bytes(4096);
    let r = open(&server, "/ok/tiny?size=5000", options);
    check("tiny", 0, &r.read_at(0, 1).unwrap());
    check("tiny", 17, &r.read_at(17, 3000).unwrap());
    let got = r.read_ranges(&[4990..5000, 0..3, 2..9]).unwrap();
    check("tiny", 4990, &got[0]);
    check("tiny", 0, &got[1]);
    check("tiny", 2, &got[2]);
}

#[test]
fn a_cache_smaller_than_a_block_keeps_nothing_and_stays_exact() {
    let server = RangeServer::start();
    let options = ReaderOptions::default()
        .block_size(64 * 1024)
        .cache_bytes(1000);
    let r = open(&server, "/ok/nocache?size=1048576", options);
    for at in [0, 70_000, 65_530, 70_000] {
        check("nocache", at, &r.read_at(at, 100).unwrap());
    }
    // Nothing is kept: the repeated read was fetched again.
    assert_eq!(server.log().len(), 5);
    assert_eq!(r.stats().hits, 0);
}

#[test]
fn local_files_are_read_directly_and_a_change_is_precondition() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("local.bin");
    content::write_file(&path, "local", 3_000_000).unwrap();
    let c = client(&[]);
    let o = karu::Locator::parse(path.to_str().unwrap()).unwrap();
    let r = Reader::open(&c, &o, ReaderOptions::default()).unwrap();
    assert_eq!((r.len(), r.etag()), (3_000_000, None));
    check(
        "local",
        1_000_000,
        &r.read_at(1_000_000, 1_500_000).unwrap(),
    );
    let got = r.read_ranges(&[10..20, 2_999_990..3_000_010]).unwrap();
    check("local", 10, &got[0]);
    assert_eq!(got[1].len(), 10);
    let mut all = Vec::new();
    r.cursor().read_to_end(&mut all).unwrap();
    check("local", 0, &all);
    // Changed in place (grown): refused until refreshed.
    std::thread::sleep(Duration::from_millis(20));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut f, b"more").unwrap();
    drop(f);
    assert_eq!(r.read_at(0, 10).unwrap_err().status(), Status::Precondition);
    r.refresh().unwrap();
    assert_eq!(r.len(), 3_000_004);
    assert_eq!(&r.read_at(3_000_000, 10).unwrap()[..], b"more");
}

#[test]
fn a_zero_block_size_is_invalid() {
    let server = RangeServer::start();
    let e = Reader::open(
        &client(&[]),
        &object(&server, "/ok/zero?size=10"),
        ReaderOptions::default().block_size(0),
    )
    .unwrap_err();
    assert_eq!(e.status(), Status::Invalid);
    assert!(server.log().is_empty());
}
