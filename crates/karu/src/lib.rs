//! karu reads exact byte ranges from local files, HTTP(S) servers and cloud object stores.
//!
//! A caller describes reads (a [`Locator`], an offset, a length, a destination and a tag);
//! karu plans them into as few transfers as its guards allow and completes each read on its
//! own, with its own status.

mod config;
mod error;
mod locator;

pub use config::{
    Config, Credentials, CredentialsKind, CredentialsProvider, HttpVersion, OptionSource, Settings,
    canonical_prefix, check_managed_headers, option_names, prefix_matches,
};
pub use error::{Error, Result, Status};
pub use locator::{Backend, Locator, Window, encode_key, redact_url};
