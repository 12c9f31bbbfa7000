//! Planner speed with the cost model (issue 13): `plan_cost` on 1,000 and 1,000,000 reads of
//! 64 KiB in four patterns, under the priors and a 1 Gbit/s link with a 20 ms round trip.
//! Targets: 1,000 reads under 100 µs, 1,000,000 reads under 500 ms.
//!
//! `cargo bench -p karu-io --bench cost`

mod common;

use std::hint::black_box;
use std::time::Duration;

use common::{KIB, offsets};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use karu::Locator;
use karu::plan::{CostModel, Policy, Request, plan_cost};

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
                total_known: true,
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
