//! karu-bench (issue 8): karu side by side with `object_store` 0.14, a naive reader and the
//! lower bound, on loopback servers behind the test kit's latency/bandwidth proxy.
//!
//! ```text
//! cargo run --release -p karu-bench                 # full run, rewrites BENCHMARKS.md's tables
//! cargo run --release -p karu-bench -- --quick      # CI: small workloads, one repetition
//! ```
//!
//! Options: `--reps N`, `--out FILE` (default: BENCHMARKS.md at the repo root in a full run,
//! `target/karu-bench-quick.md` in quick mode), `--workloads RSCHED`, `--no-nginx`, `--no-s3`,
//! `--issue-scale`.
//!
//! The parent process owns the servers (the test kit's [`RangeServer`], nginx from
//! `scripts/nginx.sh`) and the [`LatencyProxy`]s, and counts requests, bytes and connections on
//! the server side. Every reader runs in a fresh child process (this binary with `--child`), so
//! its CPU time (getrusage delta around the reads) and its peak RSS (`VmHWM`) are its own
//! and not mixed with the servers', the proxies' or another reader's.

mod plain;
mod readers;
mod report;
mod servers;
mod sigv4;
mod throttled;
mod workload;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use karu::plan::{Request, plan};
use karu_testkit::{LatencyProxy, ProxyOptions};

use readers::{DOWNLOAD_CHUNK, DOWNLOAD_PARALLELISM, KARU_CONCURRENCY, Measured, Reader, Target};
use servers::{Counted, Server};
use workload::{Kind, MIB, Scale, Workload, workload};

/// 1 Gbit/s in bytes per second.
pub const GBIT: u64 = 125_000_000;

/// A network profile: round-trip time added by the proxy, and an optional total cap.
#[derive(Clone, Copy, PartialEq)]
pub struct Profile {
    pub rtt_ms: u64,
    pub cap: Option<u64>,
}

impl Profile {
    pub fn label(&self) -> String {
        match self.cap {
            Some(_) => format!("{} ms, 1 Gbit/s", self.rtt_ms),
            None => format!("{} ms, uncapped", self.rtt_ms),
        }
    }
}

/// One reader's runs on one workload, profile and server.
pub struct Row {
    pub server: String,
    pub workload: char,
    pub profile: Profile,
    pub reader: Reader,
    pub walls: Vec<Duration>,
    pub requests: Vec<u64>,
    pub bytes: Vec<u64>,
    pub conns: Vec<u64>,
    pub cpu: Vec<f64>,
    pub rss_kib: Vec<u64>,
    /// Some runs stopped at the time budget and were scaled up (naive reader).
    pub extrapolated: bool,
    pub requested: u64,
    /// Lower bound of this reader's own plan.
    pub bound: Duration,
}

pub fn median<T: Copy + PartialOrd>(v: &[T]) -> T {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    s[s.len() / 2]
}

impl Row {
    pub fn wall(&self) -> Duration {
        median(&self.walls)
    }
}

struct Opts {
    quick: bool,
    issue_scale: bool,
    reps: usize,
    out: PathBuf,
    workloads: Vec<char>,
    nginx: bool,
    s3: bool,
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn opts() -> Opts {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let quick = args.iter().any(|a| a == "--quick");
    Opts {
        quick,
        issue_scale: args.iter().any(|a| a == "--issue-scale"),
        reps: value("--reps")
            .map(|v| v.parse().expect("--reps takes a number"))
            .unwrap_or(if quick { 1 } else { 3 }),
        out: value("--out").map(PathBuf::from).unwrap_or_else(|| {
            if quick {
                repo_root().join("target/karu-bench-quick.md")
            } else {
                repo_root().join("BENCHMARKS.md")
            }
        }),
        workloads: value("--workloads")
            .map(|v| v.chars().collect())
            .unwrap_or_else(|| workload::IDS.to_vec()),
        nginx: !args.iter().any(|a| a == "--no-nginx"),
        s3: !args.iter().any(|a| a == "--no-s3"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        child(&args[2..]);
        return;
    }
    if args.iter().any(|a| a == "--d-throttled") {
        throttled::main(&args);
        return;
    }
    let opts = opts();
    let started = Instant::now();
    let scale = if opts.quick {
        Scale::QUICK
    } else if opts.issue_scale {
        Scale::ISSUE
    } else {
        Scale::FULL
    };
    let workloads: Vec<Workload> = opts
        .workloads
        .iter()
        .map(|&id| workload(id, scale))
        .collect();
    let profiles: Vec<Profile> = if opts.quick {
        vec![
            Profile {
                rtt_ms: 0,
                cap: None,
            },
            Profile {
                rtt_ms: 20,
                cap: Some(GBIT),
            },
        ]
    } else {
        [0, 5, 20, 50]
            .into_iter()
            .flat_map(|rtt_ms| {
                [None, Some(GBIT)]
                    .into_iter()
                    .map(move |cap| Profile { rtt_ms, cap })
            })
            .collect()
    };
    let machine = report::machine();

    let mut servers = vec![Server::testkit(&workloads)];
    let mut notes = Vec::new();
    if opts.nginx {
        match Server::nginx(&workloads, opts.quick) {
            Ok(Some(s)) => servers.push(s),
            Ok(None) => {
                notes.push("nginx: not run (quick mode without `KARU_TEST_NGINX_URL`)".into())
            }
            Err(e) => notes.push(format!("nginx: not run ({e})")),
        }
    }
    if opts.s3 && workloads.iter().any(servers::on_s3) {
        match Server::s3(&workloads) {
            Ok(s) => servers.push(s),
            Err(e) => notes.push(format!("s3s-fs: not run ({e})")),
        }
    }

    let mut rows = Vec::new();
    let mut bandwidths = Vec::new();
    for server in &servers {
        let direct = server.base();
        // The uncapped bound needs a bandwidth: what a plain many-connection client gets on
        // this path (directly, and through a proxy without delay), measured now.
        let through = LatencyProxy::start(server.addr(), ProxyOptions::default());
        let bw_direct = server.measure_bandwidth(&direct);
        let bw_proxy = server.measure_bandwidth(&format!("http://{}", through.addr()));
        drop(through);
        eprintln!(
            "{}: loopback {:.2} GB/s direct, {:.2} GB/s through the proxy",
            server.name(),
            bw_direct / 1e9,
            bw_proxy / 1e9
        );
        bandwidths.push((server.name().to_string(), bw_direct, bw_proxy));
        for &profile in &profiles {
            let mine: Vec<&Workload> = workloads
                .iter()
                .filter(|w| server.runs(w, profile, opts.quick))
                .collect();
            if mine.is_empty() {
                continue;
            }
            // RTT 0 uncapped is the plain loopback, except for a server whose counts come
            // from the proxy (which then only counts).
            let proxy = (server.counted_by_proxy() || profile.rtt_ms > 0 || profile.cap.is_some())
                .then(|| {
                    LatencyProxy::start(
                        server.addr(),
                        ProxyOptions {
                            delay: Duration::from_micros(profile.rtt_ms * 500),
                            rate_total: profile.cap,
                            ..ProxyOptions::default()
                        },
                    )
                });
            let base = proxy
                .as_ref()
                .map_or(direct.clone(), |p| format!("http://{}", p.addr()));
            let bw = profile
                .cap
                .map_or(if proxy.is_some() { bw_proxy } else { bw_direct }, |c| {
                    c as f64
                });
            for w in mine {
                let t = server.target(base.clone());
                let at = Place {
                    server,
                    proxy: proxy.as_ref(),
                    target: &t,
                    profile,
                    bw,
                };
                rows.extend(run_matrix(&at, w, &opts, scale));
            }
        }
    }
    drop(servers);
    let total = started.elapsed();
    let md = report::markdown(&report::Input {
        rows: &rows,
        workloads: &workloads,
        machine: &machine,
        bandwidths: &bandwidths,
        notes: &notes,
        reps: opts.reps,
        quick: opts.quick,
        total,
    });
    report::write(&opts.out, &md);
    eprintln!(
        "wrote {} ({:.0} s in all)",
        opts.out.display(),
        total.as_secs_f64()
    );
}

/// Transfers, fetched bytes and concurrency of a reader's plan for `w` (None: not plannable
/// without running it, as for E, where the bound uses the server's counts).
fn planned(reader: Reader, w: &Workload, t: &Target) -> Option<(u64, u64, u64)> {
    let requested = w.requested();
    match w.kind {
        Kind::Ends(..) => return None,
        Kind::Download => {
            let chunks = requested.div_ceil(DOWNLOAD_CHUNK);
            return Some(match reader {
                // A probe of min(chunk, 1 MiB) learns size and ETag, then chunks follow it.
                Reader::KaruDefault => {
                    let probe = DOWNLOAD_CHUNK.min(MIB).min(requested);
                    let chunks = (requested - probe).div_ceil(DOWNLOAD_CHUNK);
                    (1 + chunks, requested, DOWNLOAD_PARALLELISM)
                }
                // A HEAD for the size, then the chunks.
                Reader::OsChunks => (1 + chunks, requested, DOWNLOAD_PARALLELISM),
                _ => (1, requested, 1),
            });
        }
        Kind::Reads => {}
    }
    let n = w.reads.len() as u64;
    Some(match reader {
        Reader::KaruDefault | Reader::KaruGap0 => {
            let gap = (reader == Reader::KaruGap0).then_some(0);
            // Building a client starts nothing; it only gives the planner its settings.
            let client = t.karu_client(gap);
            let locs = t.locators(&w.objects);
            let requests: Vec<Request> = w
                .reads
                .iter()
                .map(|&(o, offset, length)| Request {
                    locator: &locs[o],
                    offset,
                    length,
                    if_match: None,
                })
                .collect();
            let p = plan(&requests, &client.policy());
            (
                p.transfers.len() as u64,
                p.fetched_bytes(),
                u64::from(client.settings().concurrency()),
            )
        }
        Reader::OsRanges => {
            // object_store's `coalesce_ranges`: sort, merge while the gap is ≤ 1 MiB, fetch the
            // merged ranges 10 at a time.
            let mut transfers = 0;
            let mut fetched = 0;
            for o in 0..w.objects.len() {
                let mut r: Vec<(u64, u64)> = w
                    .reads
                    .iter()
                    .filter(|r| r.0 == o)
                    .map(|r| (r.1, r.1 + r.2))
                    .collect();
                r.sort();
                let mut cur: Option<(u64, u64)> = None;
                for (s, e) in r {
                    match cur {
                        Some((cs, ce)) if s <= ce + MIB => cur = Some((cs, ce.max(e))),
                        _ => {
                            if let Some((cs, ce)) = cur {
                                transfers += 1;
                                fetched += ce - cs;
                            }
                            cur = Some((s, e));
                        }
                    }
                }
                if let Some((cs, ce)) = cur {
                    transfers += 1;
                    fetched += ce - cs;
                }
            }
            (transfers, fetched, 10)
        }
        Reader::OsRange => (n, requested, KARU_CONCURRENCY as u64),
        Reader::Naive | Reader::Curl | Reader::OsGet | Reader::OsChunks => (n, requested, 1),
    })
}

pub fn bound(transfers: u64, fetched: u64, concurrency: u64, rtt_ms: u64, bw: f64) -> Duration {
    Duration::from_millis(rtt_ms) * transfers.div_ceil(concurrency.max(1)) as u32
        + Duration::from_secs_f64(fetched as f64 / bw)
}

/// Where a workload runs: server, the proxy in front of it (if any), the readers' target,
/// the network profile and the bandwidth of its bound.
struct Place<'a> {
    server: &'a Server,
    proxy: Option<&'a LatencyProxy>,
    target: &'a Target,
    profile: Profile,
    bw: f64,
}

fn run_matrix(at: &Place<'_>, w: &Workload, opts: &Opts, scale: Scale) -> Vec<Row> {
    let Place {
        server,
        proxy,
        target: t,
        profile,
        bw,
    } = *at;
    let readers = Reader::for_kind(w.kind);
    let mut rows: Vec<Row> = readers
        .iter()
        .map(|&reader| Row {
            server: server.name().to_string(),
            workload: w.id,
            profile,
            reader,
            walls: Vec::new(),
            requests: Vec::new(),
            bytes: Vec::new(),
            conns: Vec::new(),
            cpu: Vec::new(),
            rss_kib: Vec::new(),
            extrapolated: false,
            requested: w.requested(),
            bound: Duration::ZERO,
        })
        .collect();
    // The naive reader is sequential: 10,000 reads at 50 ms would take over 8 minutes, so it
    // reads for at most this long and is extrapolated linearly (marked ~ in the tables).
    let budget = Duration::from_millis(if opts.quick { 500 } else { 1000 });
    for rep in 0..opts.reps {
        // Alternate the order so that no reader always runs first (cold caches) or last.
        for k in 0..readers.len() {
            let i = (k + rep) % readers.len();
            let reader = readers[i];
            let mark = server.begin(proxy);
            let m = spawn_child(reader, w, t, scale, budget);
            let Counted {
                requests,
                bytes,
                conns,
            } = server.end(mark, proxy);
            let scale = w.count() as f64 / m.done.max(1) as f64;
            let row = &mut rows[i];
            row.extrapolated |= m.done < w.count();
            row.walls.push(m.wall.mul_f64(scale));
            row.requests.push((requests as f64 * scale).round() as u64);
            row.bytes.push((bytes as f64 * scale).round() as u64);
            row.conns.push(conns);
            row.cpu.push(m.cpu * scale);
            row.rss_kib.push(m.max_rss_kib);
            eprintln!(
                "{} {} [{}] {:<10} {:>8.3} s  {:>6} req  {:>10} B  {:>3} conn  {:.2} CPU s{}",
                server.name(),
                w.id,
                profile.label(),
                reader.key(),
                m.wall.as_secs_f64() * scale,
                requests,
                bytes,
                conns,
                m.cpu,
                if m.done < w.count() { " (partial)" } else { "" }
            );
        }
    }
    for row in &mut rows {
        let (transfers, fetched, conc) = planned(row.reader, w, t).unwrap_or_else(|| {
            // E: the bound of what the reader actually sent (karu's read_ends has no plan to
            // ask for), at the concurrency it ran with.
            let conc = if row.reader == Reader::Naive {
                1
            } else {
                KARU_CONCURRENCY as u64
            };
            (median(&row.requests), median(&row.bytes), conc)
        });
        row.bound = bound(transfers, fetched, conc, profile.rtt_ms, bw);
    }
    rows
}

fn spawn_child(
    reader: Reader,
    w: &Workload,
    t: &Target,
    scale: Scale,
    budget: Duration,
) -> Measured {
    let mut cmd = Command::new(std::env::current_exe().expect("this program"));
    if let Some(s3) = &t.s3 {
        cmd.envs(s3.env());
    }
    let out = cmd
        .arg("--child")
        .args([
            reader.key(),
            &w.id.to_string(),
            scale.name,
            &t.base,
            &t.prefix,
            &budget.as_millis().to_string(),
        ])
        .output()
        .expect("start a child");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} on {}: {}\n{}",
        reader.key(),
        w.id,
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Measured::parse(&text).expect("a RESULT line")
}

fn child(args: &[String]) {
    let [reader, id, scale, base, prefix, budget] = args else {
        panic!("--child READER WORKLOAD quick|full BASE PREFIX BUDGET_MS");
    };
    let scale = Scale::by_name(scale);
    let w = workload(id.chars().next().expect("a workload"), scale);
    let t = Target {
        base: base.clone(),
        prefix: prefix.clone(),
        s3: sigv4::S3Access::from_env(),
    };
    let m = readers::run(
        Reader::from_key(reader),
        &w,
        &t,
        Duration::from_millis(budget.parse().expect("budget")),
    );
    println!("{}", m.line());
}
