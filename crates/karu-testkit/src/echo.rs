//! `EchoServer`: answers every request with an error whose body repeats the request, as a
//! misconfigured endpoint, a debugging proxy or a hostile server may. Tests point a backend's
//! endpoint (or `KARU_HTTP_PROXY`) at it and check that no secret reaches karu's messages.
//!
//! * Any method and target, absolute-form proxy requests included, get the status given at
//!   start with a `text/plain` body.
//! * [`EchoFormat::Lines`]: the request line `METHOD TARGET HTTP/1.1`, then one `name: value`
//!   line per echoed header, CRLF-separated, as the request was written.
//! * [`EchoFormat::Values`]: the target, then every echoed header value, one per line, with
//!   no names: secrets no field name gives away.
//! * [`EchoServer::only`] echoes the named headers alone, in the order given (the summary in
//!   a message keeps only 200 characters, so a test puts what it looks for first); by
//!   default every header is echoed in arrival order.

use crate::endpoint::{Answer, Asked, Endpoint};

/// How the echo body shows the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EchoFormat {
    /// The request line and `name: value` header lines.
    Lines,
    /// The target and the header values, without names.
    Values,
}

struct State {
    status: u16,
    format: EchoFormat,
    only: Vec<String>,
}

/// An echoing endpoint on 127.0.0.1; see the [module docs](self).
pub struct EchoServer {
    endpoint: Endpoint<State>,
}

impl EchoServer {
    /// Starts answering every request with `status` and the echo in `format`.
    pub fn start(status: u16, format: EchoFormat) -> EchoServer {
        let state = State {
            status,
            format,
            only: Vec::new(),
        };
        EchoServer {
            endpoint: Endpoint::start("karu-testkit-echo", state, answer),
        }
    }

    /// Echoes only these headers (case-insensitive), in this order.
    pub fn only(self, headers: &[&str]) -> EchoServer {
        self.endpoint.state().only = headers.iter().map(|h| h.to_ascii_lowercase()).collect();
        self
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        self.endpoint.root()
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.endpoint.addr()
    }

    /// Every request so far.
    pub fn log(&self) -> Vec<Asked> {
        self.endpoint.log()
    }
}

fn answer(st: &mut State, asked: &Asked) -> Answer {
    let headers: Vec<(&str, &str)> = if st.only.is_empty() {
        asked
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect()
    } else {
        st.only
            .iter()
            .filter_map(|n| asked.header(n).map(|v| (n.as_str(), v)))
            .collect()
    };
    let mut lines = Vec::with_capacity(headers.len() + 1);
    match st.format {
        EchoFormat::Lines => {
            lines.push(format!("{} {} HTTP/1.1", asked.method, asked.target()));
            lines.extend(headers.iter().map(|(n, v)| format!("{n}: {v}")));
        }
        EchoFormat::Values => {
            lines.push(asked.target());
            lines.extend(headers.iter().map(|(_, v)| (*v).to_owned()));
        }
    }
    Answer::text(st.status, lines.join("\r\n"))
}
