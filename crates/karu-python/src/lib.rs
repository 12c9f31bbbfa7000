//! `karu._karu`, the native half of the `karu` Python package: the client, its reads and
//! their asyncio twins, batches, downloads, and the reader behind `karu.open`. The Python half (`python/karu`) holds the
//! exceptions, the file object and the fsspec filesystem; the stubs document the API.
//!
//! Every call that waits on I/O releases the GIL. Caller buffers are written through raw
//! pointers only (see `buffer`).

mod batch;
mod buffer;
mod client;
mod download;
mod errors;
mod reader;
mod types;

use pyo3::prelude::*;

#[pymodule]
fn _karu(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client::Client>()?;
    m.add_class::<batch::Completions>()?;
    m.add_class::<batch::Completion>()?;
    m.add_class::<reader::Reader>()?;
    m.add_class::<types::ObjectInfo>()?;
    m.add_class::<types::Ends>()?;
    m.add_class::<download::DownloadResult>()?;
    m.add("DEFAULT_CHUNK_SIZE", karu::DEFAULT_CHUNK_SIZE)?;
    m.add("DEFAULT_PARALLELISM", karu::DEFAULT_PARALLELISM)?;
    Ok(())
}
