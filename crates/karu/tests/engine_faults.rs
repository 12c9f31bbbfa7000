//! Hostile answers from the test kit's range server that once gave wrong bytes or hung: an
//! answer that does not prove the pinned version, a head that never comes, a multipart body
//! dressed as a single range. Every byte returned is checked.

mod common;

use std::time::{Duration, Instant};

use common::{client, object};
use karu::{
    BatchStats, Chunking, Client, Completion, DownloadOptions, Locator, Next, Read, Status,
};
use karu_testkit::content;
use karu_testkit::server::{RangeServer, etag, versioned_name};

/// Reads one range and returns its completion and the batch counters.
fn read_one(c: &Client, l: &Locator, offset: u64, length: u64) -> (Completion, BatchStats) {
    let batch = c.submit(vec![Read::new(l, offset, length)]).unwrap();
    let done = batch.next().unwrap();
    (done, batch.stats())
}

#[test]
fn a_resume_answered_without_a_strong_etag_restarts_instead_of_splicing() {
    let server = RangeServer::start();
    let c = client(&[]);
    for (name, query) in [("none", ""), ("weak", "&etag=weak")] {
        // Version 0 breaks after 600 bytes; the resume pinned to it is answered by version 1
        // with no strong ETag. Its bytes are never joined to version 0's prefix: the read
        // restarts, unpinned, and every byte is version 1's.
        let l = object(
            &server,
            &format!("/unproven/{name}?size=100000&k=600{query}"),
        );
        let (d, s) = read_one(&c, &l, 0, 1000);
        assert!(d.result.is_ok(), "{name}: {:?}", d.result);
        content::check(&versioned_name(name, 1), 0, d.bytes()).unwrap();
        assert_eq!((s.retries, s.resumed), (2, 1), "{name}");
        let log = server.log();
        let asked: Vec<(Option<&str>, Option<&str>)> = log
            .iter()
            .map(|r| (r.range.as_deref(), r.header("if-match")))
            .collect();
        let v0 = etag(name, 100_000, 0);
        assert_eq!(
            asked,
            [
                (Some("bytes=0-999"), None),
                (Some("bytes=600-999"), Some(v0.as_str())),
                (Some("bytes=0-999"), None),
            ],
            "{name}"
        );
        server.clear_log();
    }
}

#[test]
fn a_pinned_read_answered_without_a_strong_etag_fails_with_precondition() {
    let server = RangeServer::start();
    let c = client(&[]);
    for (name, query, shown) in [
        ("none", "", "no ETag".to_owned()),
        (
            "weak",
            "&etag=weak",
            format!("ETag W/{}", etag("weak", 1000, 0)),
        ),
    ] {
        // Every request sees version 1, which ignores If-Match and proves nothing.
        let l = object(
            &server,
            &format!("/unproven/{name}?size=1000&proven=0{query}"),
        );
        let pin = etag(name, 1000, 0);
        let batch = c.submit(vec![Read::new(&l, 0, 10).if_match(&pin)]).unwrap();
        let d = batch.next().unwrap();
        assert_eq!((d.status(), d.got), (Status::Precondition, 0), "{name}");
        let e = d.result.unwrap_err();
        assert_eq!(
            e.message(),
            format!(
                "{}: the server answered If-Match {pin} without a strong ETag ({shown}), so the \
                 bytes may not be the version if_match names",
                l.display()
            )
        );
        assert_eq!(batch.stats().retries, 0);
    }
}

#[test]
fn download_chunks_answered_without_a_strong_etag_publish_nothing() {
    let server = RangeServer::start();
    let size = 300_000u64;
    // The probe sees version 0 and its strong ETag; every chunk is answered by version 1
    // without one.
    let l = object(&server, &format!("/unproven/dl?size={size}"));
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out.bin");
    // Chunks from the start (a measured download of a fast object is one stream: the
    // first answer, with nothing to splice).
    let options = DownloadOptions {
        chunk_size: 64 << 10,
        parallelism: 2,
        chunking: Chunking::Always,
        ..Default::default()
    };
    let e = client(&[]).download(&l, &dest, options).unwrap_err();
    assert_eq!(e.status(), Status::Precondition, "{e}");
    assert!(!dest.exists());
    let log = server.log();
    assert!(log.len() >= 2, "{log:?}");
    assert!(log[1..].iter().all(|r| r.header("if-match").is_some()));
}

#[test]
fn a_head_that_never_comes_is_bounded_by_the_low_speed_rule_without_a_deadline() {
    let server = RangeServer::start();
    // No request deadline: only the low-speed rule bounds the wait for the head, on every
    // attempt (two here), for batch reads and probes alike.
    let c = client(&[
        ("KARU_REQUEST_TIMEOUT", "0"),
        ("KARU_LOW_SPEED_TIME", "1"),
        ("KARU_MAX_ATTEMPTS", "2"),
    ]);
    let l = object(&server, "/ok/silent?size=1000&delay_ms=3600000");
    let t = Instant::now();
    let batch = c.submit(vec![Read::new(&l, 0, 100)]).unwrap();
    let Next::Done(d) = batch.next_timeout(Duration::from_secs(10)) else {
        panic!("the read still waits for a head after 10 s");
    };
    let waited = t.elapsed();
    let s = batch.stats();
    assert_eq!((d.status(), d.got), (Status::Network, 0));
    let e = d.result.unwrap_err();
    assert!(
        e.message().contains("slower than 1024 bytes/s for 1 s"),
        "{e}"
    );
    assert_eq!(s.retries, 1);
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(c.stat(&l).map_err(|e| e.status())));
    let stat = rx.recv_timeout(Duration::from_secs(10));
    assert_eq!(stat, Ok(Err(Status::Network)), "a stat waits for its head");
    assert_eq!(server.log().len(), 0, "no answer was sent");
}

#[test]
fn a_probe_body_that_crawls_is_bounded_by_the_low_speed_rule_without_a_deadline() {
    let server = RangeServer::start();
    // One byte a second: far below the rule's 1024 bytes/s. Without a request deadline a body
    // a probe keeps whole (read_ends' suffix) must still end within the rule's window plus its
    // length at the rule's rate, on each of the two attempts (it took 200 s).
    let c = client(&[
        ("KARU_REQUEST_TIMEOUT", "0"),
        ("KARU_LOW_SPEED_TIME", "1"),
        ("KARU_MAX_ATTEMPTS", "2"),
    ]);
    let l = object(&server, "/trickle/crawl?size=100000&rate=1");
    let (tx, rx) = std::sync::mpsc::channel();
    let t = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(c.read_ends(&l, 0, 200).map(|_| ()).map_err(|e| e.status()));
    });
    let got = rx.recv_timeout(Duration::from_secs(20));
    assert_eq!(
        got,
        Ok(Err(Status::Network)),
        "probes still wait for a crawling body after {:?}",
        t.elapsed()
    );
}

#[test]
fn a_multipart_answer_with_a_matching_content_range_is_not_taken_as_data() {
    let server = RangeServer::start();
    let l = object(&server, "/multipart/parts?size=10000");
    let (d, s) = read_one(&client(&[]), &l, 100, 200);
    assert_eq!((d.status(), d.got), (Status::Http, 0), "{:?}", d.result);
    let e = d.result.unwrap_err();
    assert!(e.message().contains("multipart/byteranges answer"), "{e}");
    assert_eq!(s.retries, 0, "a validation failure is final");
    assert_eq!(server.log()[0].status, 206);
}
