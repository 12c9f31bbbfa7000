//! Cost plans carried out: reads merged and split by a given link model get exactly their
//! bytes from the test kit server (faults included) and from local files; a split read
//! completes once, and a failed piece fails its read only.

use std::collections::HashMap;
use std::time::Duration;

use karu_testkit::content;
use karu_testkit::server::{RangeServer, versioned_name};

use crate::plan::{self, CostModel, Policy};
use crate::{Client, Completion, Config, Locator, Read, Status};

fn client() -> Client {
    let mut config = Config::empty();
    config.set("KARU_COALESCE_MODE", Some("cost")).unwrap();
    Client::new(&config).unwrap()
}

/// A slow link with a long round trip: large reads are cut into many pieces.
fn slow() -> CostModel {
    CostModel {
        rtt: Duration::from_millis(50),
        per_request: Duration::ZERO,
        connection_rate: 10_000_000,
        total_rate: 1_000_000_000,
        concurrency: 16,
        max_transfer: None,
        total_known: true,
    }
}

/// Every completion of a batch of `n` reads, by tag.
fn drain(batch: &crate::Batch, n: usize) -> HashMap<u64, Completion> {
    let mut done = HashMap::new();
    for c in batch {
        assert!(done.insert(c.tag, c).is_none(), "a read completed twice");
    }
    assert_eq!(done.len(), n);
    let s = batch.stats();
    assert_eq!(s.transfers_finished, s.transfers);
    done
}

#[test]
fn a_split_read_gets_every_byte_from_its_pieces() {
    let server = RangeServer::start();
    let object = Locator::parse(&server.url("/ok/big?size=33554432")).unwrap();
    let batch = client()
        .submit_modelled(vec![Read::new(&object, 1000, 24 << 20).tag(1)], slow())
        .unwrap();
    let done = drain(&batch, 1);
    let d = &done[&1];
    assert!(d.result.is_ok(), "{:?}", d.result);
    assert_eq!(d.got, 24 << 20);
    content::check("big", 1000, d.bytes()).unwrap();
    let requests = server.log().len();
    assert!(requests > 1, "one read was not split: {requests} request");
    assert_eq!(batch.stats().transfers, requests as u64);
    assert_eq!(batch.stats().assumed, Some(slow()));
}

#[test]
fn a_failed_piece_fails_its_read_only() {
    let server = RangeServer::start();
    // The first request for `a` (one of its pieces) gets a 404; `b` is served normally.
    let a = Locator::parse(&server.url("/status/a?size=33554432&code=404&times=1")).unwrap();
    let b = Locator::parse(&server.url("/ok/b?size=33554432")).unwrap();
    let reads = vec![
        Read::new(&a, 0, 24 << 20).tag(0),
        Read::new(&b, 0, 24 << 20).tag(1),
    ];
    let batch = client().submit_modelled(reads, slow()).unwrap();
    let done = drain(&batch, 2);
    assert_eq!(done[&0].status(), Status::NotFound);
    assert_eq!(done[&0].got, 0);
    assert!(done[&1].result.is_ok());
    content::check("b", 0, done[&1].bytes()).unwrap();
    let a_requests = server.log().iter().filter(|r| r.name == "a").count();
    assert!(a_requests > 1, "the read of a was not split");
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random link: round trips of 0 to 80 ms, a total rate of 1 MB/s to 8 GB/s, one
/// connection carrying all of it down to 1/256 of it, 1 to 64 slots.
fn random_model(rng: &mut Rng) -> CostModel {
    let total_rate = 1_000_000u64 << rng.below(14);
    CostModel {
        rtt: Duration::from_micros(rng.below(80_000)),
        per_request: Duration::from_micros(rng.below(200)),
        connection_rate: (total_rate >> rng.below(9)).max(1),
        total_rate,
        concurrency: 1 + rng.below(64) as u32,
        // Half the links cold: long transfers capped at 64 KiB to 1 MiB (cut into pieces).
        max_transfer: (rng.below(2) == 0).then(|| 64 << (10 + rng.below(5))),
        // Some with the ladder above the rated gaps, some below them (a prior total).
        total_known: rng.below(2) == 0,
    }
}

/// Random reads (some overlapping, some past the end) of an object of `size`.
fn random_reads(rng: &mut Rng, size: u64) -> Vec<(u64, u64)> {
    let n = 1 + rng.below(40);
    (0..n)
        .map(|_| {
            // Now and then a read large enough to split (pieces are at least MIN_PIECE).
            let most = match rng.below(16) {
                0 => 20 << 20,
                1..8 => 3 << 20,
                _ => 64 << 10,
            };
            let length = 1 + rng.below(most);
            (rng.below(size), length)
        })
        .collect()
}

/// The bytes of one version of `name` (a changed object's reads may all come from a later
/// version, never from two).
fn one_version(name: &str, offset: u64, data: &[u8]) {
    let ok = (0..16).any(|v| content::check(&versioned_name(name, v), offset, data).is_ok());
    assert!(ok, "{name}@{offset}: bytes of no single version");
}

/// Checks one completion of a read of `name` at `offset` of `length`, in an object of `size`.
fn check(d: &Completion, name: &str, offset: u64, length: u64, size: u64, faults: bool) {
    let end = offset + length;
    match &d.result {
        Ok(()) => {
            assert!(end <= size, "a read past the end succeeded");
            assert_eq!(d.got, length);
            one_version(name, offset, d.bytes());
        }
        Err(e) if e.status() == Status::Range && end > size => {
            assert_eq!(d.got, size.saturating_sub(offset), "{e}");
            one_version(name, offset, d.bytes());
        }
        Err(e) => {
            assert!(faults, "a read failed without faults: {e}");
            assert_eq!(d.got, 0, "{e}");
        }
    }
}

#[test]
fn random_merges_and_splits_give_exact_bytes_remote_with_faults_and_local() {
    let server = RangeServer::start();
    let dir = tempfile::tempdir().unwrap();
    let size = 32u64 << 20;
    let path = dir.path().join("local.bin");
    content::write_file(&path, "local", size).unwrap();
    let local = Locator::parse(path.to_str().unwrap()).unwrap();
    let client = client();
    let mut rng = Rng(0x5eed_c057);
    let (mut split_rounds, mut merged_rounds) = (0, 0);
    for round in 0..24 {
        let model = random_model(&mut rng);
        let faults = round % 2 == 1;
        // Faults that heal by retrying or fail the read (a slow trickle would only slow the
        // test down).
        let route = if faults {
            format!(
                "chaos/r{round}?size={size}&seed={round}&per_mille=150&kinds=truncate,reset,503,\
                 etag-change,redirect,ignore-range,wrong-content-range"
            )
        } else {
            format!("ok/r{round}?size={size}")
        };
        let name = format!("r{round}");
        let remote = Locator::parse(&server.url(&format!("/{route}"))).unwrap();
        let spans = random_reads(&mut rng, size);
        let mut reads = Vec::new();
        for (i, &(offset, length)) in spans.iter().enumerate() {
            let i = i as u64;
            reads.push(Read::new(&remote, offset, length).tag(2 * i));
            reads.push(Read::new(&local, offset, length).tag(2 * i + 1));
        }
        let requests: Vec<plan::Request<'_>> = reads
            .iter()
            .map(|r| plan::Request {
                locator: &r.locator,
                offset: r.offset,
                length: r.length,
                if_match: None,
            })
            .collect();
        let planned = plan::plan_cost(&requests, &Policy::default(), &model);
        let split = planned
            .transfers
            .iter()
            .flat_map(|t| planned.parts_of(t))
            .any(|p| p.length < requests[p.index].length);
        merged_rounds += usize::from(
            planned
                .transfers
                .iter()
                .any(|t| t.remote && t.parts.len() > 1),
        );
        split_rounds += usize::from(split);
        let batch = client.submit_modelled(reads, model).unwrap();
        let done = drain(&batch, 2 * spans.len());
        for (i, &(offset, length)) in spans.iter().enumerate() {
            let i = i as u64;
            check(&done[&(2 * i)], &name, offset, length, size, faults);
            check(&done[&(2 * i + 1)], "local", offset, length, size, false);
        }
    }
    assert!(split_rounds > 2, "{split_rounds} rounds split a read");
    assert!(
        merged_rounds > 2,
        "{merged_rounds} rounds merged remote reads"
    );
}
