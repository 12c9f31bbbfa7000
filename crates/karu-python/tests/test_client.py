"""Every read of karu.Client against nginx, moto and a local file, every byte checked."""

from __future__ import annotations

import array
import io
from pathlib import Path
from typing import Callable, List, Tuple

import numpy as np
import pytest
from conftest import NGINX_FILES, S3_OBJECTS, Moto, Nginx, content

import karu

# (uri, content name, size) of one object, and the client that reads it.
Target = Tuple[karu.Client, str, str, int]


def nginx_targets(nginx: Nginx) -> List[Target]:
    client = karu.Client(hermetic=True)
    return [(client, f"{nginx.url}/{n}", n, s) for n, s in NGINX_FILES.items()]


def moto_targets(moto: Moto) -> List[Target]:
    client = moto.client()
    return [(client, moto.uri(k), k, s) for k, s in S3_OBJECTS.items()]


def local_targets(local_file: Path) -> List[Target]:
    return [(karu.Client(hermetic=True), str(local_file), "local.bin", 10000)]


@pytest.fixture(params=["nginx", "moto", "local"])
def targets(request: pytest.FixtureRequest) -> List[Target]:
    if request.param == "nginx":
        return nginx_targets(request.getfixturevalue("nginx"))
    if request.param == "moto":
        return moto_targets(request.getfixturevalue("moto"))
    return local_targets(request.getfixturevalue("local_file"))


def spans(size: int) -> List[Tuple[int, int]]:
    """Scattered, overlapping and edge ranges of an object of `size` bytes."""
    out = [(0, min(size, 10)), (size - 1, 1), (0, size)]
    out += [((i * 7919) % (size - 50), 1 + (i * 13) % 50) for i in range(20)]
    if size > 600_000:
        out.append((size - 500_000, 400_000))
    return out


def test_read(targets: List[Target]) -> None:
    for client, uri, name, size in targets:
        assert client.read(uri, 0, size) == content(name, 0, size)
        assert client.read(uri, size // 3, 17) == content(name, size // 3, 17)


def test_read_ranges(targets: List[Target]) -> None:
    for client, uri, name, size in targets:
        ranges = spans(size)
        got = client.read_ranges(uri, ranges)
        assert [len(g) for g in got] == [n for _, n in ranges]
        for (offset, length), data in zip(ranges, got):
            assert data == content(name, offset, length), (uri, offset, length)


def test_read_into_any_writable_buffer(targets: List[Target]) -> None:
    for client, uri, name, size in targets:
        ba = bytearray(100)
        assert client.read_into(uri, 5, ba) == 100
        assert bytes(ba) == content(name, 5, 100)

        # A slice of a larger buffer: only that slice is written.
        big = bytearray(b"\xee" * 300)
        assert client.read_into(uri, 50, memoryview(big)[100:200]) == 100
        assert big[:100] == b"\xee" * 100 and big[200:] == b"\xee" * 100
        assert bytes(big[100:200]) == content(name, 50, 100)

        # NumPy arrays of any dtype: their bytes, in place.
        arr = np.zeros(size // 8, dtype=np.float64)
        assert client.read_into(uri, 0, arr) == arr.nbytes
        assert arr.tobytes() == content(name, 0, arr.nbytes)

        ints = array.array("I", [0] * 16)
        client.read_into(uri, 8, ints)
        assert ints.tobytes() == content(name, 8, 64)

        assert client.read_into(uri, 0, bytearray()) == 0  # nothing to read

        # Past the end: RANGE, the valid prefix written.
        tail = bytearray(20)
        with pytest.raises(karu.Error) as caught:
            client.read_into(uri, size - 5, tail)
        assert caught.value.status == karu.Status.RANGE
        assert bytes(tail[:5]) == content(name, size - 5, 5)


def test_read_into_refuses_what_it_cannot_write(targets: List[Target]) -> None:
    client, uri, _, _ = targets[0]
    with pytest.raises((BufferError, TypeError)):
        client.read_into(uri, 0, b"read-only bytes")
    strided = np.zeros((4, 4), dtype=np.uint8)[:, 1]
    with pytest.raises((BufferError, TypeError, ValueError)):
        client.read_into(uri, 0, strided)


def test_stat_size_and_read_ends(targets: List[Target]) -> None:
    for client, uri, name, size in targets:
        info = client.stat(uri)
        assert info.size == size
        if uri.startswith("/"):
            assert info.etag is None
        else:
            assert info.etag is not None and info.etag.startswith('"')
        assert client.size(uri) == size
        ends = client.read_ends(uri, 100, 64)
        assert (ends.size, ends.etag) == (size, info.etag)
        assert ends.head == content(name, 0, 100)
        assert ends.tail == content(name, size - 64, 64)


def test_submit_yields_each_completion(targets: List[Target]) -> None:
    client, uri, name, size = targets[0]
    ranges = spans(size)
    reads = [(uri, off, n) for off, n in ranges]
    reads.append((uri, size - 2, 10, 999))  # past the end: RANGE with the valid prefix
    batch = client.submit(reads)
    seen = {}
    for done in batch:
        tag, status, data = done
        seen[tag] = (status, data, done.error)
    assert sorted(seen) == list(range(len(ranges))) + [999]
    for i, (off, n) in enumerate(ranges):
        assert seen[i] == (karu.Status.OK, content(name, off, n), None)
    status, data, error = seen[999]
    assert status == karu.Status.RANGE and isinstance(error, karu.Error)
    assert data == content(name, size - 2, 2)
    assert batch.pending() == 0
    assert batch.stats()["requested_bytes"] == sum(n for _, n in ranges) + 10


def test_submit_checks_its_input() -> None:
    client = karu.Client(hermetic=True)
    with pytest.raises(TypeError):
        client.submit([("/tmp/x", 0)])  # type: ignore[list-item]
    with pytest.raises(karu.MalformedUriError):
        client.submit([("", 0, 1)])


@pytest.mark.parametrize("via", ["callable", "bar"])
def test_download(targets: List[Target], tmp_path: Path, via: str) -> None:
    from tqdm import tqdm

    client, uri, name, size = max(targets, key=lambda t: t[3])
    dest = tmp_path / "copy.bin"
    calls: List[Tuple[int, int]] = []
    # A float total (as tqdm(total=1e6) has) is replaced by the object's size.
    bar = tqdm(total=1.0, unit="B", unit_scale=True, file=io.StringIO())
    progress: Callable[[int, int], None] = lambda done, total: calls.append((done, total))
    result = client.download(
        uri,
        str(dest),
        chunk_size=64 << 10,
        parallelism=4,
        progress=bar if via == "bar" else progress,
    )
    assert dest.read_bytes() == content(name, 0, size)
    assert result.size == size
    if via == "bar":
        assert (bar.n, bar.total) == (size, size)
    else:
        assert calls[-1] == (size, size)
        assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:]))
    # The destination exists now: refused without overwrite, replaced with it.
    with pytest.raises(karu.Error):
        client.download(uri, dest)
    assert client.download(uri, dest, overwrite=True).size == size


def test_download_cancelled_by_progress(tmp_path: Path, nginx: Nginx) -> None:
    client = karu.Client(hermetic=True)
    dest = tmp_path / "never.bin"
    with pytest.raises(karu.Error) as caught:
        client.download(f"{nginx.url}/medium.bin", dest, progress=lambda done, total: False)
    assert caught.value.status == karu.Status.CANCELLED
    assert not dest.exists()

    class Boom(Exception):
        pass

    def explode(done: int, total: int) -> None:
        raise Boom("from the callback")

    with pytest.raises(Boom):
        client.download(f"{nginx.url}/medium.bin", dest, progress=explode)
    assert not dest.exists()


def test_options_configure_the_client(moto: Moto) -> None:
    # Without the endpoint option the emulator's bucket is not reachable by that name.
    client = karu.Client({**moto.options(), "KARU_MAX_ATTEMPTS": 2, "AWS_HTTPS": False}, True)
    assert client.read(moto.uri("small.bin"), 0, 10) == content("small.bin", 0, 10)
    with pytest.raises(karu.ConfigError) as caught:
        karu.Client({"KARU_IO_THREADS": 0})
    assert caught.value.status == karu.Status.CONFIG
    with pytest.raises(karu.ConfigError):
        karu.Client({"NOT_A_KARU_OPTION": "1"})
    with pytest.raises(ValueError):
        karu.Client({"KARU_IO_THREADS": 1.5})  # type: ignore[dict-item]
