//! Bulk transfers where each stream is slow: a cold client cuts one large read into pieces,
//! and its endpoint's gate lets them run side by side (by opening on a slow first byte, or by
//! probing, where more streams carry more: here each connection is capped, so they do). The
//! gate's probing and settling are unit tests in `engine::gate`. Every byte is checked.

mod common;

use std::time::Duration;

use common::{client, collect};
use karu::{Locator, Read};
use karu_testkit::content;
use karu_testkit::proxy::{LatencyProxy, ProxyOptions};
use karu_testkit::server::RangeServer;

/// One 128 MiB read through the test kit's proxy with a one-way `delay` and each connection
/// capped at 100 MB/s (no total cap: a server that serves each stream slowly), every byte
/// checked; returns the batch's stats and the connections the proxy accepted.
fn read_through_slow_streams(delay: Duration) -> (karu::BatchStats, u64) {
    let server = RangeServer::start();
    let proxy = LatencyProxy::start(
        server.addr(),
        ProxyOptions {
            delay,
            rate_per_connection: Some(100_000_000),
            rate_total: None,
            slow_start: false,
        },
    );
    let size = 128u64 << 20;
    let l = Locator::parse(&proxy.url(&format!("/ok/bulk?size={size}"))).unwrap();
    let c = client(&[]);
    let b = c.submit(vec![Read::new(&l, 0, size)]).unwrap();
    for d in collect(&b) {
        assert!(d.result.is_ok(), "{:?}", d.result);
        content::check("bulk", 0, d.bytes()).unwrap();
    }
    (b.stats(), proxy.connections())
}

#[test]
fn pieces_of_a_large_read_run_side_by_side_where_each_stream_is_slow() {
    let (stats, connections) = read_through_slow_streams(Duration::ZERO);
    // Cut into 32 MiB pieces; the gate starts with one stream and then opens or doubles
    // while the rate grows (an epoch of 50 ms at most: a piece takes 335 ms here), so all 4
    // pieces ran side by side (1 connection if it held its start, 2 if it grew once); slow
    // pieces may hand their unread tails to transfers of their own (`engine::cut`).
    assert_eq!(stats.transfers - stats.tails_cut, 4, "{stats:?}");
    assert!(connections >= 4, "{connections} connections");
}

#[test]
fn on_a_long_link_whose_every_stream_is_slow_tails_add_streams() {
    // A 10 ms round trip: the gate opens (no first byte within 2 ms), so it does not probe,
    // and the streams' measured total is only their sum; cutting tails is how more streams
    // are tried. The 4 pieces run at 100 MB/s each (335 ms) while 60 places idle: the first
    // to be measured gives its unread end to tails (a trial), and more follow where they
    // carried more (`engine::gate`'s exploring, unit-tested there).
    let (stats, _) = read_through_slow_streams(Duration::from_millis(5));
    assert_eq!(stats.transfers - stats.tails_cut, 4, "{stats:?}");
    assert!(stats.tails_cut >= 1, "{stats:?}");
}
