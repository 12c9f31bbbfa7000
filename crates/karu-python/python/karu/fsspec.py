"""``KaruFileSystem``: karu behind fsspec's ``AbstractFileSystem`` (fsspec is optional).

Paths are whole URIs (``s3://bucket/key``, ``https://host/path``, local paths), kept as given:
karu resolves each one itself. ``register("s3", "gs", "az", "https", ...)`` makes fsspec hand
those protocols to karu, so ``pandas.read_parquet("s3://...")`` or
``xarray.open_dataset(..., engine="h5netcdf")`` read through karu unchanged.

karu reads; it does not list or write. Those operations raise ``NotImplementedError`` naming
the operation.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from fsspec import AbstractFileSystem, register_implementation

from ._file import DEFAULT_CACHE_BYTES, KaruFile, default_client
from ._karu import Client, Reader

#: The block size of the files ``KaruFileSystem.open`` returns unless told otherwise: fsspec's
#: usual 5 MiB (``AbstractBufferedFile.DEFAULT_BLOCK_SIZE``), which suits the whole-column
#: reads of Parquet better than ``karu.open``'s 1 MiB (two requests instead of five for the
#: projection of the tests' 6.5 MB table).
DEFAULT_FS_BLOCK_SIZE = 5 << 20

#: How many objects' readers (each with its block cache) a filesystem keeps for later opens.
OPEN_READERS = 8

#: The protocols ``register()`` claims when given none.
DEFAULT_PROTOCOLS = ("s3", "gs", "gcs", "az", "abfs", "http", "https", "hf")


def _unsupported(operation: str) -> NotImplementedError:
    return NotImplementedError(f"karu reads byte ranges only; it does not support {operation}")


class KaruFileSystem(AbstractFileSystem):  # type: ignore[misc]
    """A read-only fsspec filesystem whose reads go through karu.

    ``client`` defaults to one configured from the environment; otherwise ``options`` (karu's
    ``KARU_*`` / GDAL option names) and ``hermetic`` make one. ``block_size`` and
    ``cache_bytes`` are those of the files ``open`` returns. Like fsspec's other filesystems
    it remembers what it learnt: ``info`` results, and the readers (block caches, version
    pins) of the last ``OPEN_READERS`` objects opened; ``invalidate_cache()`` forgets both.
    """

    protocol = ("karu",)
    root_marker = ""

    def __init__(
        self,
        client: Optional[Client] = None,
        options: Optional[Dict[str, Any]] = None,
        hermetic: bool = False,
        block_size: int = DEFAULT_FS_BLOCK_SIZE,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        **storage_options: Any,
    ) -> None:
        super().__init__(**storage_options)
        if client is None:
            client = Client(options, hermetic) if options or hermetic else default_client()
        self.client = client
        self.block_size = block_size
        self.cache_bytes = cache_bytes
        # stat results by path: readers ask for info several times per file (pyarrow does
        # thrice), each a request otherwise. invalidate_cache() forgets them.
        self._infos: Dict[str, Dict[str, Any]] = {}
        # Readers of recently opened objects, shared by later opens of the same object (pyarrow
        # opens a Parquet file twice): their cached blocks and version pin are reused.
        self._readers: "OrderedDict[Tuple[str, int], Reader]" = OrderedDict()

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        # karu needs the scheme: a path stays the whole URI.
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        return str(path)

    def unstrip_protocol(self, name: str) -> str:
        return name

    def info(self, path: str, **kwargs: Any) -> Dict[str, Any]:
        known = self._infos.get(path)
        if known is None:
            st = self.client.stat(path)
            known = {"name": path, "size": st.size, "type": "file", "etag": st.etag}
            self._infos[path] = known
        return dict(known)

    def size(self, path: str) -> int:
        return int(self.info(path)["size"])

    def invalidate_cache(self, path: Optional[str] = None) -> None:
        if path is None:
            self._infos.clear()
            self._readers.clear()
        else:
            self._infos.pop(path, None)
            for key in [k for k in self._readers if k[0] == path]:
                del self._readers[key]
        super().invalidate_cache(path)

    def isdir(self, path: str) -> bool:
        return False

    def isfile(self, path: str) -> bool:
        try:
            self.info(path)
        except FileNotFoundError:
            return False
        return True

    def _bounds(self, path: str, start: Optional[int], end: Optional[int]) -> Tuple[int, int]:
        """``[start, end)`` with fsspec's conventions (``None`` for the object's ends, negative
        offsets from its end) resolved; the size is asked for only when needed."""
        if end is None or end < 0 or (start is not None and start < 0):
            size = self.size(path)
            if end is None:
                end = size
            elif end < 0:
                end += size
            if start is not None and start < 0:
                start += size
        return max(0, start or 0), end

    def cat_file(
        self, path: str, start: Optional[int] = None, end: Optional[int] = None, **kwargs: Any
    ) -> bytes:
        start, end = self._bounds(path, start, end)
        if end <= start:
            return b""
        return self.client.read(path, start, end - start)

    def cat_ranges(
        self,
        paths: Sequence[str],
        starts: Union[int, Sequence[int]],
        ends: Union[int, Sequence[int]],
        max_gap: Optional[int] = None,
        on_error: str = "return",
        **kwargs: Any,
    ) -> List[Union[bytes, Exception]]:
        """The bytes of each ``[start, end)`` range; the ranges of one object are one karu
        batch (planned and pinned to one version). With ``on_error="return"`` a failed
        object's ranges hold its exception instead of raising it."""
        n = len(paths)
        starts = [starts] * n if isinstance(starts, int) else list(starts)
        ends = [ends] * n if isinstance(ends, int) else list(ends)
        if len(starts) != n or len(ends) != n:
            raise ValueError("paths, starts and ends must have the same length")
        out: List[Union[bytes, Exception]] = [b""] * n
        by_path: Dict[str, List[Tuple[int, int, int]]] = defaultdict(list)
        for i, (path, start, end) in enumerate(zip(paths, starts, ends)):
            start, end = self._bounds(path, start, end)
            if end > start:
                by_path[path].append((i, start, end - start))
        for path, reads in by_path.items():
            try:
                data = self.client.read_ranges(path, [(s, n) for _, s, n in reads])
            except Exception as e:
                if on_error != "return":
                    raise
                for i, _, _ in reads:
                    out[i] = e
                continue
            for (i, _, _), d in zip(reads, data):
                out[i] = d
        return out

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: Optional[int] = None,
        autocommit: bool = True,
        cache_options: Optional[Dict[str, Any]] = None,
        **kwargs: Any,
    ) -> KaruFile:
        if mode != "rb":
            raise _unsupported(f"open in mode {mode!r} (only 'rb')")
        key = (path, block_size or self.block_size)
        reader = self._readers.get(key)
        if reader is None:
            reader = Reader(self.client, path, key[1], self.cache_bytes)
            self._readers[key] = reader
            while len(self._readers) > OPEN_READERS:
                self._readers.popitem(last=False)
        else:
            self._readers.move_to_end(key)
        return KaruFile(reader, path)

    # What karu does not do: listing and writing.

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
        raise _unsupported("ls (listing)")

    def find(self, path: str, *args: Any, **kwargs: Any) -> Any:
        raise _unsupported("find (listing)")

    def glob(self, path: str, *args: Any, **kwargs: Any) -> Any:
        raise _unsupported("glob (listing)")

    def walk(self, path: str, *args: Any, **kwargs: Any) -> Any:
        raise _unsupported("walk (listing)")

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        raise _unsupported("mkdir (writing)")

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        raise _unsupported("makedirs (writing)")

    def rmdir(self, path: str) -> None:
        raise _unsupported("rmdir (writing)")

    def rm_file(self, path: str) -> None:
        raise _unsupported("rm_file (writing)")

    def rm(self, path: Any, recursive: bool = False, maxdepth: Optional[int] = None) -> None:
        raise _unsupported("rm (writing)")

    def _rm(self, path: str) -> None:
        raise _unsupported("rm (writing)")

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        raise _unsupported("pipe_file (writing)")

    def put_file(self, lpath: str, rpath: str, callback: Any = None, **kwargs: Any) -> None:
        raise _unsupported("put_file (writing)")

    def touch(self, path: str, truncate: bool = True, **kwargs: Any) -> None:
        raise _unsupported("touch (writing)")

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        raise _unsupported("cp_file (writing)")

    def mv(self, path1: str, path2: str, *args: Any, **kwargs: Any) -> None:
        raise _unsupported("mv (writing)")


def register(*protocols: str, clobber: bool = True) -> None:
    """Makes fsspec resolve ``protocols`` (default: ``DEFAULT_PROTOCOLS``) to karu, so e.g.
    ``fsspec.filesystem("s3")`` and ``pandas.read_parquet("s3://...")`` read through karu."""
    for protocol in protocols or DEFAULT_PROTOCOLS:
        register_implementation(protocol, KaruFileSystem, clobber=clobber)
