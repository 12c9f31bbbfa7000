//! The latency proxy adds round-trip time without serializing throughput, caps bandwidth roughly,
//! and forwards bytes, end of stream and resets faithfully. Timing bounds are deliberately wide.

mod common;

use std::time::{Duration, Instant};

use common::{End, Raw, raw};
use karu_testkit::content;
use karu_testkit::{LatencyProxy, ProxyOptions, RangeServer};

fn delayed(s: &RangeServer, ms: u64) -> LatencyProxy {
    LatencyProxy::start(
        s.addr(),
        ProxyOptions {
            delay: Duration::from_millis(ms),
            ..ProxyOptions::default()
        },
    )
}

#[test]
fn delay_adds_round_trips() {
    let s = RangeServer::start();
    let p = delayed(&s, 20);
    let t0 = Instant::now();
    let mut c = Raw::connect(p.addr());
    let r = c.request("GET", "/ok/lat?size=10000", &[("Range", "bytes=100-199")]);
    let first = t0.elapsed();
    assert_eq!(r.status, 206);
    content::check("lat", 100, &r.body).unwrap();
    // Handshake round trip + request round trip.
    assert!(first >= Duration::from_millis(80), "{first:?}");

    let t1 = Instant::now();
    let r = c.request("GET", "/ok/lat?size=10000", &[("Range", "bytes=-50")]);
    let second = t1.elapsed();
    content::check("lat", 9950, &r.body).unwrap();
    assert!(second >= Duration::from_millis(40), "{second:?}");
    assert!(second < Duration::from_secs(5), "{second:?}");

    assert_eq!(p.connections(), 1);
    assert_eq!(s.connections_accepted(), 1);
    assert_eq!(p.target(), s.addr());
    assert!(p.bytes_to_client() > 150);
    assert!(p.bytes_to_target() > 50);
}

#[test]
fn delay_does_not_serialize_throughput() {
    let s = RangeServer::start();
    let p = delayed(&s, 100);
    let size = 4 << 20;
    // Warm up the connection so the measurement covers one request round trip and the body.
    let mut c = Raw::connect(p.addr());
    c.request("GET", "/ok/w?size=1", &[]);
    let t0 = Instant::now();
    let r = c.request("GET", &format!("/ok/bulk?size={size}"), &[]);
    let took = t0.elapsed();
    assert_eq!(r.body.len(), size);
    content::check("bulk", 0, &r.body).unwrap();
    eprintln!("4 MiB through a 100 ms proxy: {took:?}");
    // The proxy reads at most 32 KiB at a time, so one that slept 100 ms per read would need
    // over 12.8 s; a pipelined one needs one round trip plus the copying (under 1 s here).
    assert!(took >= Duration::from_millis(200), "{took:?}");
    assert!(took < Duration::from_secs(6), "{took:?}");
}

#[test]
fn per_connection_rate_cap() {
    let s = RangeServer::start();
    let p = LatencyProxy::start(
        s.addr(),
        ProxyOptions {
            rate_per_connection: Some(1_000_000),
            ..ProxyOptions::default()
        },
    );
    let t0 = Instant::now();
    let r = raw(p.addr(), "GET", "/ok/capped?size=400000", &[]);
    let took = t0.elapsed();
    content::check("capped", 0, &r.body).unwrap();
    assert_eq!(r.body.len(), 400_000);
    // 400 kB at 1 MB/s: about 0.4 s.
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn total_rate_cap_is_shared() {
    let s = RangeServer::start();
    let p = LatencyProxy::start(
        s.addr(),
        ProxyOptions {
            rate_total: Some(1_000_000),
            ..ProxyOptions::default()
        },
    );
    let addr = p.addr();
    let t0 = Instant::now();
    let threads: Vec<_> = (0..2)
        .map(|i| {
            std::thread::spawn(move || {
                let name = format!("shared{i}");
                let r = raw(addr, "GET", &format!("/ok/{name}?size=250000"), &[]);
                content::check(&name, 0, &r.body).unwrap();
                assert_eq!(r.body.len(), 250_000);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let took = t0.elapsed();
    // 500 kB in total at 1 MB/s: about 0.5 s (each alone would take 0.25 s).
    assert!(took >= Duration::from_millis(400), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(p.connections(), 2);
}

#[test]
fn end_of_stream_and_reset_are_forwarded() {
    let s = RangeServer::start();
    let p = delayed(&s, 5);
    let r = raw(p.addr(), "GET", "/truncate/f?size=10000&k=300", &[]);
    assert_eq!((r.end, r.body.len()), (End::Eof, 300));
    content::check("f", 0, &r.body).unwrap();

    let r = raw(p.addr(), "GET", "/reset/f?size=10000&k=300", &[]);
    assert_eq!(r.end, End::Error(std::io::ErrorKind::ConnectionReset));
    assert!(r.body.len() <= 300);
    content::check("f", 0, &r.body).unwrap();
}

#[test]
fn unreachable_target_closes_client() {
    // Bind then drop to get a port with nothing listening.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let p = LatencyProxy::start(dead, ProxyOptions::default());
    let mut c = std::net::TcpStream::connect(p.addr()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    use std::io::{Read, Write};
    let _ = c.write_all(b"GET / HTTP/1.1\r\n\r\n");
    let mut buf = [0u8; 16];
    match c.read(&mut buf) {
        Ok(0) => {}
        Err(e) => assert_ne!(e.kind(), std::io::ErrorKind::WouldBlock, "timed out"),
        Ok(n) => panic!("unexpected {n} bytes"),
    }
    assert_eq!(p.connections(), 1);
}

#[test]
fn counts_requests_and_response_bodies() {
    let s = RangeServer::start();
    let p = delayed(&s, 1);
    let mut c = Raw::connect(p.addr());
    let r = c.request("GET", "/ok/meter?size=5000", &[("Range", "bytes=10-109")]);
    content::check("meter", 10, &r.body).unwrap();
    let r = c.request("HEAD", "/ok/meter?size=5000", &[]);
    assert_eq!(r.content_length(), Some(5000));
    let r = c.request("GET", "/ok/meter?size=5000", &[]);
    assert_eq!(r.body.len(), 5000);
    let r = raw(
        p.addr(),
        "GET",
        "/ok/meter?size=5000",
        &[("Range", "bytes=-7")],
    );
    content::check("meter", 4993, &r.body).unwrap();
    // The client has every body, so the proxy has counted it.
    assert_eq!(p.requests(), 4);
    assert_eq!(p.response_body_bytes(), 100 + 5000 + 7);
    assert_eq!(s.log().len(), 4);
    assert!(p.bytes_to_client() > p.response_body_bytes());
}
