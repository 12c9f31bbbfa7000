//! The `chaos` route: each request is served as if it had come to a fault route drawn at
//! random, so that a soak can fault a chosen share of its requests with every kind of fault.
//!
//! ```text
//! http://127.0.0.1:PORT/chaos/<name>?size=<N>[&seed=S][&per_mille=P][&kinds=K1,K2...]
//! ```
//!
//! Draw `i` (counted over every chaos request of the server, from 0, in the order the requests
//! arrive) is a function of `seed` (default 0) and `i` alone: it faults the request when it falls
//! under `per_mille` (default 50, i.e. 5 %), and then picks one of `kinds` (default: all of the
//! table) and the fault's parameters. A faulted request is answered exactly as the route of its
//! kind answers with those parameters; the others as `ok`. So the sequence of faults is fixed by
//! the seed, and which request meets which fault depends only on the order of arrival. The log
//! ([`RangeServer::log`]) records the route that served each request as its `fault`.
//!
//! | kind | served as |
//! |---|---|
//! | `truncate` | `truncate` with `k` uniform in `[0, L)`, `L` the length of the range served |
//! | `reset` | `reset`, with `k` drawn the same way |
//! | `wrong-content-range` | `wrong-content-range` with a shift of 1 to 4096 bytes |
//! | `ignore-range` | `ignore-range`: 200 with the whole object instead of 206 |
//! | `503` | `status` with code 503 and `Retry-After` 0 or 1 (seconds) |
//! | `etag-change` | `etag-change` one version ahead; half of them also with `if_match=ignore`, as a server that does not evaluate `If-Match` and sends the new version |
//! | `trickle` | `trickle` at 32 to 256 KiB/s |
//! | `redirect` | `redirect` back to `chaos` (whose next request draws again): 1 to 3 hops, code 301, 302, 307 or 308, half of them crossing to the other listener, half with a relative `Location` |
//!
//! [`RangeServer::chaos_counts`] tells how many requests each kind served, counted when drawn.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Query, RangeServer, Shared, span};

/// The path segment of the chaos route.
pub const ROUTE: &str = "chaos";

/// What a chaos request was served as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// No fault: the `ok` route.
    Ok,
    /// The body cut short, then FIN.
    Truncate,
    /// The connection reset inside the body.
    Reset,
    /// A 206 for another range than the one asked for.
    WrongContentRange,
    /// 200 with the whole object instead of 206.
    IgnoreRange,
    /// 503 with `Retry-After`.
    Unavailable,
    /// The object one version ahead (new ETag and content).
    EtagChange,
    /// A slow body.
    Trickle,
    /// One or more redirects back to the chaos route.
    Redirect,
}

impl Kind {
    /// Every fault kind, in the order of the module's table.
    pub const FAULTS: [Kind; 8] = [
        Kind::Truncate,
        Kind::Reset,
        Kind::WrongContentRange,
        Kind::IgnoreRange,
        Kind::Unavailable,
        Kind::EtagChange,
        Kind::Trickle,
        Kind::Redirect,
    ];

    /// The kind's name, as in `kinds=` and the module's table.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Ok => "ok",
            Kind::Truncate => "truncate",
            Kind::Reset => "reset",
            Kind::WrongContentRange => "wrong-content-range",
            Kind::IgnoreRange => "ignore-range",
            Kind::Unavailable => "503",
            Kind::EtagChange => "etag-change",
            Kind::Trickle => "trickle",
            Kind::Redirect => "redirect",
        }
    }

    fn index(self) -> usize {
        match self {
            Kind::Ok => 0,
            k => 1 + Kind::FAULTS.iter().position(|f| *f == k).unwrap_or(0),
        }
    }
}

/// The chaos route's draw counter and its counts per kind.
#[derive(Default)]
pub(super) struct Chaos {
    draws: AtomicU64,
    counts: Mutex<[u64; 1 + Kind::FAULTS.len()]>,
}

/// splitmix64: one well-mixed word per input.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Chaos {
    /// The route and query that serve this chaos request: draws the next fault (or none) for
    /// a request of object `name` with the raw `query` and `Range` header `range`.
    pub(super) fn rewrite(
        &self,
        shared: &Shared,
        name: &str,
        query: &str,
        range: Option<&str>,
    ) -> Result<(&'static str, String), String> {
        let q = Query::parse(query);
        let seed = q.num("seed")?.unwrap_or(0);
        let per_mille = q.num("per_mille")?.unwrap_or(50);
        let kinds: Vec<Kind> = match q.get("kinds") {
            None | Some("") => Kind::FAULTS.to_vec(),
            Some(list) => list
                .split(',')
                .map(|k| {
                    Kind::FAULTS
                        .into_iter()
                        .find(|f| f.label() == k)
                        .ok_or_else(|| format!("unknown chaos kind {k:?}"))
                })
                .collect::<Result<_, _>>()?,
        };
        let size = match q.num("size")? {
            Some(s) => Some(s),
            None => shared.state().objects.get(name).map(|r| r.size),
        };
        let i = self.draws.fetch_add(1, Ordering::SeqCst);
        let base = mix(seed ^ mix(i));
        let word = |n: u64| mix(base.wrapping_add(n));
        let kind = if base % 1000 < per_mille {
            kinds[(word(1) % kinds.len() as u64) as usize]
        } else {
            Kind::Ok
        };
        self.counts.lock().unwrap_or_else(|e| e.into_inner())[kind.index()] += 1;
        // The length of what the range asks for, for a cut inside the body.
        let len = match (range, size) {
            (Some(r), Some(size)) => span(r, size).map_or(0, |(f, l)| l - f + 1),
            (None, Some(size)) => size,
            _ => 0,
        };
        let p = word(2);
        let (route, extra) = match kind {
            Kind::Ok => ("ok", String::new()),
            Kind::Truncate => ("truncate", format!("k={}", p % len.max(1))),
            Kind::Reset => ("reset", format!("k={}", p % len.max(1))),
            Kind::WrongContentRange => ("wrong-content-range", format!("shift={}", 1 + p % 4096)),
            Kind::IgnoreRange => ("ignore-range", String::new()),
            Kind::Unavailable => (
                "status",
                format!("code=503&times={}&retry_after={}", u64::MAX, p % 2),
            ),
            Kind::EtagChange => (
                "etag-change",
                if p % 2 == 0 {
                    "at=0".to_string()
                } else {
                    "at=0&if_match=ignore".to_string()
                },
            ),
            Kind::Trickle => ("trickle", format!("rate={}", (32 + p % 225) * 1024)),
            Kind::Redirect => (
                "redirect",
                format!(
                    "to={ROUTE}&hops={}&code={}&cross={}&relative={}",
                    1 + p % 3,
                    [301, 302, 307, 308][((p >> 8) % 4) as usize],
                    (p >> 16) % 2,
                    (p >> 17) % 2
                ),
            ),
        };
        let query = match (query.is_empty(), extra.is_empty()) {
            (_, true) => query.to_string(),
            (true, false) => extra,
            (false, false) => format!("{query}&{extra}"),
        };
        Ok((route, query))
    }
}

impl RangeServer {
    /// How many chaos requests each kind served so far, `Kind::Ok` included; kinds never drawn
    /// are listed with 0.
    pub fn chaos_counts(&self) -> Vec<(Kind, u64)> {
        let counts = *self
            .shared
            .chaos
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        std::iter::once(Kind::Ok)
            .chain(Kind::FAULTS)
            .map(|k| (k, counts[k.index()]))
            .collect()
    }
}
