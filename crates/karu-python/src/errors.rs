//! karu's errors as Python exceptions: the classes live in `karu/_errors.py` (they derive from
//! both `karu.Error` and a builtin, which a Rust-defined exception cannot), and Rust builds
//! them through its `_from_status` factory.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// `karu._errors._from_status(code, message, os)`, looked up once per interpreter.
static FACTORY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The Python exception of a karu error: the `karu.Error` subclass of its status (and, for a
/// local file's I/O error, of its cause: a missing file is also a `FileNotFoundError`).
pub(crate) fn to_py(py: Python<'_>, e: karu::Error) -> PyErr {
    make(py, e.status().code(), e.message(), os_cause(&e))
}

/// The operating system's reason behind a karu error, where a builtin exception names it.
fn os_cause(e: &karu::Error) -> Option<&'static str> {
    let io = std::error::Error::source(e)?.downcast_ref::<std::io::Error>()?;
    match io.kind() {
        std::io::ErrorKind::NotFound => Some("not_found"),
        std::io::ErrorKind::PermissionDenied => Some("permission"),
        _ => None,
    }
}

/// The Python exception of `code` (a karu status) with `message` and the system's reason.
fn make(py: Python<'_>, code: i32, message: &str, os: Option<&str>) -> PyErr {
    let made = FACTORY
        .get_or_try_init(py, || {
            py.import("karu._errors")?
                .getattr("_from_status")
                .map(Bound::unbind)
        })
        .and_then(|f| f.bind(py).call1((code, message, os)));
    match made {
        Ok(exc) => PyErr::from_value(exc),
        // The package is broken (its Python half missing): say so rather than lose the error.
        Err(e) => e,
    }
}

/// Converts a karu result, building the exception under the GIL.
pub(crate) trait OrRaise<T> {
    /// The value, or the karu error as its Python exception.
    fn or_raise(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> OrRaise<T> for karu::Result<T> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

/// As [`OrRaise::or_raise`], from a future running without the GIL.
pub(crate) fn attached<T>(r: karu::Result<T>) -> PyResult<T> {
    r.map_err(|e| Python::attach(|py| to_py(py, e)))
}

/// `karu.Status`, looked up once per interpreter.
static STATUS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The `karu.Status` member of `code`.
pub(crate) fn status(py: Python<'_>, code: i32) -> PyResult<Bound<'_, PyAny>> {
    let class = STATUS.get_or_try_init(py, || {
        py.import("karu._errors")?
            .getattr("Status")
            .map(Bound::unbind)
    })?;
    class.bind(py).call1((code,))
}
