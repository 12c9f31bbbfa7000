//! `karu-testkit-proxy TARGET DELAY_MS`: runs a [`LatencyProxy`] on 127.0.0.1 in front of
//! TARGET (`HOST:PORT`, loopback) with DELAY_MS of one-way delay, prints its URL, and stops
//! when its standard input closes, so that benchmarks in other languages can add a round
//! trip to a server.
//!
//! [`LatencyProxy`]: karu_testkit::proxy::LatencyProxy

use std::io::Read;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use karu_testkit::proxy::{LatencyProxy, ProxyOptions};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [target, delay] = args.as_slice() else {
        eprintln!("usage: karu-testkit-proxy HOST:PORT DELAY_MS");
        return ExitCode::from(2);
    };
    let (Ok(target), Ok(delay)) = (target.parse::<SocketAddr>(), delay.parse::<u64>()) else {
        eprintln!("karu-testkit-proxy: TARGET must be IP:PORT and DELAY_MS a number");
        return ExitCode::from(2);
    };
    if !target.ip().is_loopback() {
        eprintln!("karu-testkit-proxy: TARGET must be a loopback address");
        return ExitCode::from(2);
    }
    let proxy = LatencyProxy::start(
        target,
        ProxyOptions {
            delay: Duration::from_millis(delay),
            ..ProxyOptions::default()
        },
    );
    println!("{}", proxy.url(""));
    // Until the caller closes our stdin (or exits).
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    ExitCode::SUCCESS
}
