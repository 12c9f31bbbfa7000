//! Planner benchmark (spec §8): transfer count, byte amplification and planning time of the
//! planner alone, no I/O. Prints CSV.
//!
//! `cargo bench -p karu-io --bench plan [-- ITERATIONS]`. `plan_us` is the mean time per plan
//! (not counting freeing it) over ITERATIONS plans (default 200) for 1,000 reads, or one
//! plan for 1,000,000 reads, taking the fastest of several such rounds: on a shared machine
//! the other rounds measure the neighbours.

mod common;

use std::hint::black_box;
use std::time::Instant;

use common::{KIB, MIB, offsets};
use karu::Locator;
use karu::plan::{Policy, Request, plan};

const URL: &str = "https://example.com/data.bin";
const PATTERNS: [&str; 4] = ["contiguous", "alternating", "sparse", "random"];

fn locator() -> Locator {
    Locator::parse(URL).expect("a valid URL")
}

fn main() {
    let iterations: u32 = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(|a| a.parse().expect("ITERATIONS must be a positive number"))
        .unwrap_or(200);
    let policies = [
        ("current", Policy::default()),
        (
            "limit16_amp4",
            Policy {
                limit: 16 * MIB,
                amplification: 4,
                ..Policy::default()
            },
        ),
        (
            "limit16_amp2",
            Policy {
                limit: 16 * MIB,
                amplification: 2,
                ..Policy::default()
            },
        ),
        (
            "separate",
            Policy {
                gap: 0,
                ..Policy::default()
            },
        ),
    ];
    let object = locator();
    println!(
        "pattern,policy,requests,transfers,requested_bytes,fetched_bytes,amplification,plan_us"
    );
    for n in [1_000u64, 1_000_000] {
        let (rounds, runs) = if n > 1_000 {
            (3, 1)
        } else {
            (5, iterations.max(1))
        };
        for pattern in PATTERNS {
            let requests: Vec<Request<'_>> = offsets(pattern, n)
                .into_iter()
                .map(|offset| Request {
                    locator: &object,
                    offset,
                    length: 64 * KIB,
                    if_match: None,
                })
                .collect();
            for (name, policy) in &policies {
                let planned = plan(&requests, policy);
                let plan_us = (0..rounds)
                    .map(|_| {
                        // Plans are dropped after the clock stops: freeing is not planning.
                        let mut plans = Vec::with_capacity(runs as usize);
                        let start = Instant::now();
                        for _ in 0..runs {
                            plans.push(plan(black_box(&requests), black_box(policy)));
                        }
                        let elapsed = start.elapsed();
                        black_box(plans);
                        elapsed.as_secs_f64() * 1e6 / f64::from(runs)
                    })
                    .fold(f64::INFINITY, f64::min);
                let fetched = planned.fetched_bytes();
                println!(
                    "{pattern},{name},{n},{},{},{fetched},{:.2},{plan_us:.1}",
                    planned.transfers.len(),
                    planned.requested_bytes,
                    fetched as f64 / planned.requested_bytes as f64,
                );
            }
        }
    }
}
