//! `karu._karu.Reader`: karu's block-cached, version-pinned reader, behind `karu.open`'s file
//! object (`karu/_file.py`). Reads release the GIL.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::buffer::Writable;
use crate::client::{Client, locator};
use crate::errors::OrRaise;

/// Random access to one object, every read pinned to the version seen at open.
#[pyclass(frozen, module = "karu._karu")]
pub(crate) struct Reader {
    inner: karu::Reader,
}

#[pymethods]
impl Reader {
    /// Opens `uri` (one request for a remote object: its first block, size and version).
    #[new]
    fn new(
        py: Python<'_>,
        client: &Bound<'_, Client>,
        uri: &str,
        block_size: u64,
        cache_bytes: u64,
    ) -> PyResult<Self> {
        let locator = locator(py, uri)?;
        let client = &client.get().inner;
        let options = karu::ReaderOptions::default()
            .block_size(block_size)
            .cache_bytes(cache_bytes);
        let inner = py
            .detach(|| karu::Reader::open(client, &locator, options))
            .or_raise(py)?;
        Ok(Reader { inner })
    }

    /// The object's size as of open.
    fn len(&self) -> u64 {
        self.inner.len()
    }

    /// The strong ETag reads are pinned to (`None` for local files).
    fn etag(&self) -> Option<String> {
        self.inner.etag().map(str::to_owned)
    }

    /// `length` bytes at `offset`, shorter only where the object ends.
    fn read_at<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        length: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let data = py
            .detach(|| self.inner.read_at(offset, length))
            .or_raise(py)?;
        Ok(PyBytes::new(py, &data))
    }

    /// Fills `buffer` from `offset` (no intermediate `bytes`: the cached blocks are copied
    /// into it); returns the count, short only where the object ends.
    fn read_into(&self, py: Python<'_>, offset: u64, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let dest = Writable::get(buffer)?;
        let raw = dest.raw(0);
        let data = py
            .detach(|| self.inner.read_at(offset, raw.len as u64))
            .or_raise(py)?;
        Ok(raw.copy_from(&data))
    }

    /// The bytes of each `(offset, length)` range, one planned batch of the missing blocks.
    fn read_ranges<'py>(
        &self,
        py: Python<'py>,
        ranges: Vec<(u64, u64)>,
    ) -> PyResult<Bound<'py, PyList>> {
        let ranges: Vec<std::ops::Range<u64>> = ranges
            .into_iter()
            .map(|(offset, length)| offset..offset.saturating_add(length))
            .collect();
        let data = py.detach(|| self.inner.read_ranges(&ranges)).or_raise(py)?;
        PyList::new(py, data.iter().map(|d| PyBytes::new(py, d)))
    }

    /// Counters: `hits`, `misses` (blocks), `requests`, `bytes_fetched`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let dict = PyDict::new(py);
        dict.set_item("hits", s.hits)?;
        dict.set_item("misses", s.misses)?;
        dict.set_item("requests", s.requests)?;
        dict.set_item("bytes_fetched", s.bytes_fetched)?;
        Ok(dict)
    }
}
