//! `Client.download`: karu's parallel, version-pinned download, with a progress callable (or a
//! tqdm-like bar) called under the GIL while the download itself runs without it.

use std::path::Path;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;

use crate::errors::OrRaise;

/// What a finished download did.
#[pyclass(frozen, get_all, module = "karu._karu")]
pub(crate) struct DownloadResult {
    /// The object's visible size (the bytes now in the destination).
    size: u64,
    /// Bytes received by this call (chunks an earlier call left for resume excluded).
    received_bytes: u64,
    /// Requests made: the probe, the chunks and their retries.
    requests: u64,
    /// Retries, throttled ones included.
    retries: u64,
    /// The strong ETag every chunk was pinned to, if the object has one.
    etag: Option<String>,
    /// Chunks skipped because an interrupted earlier call had written them.
    resumed_chunks: u64,
}

#[pymethods]
impl DownloadResult {
    fn __repr__(&self) -> String {
        format!(
            "DownloadResult(size={}, received_bytes={}, requests={}, retries={}, etag={:?}, \
             resumed_chunks={})",
            self.size,
            self.received_bytes,
            self.requests,
            self.retries,
            self.etag,
            self.resumed_chunks
        )
    }
}

/// The arguments of one `download` call.
pub(crate) struct Job {
    pub(crate) chunk_size: u64,
    pub(crate) parallelism: u64,
    pub(crate) overwrite: bool,
    pub(crate) resume: bool,
    pub(crate) progress: Option<Py<PyAny>>,
}

/// Where progress goes: a callable `(done, total)` whose `False` cancels, or a bar with
/// `update(n)` and `total` (tqdm), advanced by the bytes received since the last call.
struct Reporter {
    target: Py<PyAny>,
    is_bar: bool,
    reported: u64,
    /// The exception the callable raised: it ends the download and is raised in its place.
    failure: Arc<Mutex<Option<PyErr>>>,
}

impl Reporter {
    fn report(&mut self, done: u64, total: u64) -> bool {
        let outcome = Python::attach(|py| self.call(py, done, total));
        match outcome {
            Ok(keep_going) => keep_going,
            Err(e) => {
                *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                false
            }
        }
    }

    fn call(&mut self, py: Python<'_>, done: u64, total: u64) -> PyResult<bool> {
        let target = self.target.bind(py);
        if !self.is_bar {
            let answer = target.call1((done, total))?;
            // Only an explicit False cancels: None (a lambda's usual result) goes on.
            return Ok(!answer.is(pyo3::types::PyBool::new(py, false)));
        }
        // Compared in Python: a bar's total may be None, an int or a float.
        if !target.getattr("total")?.eq(total)? {
            target.setattr("total", total)?;
        }
        let step = done.saturating_sub(self.reported);
        self.reported = self.reported.max(done);
        target.call_method1("update", (step,))?;
        Ok(true)
    }
}

impl Job {
    /// Runs the download without the GIL (taking it only to report progress).
    pub(crate) fn run(
        self,
        py: Python<'_>,
        client: &karu::Client,
        locator: &karu::Locator,
        dest: &Path,
    ) -> PyResult<DownloadResult> {
        let failure = Arc::new(Mutex::new(None));
        let mut reporter = match self.progress {
            Some(target) => {
                let bound = target.bind(py);
                let is_bar = !bound.is_callable() && bound.hasattr("update")?;
                Some(Reporter {
                    target,
                    is_bar,
                    reported: 0,
                    failure: Arc::clone(&failure),
                })
            }
            None => None,
        };
        let options = karu::DownloadOptions {
            chunk_size: self.chunk_size,
            parallelism: self.parallelism,
            overwrite: self.overwrite,
            resume: self.resume,
            progress: reporter
                .as_mut()
                .map(|r| Box::new(move |done, total| r.report(done, total)) as karu::Progress<'_>),
            ..Default::default()
        };
        let result = py.detach(|| client.download(locator, dest, options));
        drop(reporter);
        if let Some(e) = failure.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(e);
        }
        let r = result.or_raise(py)?;
        Ok(DownloadResult {
            size: r.size,
            received_bytes: r.received_bytes,
            requests: r.requests,
            retries: r.retries,
            etag: r.etag,
            resumed_chunks: r.resumed_chunks,
        })
    }
}
