//! `karu`: read exact byte ranges from local files, HTTP(S) and object stores.

mod h5;
mod units;

use std::io::{self, BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use karu::plan::{self, CostModel, Overrides, Policy};
use karu::{Client, Config, DownloadOptions, Error, Locator, Read, Status};

/// Read exact byte ranges from local files, HTTP(S) and object stores.
#[derive(Parser)]
#[command(name = "karu", version, about)]
struct Cli {
    /// Set a karu option (repeatable), e.g. `-c KARU_CONCURRENCY=16`.
    #[arg(short = 'c', long = "option", value_name = "NAME=VALUE", global = true)]
    options: Vec<String>,
    /// Ignore the environment (a hermetic configuration).
    #[arg(long, global = true)]
    hermetic: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Read LENGTH bytes at OFFSET and write them to stdout or a file.
    Read {
        /// Locator: a path, file://, http(s)://, s3://, gs://, az://, abfs://, hf://, source:// or /vsi*/.
        uri: String,
        /// Offset relative to the locator's window.
        offset: u64,
        /// Number of bytes.
        length: u64,
        /// Write to this file instead of stdout.
        #[arg(short, long)]
        output: Option<std::path::PathBuf>,
        /// Print the batch counters to stderr.
        #[arg(long)]
        stats: bool,
    },
    /// Print the visible size and strong ETag.
    Stat {
        /// Locator.
        uri: String,
    },
    /// Write the whole object to stdout, through ranged reads.
    Cat {
        /// Locator.
        uri: String,
    },
    /// Download the whole object into DEST: parallel ranged chunks pinned to one ETag, published
    /// atomically.
    Get {
        /// Locator.
        uri: String,
        /// Destination file (must not exist unless --overwrite).
        dest: std::path::PathBuf,
        /// Bytes per ranged request.
        #[arg(long, default_value_t = karu::DEFAULT_CHUNK_SIZE)]
        chunk_size: u64,
        /// Most chunks in flight.
        #[arg(long, default_value_t = karu::DEFAULT_PARALLELISM)]
        parallelism: u64,
        /// Replace an existing destination.
        #[arg(long)]
        overwrite: bool,
        /// Keep an interrupted download's state and continue it on the next run.
        #[arg(long)]
        resume: bool,
        /// Give up after this many seconds in all (default: from the size and
        /// KARU_REQUEST_TIMEOUT).
        #[arg(long, value_name = "SECONDS")]
        deadline: Option<u64>,
        /// Print the counters and the parallelism window's history to stderr.
        #[arg(long)]
        stats: bool,
    },
    /// Print the transfers the planner makes for `offset,length` lines, and (cost mode, the
    /// default) their predicted time on the given link.
    Plan {
        /// Locator.
        uri: String,
        /// File of `offset,length` lines, or `-` for stdin.
        #[arg(long)]
        ranges: String,
        #[command(flatten)]
        overrides: PlanOverrides,
        #[command(flatten)]
        link: PlanLink,
    },
    /// Inspect and read HDF5 files through the block-cached reader.
    #[command(subcommand)]
    H5(h5::H5Command),
}

/// The link a cost-model plan is made for; what is not given comes from the priors.
#[derive(Args)]
struct PlanLink {
    /// Round trip, e.g. `20ms`.
    #[arg(long, value_parser = units::duration)]
    rtt: Option<Duration>,
    /// All connections together, e.g. `1Gbit`, `100Mbit`, `200MB/s`.
    #[arg(long, value_parser = units::rate)]
    bandwidth: Option<u64>,
    /// One connection (default: the bandwidth when given). Only with both rates given may
    /// the plan cut a long transfer into pieces of its choosing; otherwise transfers over
    /// 32 MiB are cut at that size, as a client does until it has measured both.
    #[arg(long, value_parser = units::rate)]
    per_connection: Option<u64>,
    /// Transfers in flight (default: KARU_CONCURRENCY).
    #[arg(long)]
    concurrency: Option<u32>,
    /// Cost of one request besides its round trip, e.g. `100us`.
    #[arg(long, value_parser = units::duration)]
    per_request: Option<Duration>,
}

#[derive(Args)]
struct PlanOverrides {
    /// Largest gap merged (0 disables merging).
    #[arg(long)]
    gap: Option<u64>,
    /// Largest merged span.
    #[arg(long)]
    limit: Option<u64>,
    /// Most reads per transfer.
    #[arg(long)]
    parts: Option<u64>,
    /// Most fetched bytes per requested byte.
    #[arg(long)]
    amplification: Option<u64>,
}

/// The exit code of a failure with `status`: 10 plus the magnitude of a negative status
/// (11 malformed URI ... 24 precondition failed), and 30 plus a positive one (31 END,
/// 32 timeout), so that no two statuses share a code. 0 is success and 2 a usage error
/// (clap's). Computed from the C value, so a new status gets a code of its own too.
fn exit_code(status: Status) -> u8 {
    let code = status.code();
    let n = match code {
        0 => 0,
        c if c < 0 => 10 + c.unsigned_abs(),
        c => 30 + c.unsigned_abs(),
    };
    u8::try_from(n).unwrap_or(u8::MAX)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("karu: {e}");
            ExitCode::from(exit_code(e.status()))
        }
    }
}

fn client(cli: &Cli) -> Result<Client, Error> {
    let mut config = if cli.hermetic {
        Config::empty()
    } else {
        Config::from_env()
    };
    for opt in &cli.options {
        let (name, value) = opt.split_once('=').ok_or_else(|| {
            Error::new(Status::Config, format!("option '{opt}' is not NAME=VALUE"))
        })?;
        config.set(name, Some(value))?;
    }
    Client::new(&config)
}

fn io_err(e: io::Error) -> Error {
    Error::new(Status::Io, e.to_string())
}

fn run(cli: Cli) -> Result<(), Error> {
    let client = client(&cli)?;
    match cli.command {
        Command::Read {
            uri,
            offset,
            length,
            output,
            stats,
        } => {
            let object = Locator::parse(&uri)?;
            let batch = client.submit(vec![Read::new(&object, offset, length)])?;
            let done = batch.next().expect("one read gives one completion");
            if stats {
                eprintln!("{}", batch.stats());
                if object.is_remote() {
                    let e = client.link_estimate(&object);
                    eprintln!(
                        "measured: {} (rtt_samples={} rate_samples={} total_samples={})",
                        describe(&e.model),
                        e.rtt_samples,
                        e.rate_samples,
                        e.total_samples
                    );
                }
            }
            let data = done.into_result()?;
            match output {
                Some(path) => std::fs::write(&path, &data)
                    .map_err(|e| Error::new(Status::Io, format!("{}: {e}", path.display()))),
                None => io::stdout().lock().write_all(&data).map_err(io_err),
            }
        }
        Command::Stat { uri } => {
            let object = Locator::parse(&uri)?;
            let info = client.stat(&object)?;
            println!("size: {}", info.size);
            println!("etag: {}", info.etag.as_deref().unwrap_or(""));
            Ok(())
        }
        Command::Cat { uri } => cat(&client, &uri),
        Command::Get {
            uri,
            dest,
            chunk_size,
            parallelism,
            overwrite,
            resume,
            deadline,
            stats,
        } => {
            let options = DownloadOptions {
                chunk_size,
                parallelism,
                overwrite,
                resume,
                deadline: deadline.map(std::time::Duration::from_secs),
                ..DownloadOptions::default()
            };
            get(&client, &uri, &dest, &options, stats)
        }
        Command::Plan {
            uri,
            ranges,
            overrides,
            link,
        } => plan_command(&client, &uri, &ranges, &overrides, &link),
        Command::H5(command) => h5::run(&client, command),
    }
}

/// Streams the whole object in 8 MiB ranges, a few batches in flight ahead of the writer,
/// recycling their buffers (fresh pages cost more than the copy).
///
/// Never bytes of two versions: the first answer's strong ETag pins every chunk with
/// `If-Match`, so a replaced object fails with PRECONDITION instead of splicing. A remote
/// object without a strong ETag goes through [`cat_unpinned`]. Local files have no versions
/// to pin.
fn cat(client: &Client, uri: &str) -> Result<(), Error> {
    const CHUNK: u64 = 8 << 20;
    const AHEAD: usize = 4;
    let object = Locator::parse(uri)?;
    let info = client.stat(&object)?;
    if object.is_remote() && info.etag.is_none() {
        return cat_unpinned(client, &object);
    }
    let size = info.size;
    let mut out = io::stdout().lock();
    let mut next = 0u64;
    let mut inflight = std::collections::VecDeque::new();
    let mut spare: Vec<Vec<u8>> = Vec::new();
    while next < size || !inflight.is_empty() {
        while next < size && inflight.len() < AHEAD {
            let len = CHUNK.min(size - next);
            let mut read =
                Read::new(&object, next, len).into_buffer(spare.pop().unwrap_or_default());
            if let Some(etag) = &info.etag {
                read = read.if_match(etag);
            }
            inflight.push_back(client.submit(vec![read])?);
            next += len;
        }
        let batch = inflight.pop_front().expect("a batch in flight");
        let done = batch.next().expect("one read gives one completion");
        let data = done.into_result()?;
        out.write_all(&data).map_err(io_err)?;
        spare.push(data);
    }
    out.flush().map_err(io_err)
}

/// `cat` of a remote object with no strong ETag to pin chunks to: a download into a private
/// temporary directory, which applies the download rule for such objects (chunks pinned by
/// `If-Unmodified-Since` to the probe's Last-Modified and size; with no Last-Modified, one
/// stream restarted from the start; never a splice), then a copy to stdout.
fn cat_unpinned(client: &Client, object: &Locator) -> Result<(), Error> {
    let dir = tempfile::Builder::new()
        .prefix("karu-cat-")
        .tempdir()
        .map_err(|e| {
            Error::new(
                Status::Io,
                format!("cannot create a temporary directory: {e}"),
            )
        })?;
    let path = dir.path().join("object");
    client.download(object, &path, DownloadOptions::default())?;
    let mut file = std::fs::File::open(&path)
        .map_err(|e| Error::new(Status::Io, format!("{}: {e}", path.display())))?;
    let mut out = io::stdout().lock();
    io::copy(&mut file, &mut out).map_err(io_err)?;
    out.flush().map_err(io_err)
}

/// Set by SIGINT or SIGTERM during `karu get`: the download stops at its next progress call.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Routes SIGINT and SIGTERM to [`INTERRUPTED`], so an interrupted download cleans up.
fn catch_interrupts() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { libc::signal(signal, handler) };
    }
}

/// The transfer rate over the last few seconds, for the bar.
struct Rate {
    samples: std::collections::VecDeque<(Instant, u64)>,
}

impl Rate {
    const SPAN: Duration = Duration::from_secs(3);

    /// Records `done` bytes now; returns bytes per second over the window, once it spans
    /// some time.
    fn update(&mut self, done: u64) -> Option<f64> {
        let now = Instant::now();
        self.samples.push_back((now, done));
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > Self::SPAN)
        {
            self.samples.pop_front();
        }
        let (t0, d0) = *self.samples.front()?;
        let secs = now.duration_since(t0).as_secs_f64();
        (secs >= 0.2).then(|| done.saturating_sub(d0) as f64 / secs)
    }
}

/// `12.3 MiB/s ETA 5s` from a rate and what is left.
fn rate_text(rate: Option<f64>, left: u64) -> String {
    match rate {
        Some(r) if r > 0.0 => {
            let eta = (left as f64 / r).ceil() as u64;
            format!("{:.1} MiB/s ETA {}s", r / (1 << 20) as f64, eta)
        }
        _ => "-- MiB/s ETA --".to_owned(),
    }
}

/// Downloads with a live progress bar on a terminal (plain lines at every tenth otherwise),
/// prints a summary line, and on SIGINT or SIGTERM stops cleanly and exits 130.
fn get(
    client: &Client,
    uri: &str,
    dest: &std::path::Path,
    base: &DownloadOptions<'_>,
    stats: bool,
) -> Result<(), Error> {
    let object = Locator::parse(uri)?;
    catch_interrupts();
    let start = Instant::now();
    let bar = io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        // Redrawn several times a second even when no byte arrives.
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    });
    let mut tenths = 0;
    let mut rate = Rate {
        samples: Default::default(),
    };
    let progress = |done: u64, total: u64| {
        match &bar {
            Some(bar) => {
                bar.set_length(total);
                bar.set_position(done);
                bar.set_message(rate_text(rate.update(done), total - done.min(total)));
            }
            None => {
                // A tenth crossed (or the end): logs stay short whatever the object size.
                let now = done.saturating_mul(10).checked_div(total).unwrap_or(10);
                if now > tenths || done == total {
                    tenths = now;
                    eprintln!("{done}/{total} bytes");
                }
            }
        }
        !INTERRUPTED.load(Ordering::SeqCst)
    };
    let options = DownloadOptions {
        chunk_size: base.chunk_size,
        parallelism: base.parallelism,
        chunking: base.chunking,
        overwrite: base.overwrite,
        resume: base.resume,
        on_change: base.on_change,
        progress: Some(Box::new(progress)),
        deadline: base.deadline,
        max_throttled: base.max_throttled,
        stat: base.stat.clone(),
    };
    let result = client.download(&object, dest, options);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let r = match result {
        Err(e) if e.status() == Status::Cancelled && INTERRUPTED.load(Ordering::SeqCst) => {
            if base.resume {
                eprintln!(
                    "karu: interrupted; the partial download is kept: run `karu get {uri} {} --resume` to continue",
                    dest.display()
                );
            } else {
                eprintln!(
                    "karu: interrupted; nothing was published and the temporary file was removed"
                );
            }
            std::process::exit(130);
        }
        other => other?,
    };
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{}: {} bytes in {secs:.2} s ({:.1} MiB/s), {} requests, {} retries, {} throttled",
        dest.display(),
        r.size,
        r.size as f64 / secs.max(1e-9) / (1 << 20) as f64,
        r.requests,
        r.retries,
        r.throttled
    );
    if stats {
        let p = r.parallelism;
        eprintln!(
            "received_bytes={} retries={} throttled={} new_connections={} resumed={} \
             credential_refreshes={} requests={} resumed_chunks={}",
            r.received_bytes,
            r.retries,
            r.throttled,
            r.new_connections,
            r.resumed,
            r.credential_refreshes,
            r.requests,
            r.resumed_chunks
        );
        eprintln!(
            "parallelism: lowest={} final={} highest={} cuts={}",
            p.min, p.final_, p.max, p.cuts
        );
    }
    Ok(())
}

/// A cost model in words.
fn describe(m: &CostModel) -> String {
    let cap = m.max_transfer.map_or(String::new(), |max| {
        format!(
            ", transfers over {} MiB cut (one connection or the link unmeasured)",
            max >> 20
        )
    });
    format!(
        "rtt {}, per request {}, per connection {}, total {}, concurrency {}{cap}",
        units::show_duration(m.rtt),
        units::show_duration(m.per_request),
        units::show_rate(m.connection_rate),
        units::show_rate(m.total_rate),
        m.concurrency
    )
}

/// The link of `karu plan`: what was given, the priors for the rest, and the options whose
/// prior was used.
fn plan_link(client: &Client, given: &PlanLink) -> (CostModel, Vec<&'static str>) {
    let concurrency = given
        .concurrency
        .unwrap_or_else(|| client.settings().concurrency());
    let prior = CostModel::priors(concurrency);
    let model = CostModel {
        rtt: given.rtt.unwrap_or(prior.rtt),
        per_request: given.per_request.unwrap_or(prior.per_request),
        connection_rate: given
            .per_connection
            .or(given.bandwidth)
            .unwrap_or(prior.connection_rate),
        total_rate: given.bandwidth.unwrap_or(prior.total_rate),
        concurrency,
        // Given rates are measured ones; one alone leaves the other a guess.
        max_transfer: CostModel::transfer_cap(
            given.per_connection.is_some(),
            given.bandwidth.is_some(),
        ),
        total_known: given.bandwidth.is_some(),
    };
    let mut priors = Vec::new();
    if given.rtt.is_none() {
        priors.push("--rtt");
    }
    if given.bandwidth.is_none() {
        priors.push("--bandwidth");
    }
    if given.per_connection.is_none() && given.bandwidth.is_none() {
        priors.push("--per-connection");
    }
    if given.per_request.is_none() {
        priors.push("--per-request");
    }
    (model, priors)
}

fn plan_command(
    client: &Client,
    uri: &str,
    ranges: &str,
    o: &PlanOverrides,
    link: &PlanLink,
) -> Result<(), Error> {
    let object = Locator::parse(uri)?;
    let text = if ranges == "-" {
        let mut s = String::new();
        for line in io::stdin().lock().lines() {
            s.push_str(&line.map_err(io_err)?);
            s.push('\n');
        }
        s
    } else {
        std::fs::read_to_string(ranges)
            .map_err(|e| Error::new(Status::Io, format!("{ranges}: {e}")))?
    };
    let mut reads = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parsed = line
            .split_once(',')
            .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)));
        let (offset, length): (u64, u64) = parsed.ok_or_else(|| {
            Error::new(
                Status::Invalid,
                format!("{ranges}:{}: expected OFFSET,LENGTH, got '{line}'", n + 1),
            )
        })?;
        reads.push((offset, length));
    }
    let policy = client.policy().with(&Overrides {
        gap: o.gap,
        limit: o.limit,
        parts: o.parts,
        amplification: o.amplification,
        mode: None,
    })?;
    let requests: Vec<plan::Request<'_>> = reads
        .iter()
        .map(|&(offset, length)| plan::Request {
            locator: &object,
            offset,
            length,
            if_match: None,
        })
        .collect();
    // The cost plan (the default) unless the guards are chosen.
    let guards_mode = client
        .settings()
        .option("KARU_COALESCE_MODE", "")
        .is_some_and(|m| m.eq_ignore_ascii_case("guards"));
    let (model, priors) = plan_link(client, link);
    let guards = plan::plan(&requests, &policy);
    let planned = if guards_mode {
        guards.clone()
    } else {
        plan::plan_cost(&requests, &policy, &model)
    };
    let mut out = io::stdout().lock();
    let w = |out: &mut io::StdoutLock<'_>, s: String| writeln!(out, "{s}").map_err(io_err);
    w(
        &mut out,
        format!("mode: {}", if guards_mode { "guards" } else { "cost" }),
    )?;
    w(
        &mut out,
        format!(
            "policy: gap {} limit {} parts {} amplification {}",
            policy.gap, policy.limit, policy.parts, policy.amplification
        ),
    )?;
    w(
        &mut out,
        format!(
            "link: {}{}",
            describe(&model),
            if priors.is_empty() {
                String::new()
            } else {
                format!(" (priors for {})", priors.join(", "))
            }
        ),
    )?;
    let mut fetched = 0u64;
    for (i, t) in planned.transfers.iter().enumerate() {
        fetched += t.length;
        let parts = planned.parts_of(t);
        let pieces = parts
            .iter()
            .filter(|p| p.skip > 0 || p.length < reads[p.index].1);
        let pieces = pieces.count();
        w(
            &mut out,
            format!(
                "transfer {i}: bytes {}-{} ({} bytes, {} parts{})",
                t.offset,
                t.offset + t.length - 1,
                t.length,
                parts.len(),
                if pieces > 0 {
                    format!(", {pieces} of them pieces of a split read")
                } else {
                    String::new()
                }
            ),
        )?;
    }
    for (i, e) in &planned.rejected {
        w(&mut out, format!("rejected read {i}: {e}"))?;
    }
    let ratio = if planned.requested_bytes == 0 {
        0.0
    } else {
        fetched as f64 / planned.requested_bytes as f64
    };
    w(
        &mut out,
        format!(
            "reads: {}  transfers: {}  requested: {} bytes  fetched: {} bytes  fetched/requested: {ratio:.2}",
            reads.len(),
            planned.transfers.len(),
            planned.requested_bytes,
            fetched
        ),
    )?;
    let no_merge = plan::plan(&requests, &Policy { gap: 0, ..policy });
    w(
        &mut out,
        format!(
            "predicted: {}  (guards plan: {}, no merging: {})",
            units::show_duration(model.predict(&planned)),
            units::show_duration(model.predict(&guards)),
            units::show_duration(model.predict(&no_merge))
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every status has its own code, none is 0 (success) or 2 (usage) but `Ok`'s, and the
    /// codes scripts already use stay: 10 plus the magnitude of each negative status.
    #[test]
    fn every_status_has_a_distinct_exit_code() {
        let statuses: Vec<Status> = (-64..64).filter_map(Status::from_code).collect();
        assert_eq!(
            statuses.len(),
            17,
            "a status was added: give it a code and a test"
        );
        let mut seen = std::collections::HashMap::new();
        for s in statuses {
            let code = exit_code(s);
            if let Some(other) = seen.insert(code, s) {
                panic!("{s:?} and {other:?} share exit code {code}");
            }
            match s.code() {
                0 => assert_eq!(code, 0),
                c if c < 0 => assert_eq!(i32::from(code), 10 + c.abs(), "{s:?}"),
                c => assert_eq!(i32::from(code), 30 + c, "{s:?}"),
            }
            assert_ne!(code, 2, "{s:?} would look like a usage error");
        }
        assert_eq!(exit_code(Status::Timeout), 32);
        assert_eq!(exit_code(Status::Unsupported), 12);
        assert_eq!(exit_code(Status::End), 31);
        assert_eq!(exit_code(Status::Uri), 11);
    }
}
