//! Test support for karu: deterministic content (every byte a function of object and offset),
//! a fault-injecting range server ([`server::RangeServer`]) and a latency/bandwidth proxy
//! ([`proxy::LatencyProxy`]), credential endpoints ([`sts::StsServer`],
//! [`container::ContainerServer`], [`imds::ImdsServer`]), all on loopback and usable from
//! plain synchronous tests.

#![warn(missing_docs)]

mod background;
pub mod container;
pub mod content;
mod endpoint;
pub mod imds;
pub mod keys;
pub mod proxy;
pub mod server;
pub mod sts;

pub use container::ContainerServer;
pub use imds::ImdsServer;
pub use proxy::{LatencyProxy, ProxyOptions};
pub use server::{Logged, RangeServer};
pub use sts::StsServer;
