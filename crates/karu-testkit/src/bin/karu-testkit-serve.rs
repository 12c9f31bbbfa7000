//! `karu-testkit-serve [--proxy HOST:PORT --rtt-ms N]`: runs the test kit for tests and
//! benchmarks outside Rust (the Python package's).
//!
//! Without options it runs the fault-injecting [`RangeServer`]; with `--proxy` a
//! [`LatencyProxy`] adding N ms of round trip in front of HOST:PORT. It prints its base URL
//! (`http://127.0.0.1:PORT`) as the first line of stdout, answers each `requests` line on
//! stdin with the number of HTTP requests the proxy has forwarded (the server answers 0), and
//! ends when its stdin closes, so it never outlives the process that started it.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use karu_testkit::proxy::{LatencyProxy, ProxyOptions};
use karu_testkit::server::RangeServer;

/// What runs: the server, or a proxy.
enum Running {
    Server(RangeServer),
    Proxy(LatencyProxy),
}

fn start(args: &[String]) -> Result<Running, String> {
    match args {
        [] => Ok(Running::Server(RangeServer::start())),
        [p, target, r, rtt] if p == "--proxy" && r == "--rtt-ms" => {
            let target: SocketAddr = target
                .parse()
                .map_err(|_| format!("--proxy wants HOST:PORT, got {target:?}"))?;
            let rtt: u64 = rtt
                .parse()
                .map_err(|_| format!("--rtt-ms wants milliseconds, got {rtt:?}"))?;
            let opts = ProxyOptions {
                delay: Duration::from_millis(rtt) / 2,
                ..ProxyOptions::default()
            };
            Ok(Running::Proxy(LatencyProxy::start(target, opts)))
        }
        _ => Err("usage: karu-testkit-serve [--proxy HOST:PORT --rtt-ms N]".into()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let running = match start(&args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("karu-testkit-serve: {e}");
            return ExitCode::from(2);
        }
    };
    let url = match &running {
        Running::Server(s) => s.url(""),
        Running::Proxy(p) => p.url(""),
    };
    let mut out = std::io::stdout().lock();
    // A parent that closed stdout cannot read answers; it still ends us through stdin.
    let _ = writeln!(out, "{}", url.trim_end_matches('/'));
    let _ = out.flush();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim() == "requests" {
            let n = match &running {
                Running::Server(_) => 0,
                Running::Proxy(p) => p.requests(),
            };
            let _ = writeln!(out, "{n}");
            let _ = out.flush();
        }
    }
    ExitCode::SUCCESS
}
