//! The chaos route: a seeded share of requests faulted, each kind served as its own route.

mod common;

use common::{End, raw};
use karu_testkit::content;
use karu_testkit::server::chaos::Kind;
use karu_testkit::server::{RangeServer, etag, versioned_name};

/// The kinds the server logged for `n` sequential requests to `target`, with their statuses.
fn run(s: &RangeServer, target: &str, n: usize) -> Vec<(String, u16)> {
    for _ in 0..n {
        raw(s.addr(), "GET", target, &[("Range", "bytes=100-4195")]);
    }
    s.log()
        .iter()
        .map(|l| (l.fault.clone(), l.status))
        .collect()
}

#[test]
fn the_share_and_the_sequence_follow_the_seed() {
    let target = "/chaos/c?size=8192&seed=7&per_mille=50&kinds=503,ignore-range";
    let a = RangeServer::start();
    let b = RangeServer::start();
    let first = run(&a, target, 2000);
    // The same seed gives the same sequence on another server.
    assert_eq!(first, run(&b, target, 2000));
    let faulted = first.iter().filter(|(f, _)| f != "ok").count();
    assert!((60..=140).contains(&faulted), "{faulted} of 2000 faulted");
    let counts = a.chaos_counts();
    assert_eq!(counts.iter().map(|c| c.1).sum::<u64>(), 2000);
    let count = |k: Kind| counts.iter().find(|c| c.0 == k).unwrap().1;
    assert_eq!(count(Kind::Ok), 2000 - faulted as u64);
    assert_eq!(
        count(Kind::Unavailable),
        first.iter().filter(|f| f.1 == 503).count() as u64
    );
    assert_eq!(
        count(Kind::IgnoreRange),
        first.iter().filter(|f| f.1 == 200).count() as u64
    );
    assert!(count(Kind::Unavailable) > 0 && count(Kind::IgnoreRange) > 0);
    assert_eq!(count(Kind::Truncate), 0);
    // Another seed, another sequence.
    let c = RangeServer::start();
    assert_ne!(first, run(&c, &target.replace("seed=7", "seed=8"), 2000));
}

#[test]
fn every_kind_serves_its_fault() {
    let s = RangeServer::start();
    let a = s.addr();
    let range = [("Range", "bytes=100-4195")];
    let get = |kind: &str| {
        let r = raw(
            a,
            "GET",
            &format!("/chaos/k?size=8192&per_mille=1000&kinds={kind}"),
            &range,
        );
        (r, s.log().last().unwrap().fault.clone())
    };
    let (r, route) = get("truncate");
    assert_eq!(
        (route.as_str(), r.status, r.end),
        ("truncate", 206, End::Eof)
    );
    assert!(r.body.len() < 4096);
    content::check("k", 100, &r.body).unwrap();

    let (r, route) = get("reset");
    assert_eq!((route.as_str(), r.status), ("reset", 206));
    assert!(r.body.len() < 4096 && r.end != End::Complete);

    let (r, route) = get("wrong-content-range");
    assert_eq!((route.as_str(), r.status), ("wrong-content-range", 206));
    assert_ne!(r.header("content-range"), Some("bytes 100-4195/8192"));

    let (r, route) = get("ignore-range");
    assert_eq!((route.as_str(), r.status), ("ignore-range", 200));
    assert_eq!(r.body, content::bytes("k", 0, 8192));

    let (r, route) = get("503");
    assert_eq!((route.as_str(), r.status), ("status", 503));
    assert!(matches!(r.header("retry-after"), Some("0" | "1")));

    // A version ahead: 412 for the old tag, or (ignoring If-Match) the new version's bytes.
    let old = etag("k", 8192, 0);
    let new = etag("k", 8192, 1);
    let mut seen = (false, false);
    for _ in 0..16 {
        let r = raw(
            a,
            "GET",
            "/chaos/k?size=8192&per_mille=1000&kinds=etag-change",
            &[("Range", "bytes=100-4195"), ("If-Match", &old)],
        );
        assert_eq!(r.header("etag"), Some(new.as_str()));
        match r.status {
            412 => seen.0 = true,
            206 => {
                content::check(&versioned_name("k", 1), 100, &r.body).unwrap();
                seen.1 = true;
            }
            other => panic!("etag-change answered {other}"),
        }
    }
    assert_eq!(seen, (true, true));

    let (r, route) = get("trickle");
    assert_eq!(
        (route.as_str(), r.status, r.end),
        ("trickle", 206, End::Complete)
    );
    content::check("k", 100, &r.body).unwrap();

    // Redirects lead back to the chaos route, keeping its parameters.
    let (r, route) = get("redirect");
    assert_eq!(route, "redirect");
    assert!([301, 302, 307, 308].contains(&r.status), "{}", r.status);
    let location = r.header("location").unwrap();
    assert!(
        location.contains("/redirect/k?") || location.contains("/chaos/k?"),
        "{location}"
    );
    assert!(location.contains("per_mille=1000") && location.contains("size=8192"));

    let r = raw(a, "GET", "/chaos/k?size=8192&kinds=nonsense", &range);
    assert_eq!(r.status, 400);
}
