//! `karu-testkit-serve`: runs the fault-injecting [`RangeServer`] for tests outside Rust (the
//! Python package's). Prints its base URL (`http://127.0.0.1:PORT`) as the first line of
//! stdout, then serves until its stdin closes, so it ends with the process that started it.

use std::io::{Read, Write};

use karu_testkit::server::RangeServer;

fn main() {
    let server = RangeServer::start();
    let url = server.url("");
    let mut out = std::io::stdout().lock();
    // A parent that closed stdout cannot read the URL; it still ends us through stdin.
    let _ = writeln!(out, "{}", url.trim_end_matches('/'));
    let _ = out.flush();
    drop(out);
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin().lock();
    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
}
