//! `karu.Client`: the blocking reads (GIL released while they wait), their asyncio twins (run on
//! pyo3-async-runtimes' tokio runtime and resolved as asyncio futures), `submit` and `download`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyList};

use crate::batch::Completions;
use crate::buffer::{Raw, Writable};
use crate::download::{self, DownloadResult};
use crate::errors::{OrRaise, attached};
use crate::types::{Ends, ObjectInfo};

/// A karu client (see the stubs in `karu/_karu.pyi` for the documented signatures).
#[pyclass(frozen, module = "karu._karu")]
pub(crate) struct Client {
    pub(crate) inner: karu::Client,
}

/// Parses a URI or `/vsi*/` path (`karu.MalformedUriError` when it is not one).
pub(crate) fn locator(py: Python<'_>, uri: &str) -> PyResult<karu::Locator> {
    karu::Locator::parse(uri).or_raise(py)
}

/// An option value as karu reads it: strings as given, booleans as YES/NO, numbers in decimal.
fn option_value(value: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    if value.is_none() {
        Ok(None)
    } else if let Ok(b) = value.cast::<PyBool>() {
        Ok(Some(if b.is_true() { "YES" } else { "NO" }.to_owned()))
    } else if let Ok(s) = value.extract::<String>() {
        Ok(Some(s))
    } else if let Ok(n) = value.extract::<i64>() {
        Ok(Some(n.to_string()))
    } else {
        Err(PyValueError::new_err(format!(
            "option values must be str, int or bool, got {}",
            value.get_type().name()?
        )))
    }
}

/// The reads of one `read_ranges` call, each with `If-Match: etag` when one is given (the
/// ranges then plan into several transfers that could otherwise see different versions; an
/// object without a strong ETag cannot be pinned and is read as it is).
fn range_reads(
    locator: &karu::Locator,
    ranges: &[(u64, u64)],
    etag: Option<&str>,
) -> Vec<karu::Read> {
    ranges
        .iter()
        .enumerate()
        .map(|(i, &(offset, length))| {
            let read = karu::Read::new(locator, offset, length).tag(i as u64);
            match etag {
                Some(tag) => read.if_match(tag),
                None => read,
            }
        })
        .collect()
}

/// True when the ranges of a remote object plan into more than one transfer, which could
/// otherwise see different versions of it.
fn needs_pin(client: &karu::Client, locator: &karu::Locator, ranges: &[(u64, u64)]) -> bool {
    if !locator.is_remote() || ranges.len() < 2 {
        return false;
    }
    let requests: Vec<karu::plan::Request<'_>> = ranges
        .iter()
        .map(|&(offset, length)| karu::plan::Request {
            locator,
            offset,
            length,
            if_match: None,
        })
        .collect();
    karu::plan::plan(&requests, &client.policy())
        .transfers
        .len()
        > 1
}

/// Blocking `read_ranges`: a stat for the ETag first when the reads need a pin.
fn read_ranges_blocking(
    client: &karu::Client,
    locator: &karu::Locator,
    ranges: &[(u64, u64)],
) -> karu::Result<Vec<Vec<u8>>> {
    let etag = if needs_pin(client, locator, ranges) {
        client.stat(locator)?.etag
    } else {
        None
    };
    client.fetch(range_reads(locator, ranges, etag.as_deref()))
}

/// Reads `raw.len` bytes at `offset` straight into the caller's memory, blocking.
fn read_into_blocking(
    client: &karu::Client,
    locator: &karu::Locator,
    offset: u64,
    raw: Raw,
) -> karu::Result<()> {
    // SAFETY: the batch is dropped at the end of this function, while the caller still holds
    // the exported buffer `raw` points into.
    let read = unsafe { raw.read(locator, offset) };
    let batch = client.submit(vec![read])?;
    match batch.next() {
        Some(done) => done.result,
        None => Err(karu::Error::new(
            karu::Status::Cancelled,
            "the read ended without a completion",
        )),
    }
}

fn bytes_list<'py>(py: Python<'py>, buffers: &[Vec<u8>]) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, buffers.iter().map(|b| PyBytes::new(py, b)))
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (options = None, hermetic = false))]
    fn new(py: Python<'_>, options: Option<&Bound<'_, PyDict>>, hermetic: bool) -> PyResult<Self> {
        let mut config = if hermetic {
            karu::Config::empty()
        } else {
            karu::Config::from_env()
        };
        if let Some(options) = options {
            for (name, value) in options.iter() {
                let name: String = name.extract()?;
                let value = option_value(&value)?;
                config.set(&name, value.as_deref()).or_raise(py)?;
            }
        }
        let inner = karu::Client::new(&config).or_raise(py)?;
        Ok(Client { inner })
    }

    fn read<'py>(
        &self,
        py: Python<'py>,
        uri: &str,
        offset: u64,
        length: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let locator = locator(py, uri)?;
        let data = py
            .detach(|| self.inner.read(&locator, offset, length))
            .or_raise(py)?;
        Ok(PyBytes::new(py, &data))
    }

    fn read_ranges<'py>(
        &self,
        py: Python<'py>,
        uri: &str,
        ranges: Vec<(u64, u64)>,
    ) -> PyResult<Bound<'py, PyList>> {
        let locator = locator(py, uri)?;
        let buffers = py
            .detach(|| read_ranges_blocking(&self.inner, &locator, &ranges))
            .or_raise(py)?;
        bytes_list(py, &buffers)
    }

    fn read_into(
        &self,
        py: Python<'_>,
        uri: &str,
        offset: u64,
        buffer: &Bound<'_, PyAny>,
    ) -> PyResult<usize> {
        let locator = locator(py, uri)?;
        let dest = Writable::get(buffer)?;
        if dest.len() == 0 {
            return Ok(0); // nothing to read (karu refuses empty reads)
        }
        let raw = dest.raw(0);
        py.detach(|| read_into_blocking(&self.inner, &locator, offset, raw))
            .or_raise(py)?;
        Ok(dest.len())
    }

    fn stat(&self, py: Python<'_>, uri: &str) -> PyResult<ObjectInfo> {
        let locator = locator(py, uri)?;
        let info = py.detach(|| self.inner.stat(&locator)).or_raise(py)?;
        Ok(ObjectInfo::from(info))
    }

    fn size(&self, py: Python<'_>, uri: &str) -> PyResult<u64> {
        let locator = locator(py, uri)?;
        py.detach(|| self.inner.size(&locator)).or_raise(py)
    }

    fn read_ends(&self, py: Python<'_>, uri: &str, head: u64, tail: u64) -> PyResult<Ends> {
        let locator = locator(py, uri)?;
        let ends = py
            .detach(|| self.inner.read_ends(&locator, head, tail))
            .or_raise(py)?;
        Ok(Ends::from(ends))
    }

    fn submit(&self, py: Python<'_>, reads: &Bound<'_, PyAny>) -> PyResult<Completions> {
        Completions::submit(py, &self.inner, reads)
    }

    #[pyo3(signature = (uri, dest, *, chunk_size = karu::DEFAULT_CHUNK_SIZE,
        parallelism = karu::DEFAULT_PARALLELISM, overwrite = false, resume = false,
        progress = None))]
    #[allow(clippy::too_many_arguments)]
    fn download(
        &self,
        py: Python<'_>,
        uri: &str,
        dest: std::path::PathBuf,
        chunk_size: u64,
        parallelism: u64,
        overwrite: bool,
        resume: bool,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<DownloadResult> {
        let locator = locator(py, uri)?;
        let job = download::Job {
            chunk_size,
            parallelism,
            overwrite,
            resume,
            progress,
        };
        job.run(py, &self.inner, &locator, &dest)
    }

    fn read_async<'py>(
        &self,
        py: Python<'py>,
        uri: &str,
        offset: u64,
        length: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let locator = locator(py, uri)?;
        let client = self.inner.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let data = attached(client.read_async(&locator, offset, length).await)?;
            Ok(Python::attach(|py| PyBytes::new(py, &data).unbind()))
        })
    }

    fn read_ranges_async<'py>(
        &self,
        py: Python<'py>,
        uri: &str,
        ranges: Vec<(u64, u64)>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let locator = locator(py, uri)?;
        let client = self.inner.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let etag = if needs_pin(&client, &locator, &ranges) {
                attached(client.stat_async(&locator).await)?.etag
            } else {
                None
            };
            let reads = range_reads(&locator, &ranges, etag.as_deref());
            let buffers = attached(client.fetch_async(reads).await)?;
            Python::attach(|py| bytes_list(py, &buffers).map(Bound::unbind))
        })
    }

    fn read_into_async<'py>(
        &self,
        py: Python<'py>,
        uri: &str,
        offset: u64,
        buffer: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let locator = locator(py, uri)?;
        let dest = Writable::get(buffer)?;
        let client = self.inner.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            // A local declared before `batch`, so dropped after it.
            let dest = dest;
            if dest.len() == 0 {
                return Ok(0);
            }
            let raw = dest.raw(0);
            // SAFETY: `batch` is declared after `dest`, so it is dropped first (cancelled and
            // its workers waited for) whether the future completes or is dropped unfinished.
            let read = unsafe { raw.read(&locator, offset) };
            let batch = attached(client.submit(vec![read]))?;
            let done = batch.next_async().await;
            let result = match done {
                Some(done) => done.result,
                None => Err(karu::Error::new(
                    karu::Status::Cancelled,
                    "the read ended without a completion",
                )),
            };
            drop(batch);
            attached(result)?;
            Ok(dest.len())
        })
    }

    fn stat_async<'py>(&self, py: Python<'py>, uri: &str) -> PyResult<Bound<'py, PyAny>> {
        let locator = locator(py, uri)?;
        let client = self.inner.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let info = attached(client.stat_async(&locator).await)?;
            Ok(ObjectInfo::from(info))
        })
    }

    fn size_async<'py>(&self, py: Python<'py>, uri: &str) -> PyResult<Bound<'py, PyAny>> {
        let locator = locator(py, uri)?;
        let client = self.inner.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            attached(client.size_async(&locator).await)
        })
    }

    fn read_ends_async<'py>(
        &self,
        py: Python<'py>,
        uri: &str,
        head: u64,
        tail: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let locator = locator(py, uri)?;
        let client = self.inner.clone();
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let ends = attached(client.read_ends_async(&locator, head, tail).await)?;
            Ok(Ends::from(ends))
        })
    }

    fn __repr__(&self) -> &'static str {
        "karu.Client()"
    }
}
