//! Loopback throughput benchmark (issue 3, "Benchmarks"): karu against `curl` reading 1 GiB as
//! 128 ranges of 8 MiB, with CPU per GB. The output is the report: a markdown table on stdout,
//! progress on stderr.
//!
//! ```text
//! bash scripts/nginx.sh start /tmp/nginx.env        # optional: read from nginx;
//! . /tmp/nginx.env                                   # KARU_NGINX_FILES="big.bin:1073741824"
//! cargo bench -p karu-io --bench remote [-- --reps N]   # gives it a 1 GiB file
//! ```
//!
//! The reads through the latency proxy that this bench once ran (random 4 KiB and sparse
//! 64 KiB reads against karu's lower bound) moved to `crates/karu-bench` (issue 8), which runs
//! them, and more, side by side with object_store and a naive reader; see BENCHMARKS.md.
//!
//! 1 GiB as 128 reads of 8 MiB from nginx when `KARU_TEST_NGINX_URL` and
//! `KARU_TEST_NGINX_DIR` are set (the largest file in `$KARU_TEST_NGINX_DIR/www`, read
//! repeatedly if it is smaller than 1 GiB), else from the test kit server. karu (defaults, and
//! `KARU_COALESCE_GAP=0` so that it makes the same 128 requests as curl, and the latter into
//! reused caller buffers to show the cost of faulting in fresh memory) against one `curl`
//! process fetching the same 128 ranges with `--parallel --parallel-max 64`. CPU: karu is the
//! process's `getrusage(RUSAGE_SELF)` delta, minus the bench's own content checks
//! (`RUSAGE_THREAD` around them) and minus the test kit server's thread when that server is
//! in-process; curl is the `getrusage(RUSAGE_CHILDREN)` delta over its run (the only child).
//!
//! Every byte karu returns is counted and must add up to the bytes requested; every read's
//! status must be `Ok`; a sample of reads is checked byte for byte with `content::check`.

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use karu::{Client, Config, Locator, Read, Status};
use karu_testkit::{RangeServer, content};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

fn main() {
    let reps = std::env::args()
        .skip_while(|a| a != "--reps")
        .nth(1)
        .map(|v| v.parse::<usize>().expect("--reps takes a number"))
        .unwrap_or(3)
        .max(3);
    let started = Instant::now();
    let server = RangeServer::start();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# karu loopback benchmark\n\n{reps} repetitions per row, medians; machine: {} CPUs, \
         shared with other work.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    out.push_str(&loopback(&server, reps).table);
    let _ = writeln!(
        out,
        "\nTotal benchmark time {:.0} s.",
        started.elapsed().as_secs_f64()
    );
    print!("{out}");
    let _ = std::io::stdout().flush();
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
        check_cpu,
        buffers: back,
    }
}

// ---------------------------------------------------------------------------------------------
// Loopback throughput

struct Loopback {
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
    }
    Loopback { table }
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
