//! One transfer serving many reads holds only the read being filled: each read's buffer is
//! allocated when its first byte arrives and the read completes as soon as its last byte is
//! written, so a caller that drops completions as they come keeps peak memory far below the
//! transfer's span. Its own test binary, so the process's peak RSS is this test's alone.

mod common;

use common::peak_rss;
use karu::{Locator, Read};
use karu_testkit::content;
use karu_testkit::server::RangeServer;

/// 512 adjacent reads of 32 KiB: one 16 MiB transfer under the guards plan.
const READS: u64 = 512;
const LENGTH: u64 = 32 << 10;

#[test]
fn a_merged_transfer_completes_each_read_when_it_is_full() {
    let server = RangeServer::start();
    let size = READS * LENGTH;
    // Sent at 16 MB/s, slower than the loop below checks bytes even in a debug build, so
    // completions do not wait for the caller.
    let route = format!("/trickle/merged?size={size}&rate=16000000");
    let object = Locator::parse(&server.url(&route)).unwrap();
    let client = common::client(&[
        ("KARU_COALESCE_MODE", "guards"),
        ("KARU_COALESCE_PARTS", "4096"),
    ]);
    // Warm up: the loops, their runtimes and a pooled connection exist before measuring.
    let warm = client.submit(vec![Read::new(&object, 0, 4096)]).unwrap();
    assert!(warm.into_iter().all(|c| c.result.is_ok()));
    let before = peak_rss();
    let reads = (0..READS)
        .map(|i| Read::new(&object, i * LENGTH, LENGTH).tag(i))
        .collect();
    let batch = client.submit(reads).unwrap();
    let mut seen = 0u64;
    let mut early = 0u64;
    for done in &batch {
        assert!(done.result.is_ok(), "{:?}", done.result);
        content::check("merged", done.tag * LENGTH, done.bytes()).unwrap();
        // Reads handed out while their transfer still runs.
        early += u64::from(batch.stats().transfers_finished == 0);
        seen += 1;
    }
    assert_eq!(seen, READS);
    let stats = batch.stats();
    assert_eq!(stats.transfers, 1, "{stats:?}");
    assert_eq!(stats.transfers_finished, 1);
    let growth = peak_rss().saturating_sub(before);
    eprintln!("peak RSS growth {growth} bytes over a {size}-byte transfer; {early} reads early");
    // All but the last read complete before the transfer ends.
    assert!(
        early >= READS / 2,
        "{early} of {READS} reads completed early"
    );
    // Before buffers were allocated lazily, every destination of the transfer was
    // allocated at its start and held to its end: growth of at least `size` (16 MiB).
    let bound = size / 4;
    assert!(growth < bound, "{growth} bytes (bound {bound})");
}
