//! Test support for karu: deterministic content (every byte a function of object and offset),
//! a fault-injecting range server ([`server::RangeServer`]), a latency/bandwidth proxy
//! ([`proxy::LatencyProxy`]), credential endpoints ([`sts::StsServer`],
//! [`container::ContainerServer`], [`imds::ImdsServer`], [`google_token::GoogleTokenServer`],
//! [`gce_metadata::MetadataServer`]), an S3 endpoint for wrong-region and expired-token
//! answers ([`s3_responder::S3Responder`]), a Hugging Face-like hub ([`hub::HubServer`]) and
//! a token-checking object store ([`bearer_store::BearerStore`]), all on loopback and usable
//! from plain synchronous tests. The Azure identity endpoints
//! ([`microsoft_token::MicrosoftTokenServer`], [`azure_imds::AzureImds`],
//! [`app_service_identity::AppServiceIdentity`]) share
//! [`microsoft_token::IdentityEndpoint`]; every fake logs the requests it saw as [`Asked`].
//! [`echo::EchoServer`] answers errors that repeat the request, secrets included.

#![warn(missing_docs)]

pub mod app_service_identity;
pub mod azure_imds;
mod background;
pub mod bearer_store;
pub mod container;
pub mod content;
pub mod echo;
mod endpoint;
pub mod gce_metadata;
pub mod google_token;
mod http_meter;
pub mod hub;
pub mod imds;
pub mod keys;
pub mod microsoft_token;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod proxy;
pub mod s3_responder;
pub mod server;
pub mod sts;

pub use bearer_store::BearerStore;
pub use container::ContainerServer;
pub use echo::{EchoFormat, EchoServer};
pub use endpoint::Asked;
pub use gce_metadata::MetadataServer;
pub use google_token::{ExpiresIn, GoogleTokenServer};
pub use hub::HubServer;
pub use imds::ImdsServer;
pub use proxy::{LatencyProxy, ProxyOptions};
pub use s3_responder::{RegionHint, S3Request, S3Responder};
pub use server::{Logged, RangeServer};
pub use sts::StsServer;
