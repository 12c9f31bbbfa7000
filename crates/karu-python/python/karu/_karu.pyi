"""Type stubs of karu's native module (``karu._karu``); the public names are re-exported by
``karu``. Every call that waits on I/O releases the GIL."""

import os
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Union,
)

from ._errors import Error, Status

DEFAULT_CHUNK_SIZE: int
DEFAULT_PARALLELISM: int

#: A writable, C-contiguous buffer: bytearray, memoryview, array.array, a NumPy array, ...
WritableBuffer = Any

#: One read of ``submit``: ``(uri, offset, length)`` or ``(uri, offset, length, tag)``.
ReadSpec = Union[Tuple[str, int, int], Tuple[str, int, int, int]]

class ProgressBar(Protocol):
    """What ``download(progress=...)`` accepts besides a callable: a tqdm-like bar."""

    total: Optional[float]
    def update(self, n: int = ...) -> Optional[bool]: ...

#: ``progress(done, total)``; returning ``False`` cancels the download.
ProgressCallback = Callable[[int, int], Optional[bool]]

class ObjectInfo:
    """What ``stat`` learns."""

    @property
    def size(self) -> int:
        """The visible size in bytes."""
    @property
    def etag(self) -> Optional[str]:
        """The strong ETag, quotes included (``None`` for local files)."""

class Ends:
    """What ``read_ends`` returns."""

    @property
    def head(self) -> bytes: ...
    @property
    def tail(self) -> bytes: ...
    @property
    def size(self) -> int: ...
    @property
    def etag(self) -> Optional[str]: ...

class Completion:
    """One finished read of a batch; ``tag, status, data = completion`` unpacks it."""

    @property
    def tag(self) -> int: ...
    @property
    def status(self) -> Status: ...
    @property
    def data(self) -> bytes:
        """The bytes read; on ``Status.RANGE`` the valid prefix, otherwise empty on failure."""
    @property
    def error(self) -> Optional[Error]:
        """The read's exception, ``None`` on success."""
    def __iter__(self) -> Iterator[Any]: ...

class Completions:
    """The completions of ``submit``, in completion order: ``for`` or ``async for``."""

    def __iter__(self) -> Iterator[Completion]: ...
    def __next__(self) -> Completion: ...
    def __aiter__(self) -> AsyncIterator[Completion]: ...
    def __anext__(self) -> Awaitable[Completion]: ...
    def pending(self) -> int:
        """Reads not yet completed."""
    def stats(self) -> Dict[str, int]:
        """The batch's counters (``transfers``, ``received_bytes``, ``retries``, ...)."""

class DownloadResult:
    """What a finished download did."""

    @property
    def size(self) -> int: ...
    @property
    def received_bytes(self) -> int: ...
    @property
    def requests(self) -> int: ...
    @property
    def retries(self) -> int: ...
    @property
    def etag(self) -> Optional[str]: ...
    @property
    def resumed_chunks(self) -> int: ...

class Client:
    """A karu client: thread-safe, cheap to share.

    ``options`` are karu's ``KARU_*`` and GDAL option names (``AWS_S3_ENDPOINT``,
    ``AWS_NO_SIGN_REQUEST``, ``GDAL_HTTP_HEADERS``, ...); values are str, int or bool.
    ``hermetic=True`` ignores the environment (no implicit credentials, CA bundle or home
    directory).
    """

    def __init__(
        self,
        options: Optional[Mapping[str, Union[str, int, bool, None]]] = None,
        hermetic: bool = False,
    ) -> None: ...
    def read(self, uri: str, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset``; a read past the end raises with ``Status.RANGE``."""
    def read_ranges(self, uri: str, ranges: Sequence[Tuple[int, int]]) -> List[bytes]:
        """The bytes of each ``(offset, length)``: one planned batch pinned to one version."""
    def read_into(self, uri: str, offset: int, buffer: WritableBuffer) -> int:
        """Fills ``buffer`` (all of it) with the bytes at ``offset``, zero-copy; returns its
        size. Do not touch the buffer from another thread during the call."""
    def stat(self, uri: str) -> ObjectInfo: ...
    def size(self, uri: str) -> int: ...
    def read_ends(self, uri: str, head: int, tail: int) -> Ends:
        """The first ``head`` and last ``tail`` bytes, in one round trip."""
    def submit(self, reads: Iterable[ReadSpec]) -> Completions:
        """Submits reads and returns at once; completions come as they finish. A read's tag
        is its position in ``reads`` unless given."""
    def download(
        self,
        uri: str,
        dest: Union[str, "os.PathLike[str]"],
        *,
        chunk_size: int = ...,
        parallelism: int = ...,
        overwrite: bool = False,
        resume: bool = False,
        progress: Union[ProgressCallback, ProgressBar, None] = None,
    ) -> DownloadResult:
        """Downloads the whole object into ``dest`` (parallel chunks pinned to one version,
        published atomically). ``progress`` is ``progress(done, total)`` (``False`` cancels)
        or a tqdm bar: ``progress=tqdm(unit="B", unit_scale=True)``."""
    async def read_async(self, uri: str, offset: int, length: int) -> bytes: ...
    async def read_ranges_async(
        self, uri: str, ranges: Sequence[Tuple[int, int]]
    ) -> List[bytes]: ...
    async def read_into_async(self, uri: str, offset: int, buffer: WritableBuffer) -> int: ...
    async def stat_async(self, uri: str) -> ObjectInfo: ...
    async def size_async(self, uri: str) -> int: ...
    async def read_ends_async(self, uri: str, head: int, tail: int) -> Ends: ...

class Reader:
    """The block-cached, version-pinned reader behind ``karu.open`` (use that)."""

    def __init__(self, client: Client, uri: str, block_size: int, cache_bytes: int) -> None: ...
    def len(self) -> int: ...
    def etag(self) -> Optional[str]: ...
    def read_at(self, offset: int, length: int) -> bytes: ...
    def read_into(self, offset: int, buffer: WritableBuffer) -> int: ...
    def read_ranges(self, ranges: Sequence[Tuple[int, int]]) -> List[bytes]: ...
    def stats(self) -> Dict[str, int]: ...
