//! The range server behaves as its module docs say, and every byte it serves is the deterministic
//! content.

mod common;

use std::io::Read;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime};

use common::{End, Raw, hyper_get, hyper_get_many, raw};
use karu_testkit::content;
use karu_testkit::server::{RangeServer, etag, versioned_name};

fn range(v: &str) -> Vec<(&str, &str)> {
    vec![("range", v)]
}

#[test]
fn ok_route_single_range_semantics() {
    let s = RangeServer::start();
    let a = s.addr();
    let t = "/ok/obj.bin?size=1000";
    let tag = etag("obj.bin", 1000, 0);

    let r = hyper_get(a, t, &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, content::bytes("obj.bin", 0, 1000));
    assert_eq!(r.header("etag"), Some(tag.as_str()));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    assert_eq!(r.header("content-range"), None);

    let cases: &[(&str, u64, u64)] = &[
        ("bytes=0-9", 0, 9),
        ("bytes=10-19", 10, 19),
        ("bytes=990-", 990, 999),
        ("bytes=-16", 984, 999),
        ("bytes=-5000", 0, 999),
        ("bytes=995-2000", 995, 999),
        ("bytes=999-999", 999, 999),
    ];
    for &(h, f, l) in cases {
        let r = hyper_get(a, t, &range(h));
        assert_eq!(r.status, 206, "{h}");
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes {f}-{l}/1000").as_str()),
            "{h}"
        );
        assert_eq!(
            r.header("content-length"),
            Some((l - f + 1).to_string().as_str())
        );
        assert_eq!(
            r.body,
            content::bytes("obj.bin", f, (l - f + 1) as usize),
            "{h}"
        );
    }

    for h in ["bytes=1000-", "bytes=1000-1005", "bytes=-0"] {
        let r = hyper_get(a, t, &range(h));
        assert_eq!(r.status, 416, "{h}");
        assert_eq!(r.header("content-range"), Some("bytes */1000"), "{h}");
    }

    // Not one well-formed byte range: ignored.
    for h in ["bytes=5-2", "bytes=0-1,5-6", "items=0-1", "bytes=x-"] {
        let r = hyper_get(a, t, &range(h));
        assert_eq!(r.status, 200, "{h}");
        assert_eq!(r.body, content::bytes("obj.bin", 0, 1000), "{h}");
    }
}

#[test]
fn empty_object() {
    let s = RangeServer::start();
    let r = hyper_get(s.addr(), "/ok/empty?size=0", &[]);
    assert_eq!((r.status, r.body.len()), (200, 0));
    assert_eq!(r.header("content-length"), Some("0"));
    for h in ["bytes=0-0", "bytes=-1", "bytes=0-"] {
        let r = hyper_get(s.addr(), "/ok/empty?size=0", &range(h));
        assert_eq!(r.status, 416, "{h}");
        assert_eq!(r.header("content-range"), Some("bytes */0"));
    }
}

#[test]
fn large_object_streams_correct_bytes() {
    let s = RangeServer::start();
    let size = 3 * 1024 * 1024 + 17;
    let r = raw(s.addr(), "GET", &format!("/ok/big?size={size}"), &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), size);
    content::check("big", 0, &r.body).unwrap();
    let r = raw(
        s.addr(),
        "GET",
        &format!("/ok/big?size={size}"),
        &[("Range", "bytes=100000-2200000")],
    );
    assert_eq!(r.status, 206);
    content::check("big", 100_000, &r.body).unwrap();
    assert_eq!(r.body.len(), 2_100_001);
}

#[test]
fn if_match_head_keep_alive_and_log() {
    let s = RangeServer::start();
    let t = "/ok/k?size=100";
    let tag = etag("k", 100, 0);
    let mut c = Raw::connect(s.addr());
    let r1 = c.request("GET", t, &[("Range", "bytes=0-9"), ("If-Match", &tag)]);
    assert_eq!(r1.status, 206);
    content::check("k", 0, &r1.body).unwrap();
    let r2 = c.request(
        "GET",
        t,
        &[("Range", "bytes=0-9"), ("If-Match", "\"nope\"")],
    );
    assert_eq!(r2.status, 412);
    let r3 = c.request(
        "GET",
        t,
        &[("Range", "bytes=5-9"), ("If-Match", "\"a\", *")],
    );
    assert_eq!(r3.status, 206);
    let weak = format!("W/{tag}");
    let r4 = c.request("GET", t, &[("If-Match", &weak)]);
    assert_eq!(r4.status, 412);
    let r5 = c.request("HEAD", t, &[]);
    assert_eq!(r5.status, 200);
    assert_eq!(r5.content_length(), Some(100));
    assert_eq!(r5.header("etag"), Some(tag.as_str()));
    let r6 = c.request(
        "GET",
        &format!("{t}&if_match=ignore"),
        &[("If-Match", "\"nope\"")],
    );
    assert_eq!(r6.status, 200);
    content::check("k", 0, &r6.body).unwrap();

    assert_eq!(s.connections_accepted(), 1);
    let log = s.log();
    assert_eq!(log.len(), 6);
    assert!(log.iter().all(|l| l.conn == 1 && l.port == s.addr().port()));
    assert_eq!(
        log.iter().map(|l| l.status).collect::<Vec<_>>(),
        [206, 412, 206, 412, 200, 200]
    );
    assert_eq!(log[0].method, "GET");
    assert_eq!(log[4].method, "HEAD");
    assert_eq!(log[0].target, t);
    assert_eq!(log[0].fault, "ok");
    assert_eq!(log[0].name, "k");
    assert_eq!(log[0].range.as_deref(), Some("bytes=0-9"));
    assert_eq!(log[0].header("IF-MATCH"), Some(tag.as_str()));
    assert_eq!(log[0].header("host"), Some("127.0.0.1"));
    s.clear_log();
    assert!(s.log().is_empty());

    // A second connection gets the next id.
    raw(s.addr(), "GET", t, &[]);
    assert_eq!(s.log()[0].conn, 2);
    assert_eq!(s.connections_accepted(), 2);
}

#[test]
fn registered_objects_versions_and_errors() {
    let s = RangeServer::start();
    s.register("reg", 50);
    let r = raw(s.addr(), "GET", "/ok/reg", &[("Range", "bytes=40-")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 40-49/50"));
    content::check("reg", 40, &r.body).unwrap();

    s.set_version("reg", 3);
    let r = raw(s.addr(), "GET", "/ok/reg", &[]);
    assert_eq!(r.header("etag"), Some(etag("reg", 50, 3).as_str()));
    content::check(&versioned_name("reg", 3), 0, &r.body).unwrap();

    // Names with slashes and percent-encoding.
    let r = raw(s.addr(), "GET", "/ok/dir/a%20b.bin?size=10", &[]);
    content::check("dir/a b.bin", 0, &r.body).unwrap();
    assert_eq!(s.log().last().unwrap().name, "dir/a b.bin");

    assert_eq!(raw(s.addr(), "GET", "/ok/unknown", &[]).status, 404);
    assert_eq!(raw(s.addr(), "GET", "/bogus/x?size=1", &[]).status, 400);
    assert_eq!(raw(s.addr(), "GET", "/ok/x?size=abc", &[]).status, 400);
    assert_eq!(raw(s.addr(), "DELETE", "/ok/x?size=1", &[]).status, 405);
}

#[test]
fn ignore_range_and_ignore_suffix() {
    let s = RangeServer::start();
    let r = hyper_get(s.addr(), "/ignore-range/o?size=300", &range("bytes=10-19"));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-range"), None);
    assert_eq!(r.body, content::bytes("o", 0, 300));

    let t = "/ignore-suffix/o?size=300";
    let r = hyper_get(s.addr(), t, &range("bytes=-10"));
    assert_eq!(r.status, 200);
    assert_eq!(r.body, content::bytes("o", 0, 300));
    let r = hyper_get(s.addr(), t, &range("bytes=290-"));
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 290-299/300"));
    assert_eq!(r.body, content::bytes("o", 290, 10));
}

#[test]
fn truncate_closes_after_k_bytes() {
    let s = RangeServer::start();
    let r = raw(
        s.addr(),
        "GET",
        "/truncate/t?size=100000&k=1000",
        &[("Range", "bytes=100-50099")],
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 100-50099/100000"));
    assert_eq!(r.content_length(), Some(50000));
    assert_eq!(r.end, End::Eof);
    assert_eq!(r.body.len(), 1000);
    content::check("t", 100, &r.body).unwrap();

    // Without a range, and with K at 0.
    let r = raw(s.addr(), "GET", "/truncate/t?size=100", &[]);
    assert_eq!((r.status, r.body.len(), r.end), (200, 0, End::Eof));

    // K past the body: the response is complete and the connection stays usable.
    let mut c = Raw::connect(s.addr());
    let r = c.request("GET", "/truncate/t?size=100&k=500", &[]);
    assert_eq!((r.end, r.body.len()), (End::Complete, 100));
    assert_eq!(c.request("GET", "/ok/t?size=1", &[]).status, 200);
}

#[test]
fn reset_sends_rst_after_k_bytes() {
    let s = RangeServer::start();
    let r = raw(
        s.addr(),
        "GET",
        "/reset/r?size=100000&k=2000",
        &[("Range", "bytes=10-")],
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.content_length(), Some(99990));
    assert_eq!(r.end, End::Error(std::io::ErrorKind::ConnectionReset));
    assert_eq!(r.body.len(), 2000);
    content::check("r", 10, &r.body).unwrap();
    let log = s.log();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].status, 206);
}

#[test]
fn content_range_faults() {
    let s = RangeServer::start();
    let a = s.addr();

    let r = hyper_get(a, "/no-content-range/c?size=500", &range("bytes=10-19"));
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), None);
    assert_eq!(r.body, content::bytes("c", 10, 10));

    let r = hyper_get(
        a,
        "/garbled-content-range/c?size=500",
        &range("bytes=10-19"),
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes garbled"));
    assert_eq!(r.body, content::bytes("c", 10, 10));
    let r = hyper_get(
        a,
        "/garbled-content-range/c?size=500&value=bytes%2010-19",
        &range("bytes=10-19"),
    );
    assert_eq!(r.header("content-range"), Some("bytes 10-19"));

    let r = hyper_get(a, "/wrong-content-range/c?size=500", &range("bytes=10-19"));
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 11-20/500"));
    assert_eq!(r.body, content::bytes("c", 11, 10));
    let r = hyper_get(
        a,
        "/wrong-content-range/c?size=500&shift=100",
        &range("bytes=450-"),
    );
    assert_eq!(r.header("content-range"), Some("bytes 350-399/500"));
    assert_eq!(r.body, content::bytes("c", 350, 50));

    for h in ["bytes=0-0", "bytes=-1", "bytes=10-"] {
        let r = hyper_get(a, "/416/c?size=500", &range(h));
        assert_eq!(r.status, 416);
        assert_eq!(r.header("content-range"), Some("bytes */500"));
    }
    assert_eq!(hyper_get(a, "/416/c?size=500", &[]).status, 416);
}

#[test]
fn status_fails_n_times_then_succeeds() {
    let s = RangeServer::start();
    let a = s.addr();
    let t = "/status/s?size=100&code=503&times=2&retry_after=3";
    for _ in 0..2 {
        let r = raw(a, "GET", t, &[("Range", "bytes=0-9")]);
        assert_eq!(r.status, 503);
        assert_eq!(r.header("retry-after"), Some("3"));
    }
    let r = raw(a, "GET", t, &[("Range", "bytes=0-9")]);
    assert_eq!(r.status, 206);
    content::check("s", 0, &r.body).unwrap();
    assert_eq!(raw(a, "GET", t, &[]).status, 200);

    // Counters are per route and name.
    let r = raw(
        a,
        "GET",
        "/status/other?size=10&code=429&retry_after_date=120",
        &[],
    );
    assert_eq!(r.status, 429);
    let when = httpdate::parse_http_date(r.header("retry-after").unwrap()).unwrap();
    let ahead = when.duration_since(SystemTime::now()).unwrap();
    assert!(ahead > Duration::from_secs(100) && ahead <= Duration::from_secs(121));
    assert_eq!(
        raw(a, "GET", "/status/other?size=10&code=429", &[]).status,
        200
    );

    let r = raw(a, "GET", "/status/five?size=10&code=500", &[]);
    assert_eq!((r.status, r.header("retry-after")), (500, None));
    assert_eq!(
        raw(a, "GET", "/status/five?size=10&code=500", &[]).status,
        200
    );
    let r = raw(
        a,
        "GET",
        "/status/rt?size=10&code=400&body=%3CCode%3ERequestTimeout%3C/Code%3E",
        &[],
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.body, b"<Code>RequestTimeout</Code>");
    s.reset_counters();
    assert_eq!(
        raw(a, "GET", "/status/five?size=10&code=500", &[]).status,
        500
    );
}

#[test]
fn etag_changes_between_requests() {
    let s = RangeServer::start();
    let a = s.addr();
    let t = "/etag-change/e?size=64";
    let mut tags = Vec::new();
    for v in 0..3 {
        let r = raw(a, "GET", t, &[("Range", "bytes=0-31")]);
        assert_eq!(r.status, 206);
        assert_eq!(r.header("etag"), Some(etag("e", 64, v).as_str()));
        content::check(&versioned_name("e", v), 0, &r.body).unwrap();
        tags.push(r.header("etag").unwrap().to_string());
    }
    assert_ne!(
        content::bytes("e", 0, 32),
        content::bytes(&versioned_name("e", 1), 0, 32)
    );
    // A resume pinned to an old tag fails.
    let r = raw(
        a,
        "GET",
        t,
        &[("Range", "bytes=32-"), ("If-Match", &tags[2])],
    );
    assert_eq!(r.status, 412);
    assert_eq!(r.header("etag"), Some(etag("e", 64, 3).as_str()));

    // Changes once, after the first request.
    let t = "/etag-change/once?size=64&at=1";
    let v: Vec<String> = (0..3)
        .map(|_| raw(a, "GET", t, &[]).header("etag").unwrap().to_string())
        .collect();
    assert_eq!(
        v,
        [
            etag("once", 64, 0),
            etag("once", 64, 1),
            etag("once", 64, 1)
        ]
    );
}

#[test]
fn trickle_is_slower_than_rate() {
    let s = RangeServer::start();
    let t0 = Instant::now();
    let r = raw(
        s.addr(),
        "GET",
        "/trickle/slow?size=10000&rate=4000",
        &[("Range", "bytes=0-1999")],
    );
    let took = t0.elapsed();
    assert_eq!(r.status, 206);
    content::check("slow", 0, &r.body).unwrap();
    assert_eq!(r.body.len(), 2000);
    assert!(took >= Duration::from_millis(450), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn redirects_same_host_and_cross_host() {
    let s = RangeServer::start();
    let (p1, p2) = (s.addr().port(), s.alt_addr().port());

    let r = raw(s.addr(), "GET", "/redirect/x?size=100&hops=3", &[]);
    assert_eq!(r.status, 302);
    assert_eq!(
        r.header("location"),
        Some(format!("http://127.0.0.1:{p1}/redirect/x?size=100&hops=2").as_str())
    );
    // Follow the chain with hyper.
    let mut target = "/redirect/x?size=100&hops=3".to_string();
    let mut hops = 0;
    let last = loop {
        let r = hyper_get(s.addr(), &target, &range("bytes=5-9"));
        if r.status != 302 {
            break r;
        }
        hops += 1;
        let loc = r.header("location").unwrap();
        target = loc
            .strip_prefix(&format!("http://127.0.0.1:{p1}"))
            .unwrap()
            .to_string();
    };
    assert_eq!(hops, 3);
    assert_eq!(target, "/ok/x?size=100");
    assert_eq!(last.status, 206);
    assert_eq!(last.body, content::bytes("x", 5, 5));

    // Cross-host: alternate listeners, final route chosen with `to`.
    let r = raw(
        s.addr(),
        "GET",
        "/redirect/y?size=100&hops=2&cross=1&code=307&to=ignore-range",
        &[],
    );
    assert_eq!(r.status, 307);
    let loc = r.header("location").unwrap().to_string();
    assert!(
        loc.starts_with(&format!("http://127.0.0.1:{p2}/redirect/y?")),
        "{loc}"
    );
    let path = loc.strip_prefix(&format!("http://127.0.0.1:{p2}")).unwrap();
    let r = raw(s.alt_addr(), "GET", path, &[]);
    assert_eq!(r.status, 307);
    assert_eq!(
        r.header("location"),
        Some(format!("http://127.0.0.1:{p1}/ignore-range/y?size=100").as_str())
    );
    let r = raw(
        s.alt_addr(),
        "GET",
        "/ok/y?size=100",
        &[("Range", "bytes=0-0")],
    );
    assert_eq!(r.status, 206);
    content::check("y", 0, &r.body).unwrap();
    assert!(s.log().iter().any(|l| l.port == p2));

    let r = raw(
        s.addr(),
        "GET",
        "/redirect/z?size=1&relative=1&code=301",
        &[],
    );
    assert_eq!(
        (r.status, r.header("location")),
        (301, Some("/ok/z?size=1"))
    );
}

#[test]
fn gzip_and_warning_214() {
    let s = RangeServer::start();
    let r = hyper_get(s.addr(), "/gzip/g?size=5000", &range("bytes=100-4099"));
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.header("content-range"), Some("bytes 100-4099/5000"));
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&r.body[..])
        .read_to_end(&mut plain)
        .unwrap();
    assert_eq!(plain, content::bytes("g", 100, 4000));

    let r = hyper_get(
        s.addr(),
        "/gzip/g?size=5000&raw=1",
        &range("bytes=100-4099"),
    );
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.body, content::bytes("g", 100, 4000));

    let r = hyper_get(s.addr(), "/warning-214/g?size=5000", &range("bytes=0-9"));
    assert_eq!(r.status, 206);
    assert_eq!(
        r.header("warning"),
        Some("214 - \"Transformation Applied\"")
    );
    assert_eq!(r.body, content::bytes("g", 0, 10));
}

#[test]
fn short_object_ends_inside_request() {
    let s = RangeServer::start();
    let r = hyper_get(
        s.addr(),
        "/short-object/so?size=1000",
        &range("bytes=900-1999"),
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 900-999/1000"));
    assert_eq!(r.body, content::bytes("so", 900, 100));
    let r = hyper_get(
        s.addr(),
        "/short-object/so?size=1000&star=1",
        &range("bytes=900-1999"),
    );
    assert_eq!(r.header("content-range"), Some("bytes 900-999/*"));
    assert_eq!(r.body, content::bytes("so", 900, 100));
}

#[test]
fn hyper_keep_alive_reuses_one_connection() {
    let s = RangeServer::start();
    let reqs: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("/ok/ka?size=1000", range("bytes=0-99")),
        ("/ok/ka?size=1000", range("bytes=-100")),
        ("/ok/ka?size=1000", vec![]),
    ];
    let rs = hyper_get_many(s.addr(), &reqs);
    assert_eq!(rs[0].body, content::bytes("ka", 0, 100));
    assert_eq!(rs[1].body, content::bytes("ka", 900, 100));
    assert_eq!(rs[2].body, content::bytes("ka", 0, 1000));
    assert_eq!(s.connections_accepted(), 1);
    let ranges: Vec<Option<String>> = s.log().into_iter().map(|l| l.range).collect();
    assert_eq!(
        ranges,
        [
            Some("bytes=0-99".to_string()),
            Some("bytes=-100".to_string()),
            None
        ]
    );
}

#[test]
fn delay_builds_up_concurrency() {
    let s = RangeServer::start();
    s.set_delay(Duration::from_millis(800));
    let n = 6;
    let barrier = Arc::new(Barrier::new(n));
    let addr = s.addr();
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let b = barrier.clone();
            std::thread::spawn(move || {
                let mut c = Raw::connect(addr);
                b.wait();
                let r = c.request("GET", &format!("/ok/c{i}?size=10"), &[]);
                content::check(&format!("c{i}"), 0, &r.body).unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(s.max_in_flight(), n);
    assert_eq!(s.in_flight(), 0);
    assert_eq!(s.connections_accepted(), n as u64);
    s.reset_max_in_flight();
    assert_eq!(s.max_in_flight(), 0);

    // A per-request delay overrides the default.
    s.set_delay(Duration::ZERO);
    let t0 = Instant::now();
    raw(addr, "GET", "/ok/d?size=1&delay_ms=150", &[]);
    assert!(t0.elapsed() >= Duration::from_millis(150));
    assert_eq!(s.max_in_flight(), 1);
}
