//! Small HTTP/1.1 clients for the testkit's own tests: a raw one over `std::net::TcpStream`
//! (exact control of the connection, sees truncation and resets) and one built on hyper.

#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

/// How a raw response ended.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// The body had its announced length.
    Complete,
    /// The peer closed (FIN) before the announced length.
    Eof,
    /// The connection was reset or failed with this error kind.
    Error(io::ErrorKind),
}

/// A response read by [`Raw`].
#[derive(Debug)]
pub struct RawResp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub end: End,
}

impl RawResp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn content_length(&self) -> Option<usize> {
        self.header("content-length").map(|v| v.parse().unwrap())
    }
}

/// One raw keep-alive connection.
pub struct Raw {
    stream: TcpStream,
    pending: Vec<u8>,
}

impl Raw {
    pub fn connect(addr: SocketAddr) -> Raw {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Raw {
            stream,
            pending: Vec::new(),
        }
    }

    /// Sends one request and reads its response (head, then `Content-Length` bytes of body or
    /// whatever arrives before the connection ends).
    pub fn request(&mut self, method: &str, target: &str, headers: &[(&str, &str)]) -> RawResp {
        let mut req = format!("{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        self.stream.write_all(req.as_bytes()).unwrap();

        let head_end = loop {
            if let Some(p) = self.pending.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            let mut buf = [0u8; 16384];
            let n = self.stream.read(&mut buf).expect("reading response head");
            assert!(n > 0, "connection closed before the response head");
            self.pending.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8(self.pending[..head_end].to_vec()).unwrap();
        self.pending.drain(..head_end);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (k, v) = l.split_once(':').unwrap();
                (k.trim().to_ascii_lowercase(), v.trim().to_string())
            })
            .collect();
        let mut resp = RawResp {
            status,
            headers,
            body: Vec::new(),
            end: End::Complete,
        };
        let want = if method == "HEAD" {
            0
        } else {
            resp.content_length().expect("content-length")
        };
        while self.pending.len() < want {
            let mut buf = [0u8; 65536];
            match self.stream.read(&mut buf) {
                Ok(0) => {
                    resp.end = End::Eof;
                    break;
                }
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(e) => {
                    resp.end = End::Error(e.kind());
                    break;
                }
            }
        }
        let n = want.min(self.pending.len());
        resp.body = self.pending.drain(..n).collect();
        resp
    }
}

/// One GET (or HEAD) on a fresh raw connection.
pub fn raw(addr: SocketAddr, method: &str, target: &str, headers: &[(&str, &str)]) -> RawResp {
    Raw::connect(addr).request(method, target, headers)
}

/// A response read with hyper.
#[derive(Debug)]
pub struct HyperResp {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Vec<u8>,
}

impl HyperResp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }
}

/// Sends `requests` one after the other on one hyper HTTP/1.1 connection.
pub fn hyper_get_many(addr: SocketAddr, requests: &[(&str, Vec<(&str, &str)>)]) -> Vec<HyperResp> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(conn);
        let mut out = Vec::new();
        for (target, headers) in requests {
            let mut b = hyper::Request::get(*target).header("host", addr.to_string());
            for (k, v) in headers {
                b = b.header(*k, *v);
            }
            let req = b.body(Empty::<bytes::Bytes>::new()).unwrap();
            let resp = sender.send_request(req).await.unwrap();
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let body = resp
                .into_body()
                .collect()
                .await
                .unwrap()
                .to_bytes()
                .to_vec();
            out.push(HyperResp {
                status,
                headers,
                body,
            });
        }
        out
    })
}

/// One GET with hyper on a fresh connection.
pub fn hyper_get(addr: SocketAddr, target: &str, headers: &[(&str, &str)]) -> HyperResp {
    hyper_get_many(addr, &[(target, headers.to_vec())])
        .pop()
        .unwrap()
}
