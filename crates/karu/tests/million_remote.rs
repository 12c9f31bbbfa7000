//! A batch of 1,000,000 remote reads is a million small queue entries, not a million
//! futures, sockets or buffers: memory stays bounded while they wait, concurrency stays at
//! the limit, and dropping the batch discards what waits. Its own test binary, so the
//! process's peak RSS is this test's alone.

mod common;

use std::time::Duration;

use common::peak_rss;
use karu::{Locator, Read};
use karu_testkit::server::RangeServer;

#[test]
fn a_million_queued_remote_reads_keep_memory_and_concurrency_bounded() {
    const READS: u64 = 1_000_000;
    let server = RangeServer::start();
    let url = server.url("/ok/queued?size=100000000&delay_ms=50");
    let object = Locator::parse(&url).unwrap();
    let client = common::client(&[("KARU_COALESCE_GAP", "0"), ("KARU_CONCURRENCY", "16")]);
    let before = peak_rss();
    // Gap 0 and a 100-byte stride: a million separate transfers.
    let reads = (0..READS)
        .map(|i| Read::new(&object, i * 100, 16).tag(i))
        .collect();
    let batch = client.submit(reads).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let first = batch.next().unwrap();
    assert!(first.result.is_ok(), "{:?}", first.result);
    assert!(server.max_in_flight() <= 16, "{}", server.max_in_flight());
    let growth = peak_rss().saturating_sub(before);
    let per_read = growth / READS;
    eprintln!(
        "peak RSS growth {growth} bytes for {READS} queued remote reads: {per_read} per read"
    );
    // Measured on the 2-core dev machine: about 320 bytes per read (the Read, its planned
    // part and its queue entry; destinations are allocated only when a transfer starts).
    assert!(per_read < 512, "{per_read} bytes per read");
    let t = std::time::Instant::now();
    drop(batch);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    // Far fewer requests than reads reached the server.
    assert!((server.log().len() as u64) < READS / 10);
}
