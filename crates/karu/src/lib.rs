//! karu reads exact byte ranges from local files, HTTP(S) servers and cloud object stores.
//!
//! A caller describes reads (a [`Locator`], an offset, a length, a destination and a tag);
//! karu plans them into as few transfers as its guards allow and completes each read on its
//! own, with its own status.
//!
//! ```
//! # let path = std::env::temp_dir().join("karu-doc-lib.bin");
//! # std::fs::write(&path, (0..=255u8).collect::<Vec<_>>()).unwrap();
//! let client = karu::Client::new(&karu::Config::empty())?;
//! let object = karu::Locator::parse(path.to_str().unwrap())?;
//! let batch = client.submit(vec![
//!     karu::Read::new(&object, 16, 4).tag(1),
//!     karu::Read::new(&object, 300, 4).tag(2), // past the end: Range, got 0
//! ])?;
//! for done in &batch {
//!     match done.tag {
//!         1 => assert_eq!(done.bytes(), &[16, 17, 18, 19]),
//!         _ => assert_eq!(done.status(), karu::Status::Range),
//!     }
//! }
//! # Ok::<(), karu::Error>(())
//! ```

#![warn(missing_docs)]

mod backends;
mod batch;
mod client;
mod config;
#[cfg(test)]
mod cost_tests;
mod credentials;
mod dest;
mod download;
mod engine;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod locator;
pub mod plan;
mod probe;
mod read;
mod reader;
mod transport;
mod validate;

pub use batch::{Batch, BatchStats, Completion, Completions, Next, NextAsync};
pub use client::Client;
pub use config::{
    Config, Credentials, CredentialsKind, CredentialsProvider, HttpVersion, OptionSource, Settings,
    option_names,
};
pub use download::{
    Chunking, DEFAULT_CHUNK_SIZE, DEFAULT_PARALLELISM, DownloadOptions, DownloadResult, OnChange,
    ParallelismStats, Progress,
};
pub use error::{Error, Result, Status};
pub use locator::{Backend, Locator, Window};
pub use probe::{Ends, ObjectInfo};
pub use read::Read;
#[cfg(feature = "hdf5")]
pub use reader::h5;
pub use reader::{Cursor, Reader, ReaderOptions, ReaderStats};

/// The README's examples, compiled (and run where they may) as doc tests, so the README
/// cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
