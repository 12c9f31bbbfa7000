//! D-throttled (issue 18): the download workload D against a store that answers 503 above 4
//! concurrent requests, at RTT 20 ms through the latency proxy. karu at its default
//! parallelism against karu at parallelism 4 (the store's limit, known in advance), one
//! `curl` stream and object_store's 8 MiB × 8 chunks. karu's default must be within 1.1× of
//! the best.
//!
//! ```text
//! cargo run --release -p karu-bench -- --d-throttled [--reps N] [--mib N]
//! ```
//!
//! Readers run in this process, alternating, every byte of every file checked after the
//! timing; the table gives the median wall time, the throttled answers the server sent
//! and, for karu, the window's history.

use std::time::{Duration, Instant};

use karu::{DownloadOptions, DownloadResult, Locator};
use karu_testkit::proxy::ProxyOptions;
use karu_testkit::{LatencyProxy, RangeServer};

use crate::readers::{self, Reader, Target};
use crate::workload::{Kind, MIB, Workload};

/// The store's limit: more requests than this in flight get 503.
const THROTTLE_ABOVE: u64 = 4;
/// One-way delay of the proxy: RTT 20 ms.
const DELAY: Duration = Duration::from_millis(10);
const NAME: &str = "d-throttled";

#[derive(Clone, Copy, PartialEq)]
enum Who {
    KaruDefault,
    Karu4,
    Curl,
    OsChunks,
    /// karu's defaults on the same object without throttling: what the machine gives.
    KaruUnthrottled,
}

impl Who {
    const ALL: [Who; 5] = [
        Who::KaruDefault,
        Who::Karu4,
        Who::Curl,
        Who::OsChunks,
        Who::KaruUnthrottled,
    ];
    /// The readers compared (the last row is a reference, not a peer).
    const PEERS: usize = 4;

    fn label(self) -> &'static str {
        match self {
            Who::KaruDefault => "karu `download`, defaults (8 MiB × 8)",
            Who::Karu4 => "karu `download`, parallelism 4",
            Who::Curl => "curl, one stream",
            Who::OsChunks => "object_store `get_range`, 8 MiB × 8",
            Who::KaruUnthrottled => "(reference) karu defaults, same object not throttled",
        }
    }
}

/// One run: wall time, 503s the server sent, and karu's result.
struct Run {
    wall: Duration,
    throttled: usize,
    karu: Option<DownloadResult>,
}

/// Runs the cell `reps` times on an object of `mib` MiB and prints its tables.
pub fn main(reps: u64, mib: u64) {
    let reps = reps as usize;
    let size = mib * MIB;
    let server = RangeServer::start();
    server.register(NAME, size);
    server.set_throttle_above(THROTTLE_ABOVE);
    let proxy = LatencyProxy::start(
        server.addr(),
        ProxyOptions {
            delay: DELAY,
            ..ProxyOptions::default()
        },
    );
    let target = Target {
        base: format!("http://{}", proxy.addr()),
        prefix: "throttle/".into(),
        s3: None,
    };
    let workload = Workload {
        id: 'D',
        title: "download under throttling".into(),
        objects: vec![(NAME.into(), size)],
        reads: Vec::new(),
        kind: Kind::Download,
    };
    let mut runs: Vec<Vec<Run>> = Who::ALL.iter().map(|_| Vec::new()).collect();
    for rep in 0..reps {
        for (i, &who) in Who::ALL.iter().enumerate() {
            server.clear_log();
            let (wall, karu) = run(who, &workload, &target);
            let throttled = server.log().iter().filter(|r| r.status == 503).count();
            eprintln!(
                "rep {rep}: {}: {:.0} ms, {throttled} throttled",
                who.label(),
                wall.as_secs_f64() * 1e3
            );
            runs[i].push(Run {
                wall,
                throttled,
                karu,
            });
        }
    }
    println!("{}", table(&runs, size, reps));
    println!("{}", converge(&server, reps));
}

/// Issue 18's own case: 64 MiB served at 8 MB/s per request, 503 above 3 in flight, 1 MiB
/// chunks, no added latency: parallelism 16 against parallelism 3 (target: within 1.15×, at
/// most 16 throttled answers).
fn converge(server: &RangeServer, reps: usize) -> String {
    let size = 64 * MIB;
    let url = server.url(&format!("/throttle/converge?size={size}&n=3&rate=8000000"));
    let object = Locator::parse(&url).expect("a locator");
    let client = karu::Client::new(&karu::Config::empty()).expect("a karu client");
    let mut walls = [Vec::new(), Vec::new()];
    let mut throttled = [Vec::new(), Vec::new()];
    for rep in 0..reps {
        for (i, parallelism) in [16, 3].into_iter().enumerate() {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let dest = dir.path().join("download.bin");
            let t = Instant::now();
            let r = client
                .download(
                    &object,
                    &dest,
                    DownloadOptions {
                        chunk_size: MIB,
                        parallelism,
                        ..DownloadOptions::default()
                    },
                )
                .expect("the download");
            let wall = t.elapsed().as_secs_f64();
            readers::check_file("converge", size, &dest);
            eprintln!(
                "rep {rep}: parallelism {parallelism}: {:.0} ms, {} throttled",
                wall * 1e3,
                r.throttled
            );
            walls[i].push(wall);
            throttled[i].push(r.throttled as f64);
        }
    }
    let (w16, w3) = (median(walls[0].clone()), median(walls[1].clone()));
    let most = throttled[0].iter().copied().fold(0.0, f64::max);
    format!(
        "Issue 18's case: 64 MiB at 8 MB/s per request, 503 above 3 in flight, 1 MiB chunks \
         (64 requests); median of {reps}\n\n\
         | karu parallelism | median wall | throttled answers (median, most) |\n|---|---|---|\n\
         | 16 | {:.0} ms | {:.0}, {most:.0} |\n| 3 | {:.0} ms | {:.0} |\n\n\
         16 ÷ 3: {:.2} (target ≤ 1.15: {}); throttled ≤ 16: {}\n",
        w16 * 1e3,
        median(throttled[0].clone()),
        w3 * 1e3,
        median(throttled[1].clone()),
        w16 / w3,
        if w16 / w3 <= 1.15 { "met" } else { "missed" },
        if most <= 16.0 { "met" } else { "missed" },
    )
}

fn run(who: Who, w: &Workload, target: &Target) -> (Duration, Option<DownloadResult>) {
    let budget = Duration::from_secs(600);
    match who {
        Who::KaruDefault | Who::Karu4 | Who::KaruUnthrottled => {
            let parallelism = if who == Who::Karu4 {
                THROTTLE_ABOVE
            } else {
                karu::DEFAULT_PARALLELISM
            };
            let dir = tempfile::tempdir().expect("a temporary directory");
            let dest = dir.path().join("download.bin");
            let client = target.karu_client(None);
            let url = match who {
                Who::KaruUnthrottled => format!("{}/ok/{NAME}", target.base),
                _ => target.url(NAME),
            };
            let object = Locator::parse(&url).expect("a locator");
            let t = Instant::now();
            let result = client
                .download(
                    &object,
                    &dest,
                    DownloadOptions {
                        parallelism,
                        ..DownloadOptions::default()
                    },
                )
                .expect("the download");
            let wall = t.elapsed();
            readers::check_file(NAME, w.objects[0].1, &dest);
            (wall, Some(result))
        }
        Who::Curl => (readers::run(Reader::Curl, w, target, budget).wall, None),
        Who::OsChunks => (readers::run(Reader::OsChunks, w, target, budget).wall, None),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn table(runs: &[Vec<Run>], size: u64, reps: usize) -> String {
    let walls: Vec<f64> = runs
        .iter()
        .map(|r| median(r.iter().map(|x| x.wall.as_secs_f64()).collect()))
        .collect();
    let best = walls[..Who::PEERS]
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min);
    let mut out = format!(
        "D-throttled: one {} MiB object, 503 above {THROTTLE_ABOVE} requests in flight, RTT \
         20 ms, uncapped; median of {reps} alternating runs\n\n\
         | reader | median wall | ÷ best | 503s (median) | karu window: lowest / final / highest, cuts |\n\
         |---|---|---|---|---|\n",
        size / MIB
    );
    for (i, who) in Who::ALL.iter().enumerate() {
        let throttled = median(runs[i].iter().map(|x| x.throttled as f64).collect());
        let window = runs[i]
            .iter()
            .filter_map(|x| x.karu.as_ref())
            .map(|r| {
                let p = r.parallelism;
                format!("{}/{}/{} {}", p.min, p.final_, p.max, p.cuts)
            })
            .collect::<Vec<_>>()
            .join(", ");
        out.push_str(&format!(
            "| {} | {:.0} ms | {:.2} | {throttled:.0} | {} |\n",
            who.label(),
            walls[i] * 1e3,
            walls[i] / best,
            if window.is_empty() {
                "–".into()
            } else {
                window
            },
        ));
    }
    let ratio = walls[0] / best;
    out.push_str(&format!(
        "\nkaru's default ÷ best: {ratio:.2} (target ≤ 1.10: {})\n",
        if ratio <= 1.10 { "met" } else { "missed" }
    ));
    out
}
