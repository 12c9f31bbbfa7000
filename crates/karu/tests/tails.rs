//! A slow stream's unread tail cut off onto idle slots (`engine::cut`): every byte still
//! arrives once and right, each read completes once, and a tail that fails fails its own
//! reads only.

mod common;

use common::{client, collect, object, read_all};
use karu::Read;
use karu_testkit::content;
use karu_testkit::server::RangeServer;

const MIB: u64 = 1 << 20;

#[test]
fn a_slow_merged_transfer_hands_its_tail_to_idle_slots() {
    let server = RangeServer::start();
    // Each answer streams at 40 MB/s: 12 MiB of neighbouring reads, one transfer, take some
    // 300 ms alone on a link (loopback) that carries far more. One transfer measures no
    // total, so the prior's stands, short link or long.
    let l = object(&server, "/trickle/slow?size=67108864&rate=40000000");
    let c = client(&[("KARU_CONCURRENCY", "8")]);
    let reads: Vec<(u64, u64)> = (0..48)
        .map(|i| (MIB + i * (256 << 10), 256 << 10))
        .collect();
    let stats = read_all(&c, &l, "slow", &reads);
    assert!(stats.tails_cut >= 1, "{stats}");
    // One request per transfer; a cut one stops reading at its cut, and the tails ask for
    // disjoint ranges that cover the rest.
    let log = server.log();
    assert_eq!(log.len() as u64, stats.transfers, "{stats}");
    assert!(log.iter().all(|r| r.status == 206));
}

#[test]
fn a_split_reads_pieces_complete_it_once_whether_cut_or_not() {
    let server = RangeServer::start();
    // One read of 40 MiB: a cold plan cuts it into pieces of at most 32 MiB, and a slow
    // piece hands its tail on, unless a busy machine's late first byte made the link look
    // long and the two pieces' measured total stands for it (`engine::cut`). Cutting a
    // piece in two is `engine::split`'s unit test; here every byte is checked either way.
    let l = object(&server, "/trickle/big?size=67108864&rate=60000000");
    let c = client(&[("KARU_CONCURRENCY", "8")]);
    let stats = read_all(&c, &l, "big", &[(3, 40 * MIB)]);
    assert_eq!(stats.transfers - stats.tails_cut, 2, "{stats}");
}

#[test]
fn a_failed_tail_fails_its_own_reads_only() {
    let server = RangeServer::start();
    // The first request streams slowly; every later one (the tails) gets 404.
    let l = object(
        &server,
        "/throttle/tail?size=67108864&after=1&code=404&rate=40000000",
    );
    let c = client(&[("KARU_CONCURRENCY", "8")]);
    let reads: Vec<(u64, u64)> = (0..48).map(|i| (i * (256 << 10), 256 << 10)).collect();
    let batch = c
        .submit(
            reads
                .iter()
                .enumerate()
                .map(|(i, &(o, n))| Read::new(&l, o, n).tag(i as u64))
                .collect(),
        )
        .unwrap();
    let done = collect(&batch);
    assert_eq!(done.len(), reads.len());
    let stats = batch.stats();
    assert!(stats.tails_cut >= 1, "{stats}");
    // The reads before the first cut came whole from the first answer; every read after it
    // failed with the tail's 404, none with another's bytes.
    let first_failed = done.iter().position(|d| d.result.is_err()).expect("a tail");
    assert!(first_failed > 0);
    for (i, d) in done.iter().enumerate() {
        let (o, _) = reads[i];
        match &d.result {
            Ok(()) => content::check("tail", o, d.bytes()).unwrap(),
            Err(e) => assert_eq!(e.status(), karu::Status::NotFound, "{e}"),
        }
    }
}
