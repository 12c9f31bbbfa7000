//! nginx started by `scripts/nginx.sh` serves the testkit's deterministic files, directly and
//! through the latency proxy. Skipped (with a message) when `KARU_TEST_NGINX_URL` is unset.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{Raw, raw};
use karu_testkit::content;
use karu_testkit::{LatencyProxy, ProxyOptions};

fn endpoint(var: &str) -> Option<SocketAddr> {
    match std::env::var(var) {
        Ok(url) => {
            let hostport = url.trim_start_matches("http://").trim_end_matches('/');
            Some(
                hostport
                    .parse()
                    .unwrap_or_else(|e| panic!("{var}={url}: {e}")),
            )
        }
        Err(_) => {
            eprintln!("skipped: {var} is not set (run scripts/nginx.sh and source its output)");
            None
        }
    }
}

#[test]
fn nginx_serves_deterministic_files() {
    let Some(a) = endpoint("KARU_TEST_NGINX_URL") else {
        return;
    };
    let r = raw(a, "GET", "/probe.bin", &[("Range", "bytes=10-19")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 10-19/1000"));
    content::check("probe.bin", 10, &r.body).unwrap();

    let r = raw(a, "GET", "/probe.bin", &[("Range", "bytes=-16")]);
    assert_eq!(r.header("content-range"), Some("bytes 984-999/1000"));
    content::check("probe.bin", 984, &r.body).unwrap();

    let r = raw(a, "GET", "/probe.bin", &[("Range", "bytes=1000-")]);
    assert_eq!(
        (r.status, r.header("content-range")),
        (416, Some("bytes */1000"))
    );

    let r = raw(a, "GET", "/probe.bin", &[("Range", "bytes=0-1,5-6")]);
    assert_eq!(r.status, 206);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("multipart/byteranges")
    );

    let tag = raw(a, "HEAD", "/probe.bin", &[])
        .header("etag")
        .unwrap()
        .to_string();
    let r = raw(
        a,
        "GET",
        "/probe.bin",
        &[("Range", "bytes=0-0"), ("If-Match", &tag)],
    );
    assert_eq!(r.status, 206);
    let r = raw(
        a,
        "GET",
        "/probe.bin",
        &[("Range", "bytes=0-0"), ("If-Match", "\"x\"")],
    );
    assert_eq!(r.status, 412);

    if let Some(s) = endpoint("KARU_TEST_NGINX_SINGLE_RANGE_URL") {
        let r = raw(s, "GET", "/probe.bin", &[("Range", "bytes=0-1,5-6")]);
        assert_eq!(r.status, 200);
        content::check("probe.bin", 0, &r.body).unwrap();
        assert_eq!(
            raw(s, "GET", "/probe.bin", &[("Range", "bytes=0-1")]).status,
            206
        );
    }
    if let Some(n) = endpoint("KARU_TEST_NGINX_NO_RANGE_URL") {
        let r = raw(n, "GET", "/probe.bin", &[("Range", "bytes=0-1")]);
        assert_eq!((r.status, r.body.len()), (200, 1000));
    }
}

#[test]
fn nginx_through_latency_proxy() {
    let Some(a) = endpoint("KARU_TEST_NGINX_URL") else {
        return;
    };
    let p = LatencyProxy::start(
        a,
        ProxyOptions {
            delay: Duration::from_millis(10),
            ..ProxyOptions::default()
        },
    );
    let mut c = Raw::connect(p.addr());
    c.request("HEAD", "/probe.bin", &[]);
    let t0 = Instant::now();
    let r = c.request("GET", "/probe.bin", &[("Range", "bytes=500-599")]);
    assert!(t0.elapsed() >= Duration::from_millis(20));
    assert_eq!(r.status, 206);
    content::check("probe.bin", 500, &r.body).unwrap();
    assert_eq!(p.connections(), 1);
}
