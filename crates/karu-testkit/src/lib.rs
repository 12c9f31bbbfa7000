//! Test support for karu: deterministic content (every byte a function of object and offset),
//! a fault-injecting range server ([`server::RangeServer`]), a latency/bandwidth proxy
//! ([`proxy::LatencyProxy`]), credential endpoints ([`sts::StsServer`],
//! [`container::ContainerServer`], [`imds::ImdsServer`]) and an S3 endpoint for wrong-region
//! and expired-token answers ([`s3_responder::S3Responder`]), all on loopback and usable from
//! plain synchronous tests.

#![warn(missing_docs)]

pub mod app_service_identity;
pub mod azure_imds;
mod background;
pub mod container;
pub mod content;
mod endpoint;
pub mod imds;
pub mod keys;
pub mod credential_endpoint;
pub mod microsoft_token;
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
