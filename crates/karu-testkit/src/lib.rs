//! Test support for karu: deterministic content (every byte a function of object and offset),
//! a fault-injecting range server ([`server::RangeServer`]) and a latency/bandwidth proxy
//! ([`proxy::LatencyProxy`]), all on loopback and usable from plain synchronous tests.

#![warn(missing_docs)]

pub mod app_service_identity;
pub mod azure_imds;
mod background;
pub mod content;
pub mod credential_endpoint;
pub mod microsoft_token;
pub mod proxy;
pub mod server;

pub use proxy::{LatencyProxy, ProxyOptions};
pub use server::{Logged, RangeServer};
