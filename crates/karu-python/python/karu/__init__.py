"""karu: exact byte-range reads from local files, HTTP(S) and cloud object stores.

>>> import karu
>>> client = karu.Client()
>>> client.read("s3://bucket/data.bin", 4096, 512)  # doctest: +SKIP

``karu.open`` gives a read-only, seekable binary file (for h5py, pyarrow, zipfile, tarfile);
``karu.fsspec.KaruFileSystem`` plugs karu into fsspec, pandas and xarray.
"""

from ._errors import (
    AuthError,
    ConfigError,
    CredentialsError,
    Error,
    FileMissingError,
    FilePermissionError,
    InvalidError,
    MalformedUriError,
    NotFoundError,
    Status,
    TimeoutError,
)
from ._file import KaruFile, open
from ._karu import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_PARALLELISM,
    Client,
    Completion,
    Completions,
    DownloadResult,
    Ends,
    ObjectInfo,
)

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_PARALLELISM",
    "AuthError",
    "Client",
    "Completion",
    "Completions",
    "ConfigError",
    "CredentialsError",
    "DownloadResult",
    "Ends",
    "Error",
    "FileMissingError",
    "FilePermissionError",
    "InvalidError",
    "KaruFile",
    "MalformedUriError",
    "NotFoundError",
    "ObjectInfo",
    "Status",
    "TimeoutError",
    "open",
]
