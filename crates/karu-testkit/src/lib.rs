//! Test support for karu: deterministic content (every byte a function of object and offset),
//! a fault-injecting range server ([`server::RangeServer`]) and a latency/bandwidth proxy
//! ([`proxy::LatencyProxy`]), all on loopback and usable from plain synchronous tests.

#![warn(missing_docs)]

mod background;
pub mod content;
mod http_meter;
pub mod proxy;
pub mod server;

pub use proxy::{LatencyProxy, ProxyOptions};
pub use server::{Logged, RangeServer};
