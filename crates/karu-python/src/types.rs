//! Plain results handed to Python: `ObjectInfo` (stat) and `Ends` (read_ends).

use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// What `stat` learns: the visible size and the strong ETag (`None` for local files).
#[pyclass(frozen, get_all, module = "karu._karu")]
pub(crate) struct ObjectInfo {
    size: u64,
    etag: Option<String>,
}

impl From<karu::ObjectInfo> for ObjectInfo {
    fn from(info: karu::ObjectInfo) -> ObjectInfo {
        ObjectInfo {
            size: info.size,
            etag: info.etag,
        }
    }
}

#[pymethods]
impl ObjectInfo {
    fn __repr__(&self) -> String {
        format!("ObjectInfo(size={}, etag={:?})", self.size, self.etag)
    }
}

/// What `read_ends` returns: the first and last bytes, with the object's size and ETag.
#[pyclass(frozen, get_all, module = "karu._karu")]
pub(crate) struct Ends {
    head: Py<PyBytes>,
    tail: Py<PyBytes>,
    size: u64,
    etag: Option<String>,
}

impl From<karu::Ends> for Ends {
    fn from(ends: karu::Ends) -> Ends {
        Python::attach(|py| Ends {
            head: PyBytes::new(py, &ends.head).unbind(),
            tail: PyBytes::new(py, &ends.tail).unbind(),
            size: ends.info.size,
            etag: ends.info.etag,
        })
    }
}

#[pymethods]
impl Ends {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Ends(head=<{} bytes>, tail=<{} bytes>, size={}, etag={:?})",
            self.head.bind(py).as_bytes().len(),
            self.tail.bind(py).as_bytes().len(),
            self.size,
            self.etag
        )
    }
}
