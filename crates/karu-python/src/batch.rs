//! `Client.submit`: a batch whose completions a Python loop (`for`) or an asyncio task
//! (`async for`) takes as they finish.

use std::collections::HashMap;
use std::sync::Arc;

use pyo3::exceptions::{PyStopAsyncIteration, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyIterator, PyTuple};

use crate::errors::{self, OrRaise};

/// The completions of submitted reads, in completion order.
#[pyclass(frozen, module = "karu._karu")]
pub(crate) struct Completions {
    batch: Arc<karu::Batch>,
}

/// One finished read: `tag, status, data = completion` unpacks it.
#[pyclass(frozen, get_all, module = "karu._karu")]
pub(crate) struct Completion {
    /// The read's tag (its position in `reads` unless given).
    tag: u64,
    /// A `karu.Status`; `Status.OK` on success.
    status: Py<PyAny>,
    /// The bytes read; on a `RANGE` failure the valid prefix, otherwise empty on failure.
    data: Py<PyBytes>,
    /// The `karu.Error` of a failed read, `None` on success.
    error: Option<Py<PyAny>>,
}

impl Completion {
    fn new(py: Python<'_>, done: karu::Completion) -> PyResult<Completion> {
        let code = done.status().code();
        let data = PyBytes::new(py, done.bytes()).unbind();
        let error = match &done.result {
            Ok(()) => None,
            Err(e) => Some(errors::to_py(py, e.clone()).into_value(py).into_any()),
        };
        Ok(Completion {
            tag: done.tag,
            status: errors::status(py, code)?.unbind(),
            data,
            error,
        })
    }
}

/// One read of `submit`'s input: `(uri, offset, length)` or `(uri, offset, length, tag)`.
fn one_read(
    py: Python<'_>,
    item: &Bound<'_, PyAny>,
    index: usize,
    locators: &mut HashMap<String, karu::Locator>,
) -> PyResult<karu::Read> {
    let tuple = item
        .cast::<PyTuple>()
        .map_err(|_| PyTypeError::new_err("each read is a tuple (uri, offset, length[, tag])"))?;
    let (uri, offset, length, tag): (String, u64, u64, Option<u64>) = match tuple.len() {
        3 => {
            let (u, o, l) = tuple.extract()?;
            (u, o, l, None)
        }
        4 => {
            let (u, o, l, t) = tuple.extract()?;
            (u, o, l, Some(t))
        }
        n => {
            return Err(PyTypeError::new_err(format!(
                "each read is a tuple (uri, offset, length[, tag]), got {n} items"
            )));
        }
    };
    let locator = match locators.get(&uri) {
        Some(l) => l.clone(),
        None => {
            let l = crate::client::locator(py, &uri)?;
            locators.insert(uri, l.clone());
            l
        }
    };
    Ok(karu::Read::new(&locator, offset, length).tag(tag.unwrap_or(index as u64)))
}

impl Completions {
    /// Submits `reads` (an iterable of read tuples) as one batch.
    pub(crate) fn submit(
        py: Python<'_>,
        client: &karu::Client,
        reads: &Bound<'_, PyAny>,
    ) -> PyResult<Completions> {
        let mut locators = HashMap::new();
        let mut batch_reads = Vec::new();
        for (i, item) in reads.try_iter()?.enumerate() {
            batch_reads.push(one_read(py, &item?, i, &mut locators)?);
        }
        let batch = py.detach(|| client.submit(batch_reads)).or_raise(py)?;
        Ok(Completions {
            batch: Arc::new(batch),
        })
    }
}

#[pymethods]
impl Completion {
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyIterator>> {
        (self.tag, self.status.clone_ref(py), self.data.clone_ref(py))
            .into_pyobject(py)?
            .try_iter()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Completion(tag={}, status={}, data=<{} bytes>)",
            self.tag,
            self.status.bind(py).repr()?,
            self.data.bind(py).as_bytes().len()
        ))
    }
}

#[pymethods]
impl Completions {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Completion>> {
        let batch = Arc::clone(&self.batch);
        match py.detach(move || batch.next()) {
            Some(done) => Completion::new(py, done).map(Some),
            None => Ok(None),
        }
    }

    fn __aiter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __anext__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let batch = Arc::clone(&self.batch);
        pyo3_async_runtimes::tokio::future_into_py(py, async move {
            let done = batch.next_async().await;
            Python::attach(|py| match done {
                Some(done) => Completion::new(py, done),
                None => Err(PyStopAsyncIteration::new_err(())),
            })
        })
    }

    /// Reads not yet completed.
    fn pending(&self) -> usize {
        self.batch.pending()
    }

    /// The batch's counters so far, as a dict (`transfers`, `received_bytes`, `retries`, ...).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.batch.stats();
        let dict = PyDict::new(py);
        for (name, value) in [
            ("transfers", s.transfers),
            ("transfers_finished", s.transfers_finished),
            ("requested_bytes", s.requested_bytes),
            ("received_bytes", s.received_bytes),
            ("retries", s.retries),
            ("throttled", s.throttled),
            ("new_connections", s.new_connections),
            ("resumed", s.resumed),
            ("credential_refreshes", s.credential_refreshes),
        ] {
            dict.set_item(name, value)?;
        }
        Ok(dict)
    }
}
