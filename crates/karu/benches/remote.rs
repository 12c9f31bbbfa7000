//! Remote reads benchmark (issue 3, "Benchmarks"): karu against the lower bound of its own plan
//! through a latency proxy, and loopback throughput against `curl`. The output is the report:
//! markdown tables on stdout, progress on stderr.
//!
//! ```text
//! bash scripts/nginx.sh start /tmp/nginx.env        # optional, for the loopback part;
//! . /tmp/nginx.env                                   # KARU_NGINX_FILES="big.bin:1073741824"
//! cargo bench -p karu --bench remote [-- --reps N]   # gives it a 1 GiB file
//! ```
//!
//! * **Through the proxy** ([`LatencyProxy`], one-way delay 10 ms, so RTT 20 ms, in front of the
//!   test kit's [`RangeServer`]): (a) 10,000 random 4 KiB reads in a 1 GiB object, (b) 1,000
//!   sparse 64 KiB reads at 1 MiB stride, and (b) again behind a 1 Gbit/s total cap; each with
//!   karu's defaults and with `KARU_COALESCE_GAP=0`. Every repetition uses a fresh client (so its
//!   connections are opened, and counted, in that run) and a cleared server log. Requests and
//!   bytes are counted from the server's log; connections by the server's accept counter.
//!   Lower bound: `⌈transfers ÷ concurrency⌉ × RTT + fetched bytes ÷ bandwidth`, with the
//!   transfers and bytes of karu's plan (`karu::plan::plan`, no I/O) and the proxy's cap as the
//!   bandwidth, or, without a cap, the best loopback throughput measured in part 2. The bound
//!   adds latency and transfer time; with many connections they overlap, so a run may beat it.
//!   A plain blocking HTTP/1.1 client sends the same planned ranges through the same proxy,
//!   which shows the floor of this set-up (proxy and server share the 2 cores with karu).
//! * **Loopback**: 1 GiB as 128 reads of 8 MiB from nginx when `KARU_TEST_NGINX_URL` and
//!   `KARU_TEST_NGINX_DIR` are set (the largest file in `$KARU_TEST_NGINX_DIR/www`, read
//!   repeatedly if it is smaller than 1 GiB), else from the test kit server. karu (defaults, and
//!   `KARU_COALESCE_GAP=0` so that it makes the same 128 requests as curl, and the latter into
//!   reused caller buffers to show the cost of faulting in fresh memory) against one `curl`
//!   process fetching the same 128 ranges with `--parallel --parallel-max 64`. CPU: karu is the
//!   process's `getrusage(RUSAGE_SELF)` delta, minus the bench's own content checks
//!   (`RUSAGE_THREAD` around them) and minus the test kit server's thread when that server is
//!   in-process; curl is the `getrusage(RUSAGE_CHILDREN)` delta over its run (the only child).
//!
//! Every byte karu returns is counted and must add up to the bytes requested; every read's
//! status must be `Ok`; a sample of reads is checked byte for byte with `content::check`.

use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use karu::plan::{Request, plan};
use karu::{Client, Config, Locator, Read, Status};
use karu_testkit::server::Logged;
use karu_testkit::{LatencyProxy, ProxyOptions, RangeServer, content};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// One-way delay of the proxy; RTT is twice this.
const DELAY: Duration = Duration::from_millis(10);
/// 1 Gbit/s in bytes per second.
const GBIT: u64 = 125_000_000;

fn main() {
    let reps = std::env::args()
        .skip_while(|a| a != "--reps")
        .nth(1)
        .map(|v| v.parse::<usize>().expect("--reps takes a number"))
        .unwrap_or(3)
        .max(3);
    let only = std::env::args()
        .skip_while(|a| a != "--only")
        .nth(1)
        .unwrap_or_default();
    let started = Instant::now();
    let server = RangeServer::start();

    let mut out = String::new();
    let _ = writeln!(
        out,
        "# karu remote benchmark\n\n{reps} repetitions per row, medians; machine: {} CPUs, \
         shared with other work.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    // Part 2 first: its throughput is the bandwidth of the uncapped lower bounds.
    let loopback = if only == "remote" {
        Loopback {
            rows: Vec::new(),
            table: String::new(),
        }
    } else {
        loopback(&server, reps)
    };
    if only == "loopback" {
        print!("{out}{}", loopback.table);
        return;
    }
    // Without part 2 (`--only remote`), 1 GB/s stands in for the loopback throughput.
    let bandwidth = loopback
        .rows
        .iter()
        .map(|r| r.gbps * 1e9)
        .fold(0.0f64, f64::max)
        .max(if loopback.rows.is_empty() { 1e9 } else { 0.0 });

    let open = LatencyProxy::start(
        server.addr(),
        ProxyOptions {
            delay: DELAY,
            ..ProxyOptions::default()
        },
    );
    let capped = LatencyProxy::start(
        server.addr(),
        ProxyOptions {
            delay: DELAY,
            rate_total: Some(GBIT),
            ..ProxyOptions::default()
        },
    );

    let random = random_offsets(10_000, GIB / (4 * KIB), 0x5eed);
    let sparse: Vec<u64> = (0..1000).map(|i| i * MIB).collect();
    let workloads = [
        ("(a) 10,000 random 4 KiB", &open, None, &random, 4 * KIB),
        ("(b) 1,000 sparse 64 KiB", &open, None, &sparse, 64 * KIB),
        (
            "(b) 1,000 sparse 64 KiB, 1 Gbit/s cap",
            &capped,
            Some(GBIT),
            &sparse,
            64 * KIB,
        ),
    ];
    let mut rows = Vec::new();
    for (label, proxy, cap, offsets, len) in workloads {
        for gap in [None, Some(0)] {
            let w = Workload {
                label,
                proxy,
                cap,
                offsets,
                len,
                gap,
            };
            rows.push(remote(&server, &w, reps, bandwidth));
        }
    }

    let _ = writeln!(
        out,
        "## Through the latency proxy (RTT {} ms) to the test kit server, object 1 GiB\n",
        (DELAY * 2).as_millis()
    );
    let _ = writeln!(
        out,
        "Lower bound (LB) = ⌈transfers ÷ concurrency⌉ × RTT + fetched bytes ÷ bandwidth, with \
         karu's planned transfers and bytes; bandwidth = the cap, or without one the best \
         loopback throughput of part 2 ({:.2} GB/s). Requests, bytes and connections are \
         counted by the server; each repetition starts a new client, so its connections \
         (and their extra handshake RTT, which the bound leaves out) are part of it. \
         \"plain client\": the floor of this set-up, a blocking HTTP/1.1 client with one \
         thread and keep-alive connection per concurrency slot sending karu's planned \
         ranges through the same proxy (median wall). The bound adds latency and transfer time, \
         which overlap across connections, so a run can beat it.\n",
        bandwidth / 1e9
    );
    let _ = writeln!(
        out,
        "| workload | coalescing | transfers planned | server requests | server bytes | \
         fetched ÷ requested | connections | retries | wall (median) | wall (all) | LB | \
         karu ÷ LB | ≤ 1.25× | plain client | plain ÷ LB | karu ÷ plain |"
    );
    let _ = writeln!(
        out,
        "|---|---|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|:-:|--:|--:|--:|"
    );
    for r in &rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.2} | {} | {} | {} | {} | {} | {:.2} | {} | {} | {:.2} | {:.2} |",
            r.label,
            r.policy,
            r.transfers,
            r.requests,
            human(r.server_bytes),
            r.server_bytes as f64 / r.requested as f64,
            r.connections,
            r.retries,
            ms(r.wall),
            r.all.iter().map(|d| ms(*d)).collect::<Vec<_>>().join(", "),
            ms(r.bound),
            r.wall.as_secs_f64() / r.bound.as_secs_f64(),
            if r.wall.as_secs_f64() <= 1.25 * r.bound.as_secs_f64() {
                "yes"
            } else {
                "**no**"
            },
            ms(r.plain),
            r.plain.as_secs_f64() / r.bound.as_secs_f64(),
            r.wall.as_secs_f64() / r.plain.as_secs_f64(),
        );
    }
    out.push('\n');
    out.push_str(&loopback.table);
    let _ = writeln!(
        out,
        "\nTotal benchmark time {:.0} s.",
        started.elapsed().as_secs_f64()
    );
    print!("{out}");
    let _ = std::io::stdout().flush();
}

/// `n` 4 KiB-aligned offsets below `blocks × 4 KiB` (splitmix64, fixed seed; repeats possible).
fn random_offsets(n: usize, blocks: u64, seed: u64) -> Vec<u64> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            (z % blocks) * 4 * KIB
        })
        .collect()
}

fn client(gap: Option<u64>) -> Client {
    let mut config = Config::empty();
    if let Some(gap) = gap {
        config
            .set("KARU_COALESCE_GAP", Some(&gap.to_string()))
            .expect("a valid gap");
    }
    Client::new(&config).expect("a client")
}

/// What one batch returned.
struct Outcome {
    wall: Duration,
    stats: karu::BatchStats,
    /// CPU seconds this thread spent in `content::check` (the bench's, not karu's).
    check_cpu: f64,
    /// The completions' buffers by read index, when the reads were given buffers.
    buffers: Vec<Vec<u8>>,
}

/// Submits `len`-byte reads at `offsets` of `object` (content `name`), takes every completion,
/// and checks them: status `Ok`, the full length, every byte counted; each read whose index is
/// a multiple of `check_every` is compared with the content, the others in `[0, probe)`.
/// With `buffers` (one per read), the reads go into them and they come back in the outcome.
#[allow(clippy::too_many_arguments)]
fn read_all(
    client: &Client,
    object: &Locator,
    name: &str,
    offsets: &[u64],
    len: u64,
    check_every: usize,
    probe: usize,
    buffers: Vec<Vec<u8>>,
) -> Outcome {
    let reuse = !buffers.is_empty();
    let mut given = buffers.into_iter();
    let reads: Vec<Read> = offsets
        .iter()
        .enumerate()
        .map(|(i, &o)| {
            let r = Read::new(object, o, len).tag(i as u64);
            match given.next() {
                Some(b) => r.into_buffer(b),
                None => r,
            }
        })
        .collect();
    let mut back: Vec<Vec<u8>> = Vec::new();
    if reuse {
        back.resize_with(offsets.len(), Vec::new);
    }
    let t = Instant::now();
    let batch = client.submit(reads).expect("submit");
    let mut count = 0usize;
    let mut bytes = 0u64;
    let mut check_cpu = 0.0;
    for done in &batch {
        assert_eq!(
            done.status(),
            Status::Ok,
            "read {}: {:?}",
            done.tag,
            done.result
        );
        let data = done.bytes();
        assert_eq!(data.len() as u64, len, "read {} came back short", done.tag);
        let i = done.tag as usize;
        let check = if i.is_multiple_of(check_every) {
            data
        } else {
            &data[..probe.min(data.len())]
        };
        let c0 = thread_cpu();
        if let Err(e) = content::check(name, offsets[i], check) {
            panic!("read {i}: {e}");
        }
        check_cpu += thread_cpu() - c0;
        bytes += data.len() as u64;
        count += 1;
        if reuse {
            back[i] = done.buffer.expect("an owned buffer");
        }
    }
    let wall = t.elapsed();
    assert_eq!(count, offsets.len(), "every read completes once");
    assert_eq!(bytes, offsets.len() as u64 * len, "every byte counted");
    Outcome {
        wall,
        stats: batch.stats(),
        check_cpu,
        buffers: back,
    }
}

struct Workload<'a> {
    label: &'a str,
    proxy: &'a LatencyProxy,
    cap: Option<u64>,
    offsets: &'a [u64],
    len: u64,
    gap: Option<u64>,
}

struct RemoteRow {
    label: String,
    policy: String,
    transfers: usize,
    requests: String,
    requested: u64,
    server_bytes: u64,
    connections: String,
    retries: u64,
    wall: Duration,
    all: Vec<Duration>,
    bound: Duration,
    /// Median wall time of [`plain_client`] on the same transfers.
    plain: Duration,
}

/// Bytes the server sent in 200/206 bodies, from the ranges in its log.
fn served_bytes(log: &[Logged], size: u64) -> u64 {
    log.iter()
        .map(|l| match (l.status, l.range.as_deref()) {
            (200, _) => size,
            (206, Some(r)) => {
                let (f, e) = r
                    .strip_prefix("bytes=")
                    .and_then(|r| r.split_once('-'))
                    .expect("a closed range");
                let (f, e): (u64, u64) = (f.parse().unwrap(), e.parse().unwrap());
                e.min(size - 1) + 1 - f
            }
            _ => 0,
        })
        .sum()
}

/// "n" when every repetition saw the same value, else "min–max".
fn spread(v: &[u64]) -> String {
    let (lo, hi) = (v.iter().min().unwrap(), v.iter().max().unwrap());
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}–{hi}")
    }
}

fn remote(server: &RangeServer, w: &Workload<'_>, reps: usize, bandwidth: f64) -> RemoteRow {
    let name = "bench/remote.bin";
    let object = Locator::parse(&w.proxy.url(&format!("ok/{name}?size={GIB}"))).unwrap();
    let policy = match w.gap {
        None => "defaults".to_string(),
        Some(g) => format!("KARU_COALESCE_GAP={g}"),
    };
    eprintln!("remote: {} / {policy}", w.label);

    let probe = client(w.gap);
    let requests: Vec<Request> = w
        .offsets
        .iter()
        .map(|&o| Request {
            locator: &object,
            offset: o,
            length: w.len,
            if_match: None,
        })
        .collect();
    let planned = plan(&requests, &probe.policy());
    let concurrency = u64::from(probe.settings().concurrency());
    drop(probe);
    let transfers = planned.transfers.len() as u64;
    let fetched = planned.fetched_bytes();
    let bw = w.cap.map_or(bandwidth, |c| c as f64);
    let rtt = DELAY * 2;
    let bound =
        rtt * transfers.div_ceil(concurrency) as u32 + Duration::from_secs_f64(fetched as f64 / bw);

    let ranges: Vec<(u64, u64)> = planned
        .transfers
        .iter()
        .map(|t| (t.offset, t.length))
        .collect();
    let target = format!("/ok/{name}?size={GIB}");
    let (mut walls, mut reqs, mut bytes, mut conns, mut retries) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut plain = Vec::new();
    for rep in 0..reps {
        // Let the previous client's connections close before counting.
        std::thread::sleep(Duration::from_millis(100));
        let c = client(w.gap);
        server.clear_log();
        let accepted = server.connections_accepted();
        // Check every 16th read in full, the first 64 bytes of the others.
        let o = read_all(&c, &object, name, w.offsets, w.len, 16, 64, Vec::new());
        let log = server.log();
        conns.push(server.connections_accepted() - accepted);
        reqs.push(log.len() as u64);
        bytes.push(served_bytes(&log, GIB));
        retries.push(o.stats.retries);
        assert_eq!(o.stats.transfers, transfers, "karu's plan is the planner's");
        assert_eq!(o.stats.requested_bytes, planned.requested_bytes);
        eprintln!(
            "  rep {rep}: {:.3} s, {} requests, {} bytes, {} connections (karu: {} new), {} retries",
            o.wall.as_secs_f64(),
            log.len(),
            bytes[rep],
            conns[rep],
            o.stats.new_connections,
            o.stats.retries
        );
        walls.push(o.wall);
        drop(c);
        std::thread::sleep(Duration::from_millis(100));
        let p = plain_client(w.proxy.addr(), &target, &ranges, concurrency as usize);
        eprintln!("  plain client: {:.3} s", p.as_secs_f64());
        plain.push(p);
    }
    let mut sorted = walls.clone();
    sorted.sort();
    plain.sort();
    RemoteRow {
        label: w.label.to_string(),
        policy,
        transfers: transfers as usize,
        requests: spread(&reqs),
        requested: planned.requested_bytes,
        server_bytes: *bytes.iter().max().unwrap(),
        connections: spread(&conns),
        retries: retries.iter().sum(),
        wall: sorted[sorted.len() / 2],
        all: walls,
        bound,
        plain: plain[plain.len() / 2],
    }
}

/// The floor of the test set-up: a plain blocking HTTP/1.1 client (one thread and one
/// keep-alive connection per slot, `conns` slots, no parsing beyond status and length, bodies
/// read into a scratch buffer and dropped) sending the same ranges to the same address. Returns
/// the wall time; panics on anything but a 206 of the right length.
fn plain_client(addr: SocketAddr, target: &str, ranges: &[(u64, u64)], conns: usize) -> Duration {
    let next = AtomicUsize::new(0);
    let total = AtomicU64::new(0);
    let t = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..conns.min(ranges.len()) {
            scope.spawn(|| {
                let stream = TcpStream::connect(addr).expect("connect");
                stream.set_nodelay(true).unwrap();
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::with_capacity(256 * KIB as usize, stream);
                let mut scratch = vec![0u8; 256 * KIB as usize];
                let mut line = String::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(off, len)) = ranges.get(i) else {
                        break;
                    };
                    write!(
                        writer,
                        "GET {target} HTTP/1.1\r\nHost: {addr}\r\nRange: bytes={off}-{}\r\n\r\n",
                        off + len - 1
                    )
                    .unwrap();
                    let mut length = None;
                    let mut status = String::new();
                    loop {
                        line.clear();
                        reader.read_line(&mut line).unwrap();
                        let l = line.trim_end();
                        if l.is_empty() {
                            break;
                        }
                        if status.is_empty() {
                            status = l.to_string();
                        } else if let Some((k, v)) = l.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            length = Some(v.trim().parse::<u64>().unwrap());
                        }
                    }
                    assert!(status.contains(" 206 "), "plain client got {status}");
                    assert_eq!(length, Some(len), "plain client: body length");
                    let mut left = len;
                    while left > 0 {
                        let n = left.min(scratch.len() as u64) as usize;
                        reader.read_exact(&mut scratch[..n]).unwrap();
                        left -= n as u64;
                    }
                    total.fetch_add(len, Ordering::Relaxed);
                }
            });
        }
    });
    let wall = t.elapsed();
    let want: u64 = ranges.iter().map(|r| r.1).sum();
    assert_eq!(total.into_inner(), want, "plain client read every byte");
    wall
}

// ---------------------------------------------------------------------------------------------
// Loopback throughput

struct LoopbackRow {
    gbps: f64,
}

struct Loopback {
    rows: Vec<LoopbackRow>,
    table: String,
}

/// CPU seconds (user, system) from a `rusage`.
fn cpu(ru: &libc::rusage) -> (f64, f64) {
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

fn rusage(who: libc::c_int) -> (f64, f64) {
    // SAFETY: getrusage only writes the struct it is given.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(who, &mut ru), 0);
        cpu(&ru)
    }
}

/// CPU seconds (user, system) of the whole process.
fn self_cpu() -> (f64, f64) {
    rusage(libc::RUSAGE_SELF)
}

/// CPU seconds (user + system) of the calling thread.
fn thread_cpu() -> f64 {
    let (u, s) = rusage(libc::RUSAGE_THREAD);
    u + s
}

/// CPU seconds (user, system) of this process's test kit threads (the in-process server and
/// proxies), from `/proc/self/task/*/stat`, so they can be taken out of karu's figure.
fn testkit_cpu() -> (f64, f64) {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let mut total = (0.0, 0.0);
    for task in std::fs::read_dir("/proc/self/task").into_iter().flatten() {
        let Ok(task) = task else { continue };
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ...: comm may hold spaces, so split after the last ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with("karu-testkit") {
            continue;
        }
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        // Fields 14 and 15 of stat (utime, stime) are 11 and 12 after the state field (3).
        let (u, s): (f64, f64) = (fields[11].parse().unwrap(), fields[12].parse().unwrap());
        total.0 += u / ticks;
        total.1 += s / ticks;
    }
    total
}

/// The source of the loopback reads: a URL, the content name, the file size.
struct Source {
    url: String,
    name: String,
    size: u64,
    what: String,
    in_process: bool,
}

/// The largest regular file under `dir`, with its path relative to `dir`.
fn largest_file(dir: &Path) -> Option<(PathBuf, u64)> {
    let mut best: Option<(PathBuf, u64)> = None;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).ok()?.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                stack.push(e.path());
            } else if meta.is_file() && best.as_ref().is_none_or(|b| meta.len() > b.1) {
                best = Some((e.path().strip_prefix(dir).ok()?.to_path_buf(), meta.len()));
            }
        }
    }
    best
}

fn source(server: &RangeServer) -> Source {
    if let (Ok(url), Ok(dir)) = (
        std::env::var("KARU_TEST_NGINX_URL"),
        std::env::var("KARU_TEST_NGINX_DIR"),
    ) {
        match largest_file(&Path::new(&dir).join("www")) {
            Some((path, size)) if size >= 8 * MIB => {
                let name = path.to_string_lossy().into_owned();
                return Source {
                    url: format!("{}/{name}", url.trim_end_matches('/')),
                    what: format!("nginx, file `{name}` of {}", human(size)),
                    name,
                    size,
                    in_process: false,
                };
            }
            _ => eprintln!("loopback: no nginx file of 8 MiB or more; using the test kit server"),
        }
    }
    let name = "bench/loopback.bin".to_string();
    Source {
        url: server.url(&format!("ok/{name}?size={GIB}")),
        what: format!(
            "the test kit server in this process (its thread's CPU is left out of karu's), \
             object of {}",
            human(GIB)
        ),
        name,
        size: GIB,
        in_process: true,
    }
}

/// Times one reader: wall, CPU seconds (user, system).
struct Sample {
    wall: Duration,
    user: f64,
    sys: f64,
}

/// With `buffers` (empty: karu allocates), the reads reuse them and they are put back.
fn karu_sample(
    src: &Source,
    offsets: &[u64],
    gap: Option<u64>,
    buffers: &mut Vec<Vec<u8>>,
) -> Sample {
    let c = client(gap);
    let object = Locator::parse(&src.url).unwrap();
    // A new client, like a new curl process: both open their connections in the timed run.
    let (cpu0, kit0) = (self_cpu(), testkit_cpu());
    // Check each 8 MiB read's first 4 KiB; every 16th read in full.
    let given = std::mem::take(buffers);
    let o = read_all(&c, &object, &src.name, offsets, 8 * MIB, 16, 4096, given);
    *buffers = o.buffers;
    let (cpu1, kit1) = (self_cpu(), testkit_cpu());
    // The bench's own checking is user time on this thread: not karu's.
    let (mut user, mut sys) = (cpu1.0 - cpu0.0 - o.check_cpu, cpu1.1 - cpu0.1);
    if src.in_process {
        user -= kit1.0 - kit0.0;
        sys -= kit1.1 - kit0.1;
    }
    Sample {
        wall: o.wall,
        user,
        sys,
    }
}

fn curl_sample(src: &Source, offsets: &[u64], config: &Path) -> Sample {
    let mut cfg = String::new();
    for &o in offsets {
        let _ = writeln!(
            cfg,
            "url = \"{}\"\nrange = \"{}-{}\"\noutput = \"/dev/null\"",
            src.url,
            o,
            o + 8 * MIB - 1
        );
    }
    std::fs::write(config, cfg).unwrap();
    // curl's own CPU: the children's rusage grows by exactly this child once it is waited for
    // (the bench starts no other processes).
    let before = rusage(libc::RUSAGE_CHILDREN);
    let t = Instant::now();
    let mut child = Command::new("curl")
        .args(["-s", "--no-progress-meter", "--fail"])
        .args(["--parallel", "--parallel-max", "64"])
        .args(["-w", "%{http_code} %{size_download}\\n", "-K"])
        .arg(config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("curl runs");
    let mut text = String::new();
    let read = child
        .stdout
        .take()
        .expect("piped stdout")
        .read_to_string(&mut text);
    let status = child.wait().expect("curl is waited for");
    let wall = t.elapsed();
    let after = rusage(libc::RUSAGE_CHILDREN);
    read.expect("curl's report");
    assert!(status.success(), "curl failed: {status}");
    let mut bytes = 0u64;
    for line in text.lines() {
        let (code, n) = line.split_once(' ').unwrap();
        assert_eq!(code, "206", "curl got {line}");
        bytes += n.parse::<u64>().unwrap();
    }
    assert_eq!(
        bytes,
        offsets.len() as u64 * 8 * MIB,
        "curl fetched every byte"
    );
    Sample {
        wall,
        user: after.0 - before.0,
        sys: after.1 - before.1,
    }
}

fn loopback(server: &RangeServer, reps: usize) -> Loopback {
    let src = source(server);
    eprintln!("loopback: {}", src.what);
    // 128 reads of 8 MiB; a file smaller than 1 GiB is read round and round.
    let usable = src.size / (8 * MIB) * (8 * MIB);
    let offsets: Vec<u64> = (0..GIB / (8 * MIB))
        .map(|i| (i * 8 * MIB) % usable)
        .collect();
    let total = offsets.len() as u64 * 8 * MIB;
    let config = std::env::temp_dir().join(format!("karu-bench-curl-{}.cfg", std::process::id()));

    // (label, Some(gap) for karu or None for curl, reuse buffers). The third row is a
    // diagnostic: the same reads into caller buffers (`Read::into_buffer`) touched once before
    // timing and reused, which takes the page faults of fresh destinations out.
    let readers: [(&str, Option<Option<u64>>, bool); 4] = [
        ("karu (defaults)", Some(None), false),
        ("karu (`KARU_COALESCE_GAP=0`)", Some(Some(0)), false),
        (
            "karu (`KARU_COALESCE_GAP=0`, reused caller buffers)",
            Some(Some(0)),
            true,
        ),
        ("curl `--parallel --parallel-max 64`", None, false),
    ];
    let mut reused: Vec<Vec<u8>> = offsets
        .iter()
        .map(|_| vec![1u8; 8 * MIB as usize])
        .collect();
    let mut samples: Vec<Vec<Sample>> = readers.iter().map(|_| Vec::new()).collect();
    // One untimed round to warm the page cache and the server, then the readers in turn.
    let _ = karu_sample(&src, &offsets, Some(0), &mut Vec::new());
    for _ in 0..reps {
        for (i, (_, r, reuse)) in readers.iter().enumerate() {
            let s = match r {
                Some(gap) if *reuse => karu_sample(&src, &offsets, *gap, &mut reused),
                Some(gap) => karu_sample(&src, &offsets, *gap, &mut Vec::new()),
                None => curl_sample(&src, &offsets, &config),
            };
            samples[i].push(s);
        }
    }
    let _ = std::fs::remove_file(&config);

    let mut table = String::new();
    let _ = writeln!(
        table,
        "## Loopback throughput: {} as {} reads of 8 MiB, from {}\n",
        human(total),
        offsets.len(),
        src.what
    );
    let _ = writeln!(
        table,
        "| reader | GB/s (median) | CPU s per GB (median) | user + sys s per GB | \
         wall (median) | GB/s (all) |"
    );
    let _ = writeln!(table, "|---|--:|--:|--:|--:|---|");
    let mut rows = Vec::new();
    for ((label, _, _), s) in readers.iter().zip(&samples) {
        let gb = total as f64 / 1e9;
        let mut rates: Vec<f64> = s.iter().map(|s| gb / s.wall.as_secs_f64()).collect();
        let all = rates
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut cpus: Vec<(f64, f64, f64)> = s
            .iter()
            .map(|s| ((s.user + s.sys) / gb, s.user / gb, s.sys / gb))
            .collect();
        let mut walls: Vec<Duration> = s.iter().map(|s| s.wall).collect();
        rates.sort_by(f64::total_cmp);
        cpus.sort_by(|a, b| a.0.total_cmp(&b.0));
        walls.sort();
        let gbps = rates[rates.len() / 2];
        let _ = writeln!(
            table,
            "| {label} | {gbps:.2} | {:.3} | {:.3} + {:.3} | {} | {all} |",
            cpus[cpus.len() / 2].0,
            cpus[cpus.len() / 2].1,
            cpus[cpus.len() / 2].2,
            ms(walls[walls.len() / 2])
        );
        rows.push(LoopbackRow { gbps });
    }
    Loopback { rows, table }
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

fn human(b: u64) -> String {
    if b >= GIB && b.is_multiple_of(MIB) {
        format!("{:.2} GiB", b as f64 / GIB as f64)
    } else if b >= MIB {
        format!("{:.1} MiB", b as f64 / MIB as f64)
    } else {
        format!("{:.1} KiB", b as f64 / KIB as f64)
    }
}
