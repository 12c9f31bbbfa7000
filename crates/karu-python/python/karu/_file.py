"""``karu.open``: a read-only, seekable binary file over karu's block-cached reader.

Every read of one file is pinned to the version of the object seen when it was opened (a
changed object fails reads with ``Status.PRECONDITION``); reads go through an aligned block
cache of ``cache_bytes`` with sequential readahead, so format libraries that issue many small
reads (h5py, pyarrow) make few requests. A miss in an object of at most half the cache, on a
link that carries its missing bytes within a round trip, fetches all of them: pyarrow reading
a column projection of such a Parquet file then costs the open and one request. On a faster
link the second miss fetches the rest of such an object when at most 8 blocks are missing
(the open, the footer and one request on loopback).
"""

from __future__ import annotations

import io
import threading
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from . import _karu

if TYPE_CHECKING:
    from ._karu import Client, Reader

DEFAULT_BLOCK_SIZE = 1 << 20
DEFAULT_CACHE_BYTES = 64 << 20

_default: Optional[Client] = None
_default_lock = threading.Lock()


def default_client() -> Client:
    """The client ``karu.open`` and ``KaruFileSystem`` use when given none (options from the
    environment), made on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = _karu.Client()
        return _default


class KaruFile(io.RawIOBase):
    """A read-only, seekable binary file over one object (``io.RawIOBase`` semantics).

    ``readinto`` writes straight into the caller's buffer (no intermediate ``bytes``).
    """

    def __init__(self, reader: Reader, name: str) -> None:
        super().__init__()
        self._reader = reader
        self._pos = 0
        self.name = name
        self.mode = "rb"
        self.size: int = reader.len()

    def readable(self) -> bool:
        self._checkClosed()
        return True

    def seekable(self) -> bool:
        self._checkClosed()
        return True

    def writable(self) -> bool:
        self._checkClosed()
        return False

    def readinto(self, buffer: Any) -> int:
        self._checkClosed()
        n = self._reader.read_into(self._pos, buffer)
        self._pos += n
        return n

    def read(self, size: Optional[int] = -1) -> bytes:
        self._checkClosed()
        if size is None or size < 0:
            return self.readall()
        n = max(0, min(size, self.size - self._pos))
        if n == 0:
            return b""
        data = self._reader.read_at(self._pos, n)
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(max(0, self.size - self._pos))

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._checkClosed()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self.size + offset
        else:
            raise ValueError(f"invalid whence ({whence!r}, should be 0, 1 or 2)")
        if pos < 0:
            raise ValueError(f"negative seek position {pos}")
        self._pos = pos
        return pos

    def tell(self) -> int:
        self._checkClosed()
        return self._pos

    def read_ranges(self, ranges: Sequence[Tuple[int, int]]) -> List[bytes]:
        """The bytes of each ``(offset, length)`` range, fetched together (one planned batch
        for the blocks missing from the cache)."""
        self._checkClosed()
        return self._reader.read_ranges(list(ranges))

    @property
    def etag(self) -> Optional[str]:
        """The strong ETag every read is pinned to (``None`` for local files)."""
        return self._reader.etag()

    def stats(self) -> Dict[str, int]:
        """The reader's counters: ``hits``, ``misses``, ``requests``, ``bytes_fetched``."""
        return self._reader.stats()

    def __repr__(self) -> str:
        return f"<karu.KaruFile name={self.name!r} size={self.size}>"


def open(
    uri: str,
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
    client: Optional[Client] = None,
) -> KaruFile:
    """Opens ``uri`` (one round trip) as a read-only, seekable binary file.

    ``block_size`` is the cache's unit and the smallest request; ``cache_bytes`` bounds the
    cache. ``client`` defaults to one configured from the environment.
    """
    reader = _karu.Reader(client or default_client(), uri, block_size, cache_bytes)
    return KaruFile(reader, uri)
