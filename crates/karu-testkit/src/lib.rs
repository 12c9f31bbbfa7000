//! Test support for karu: deterministic content (every byte a function of object and offset),
//! a fault-injecting range server ([`server::RangeServer`]) and a latency/bandwidth proxy
//! ([`proxy::LatencyProxy`]), fakes of credential endpoints ([`google_token`],
//! [`gce_metadata`]), of the Hugging Face hub ([`hub`]) and a token-checking object store
//! ([`bearer_store`]), all on loopback and usable from plain synchronous tests.

#![warn(missing_docs)]

mod background;
pub mod bearer_store;
pub mod content;
pub mod gce_metadata;
pub mod google_token;
pub mod hub;
mod plain;
pub mod proxy;
pub mod server;

pub use bearer_store::BearerStore;
pub use gce_metadata::MetadataServer;
pub use google_token::{ExpiresIn, GoogleTokenServer};
pub use hub::HubServer;
pub use plain::Asked;
pub use proxy::{LatencyProxy, ProxyOptions};
pub use server::{Logged, RangeServer};
