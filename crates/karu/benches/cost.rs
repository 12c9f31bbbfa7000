//! Planner speed with the cost model (issue 13): `plan_cost` on 1,000 and 1,000,000 reads of
//! 64 KiB in four patterns, under the priors and a 1 Gbit/s link with a 20 ms round trip.
//! Targets: 1,000 reads under 100 µs, 1,000,000 reads under 500 ms.
//!
//! `cargo bench -p karu --bench cost`

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use karu::Locator;
use karu::plan::{CostModel, Policy, Request, plan_cost};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// Offsets of `n` reads of 64 KiB: back to back, every other slot, 1 MiB apart, or random
/// (4 KiB-aligned, unsorted, in an object of n × 256 KiB; splitmix64 with a fixed seed).
fn offsets(pattern: &str, n: u64) -> Vec<u64> {
    let stride = |s: u64| (0..n).map(|i| i * s).collect();
    match pattern {
        "contiguous" => stride(64 * KIB),
        "alternating" => stride(128 * KIB),
        "sparse" => stride(MIB),
        _ => {
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            (0..n)
                .map(|_| {
                    state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    let mut z = state;
                    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                    z ^= z >> 31;
                    (z % (n * 64)) * 4 * KIB
                })
                .collect()
        }
    }
}

fn bench(c: &mut Criterion) {
    let object = Locator::parse("https://example.com/data.bin").expect("a valid URL");
    let policy = Policy::default();
    let models = [
        ("priors", CostModel::priors(64)),
        (
            "20ms-1gbit",
            CostModel {
                rtt: Duration::from_millis(20),
                connection_rate: 125_000_000,
                total_rate: 125_000_000,
                ..CostModel::priors(64)
            },
        ),
    ];
    for n in [1_000u64, 1_000_000] {
        let mut group = c.benchmark_group(format!("plan_cost/{n}"));
        if n > 1_000 {
            group.sample_size(10);
            group.measurement_time(Duration::from_secs(8));
        }
        for pattern in ["contiguous", "alternating", "sparse", "random"] {
            let requests: Vec<Request<'_>> = offsets(pattern, n)
                .into_iter()
                .map(|offset| Request {
                    locator: &object,
                    offset,
                    length: 64 * KIB,
                    if_match: None,
                })
                .collect();
            for (name, model) in &models {
                group.bench_with_input(
                    BenchmarkId::new(pattern, name),
                    &requests,
                    |b, requests| b.iter(|| plan_cost(black_box(requests), &policy, model)),
                );
            }
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
