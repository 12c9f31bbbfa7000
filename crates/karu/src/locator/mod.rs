//! Locators: where bytes live. A URI or `/vsi*/` path is parsed once into a canonical identity
//! (backend, container, key) and an optional byte window. No I/O, no configuration.
//!
//! The work is split by concern: `uri` turns one terminal URI into its backend parts,
//! `window` handles `/vsisubfile/` and `#bytes=` and their composition, `encode` holds the
//! percent-encoding and redaction rules.

use std::sync::Arc;

use crate::error::{Error, Result, Status};

mod encode;
#[cfg(test)]
mod tests;
mod uri;
mod window;

pub use encode::{encode_key, redact_url};

/// A `Status::Uri` error: every parse failure but an unknown `/vsi*/` handler.
fn uri_error(message: impl Into<String>) -> Error {
    Error::new(Status::Uri, message)
}

/// Which backend serves an object.
///
/// ```
/// use karu::{Backend, Locator};
/// let object = Locator::parse("s3://bucket/key.bin")?;
/// assert_eq!(object.backend(), Backend::S3);
/// assert_eq!(object.backend().name(), "s3");
/// assert!(object.backend().is_remote());
/// assert!(!Locator::parse("/data/local.bin")?.backend().is_remote());
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Backend {
    /// A local file.
    File,
    /// A plain HTTP(S) URL.
    Http,
    /// Amazon S3 or an S3-compatible store.
    S3,
    /// Google Cloud Storage.
    Gcs,
    /// Azure Blob Storage.
    Azure,
    /// Azure Data Lake Storage Gen2 (the DFS endpoint).
    AzureDataLake,
    /// Hugging Face Hub.
    HuggingFace,
    /// Source Cooperative.
    Source,
}

impl Backend {
    /// True for every backend but local files.
    pub fn is_remote(self) -> bool {
        self != Backend::File
    }

    /// A short human name, used in messages ("s3", "http", ...).
    pub fn name(self) -> &'static str {
        match self {
            Backend::File => "file",
            Backend::Http => "http",
            Backend::S3 => "s3",
            Backend::Gcs => "gcs",
            Backend::Azure => "azure",
            Backend::AzureDataLake => "azure data lake",
            Backend::HuggingFace => "hugging face",
            Backend::Source => "source cooperative",
        }
    }
}

/// A byte window of an object: reads are relative to `offset` and may not leave it.
///
/// ```
/// use karu::{Locator, Window};
/// let object = Locator::parse("https://example.com/data.bin#bytes=100-199")?;
/// let w = object.window();
/// assert_eq!(w, Window { offset: 100, length: Some(100) });
/// assert_eq!(w.end(), Some(200));
/// let whole = Locator::parse("https://example.com/data.bin")?.window();
/// assert_eq!((whole.offset, whole.end()), (0, None)); // runs to the end of the object
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Window {
    /// Absolute offset of the window's first byte.
    pub offset: u64,
    /// Length of the window, or `None` when it runs to the end of the object.
    pub length: Option<u64>,
}

impl Window {
    /// Absolute offset one past the window's last byte, `None` when unbounded. Parsed
    /// locators always have a representable end.
    pub fn end(&self) -> Option<u64> {
        self.length.and_then(|l| self.offset.checked_add(l))
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Inner {
    backend: Backend,
    identity: String,
    target: String,
    container: String,
    key: String,
    window: Window,
}

/// A parsed locator. Cheap to clone (shared, immutable).
///
/// ```
/// let l = karu::Locator::parse("/vsisubfile/5_10,s3://bucket/key#bytes=100-199").unwrap();
/// assert_eq!(l.identity(), "/vsis3/bucket/key");
/// assert_eq!(l.window_offset(), 105);
/// assert_eq!(l.window_length(), Some(10));
/// assert!(l.is_remote());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Locator(Arc<Inner>);

impl Locator {
    /// Builds a locator from parsed parts (the parser's only constructor).
    pub(crate) fn from_parts(
        backend: Backend,
        identity: String,
        target: String,
        container: String,
        key: String,
        window: Window,
    ) -> Locator {
        Locator(Arc::new(Inner {
            backend,
            identity,
            target,
            container,
            key,
            window,
        }))
    }

    /// Parses a URI or `/vsi*/` path (see `spec.md` §4 for the forms). Errors are
    /// [`Status::Uri`], or [`Status::Unsupported`] for an unknown `/vsi*/` handler.
    pub fn parse(uri: &str) -> Result<Locator> {
        if uri.is_empty() {
            return Err(uri_error("empty URI"));
        }
        let Inner {
            backend,
            identity,
            target,
            container,
            key,
            window,
        } = window::parse_nested(uri, 0)?;
        Ok(Locator::from_parts(
            backend, identity, target, container, key, window,
        ))
    }

    /// The backend that serves this object.
    pub fn backend(&self) -> Backend {
        self.0.backend
    }

    /// True for every backend but local files.
    pub fn is_remote(&self) -> bool {
        self.0.backend.is_remote()
    }

    /// The canonical identity: reads with equal identities address the same object.
    pub fn identity(&self) -> &str {
        &self.0.identity
    }

    /// What the backend addresses: the local path, the HTTP URL without its `#bytes=`
    /// fragment, or for Hugging Face the endpoint path `/[kind/]owner/name/resolve/rev/path`.
    /// Equal to the identity for the other cloud backends.
    pub fn target(&self) -> &str {
        &self.0.target
    }

    /// The bucket, container or account for cloud backends; empty otherwise.
    pub fn container(&self) -> &str {
        &self.0.container
    }

    /// The object key for cloud backends (verbatim, unencoded); empty otherwise.
    pub fn key(&self) -> &str {
        &self.0.key
    }

    /// The byte window reads are relative to.
    pub fn window(&self) -> Window {
        self.0.window
    }

    /// Absolute offset of the window.
    pub fn window_offset(&self) -> u64 {
        self.0.window.offset
    }

    /// Length of the window, `None` when unbounded.
    pub fn window_length(&self) -> Option<u64> {
        self.0.window.length
    }

    /// The identity as it may appear in messages and logs: HTTP URLs have user information,
    /// query and fragment redacted.
    pub fn display(&self) -> String {
        match self.0.backend {
            Backend::Http => redact_url(&self.0.identity),
            _ => self.0.identity.clone(),
        }
    }

    /// True when both locators are the very same shared value (a fast path before comparing
    /// identities).
    pub fn ptr_eq(&self, other: &Locator) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
