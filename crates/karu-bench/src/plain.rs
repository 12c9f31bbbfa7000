//! A plain blocking HTTP/1.1 client: the naive reader (one connection, one GET per read, in
//! order) and the yardstick that measures what the loopback path can carry (many connections).
//! It parses only the status line and `Content-Length`, which is all a range GET needs here.
//! Against the S3 emulator it signs each request (SigV4).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::sigv4::S3Access;

/// One keep-alive connection.
pub struct Conn {
    addr: SocketAddr,
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    line: String,
    signer: Option<S3Access>,
}

impl Conn {
    /// A connection to `addr`; with `signer`, every request is signed with its keys.
    pub fn open(addr: SocketAddr, signer: Option<&S3Access>) -> Conn {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        let writer = stream.try_clone().expect("clone the socket");
        Conn {
            addr,
            writer,
            reader: BufReader::with_capacity(256 << 10, stream),
            line: String::new(),
            signer: signer.cloned(),
        }
    }

    /// GET `target` with `Range: bytes=<range>`; the body goes into `out` (cleared first).
    /// Panics on anything but a 206: a benchmark must not time failures.
    pub fn get(&mut self, target: &str, range: &str, out: &mut Vec<u8>) {
        let host = self.addr.to_string();
        let mut head = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nRange: bytes={range}\r\n");
        if let Some(s) = &self.signer {
            for (name, value) in s.sign_get(&host, target, range) {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
        }
        head.push_str("\r\n");
        self.writer
            .write_all(head.as_bytes())
            .expect("send a request");
        let mut status = String::new();
        let mut length = None;
        loop {
            self.line.clear();
            self.reader
                .read_line(&mut self.line)
                .expect("a header line");
            let l = self.line.trim_end();
            if l.is_empty() {
                break;
            }
            if status.is_empty() {
                status = l.to_string();
            } else if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = Some(v.trim().parse::<usize>().expect("a length"));
            }
        }
        assert!(status.contains(" 206 "), "{target} {range}: got {status}");
        let length = length.expect("Content-Length");
        out.clear();
        out.resize(length, 0);
        self.reader.read_exact(out).expect("the body");
    }
}

/// `http://host:port[/...]` → the socket address.
pub fn addr_of(base: &str) -> SocketAddr {
    let rest = base.strip_prefix("http://").expect("an http:// URL");
    let hostport = rest.split('/').next().unwrap_or(rest);
    hostport.parse().expect("a 127.0.0.1:port address")
}

/// Fetches `ranges` (inclusive first-last) of `target` over `conns` keep-alive connections, each
/// taking the next range when its last one is done; bodies are read and dropped. Returns the wall
/// time and the bytes received.
pub fn parallel(
    addr: SocketAddr,
    target: &str,
    ranges: &[(u64, u64)],
    conns: usize,
    signer: Option<&S3Access>,
) -> (Duration, u64) {
    let next = AtomicUsize::new(0);
    let total = AtomicU64::new(0);
    let t = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..conns.min(ranges.len()) {
            scope.spawn(|| {
                let mut c = Conn::open(addr, signer);
                let mut body = Vec::new();
                while let Some(&(off, len)) = ranges.get(next.fetch_add(1, Ordering::Relaxed)) {
                    c.get(target, &format!("{off}-{}", off + len - 1), &mut body);
                    total.fetch_add(body.len() as u64, Ordering::Relaxed);
                }
            });
        }
    });
    (t.elapsed(), total.into_inner())
}
