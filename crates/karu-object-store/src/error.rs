//! karu's errors as object_store's: the variants callers match on, and `Generic` (keeping
//! karu's status and message as its source) for the rest.

use karu::Status;
use object_store::path::Path;

use crate::STORE;

/// `error`, met reading `path`, as the object_store error a caller matches on: `NotFound`,
/// `Precondition` (a changed object or a failed `If-Match`), `PermissionDenied` (the server
/// refused the credentials), `Unauthenticated` (no credentials could be had),
/// `NotSupported`, and `Generic` for every other status. The karu error is the source of
/// each, so its status and message stay reachable.
pub fn to_object_store(path: &Path, error: karu::Error) -> object_store::Error {
    let path = path.to_string();
    let source = Box::new(error.clone());
    match error.status() {
        Status::NotFound => object_store::Error::NotFound { path, source },
        Status::Precondition => object_store::Error::Precondition { path, source },
        Status::Auth => object_store::Error::PermissionDenied { path, source },
        Status::Credentials => object_store::Error::Unauthenticated { path, source },
        Status::Unsupported => object_store::Error::NotSupported { source },
        _ => generic(error),
    }
}

/// A `Generic` error of this store.
pub(crate) fn generic(
    source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
) -> object_store::Error {
    object_store::Error::Generic {
        store: STORE,
        source: source.into(),
    }
}

/// `NotImplemented` for an operation this store leaves to an inner store it was not given.
pub(crate) fn not_implemented(operation: &str) -> object_store::Error {
    object_store::Error::NotImplemented {
        operation: format!("{operation} (KaruStore reads; give it an inner store for the rest)"),
        implementer: STORE.to_owned(),
    }
}
