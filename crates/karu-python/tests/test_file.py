"""karu.open: a read-only, seekable binary file over the block-cached, version-pinned
reader, usable by zipfile, tarfile and h5py."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import PARQUET_COLUMNS, ROOT, SLOW_RTT_MS, Moto, Nginx, content

import karu


def test_file_semantics(nginx: Nginx, moto: Moto, local_file: Path) -> None:
    for uri, name, size, client in [
        (f"{nginx.url}/medium.bin", "medium.bin", 1048583, karu.Client(hermetic=True)),
        (moto.uri("medium.bin"), "medium.bin", 1048583, moto.client()),
        (str(local_file), "local.bin", 10000, karu.Client(hermetic=True)),
    ]:
        with karu.open(uri, client=client, block_size=64 << 10) as f:
            assert isinstance(f, io.RawIOBase)
            assert f.readable() and f.seekable() and not f.writable()
            assert (f.size, f.name, f.mode) == (size, uri, "rb")
            assert f.read(10) == content(name, 0, 10)
            assert f.tell() == 10
            buf = bytearray(1000)
            assert f.readinto(buf) == 1000 and bytes(buf) == content(name, 10, 1000)
            arr = np.zeros(100, dtype=np.int16)  # readinto writes any writable buffer
            assert f.readinto(arr) == 200 and arr.tobytes() == content(name, 1010, 200)
            assert f.seek(-5, io.SEEK_END) == size - 5
            assert f.read() == content(name, size - 5, 5)
            assert f.read(10) == b"" and f.readinto(bytearray(4)) == 0  # at the end
            assert f.seek(size + 100) == size + 100 and f.read(1) == b""
            f.seek(3)
            f.seek(4, io.SEEK_CUR)
            assert f.read(3) == content(name, 7, 3)
            with pytest.raises(ValueError):
                f.seek(-1)
            assert f.read_ranges([(0, 4), (size - 4, 4)]) == [
                content(name, 0, 4),
                content(name, size - 4, 4),
            ]
            f.seek(0)
            assert f.readall() == content(name, 0, size)
            if uri.startswith("/"):
                assert f.etag is None
            else:
                assert f.etag and f.stats()["requests"] >= 1
        assert f.closed
        with pytest.raises(ValueError):
            f.read(1)
        # Buffered on top, as open() in text or buffered modes would do.
        with io.BufferedReader(karu.open(uri, client=client)) as b:
            assert b.read(20) == content(name, 0, 20)


def test_open_errors(nginx: Nginx) -> None:
    client = karu.Client(hermetic=True)
    with pytest.raises(FileNotFoundError):
        karu.open(f"{nginx.url}/missing.bin", client=client)
    with pytest.raises(karu.InvalidError):
        karu.open(f"{nginx.url}/small.bin", client=client, block_size=0)


def test_zipfile_and_tarfile_read_through_it(nginx: Nginx) -> None:
    members = {f"m{i}.bin": content(f"member{i}", 0, 5000 + i) for i in range(5)}
    zpath = nginx.www / "py-test.zip"
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
        for n, data in members.items():
            z.writestr(n, data)
    tpath = nginx.www / "py-test.tar"
    with tarfile.open(tpath, "w") as t:
        for n, data in members.items():
            info = tarfile.TarInfo(n)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    client = karu.Client(hermetic=True)
    with zipfile.ZipFile(karu.open(f"{nginx.url}/py-test.zip", client=client)) as z:
        assert {n: z.read(n) for n in z.namelist()} == members
    with tarfile.open(fileobj=karu.open(f"{nginx.url}/py-test.tar", client=client)) as t:
        got = {}
        for m in t.getmembers():
            extracted = t.extractfile(m)
            assert extracted is not None
            got[m.name] = extracted.read()
        assert got == members


@pytest.fixture(scope="session")
def h5_dir() -> Path:
    """The HDF5 test files of scripts/h5files.py (made once, cached by the script; already
    made when scripts/test.sh set KARU_TEST_H5_DIR)."""
    if os.environ.get("KARU_TEST_H5_DIR"):
        return Path(os.environ["KARU_TEST_H5_DIR"])
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "h5files.py")],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout.strip()
    return Path(out)


def test_h5py_reads_file_b_in_few_requests(nginx: Nginx, h5_dir: Path) -> None:
    h5py = pytest.importorskip("h5py")
    served = nginx.www / "py-b.h5"
    if not served.exists():
        os.symlink(h5_dir / "b.h5", served)
    with h5py.File(h5_dir / "b.h5", "r") as local:
        want = local["var"][()]
    since = len(nginx.log_lines())
    f = karu.open(f"{nginx.url}/py-b.h5", client=karu.Client(hermetic=True))
    with h5py.File(f, "r") as remote:
        got = remote["var"][()]
        names = sorted(remote.keys())
    np.testing.assert_array_equal(got, want)
    assert got.shape == (780, 120, 128) and names == ["time", "var", "x", "y"]
    requests = nginx.requests_for("py-b.h5", since)
    print(f"h5py file B through karu.open: {len(requests)} requests ({f.stats()})")
    assert len(requests) <= 25, len(requests)
    assert len(requests) == f.stats()["requests"]


def test_pandas_reads_a_parquet_projection_through_it(
    nginx: Nginx, slow_nginx: str, parquet_file: Path
) -> None:
    pd = pytest.importorskip("pandas")
    pq = pytest.importorskip("pyarrow.parquet")
    (nginx.www / "py-open.parquet").write_bytes(parquet_file.read_bytes())
    want = pq.read_table(parquet_file, columns=PARQUET_COLUMNS).to_pandas()
    counts = {}
    for name, base in [("loopback", nginx.url), (f"{SLOW_RTT_MS} ms away", slow_nginx)]:
        since = len(nginx.log_lines())
        with karu.open(f"{base}/py-open.parquet", client=karu.Client(hermetic=True)) as f:
            got = pd.read_parquet(f, columns=PARQUET_COLUMNS)
            stats = f.stats()
        pd.testing.assert_frame_equal(got, want)
        counts[name] = len(nginx.requests_for("py-open.parquet", since))
        assert counts[name] == stats["requests"], (name, stats)
    print(f"pandas, Parquet projection through karu.open: {counts} requests")
    # pyarrow reads the footer, then the projection's column chunks one by one through the
    # file object's lock. On loopback a round trip costs less than the rest of the 6.5 MB, so
    # the first miss fetches its own blocks; the second finds at most 8 blocks missing and
    # fetches all of them: at most the open and two requests, as many as fsspec's HTTP
    # filesystem with `blockcache` (a HEAD and two 5 MiB blocks). A link whose round trip
    # outlasts the rest makes the first miss fetch all of it: the open and one more.
    assert 0 < counts["loopback"] <= 3
    assert counts[f"{SLOW_RTT_MS} ms away"] == 2
