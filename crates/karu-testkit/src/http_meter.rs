//! Counts HTTP/1.1 exchanges passing through the [`LatencyProxy`](crate::LatencyProxy): requests
//! in the client's stream and response body bytes in the server's, so that a server that keeps
//! no log (an S3 emulator) can still be measured from outside.
//!
//! Each direction of a connection feeds its bytes, in order and in any split, to its own
//! parser. A request head pushes whether its response has a body (not for `HEAD`) onto a queue
//! the response parser pops. Bodies are framed by `Content-Length` or chunked encoding (counted
//! decoded); a response without either runs to the end of the connection. A stream that is not
//! HTTP/1.1 (TLS, HTTP/2, a head over 64 KiB) stops its parser: nothing more of that connection
//! is counted.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Largest request or response head the parser buffers.
const MAX_HEAD: usize = 64 << 10;

/// Totals over every connection of one proxy.
#[derive(Debug, Default)]
pub(crate) struct Totals {
    pub(crate) requests: AtomicU64,
    pub(crate) body_bytes: AtomicU64,
}

/// Where a parser is in its stream.
#[derive(Debug, PartialEq)]
enum State {
    /// Reading a head (start line and fields) into `head`.
    Head,
    /// Inside a body framed by a length: this many bytes to go.
    Fixed(u64),
    /// A chunk-size line, buffered in `head`.
    ChunkSize,
    /// Inside a chunk's data: this many bytes to go.
    ChunkData(u64),
    /// The CRLF after a chunk's data: this many bytes to go.
    ChunkEnd(u8),
    /// The trailer section after the last chunk, buffered in `head` until an empty line.
    Trailer,
    /// A body that runs until the connection ends.
    UntilClose,
    /// Not HTTP/1.1 as this parser knows it: ignore the rest.
    Lost,
}

/// Which side of the exchange a parser reads.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Side {
    Requests,
    Responses,
}

/// One direction of one connection.
#[derive(Debug)]
pub(crate) struct Meter {
    side: Side,
    state: State,
    head: Vec<u8>,
    /// Shared by the two directions of a connection: `true` for each request whose response
    /// carries no body (HEAD).
    bodiless: Arc<Mutex<VecDeque<bool>>>,
    totals: Arc<Totals>,
}

impl Meter {
    /// The two parsers of one connection: (client → server, server → client).
    pub(crate) fn pair(totals: &Arc<Totals>) -> (Meter, Meter) {
        let bodiless = Arc::new(Mutex::new(VecDeque::new()));
        let make = |side| Meter {
            side,
            state: State::Head,
            head: Vec::new(),
            bodiless: bodiless.clone(),
            totals: totals.clone(),
        };
        (make(Side::Requests), make(Side::Responses))
    }

    /// Takes the next bytes of this direction.
    pub(crate) fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            data = match self.state {
                State::Lost => return,
                State::UntilClose => {
                    self.body(data.len() as u64);
                    return;
                }
                State::Fixed(left) | State::ChunkData(left) => {
                    let n = left.min(data.len() as u64);
                    self.body(n);
                    let left = left - n;
                    self.state = match (&self.state, left) {
                        (State::Fixed(_), 0) => State::Head,
                        (State::Fixed(_), _) => State::Fixed(left),
                        (_, 0) => State::ChunkEnd(2),
                        _ => State::ChunkData(left),
                    };
                    &data[n as usize..]
                }
                State::ChunkEnd(left) => {
                    let n = usize::from(left).min(data.len());
                    self.state = match left - n as u8 {
                        0 => State::ChunkSize,
                        l => State::ChunkEnd(l),
                    };
                    &data[n..]
                }
                State::Head | State::ChunkSize | State::Trailer => {
                    // A head ends at an empty line; chunk-size and trailer lines at their CRLF.
                    let end = if self.state == State::Head {
                        b"\r\n\r\n".as_slice()
                    } else {
                        b"\r\n".as_slice()
                    };
                    // The terminator may straddle the previous feed: search from just before
                    // it. It cannot lie wholly in the old bytes, which were searched already.
                    let old = self.head.len();
                    let from = old.saturating_sub(end.len() - 1);
                    self.head.extend_from_slice(data);
                    let Some(at) = self.head[from..]
                        .windows(end.len())
                        .position(|w| w == end)
                        .map(|p| from + p + end.len())
                    else {
                        if self.head.len() > MAX_HEAD {
                            self.state = State::Lost;
                        }
                        return;
                    };
                    self.head.truncate(at);
                    let line = std::mem::take(&mut self.head);
                    self.state = match self.state {
                        State::ChunkSize => chunk_size(&line),
                        // The trailer section ends with an empty line.
                        State::Trailer if line.len() == 2 => State::Head,
                        State::Trailer => State::Trailer,
                        _ => self.on_head(&line),
                    };
                    &data[at - old..]
                }
            };
        }
    }

    fn body(&self, n: u64) {
        if self.side == Side::Responses {
            self.totals.body_bytes.fetch_add(n, Ordering::SeqCst);
        }
    }

    /// The state after a complete head.
    fn on_head(&mut self, head: &[u8]) -> State {
        let text = String::from_utf8_lossy(head);
        let mut lines = text.split("\r\n");
        let start: Vec<&str> = lines.next().unwrap_or("").split(' ').collect();
        let mut length = None;
        let mut chunked = false;
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = value.parse::<u64>().ok();
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.to_ascii_lowercase().ends_with("chunked");
            }
        }
        let framed = |length: Option<u64>| match (chunked, length) {
            (true, _) => State::ChunkSize,
            (false, Some(0)) => State::Head,
            (false, Some(n)) => State::Fixed(n),
            (false, None) => State::UntilClose,
        };
        let mut queue = self.bodiless.lock().unwrap_or_else(|e| e.into_inner());
        match self.side {
            Side::Requests => {
                let [method, _, version] = start[..] else {
                    return State::Lost;
                };
                if version != "HTTP/1.1" && version != "HTTP/1.0" {
                    return State::Lost;
                }
                self.totals.requests.fetch_add(1, Ordering::SeqCst);
                queue.push_back(method == "HEAD");
                // A request without a length or chunking has no body.
                framed(length.or(Some(0)))
            }
            Side::Responses => {
                let Some(status) = start.get(1).and_then(|s| s.parse::<u16>().ok()) else {
                    return State::Lost;
                };
                if (100..200).contains(&status) && status != 101 {
                    // An interim answer: the final one follows for the same request.
                    return State::Head;
                }
                let head_only = queue.pop_front().unwrap_or(false);
                if status == 101 {
                    return State::Lost;
                }
                if head_only || status == 204 || status == 304 {
                    State::Head
                } else {
                    framed(length)
                }
            }
        }
    }
}

/// The state after a chunk-size line (`<hex>[;ext]\r\n`).
fn chunk_size(line: &[u8]) -> State {
    let text = String::from_utf8_lossy(line);
    let hex = text.trim_end().split(';').next().unwrap_or("").trim();
    match u64::from_str_radix(hex, 16) {
        Ok(0) => State::Trailer,
        Ok(n) => State::ChunkData(n),
        Err(_) => State::Lost,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `requests` and `responses` in pieces of `split` bytes (alternating, requests
    /// first, as an exchange would) and returns (requests, response body bytes).
    fn count(requests: &[u8], responses: &[u8], split: usize) -> (u64, u64) {
        let totals = Arc::new(Totals::default());
        let (mut up, mut down) = Meter::pair(&totals);
        for piece in requests.chunks(split) {
            up.feed(piece);
        }
        for piece in responses.chunks(split) {
            down.feed(piece);
        }
        (
            totals.requests.load(Ordering::SeqCst),
            totals.body_bytes.load(Ordering::SeqCst),
        )
    }

    #[test]
    fn lengths_heads_and_chunks_at_every_split() {
        let requests = b"GET /a HTTP/1.1\r\nHost: x\r\nRange: bytes=0-9\r\n\r\n\
            HEAD /a HTTP/1.1\r\nHost: x\r\n\r\n\
            PUT /b HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello\
            GET /c HTTP/1.1\r\nHost: x\r\n\r\n\
            GET /d HTTP/1.1\r\nHost: x\r\n\r\n\
            GET /e HTTP/1.1\r\nHost: x\r\n\r\n";
        let responses = b"HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\n\r\n0123456789\
            HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n\
            HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n\
            HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
            4;x=y\r\nabcd\r\n10\r\n0123456789abcdef\r\n0\r\nTrailer: 1\r\n\r\n\
            HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz\r\n0\r\n\r\n\
            HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n";
        for split in 1..=responses.len() {
            assert_eq!(
                count(requests, responses, split),
                (6, 10 + 4 + 16 + 3),
                "{split}"
            );
        }
    }

    #[test]
    fn a_body_without_framing_runs_to_the_end() {
        let responses = b"HTTP/1.0 200 OK\r\n\r\nabcdefgh";
        assert_eq!(count(b"GET / HTTP/1.0\r\n\r\n", responses, 3), (1, 8));
    }

    #[test]
    fn other_protocols_are_not_counted() {
        let h2 = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nGET / HTTP/1.1\r\n\r\n";
        assert_eq!(count(h2, b"", 7), (0, 0));
        let tls = [0x16u8; MAX_HEAD + 10];
        assert_eq!(count(&tls, &tls, 1000), (0, 0));
    }
}
