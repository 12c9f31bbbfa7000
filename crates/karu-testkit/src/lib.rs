//! Test support for karu: deterministic content (every byte a function of object and offset),
//! a fault-injecting range server ([`server::RangeServer`]), a latency/bandwidth proxy
//! ([`proxy::LatencyProxy`]), credential endpoints ([`sts::StsServer`],
//! [`container::ContainerServer`], [`imds::ImdsServer`]) and an S3 endpoint for wrong-region
//! and expired-token answers ([`s3_responder::S3Responder`]), all on loopback and usable from
//! plain synchronous tests.

#![warn(missing_docs)]

mod background;
pub mod container;
pub mod content;
mod endpoint;
mod http_meter;
pub mod imds;
pub mod keys;
pub mod proxy;
pub mod s3_responder;
pub mod server;
pub mod sts;

pub use container::ContainerServer;
pub use imds::ImdsServer;
pub use proxy::{LatencyProxy, ProxyOptions};
pub use s3_responder::{RegionHint, S3Request, S3Responder};
pub use server::{Logged, RangeServer};
pub use sts::StsServer;
