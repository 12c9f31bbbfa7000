//! karu-bench (issue 8): karu side by side with `object_store` 0.14, a naive reader and the
//! lower bound, on loopback servers behind the test kit's latency/bandwidth proxy; and the fault
//! soak of issue 12 (`--soak`, see [`soak`]).
//!
//! ```text
//! cargo run --release -p karu-bench                 # full run, rewrites BENCHMARKS.md's tables
//! cargo run --release -p karu-bench -- --quick      # CI: small workloads, one repetition
//! cargo run --release -p karu-bench -- --workloads R --servers testkit --profiles 20
//! cargo run --release -p karu-bench -- --soak       # 1,000,000 faulted reads, RELIABILITY.md
//! cargo run --release -p karu-bench -- --help       # every option
//! ```
//!
//! The parent process owns the servers (the test kit's `RangeServer`, nginx from
//! `scripts/nginx.sh`) and the [`LatencyProxy`]s, and counts requests, bytes and connections on
//! the server side. Every reader runs in a fresh child process (this binary with `--child`), so
//! its CPU time (getrusage delta around the reads) and its peak RSS (`VmHWM`) are its own
//! and not mixed with the servers', the proxies' or another reader's. The servers it started
//! are stopped however it ends ([`cleanup`]).

mod chart;
mod cleanup;
mod instructions;
mod issue13;
mod issue17;
mod plain;
mod pq;
mod readers;
mod report;
mod servers;
mod sigv4;
mod soak;
mod throttled;
mod workload;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use clap::Parser;
use karu::plan::{Request, plan};
use karu_testkit::{LatencyProxy, ProxyOptions};

use readers::{DOWNLOAD_CHUNK, DOWNLOAD_PARALLELISM, KARU_CONCURRENCY, Measured, Reader, Target};
use servers::{Counted, Server};
use workload::{Kind, MIB, Scale, Workload, workload};

/// 1 Gbit/s in bytes per second.
pub const GBIT: u64 = 125_000_000;
/// One connection's rate on a per-connection profile: 100 MB/s, about what one connection to
/// S3 carries however fast the link.
pub const CONNECTION_RATE: u64 = 100_000_000;

/// A network profile: round-trip time added by the proxy, and an optional cap.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Profile {
    pub rtt_ms: u64,
    pub cap: Option<Cap>,
    /// Each connection paced by TCP's slow start over the round trip
    /// (`ProxyOptions::slow_start`): a real path, where a new connection carries little in
    /// its first round trips, which the proxy otherwise hides.
    pub slow_start: bool,
}

/// What a profile's proxy caps, in bytes per second.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Cap {
    /// All connections together ([`GBIT`]): a slow link.
    Total(u64),
    /// Each connection on its own ([`CONNECTION_RATE`]), the link uncapped: a store that
    /// serves each stream slowly, where more streams carry more.
    PerConnection(u64),
}

impl Profile {
    /// A profile of the proxy's own path (no slow start): the matrix's.
    pub fn new(rtt_ms: u64, cap: Option<Cap>) -> Profile {
        Profile {
            rtt_ms,
            cap,
            slow_start: false,
        }
    }

    pub fn label(&self) -> String {
        let link = match self.cap {
            Some(Cap::Total(_)) => format!("{} ms, 1 Gbit/s", self.rtt_ms),
            Some(Cap::PerConnection(rate)) => {
                format!("{} ms, {} MB/s a connection", self.rtt_ms, rate / 1_000_000)
            }
            None => format!("{} ms, uncapped", self.rtt_ms),
        };
        match self.slow_start {
            true => format!("{link}, slow start"),
            false => link,
        }
    }

    /// The cap of all connections together, if any.
    pub fn total_cap(&self) -> Option<u64> {
        match self.cap {
            Some(Cap::Total(rate)) => Some(rate),
            _ => None,
        }
    }

    /// The cap of each connection, if any.
    pub fn connection_cap(&self) -> Option<u64> {
        match self.cap {
            Some(Cap::PerConnection(rate)) => Some(rate),
            _ => None,
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

    /// A row of one uncapped run taking `wall_ms`, for the report's unit tests: 1 GB
    /// requested and fetched in one request, 0.1 CPU s, 1 MiB peak, a 1 ms bound.
    #[cfg(test)]
    pub fn sample(server: &str, workload: char, rtt_ms: u64, reader: Reader, wall_ms: u64) -> Row {
        Row {
            server: server.into(),
            workload,
            profile: Profile::new(rtt_ms, None),
            reader,
            walls: vec![Duration::from_millis(wall_ms)],
            requests: vec![1],
            bytes: vec![1_000_000_000],
            conns: vec![1],
            cpu: vec![0.1],
            rss_kib: vec![1024],
            extrapolated: false,
            requested: 1_000_000_000,
            bound: Duration::from_millis(1),
        }
    }

    /// What the row's readers are compared within: its workload, where P's full scans are a
    /// comparison of their own (`P scan`).
    pub fn cell(&self) -> String {
        match self.reader.parquet() {
            Some((_, true)) => format!("{} scan", self.workload),
            _ => self.workload.to_string(),
        }
    }
}

/// karu side by side with object_store, a naive reader and the lower bound, on loopback servers
/// behind a latency/bandwidth proxy; or the fault soak (`--soak`).
///
/// A full run rewrites the tables of BENCHMARKS.md (about 40 minutes on 2 shared cores). The
/// selections (`--workloads`, `--servers`, `--profiles`) re-run single cells in seconds;
/// explicitly chosen profiles run on every chosen server.
#[derive(Parser)]
#[command(name = "karu-bench", about, long_about)]
struct Cli {
    /// Small workloads and one repetition (CI keeps it working); writes
    /// target/karu-bench-quick.md unless --out is given.
    #[arg(long)]
    quick: bool,
    /// The issue's exact sizes (see "Scale" in BENCHMARKS.md).
    #[arg(long, conflicts_with = "quick")]
    issue_scale: bool,
    /// Repetitions per cell [default: 5 (a cell's walls spread by 10-30 %, and the median of
    /// 3 moved the acceptance checks between runs), or 1 with --quick].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    reps: Option<u64>,
    /// Where the tables go [default: BENCHMARKS.md at the repository root, or
    /// target/karu-bench-quick.md with --quick; with --soak: RELIABILITY.md, or
    /// target/karu-soak-quick.md with --soak-reads].
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Workloads to run, by letter, e.g. `RS` [default: all].
    #[arg(long, value_name = "IDS", value_parser = workload_ids)]
    workloads: Option<WorkloadIds>,
    /// Servers to run on, comma-separated [default: all].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_enum)]
    servers: Vec<ServerId>,
    /// Network profiles, comma-separated: a round-trip time in ms, uncapped (`20`), capped at
    /// 1 Gbit/s (`20/1g`) or at 100 MB/s per connection (`20/conn`), each optionally with
    /// every connection paced by TCP's slow start (`/ss` last: `20/ss`, `20/conn/ss`); per
    /// connection and slow start are not in the default matrix [default: 0, 5, 20 and 50 ms,
    /// each uncapped and at 1 Gbit/s; 0 and 20/1g with --quick].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = profile)]
    profiles: Vec<Profile>,
    /// Run the fault soak instead: batched reads from the test kit server's chaos route, 5 % of
    /// requests faulted, every byte checked.
    #[arg(long)]
    soak: bool,
    /// Reads in the soak; fewer than the full run's 1,000,000 is the quick mode.
    #[arg(long, value_name = "N", requires = "soak", default_value_t = soak::FULL_READS)]
    soak_reads: u64,
    /// Seed of the soak's reads and of the server's fault draws.
    #[arg(long, value_name = "S", requires = "soak", default_value_t = 1)]
    soak_seed: u64,
    /// Run only the D-throttled cell (503 above 4 requests in flight, RTT 20 ms) and issue
    /// 18's own case, printing their tables [--reps default: 5].
    #[arg(long, conflicts_with_all = ["quick", "soak"])]
    d_throttled: bool,
    /// Object size in MiB for --d-throttled.
    #[arg(
        long,
        value_name = "N",
        requires = "d_throttled",
        default_value_t = 256
    )]
    mib: u64,
    /// Print instructions per request (valgrind's callgrind) of one plain HTTP GET and one
    /// signed S3 GET, karu beside object_store `get_range`, instead of a run.
    #[arg(long, conflicts_with_all = ["quick", "soak", "d_throttled"])]
    instructions: bool,
}

/// A server of the benchmark.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ServerId {
    /// The test kit's range server (in this process).
    Testkit,
    /// nginx (`KARU_TEST_NGINX_URL`, else started with scripts/nginx.sh; full runs only).
    Nginx,
    /// The s3s-fs S3 emulator (`KARU_TEST_S3S_URL`, else started with scripts/s3.sh).
    #[value(name = "s3s-fs")]
    S3sFs,
}

/// Workload letters, one value (a `Vec` would be taken for several values).
#[derive(Clone)]
struct WorkloadIds(Vec<char>);

fn workload_ids(v: &str) -> Result<WorkloadIds, String> {
    let ids: Vec<char> = v.chars().collect();
    match ids.iter().find(|c| !workload::IDS.contains(c)) {
        _ if ids.is_empty() => Err("no workload given".into()),
        Some(c) => Err(format!(
            "unknown workload {c:?} (known: {})",
            workload::IDS.iter().collect::<String>()
        )),
        None => Ok(WorkloadIds(ids)),
    }
}

fn profile(v: &str) -> Result<Profile, String> {
    let (link, slow_start) = match v.strip_suffix("/ss") {
        Some(link) => (link, true),
        None => (v, false),
    };
    let (rtt, cap) = match link.split_once('/') {
        None => (link, None),
        Some((rtt, "1g")) => (rtt, Some(Cap::Total(GBIT))),
        Some((rtt, "conn")) => (rtt, Some(Cap::PerConnection(CONNECTION_RATE))),
        Some(_) => return Err(format!("{v:?}: the caps are `/1g` and `/conn`, then `/ss`")),
    };
    let rtt_ms = rtt.parse().map_err(|_| {
        format!("{v:?}: a round-trip time in ms, e.g. 20, 20/1g, 20/conn, 20/ss or 20/conn/ss")
    })?;
    Ok(Profile {
        rtt_ms,
        cap,
        slow_start,
    })
}

struct Opts {
    quick: bool,
    reps: usize,
    out: PathBuf,
    workloads: Vec<char>,
    servers: Vec<ServerId>,
    /// Chosen on the command line: then every server runs every one of them.
    profiles: Option<Vec<Profile>>,
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl Cli {
    fn opts(self) -> Opts {
        let quick = self.quick;
        Opts {
            quick,
            reps: self.reps.map_or(if quick { 1 } else { 5 }, |r| r as usize),
            out: self.out.unwrap_or_else(|| {
                if quick {
                    repo_root().join("target/karu-bench-quick.md")
                } else {
                    repo_root().join("BENCHMARKS.md")
                }
            }),
            workloads: self
                .workloads
                .map_or_else(|| workload::IDS.to_vec(), |w| w.0),
            servers: if self.servers.is_empty() {
                vec![ServerId::Testkit, ServerId::Nginx, ServerId::S3sFs]
            } else {
                self.servers
            },
            profiles: (!self.profiles.is_empty()).then_some(self.profiles),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // The internal modes of the children this program runs.
    match args.get(1).map(String::as_str) {
        Some("--child") => return child(&args[2..]),
        Some(soak::CHILD) => return soak::child(&args[2..]),
        Some(instructions::CHILD) => return instructions::child(&args[2..]),
        _ => {}
    }
    cleanup::install();
    let cli = Cli::parse();
    if cli.instructions {
        instructions::main();
        cleanup::finish();
        return;
    }
    if cli.d_throttled {
        throttled::main(cli.reps.unwrap_or(5), cli.mib);
        cleanup::finish();
        return;
    }
    if cli.soak {
        let quick = cli.soak_reads < soak::FULL_READS;
        let out = cli.out.unwrap_or_else(|| {
            repo_root().join(if quick {
                "target/karu-soak-quick.md"
            } else {
                "RELIABILITY.md"
            })
        });
        let code = soak::run(cli.soak_reads, cli.soak_seed, &out);
        cleanup::finish();
        std::process::exit(code);
    }
    let scale = if cli.quick {
        Scale::QUICK
    } else if cli.issue_scale {
        Scale::ISSUE
    } else {
        Scale::FULL
    };
    let opts = cli.opts();
    let started = Instant::now();
    let workloads: Vec<Workload> = opts
        .workloads
        .iter()
        .map(|&id| workload(id, scale).sized())
        .collect();
    let profiles: Vec<Profile> = match &opts.profiles {
        Some(chosen) => chosen.clone(),
        None if opts.quick => vec![
            Profile::new(0, None),
            Profile::new(20, Some(Cap::Total(GBIT))),
        ],
        None => [0, 5, 20, 50]
            .into_iter()
            .flat_map(|rtt_ms| {
                [None, Some(Cap::Total(GBIT))]
                    .into_iter()
                    .map(move |cap| Profile::new(rtt_ms, cap))
            })
            .collect(),
    };
    let machine = report::machine();

    let mut servers = Vec::new();
    let mut notes = Vec::new();
    for id in &opts.servers {
        match id {
            ServerId::Testkit => {
                if workloads.iter().any(|w| w.written().is_some()) {
                    notes.push(
                        "testkit: P not run (the test kit server serves its generated content, \
                         not a written Parquet file)"
                            .into(),
                    );
                }
                // Nothing else to serve: no server (its bandwidth needs an object).
                if workloads.iter().any(|w| w.written().is_none()) {
                    servers.push(Server::testkit(&workloads));
                }
            }
            ServerId::Nginx => match Server::nginx(&workloads, opts.quick) {
                Ok(Some(s)) => servers.push(s),
                Ok(None) => {
                    notes.push("nginx: not run (quick mode without `KARU_TEST_NGINX_URL`)".into())
                }
                Err(e) => notes.push(format!("nginx: not run ({e})")),
            },
            ServerId::S3sFs if workloads.iter().any(servers::on_s3) => {
                match Server::s3(&workloads) {
                    Ok(s) => servers.push(s),
                    Err(e) => notes.push(format!("s3s-fs: not run ({e})")),
                }
            }
            ServerId::S3sFs => {}
        }
    }

    let mut rows = Vec::new();
    let mut links = Vec::new();
    for server in &servers {
        let direct = server.base();
        let mut measured = Vec::new();
        for &profile in &profiles {
            let mine: Vec<&Workload> = workloads
                .iter()
                .filter(|w| match opts.profiles {
                    Some(_) => server.serves(w),
                    None => server.runs(w, profile, opts.quick),
                })
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
                            rate_total: profile.total_cap(),
                            rate_per_connection: profile.connection_cap(),
                            slow_start: profile.slow_start,
                        },
                    )
                });
            let base = proxy
                .as_ref()
                .map_or(direct.clone(), |p| format!("http://{}", p.addr()));
            // An uncapped bound needs the path's bandwidth: what a plain many-connection client
            // gets on it (directly, or through a proxy without delay), measured just before the
            // profile's cells, since the share of the 2 cores the path gets moves during a run
            // (through the proxy on the test kit server 1.03 and 1.58 GB/s at the starts of two
            // runs, and 0.98 between them).
            let bandwidth = match profile.total_cap() {
                Some(cap) => report::Bandwidth::Cap(cap),
                None => report::Bandwidth::Measured {
                    rate: if proxy.is_some() {
                        let through = LatencyProxy::start(server.addr(), ProxyOptions::default());
                        server.measure_bandwidth(&format!("http://{}", through.addr()))
                    } else {
                        server.measure_bandwidth(&direct)
                    },
                    proxied: proxy.is_some(),
                },
            };
            let link = report::Link {
                profile,
                rtt: server.measure_rtt(&base),
                bandwidth,
            };
            say!(
                "{} {}: the bounds' round trip {:.2} ms, bandwidth {:.2} GB/s",
                server.name(),
                profile.label(),
                link.rtt.as_secs_f64() * 1e3,
                bandwidth.rate() / 1e9
            );
            measured.push(link);
            for w in mine {
                let t = server.target(base.clone());
                let at = Place {
                    server,
                    proxy: proxy.as_ref(),
                    target: &t,
                    link,
                };
                rows.extend(run_matrix(&at, w, &opts, scale));
            }
        }
        links.push((server.name().to_string(), measured));
    }
    drop(servers);
    let total = started.elapsed();
    let input = report::Input {
        rows: &rows,
        workloads: &workloads,
        machine: &machine,
        links: &links,
        notes: &notes,
        reps: opts.reps,
        quick: opts.quick,
        total,
        command: rerun_command(std::env::args().skip(1)),
    };
    // P's rows have a section of their own, so a run of P alone leaves the other tables (and
    // the chart drawn from them) as they are.
    let ran_p = rows.iter().any(|r| r.reader.parquet().is_some());
    if ran_p {
        report::write_parquet(&opts.out, &report::parquet(&input));
    }
    if !ran_p || rows.iter().any(|r| r.reader.parquet().is_none()) {
        report::write(&opts.out, &report::markdown(&input));
        let svg = report::chart_path(&opts.out);
        match chart::draw(
            &rows,
            "karu and its peers: wall time relative to the fastest reader",
            &svg,
        ) {
            Ok(()) => report::write_chart(&opts.out, &svg, &input),
            Err(e) => say!("could not draw {}: {e}", svg.display()),
        }
    }
    say!(
        "wrote {} ({:.0} s in all)",
        opts.out.display(),
        total.as_secs_f64()
    );
    cleanup::finish();
}

/// What a plan sends: its transfers, the bytes they fetch, the longest one's bytes, and how
/// many run at once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    pub transfers: u64,
    pub fetched: u64,
    pub longest: u64,
    pub concurrency: u64,
}

impl Shape {
    /// `transfers` of `length` bytes each, `concurrency` at a time.
    fn even(transfers: u64, length: u64, concurrency: u64) -> Shape {
        Shape {
            transfers,
            fetched: transfers * length,
            longest: length,
            concurrency,
        }
    }
}

/// The shape of a reader's plan for `w` (None: not plannable without running it, as for E,
/// where the bound uses the server's counts).
fn planned(reader: Reader, w: &Workload, t: &Target) -> Option<Shape> {
    let requested = w.requested();
    match w.kind {
        Kind::Ends(..) | Kind::Parquet(_) => return None,
        Kind::Download => {
            let chunks = requested.div_ceil(DOWNLOAD_CHUNK);
            let longest = DOWNLOAD_CHUNK.min(requested);
            let chunked = |transfers| Shape {
                transfers,
                fetched: requested,
                longest,
                concurrency: DOWNLOAD_PARALLELISM,
            };
            return Some(match reader {
                // A probe of min(chunk, 1 MiB) learns size and ETag, then chunks follow it.
                Reader::KaruDefault => {
                    let probe = DOWNLOAD_CHUNK.min(MIB).min(requested);
                    chunked(1 + (requested - probe).div_ceil(DOWNLOAD_CHUNK))
                }
                // A HEAD for the size, then the chunks.
                Reader::OsChunks => chunked(1 + chunks),
                _ => Shape::even(1, requested, 1),
            });
        }
        Kind::Reads => {}
    }
    let n = w.reads.len() as u64;
    let longest_read = w.reads.iter().map(|r| r.2).max().unwrap_or(0);
    Some(match reader {
        // karu's own plan is the guards plan (a cost plan depends on what the run measures).
        Reader::KaruDefault | Reader::KaruGap0 | Reader::KaruGuards => {
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
            Shape {
                transfers: p.transfers.len() as u64,
                fetched: p.fetched_bytes(),
                longest: p.transfers.iter().map(|t| t.length).max().unwrap_or(0),
                concurrency: u64::from(client.settings().concurrency()),
            }
        }
        Reader::OsRanges => {
            // object_store's `coalesce_ranges`: sort, merge while the gap is ≤ 1 MiB, fetch the
            // merged ranges 10 at a time.
            let mut shape = Shape::even(0, 0, 10);
            let mut add = |(start, end): (u64, u64)| {
                shape.transfers += 1;
                shape.fetched += end - start;
                shape.longest = shape.longest.max(end - start);
            };
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
                            if let Some(done) = cur {
                                add(done);
                            }
                            cur = Some((s, e));
                        }
                    }
                }
                if let Some(done) = cur {
                    add(done);
                }
            }
            shape
        }
        Reader::OsRange => Shape {
            transfers: n,
            fetched: requested,
            longest: longest_read,
            concurrency: KARU_CONCURRENCY as u64,
        },
        Reader::Naive | Reader::Curl | Reader::OsGet | Reader::OsChunks => Shape {
            transfers: n,
            fetched: requested,
            longest: longest_read,
            concurrency: 1,
        },
        // P's readers read only P, whose transfers their Parquet reader decides.
        Reader::PqOwn
        | Reader::PqKaruStore
        | Reader::PqObjectStore
        | Reader::PqOwnScan
        | Reader::PqKaruStoreScan
        | Reader::PqObjectStoreScan => return None,
    })
}

/// The lower bound of a plan of `shape` on a path whose requests take `rtt` (measured) and
/// whose new connections `handshake` first (every run is a fresh client, and a new connection
/// answers nothing before its handshake, through the proxy as over TCP): a round trip per
/// wave, the first connection's handshake, and the bytes at the bandwidth `bw`, or, where
/// each connection carries at most `per_connection`, at what the plan's connections carry
/// together, and no sooner than its longest transfer on one connection.
pub fn bound(
    shape: Shape,
    (rtt, handshake): (Duration, Duration),
    bw: f64,
    per_connection: Option<f64>,
) -> Duration {
    // A rate that is not positive (a path that measured nothing) bounds nothing: no panic.
    let secs = |bytes: u64, rate: f64| match bytes {
        0 => Duration::ZERO,
        _ => Duration::try_from_secs_f64(bytes as f64 / rate).unwrap_or(Duration::MAX),
    };
    let Shape {
        transfers,
        fetched,
        longest,
        concurrency,
    } = shape;
    let bytes = match per_connection {
        Some(pc) => {
            let streams = transfers.clamp(1, concurrency.max(1)) as f64;
            secs(fetched, bw.min(streams * pc)).max(secs(longest, pc))
        }
        None => secs(fetched, bw),
    };
    if transfers == 0 {
        return bytes;
    }
    let waves = transfers.div_ceil(concurrency.max(1));
    rtt.saturating_mul(u32::try_from(waves).unwrap_or(u32::MAX))
        .saturating_add(handshake)
        .saturating_add(bytes)
}

/// Where a workload runs: server, the proxy in front of it (if any), the readers' target,
/// and the network profile with what its bounds assume of the path.
struct Place<'a> {
    server: &'a Server,
    proxy: Option<&'a LatencyProxy>,
    target: &'a Target,
    link: report::Link,
}

/// The command that re-runs a run given `args`: the same arguments but `--out`, which only
/// says where the tables went (a committed file would otherwise name a scratch path).
fn rerun_command(mut args: impl Iterator<Item = String>) -> String {
    let mut kept = Vec::new();
    while let Some(a) = args.next() {
        if a == "--out" {
            args.next();
        } else if !a.starts_with("--out=") {
            kept.push(a);
        }
    }
    let mut command = String::from("cargo run --release -p karu-bench");
    if !kept.is_empty() {
        command.push_str(" -- ");
        command.push_str(&kept.join(" "));
    }
    command
}

/// A cell whose readers' median walls add up to less than this is short: its walls move
/// most between runs in proportion (a 15 ms job loses a third to one busy moment of the 2
/// cores), and its repetitions cost little, so it runs [`SHORT_CELL_REPS`] times as many.
/// With 5 repetitions, the medians of such cells moved by 5-10 % between full runs whose
/// plans were the same (testkit C at 20 ms: karu ÷ the guards 1.00 and 1.07).
pub const SHORT_CELL: Duration = Duration::from_secs(1);
/// How many times `--reps` a short cell ([`SHORT_CELL`]) runs.
pub const SHORT_CELL_REPS: usize = 3;

fn run_matrix(at: &Place<'_>, w: &Workload, opts: &Opts, scale: Scale) -> Vec<Row> {
    let Place {
        server,
        proxy,
        target: t,
        link,
    } = *at;
    let profile = link.profile;
    // The first connection's handshake: the proxy sleeps the profile's round trip (never
    // less) before it connects.
    let path = (link.rtt, Duration::from_millis(profile.rtt_ms));
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
    let mut reps = opts.reps;
    let mut rep = 0;
    while rep < reps {
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
            say!(
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
        rep += 1;
        // Decided once, when every reader has run `opts.reps` times.
        if rep == opts.reps
            && !opts.quick
            && rows.iter().map(Row::wall).sum::<Duration>() < SHORT_CELL
        {
            reps *= SHORT_CELL_REPS;
        }
    }
    for row in &mut rows {
        let shape = planned(row.reader, w, t).unwrap_or_else(|| {
            // E: the bound of what the reader actually sent (karu's read_ends has no plan to
            // ask for), at the concurrency it ran with.
            let conc = if row.reader == Reader::Naive {
                1
            } else {
                KARU_CONCURRENCY as u64
            };
            // What it sent, as if in equal transfers (the longest is at least their mean).
            let (transfers, fetched) = (median(&row.requests), median(&row.bytes));
            Shape {
                transfers,
                fetched,
                longest: fetched / transfers.max(1),
                concurrency: conc,
            }
        });
        let per_connection = profile.connection_cap().map(|c| c as f64);
        row.bound = bound(shape, path, link.bandwidth.rate(), per_connection);
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
    // The parent reads this line; if it is gone there is no one to tell.
    let _ = writeln!(std::io::stdout(), "{}", m.line());
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("karu-bench").chain(args.iter().copied()))
    }

    #[test]
    fn a_bound_counts_each_wave_and_the_first_handshake() {
        let ms = Duration::from_millis;
        let at = |n| (ms(n), ms(n));
        let shape = |transfers, fetched, concurrency| Shape {
            transfers,
            fetched,
            longest: fetched / u64::max(transfers, 1),
            concurrency,
        };
        // 130 transfers, 64 at a time: 3 waves and the handshake, at 20 ms.
        assert_eq!(bound(shape(130, 0, 64), at(20), 1e9, None), ms(80));
        // Waves take the measured round trip, the handshake the profile's.
        assert_eq!(
            bound(shape(130, 0, 64), (ms(22), ms(20)), 1e9, None),
            ms(86)
        );
        // One transfer of 1 GB at 1 GB/s: its two round trips and its bytes.
        let gb = shape(1, 1_000_000_000, 64);
        assert_eq!(bound(gb, at(50), 1e9, None), ms(1100));
        // At RTT 0 only the bytes count; nothing sent costs nothing.
        assert_eq!(
            bound(shape(10, 500_000, 1), at(0), 1e9, None),
            Duration::from_micros(500)
        );
        assert_eq!(bound(shape(0, 0, 64), at(20), 1e9, None), Duration::ZERO);
        // A path that measured no bandwidth bounds nothing, and does not panic.
        assert_eq!(bound(shape(1, 1, 64), at(20), 0.0, None), Duration::MAX);
    }

    #[test]
    fn a_bound_under_a_connection_cap_counts_the_plans_streams() {
        let ms = Duration::from_millis;
        let at = (ms(20), ms(20));
        let pc = Some(1e8);
        // One transfer of 1 GB: 10 s on its one connection, however fast the link.
        let one = Shape::even(1, 1_000_000_000, 64);
        assert_eq!(bound(one, at, 1e9, pc), ms(10_040));
        // 16 of 62.5 MB, 64 at a time: 16 streams carry 1.6 GB/s, the link 1 GB/s.
        let sixteen = Shape::even(16, 62_500_000, 64);
        assert_eq!(bound(sixteen, at, 1e9, pc), ms(1040));
        // 4 at a time: 400 MB/s, and no sooner than the longest transfer's 625 ms.
        let four = Shape::even(16, 62_500_000, 4);
        assert_eq!(bound(four, (ms(0), ms(0)), 1e9, pc), ms(2500));
        let uneven = Shape {
            longest: 500_000_000,
            ..sixteen
        };
        assert_eq!(bound(uneven, at, 1e9, pc), ms(5040));
    }

    #[test]
    fn the_rerun_command_leaves_out_where_the_tables_went() {
        let rerun = |a: &[&str]| rerun_command(a.iter().map(|s| s.to_string()));
        assert_eq!(rerun(&[]), "cargo run --release -p karu-bench");
        assert_eq!(
            rerun(&["--out", "/tmp/b.md", "--workloads", "P", "--out=/tmp/c.md"]),
            "cargo run --release -p karu-bench -- --workloads P"
        );
    }

    #[test]
    fn arguments_select_cells() {
        Cli::command().debug_assert();
        let o = parse(&[
            "--quick",
            "--workloads",
            "RS",
            "--servers",
            "testkit,s3s-fs",
            "--profiles",
            "0,20/1g",
        ])
        .unwrap()
        .opts();
        assert!(o.quick && o.reps == 1);
        assert_eq!(o.workloads, ['R', 'S']);
        assert!(o.servers == [ServerId::Testkit, ServerId::S3sFs]);
        let p = o.profiles.unwrap();
        assert!(p[0] == Profile::new(0, None));
        assert!(p[1] == Profile::new(20, Some(Cap::Total(GBIT))));
        let one = |v: &str| parse(&["--profiles", v]).unwrap().opts().profiles.unwrap()[0];
        let conn = one("5/conn");
        assert_eq!(conn.connection_cap(), Some(CONNECTION_RATE));
        assert_eq!(conn.total_cap(), None);
        assert_eq!(conn.label(), "5 ms, 100 MB/s a connection");
        let ss = one("20/ss");
        assert!(ss.slow_start && ss.cap.is_none());
        assert_eq!(ss.label(), "20 ms, uncapped, slow start");
        let s3 = one("20/conn/ss");
        assert!(s3.slow_start);
        assert_eq!(s3.connection_cap(), Some(CONNECTION_RATE));
        assert_eq!(s3.label(), "20 ms, 100 MB/s a connection, slow start");
        assert!(parse(&["--profiles", "20/ss/conn"]).is_err());
        let o = parse(&[]).unwrap().opts();
        assert!(!o.quick && o.reps == 5 && o.profiles.is_none() && o.servers.len() == 3);
        assert_eq!(o.workloads, workload::IDS);
        let soak = parse(&["--soak", "--soak-reads", "100"]).unwrap();
        assert!(soak.soak && soak.soak_reads == 100 && soak.soak_seed == 1);
        for bad in [
            &["--workloads", "RX"][..],
            &["--profiles", "20/2g"],
            &["--servers", "minio"],
            &["--soak-reads", "5"],
            &["--quick", "--issue-scale"],
            &["--reps", "0"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse(&["--help"]).err().map(|e| e.kind()),
            Some(clap::error::ErrorKind::DisplayHelp)
        );
    }
}
