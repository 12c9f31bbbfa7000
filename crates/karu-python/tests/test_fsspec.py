"""karu.fsspec.KaruFileSystem: cat_file, cat_ranges, info/size, open; listing and writing
refused by name; register(); pyarrow and pandas reading Parquet through it."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import fsspec
import pytest
from conftest import PARQUET_COLUMNS, Moto, Nginx, content

import karu
from karu.fsspec import KaruFileSystem, register


def test_cat_info_size_open(nginx: Nginx, moto: Moto) -> None:
    for fs, uri in [
        (KaruFileSystem(hermetic=True), f"{nginx.url}/medium.bin"),
        (KaruFileSystem(options=moto.options(), hermetic=True), moto.uri("medium.bin")),
    ]:
        size = 1048583
        assert fs.cat_file(uri) == content("medium.bin", 0, size)
        assert fs.cat_file(uri, 100, 200) == content("medium.bin", 100, 100)
        assert fs.cat_file(uri, -10) == content("medium.bin", size - 10, 10)
        assert fs.cat_file(uri, 5, -5) == content("medium.bin", 5, size - 10)
        assert fs.cat_file(uri, 10, 10) == b""
        info = fs.info(uri)
        assert (info["name"], info["size"], info["type"]) == (uri, size, "file")
        assert info["etag"].startswith('"')
        assert fs.size(uri) == size and fs.isfile(uri) and not fs.isdir(uri)
        assert fs.exists(uri) and not fs.exists(uri + ".missing")
        with fs.open(uri, "rb") as f:
            assert isinstance(f, karu.KaruFile)
            f.seek(1000)
            assert f.read(24) == content("medium.bin", 1000, 24)
        with pytest.raises(FileNotFoundError):
            fs.info(uri + ".missing")


def test_opens_share_a_reader_until_invalidated(nginx: Nginx) -> None:
    fs = KaruFileSystem(hermetic=True, skip_instance_cache=True)
    uri = f"{nginx.url}/medium.bin"
    since = len(nginx.log_lines())
    with fs.open(uri) as f1, fs.open(uri) as f2:
        f1.seek(10)
        assert f2.read(5) == content("medium.bin", 0, 5)  # own positions
        assert f1.read(5) == content("medium.bin", 10, 5)
    assert fs.size(uri) == fs.size(uri) == 1048583
    assert len(nginx.requests_for("medium.bin", since)) == 2  # one open, one stat
    fs.invalidate_cache()
    with fs.open(uri) as f3:
        assert f3.read(3) == content("medium.bin", 0, 3)
    assert len(nginx.requests_for("medium.bin", since)) == 3  # opened anew


def test_cat_ranges_is_one_batch_per_object(nginx: Nginx, moto: Moto) -> None:
    fs = KaruFileSystem(hermetic=True)
    a, b = f"{nginx.url}/medium.bin", f"{nginx.url}/small.bin"
    missing = f"{nginx.url}/missing.bin"
    paths = [a, b, a, missing, a, b]
    starts = [0, 10, 500_000, 0, 1_000_000, 990]
    ends = [100, 20, 500_010, 5, 1_000_100, 1000]
    since = len(nginx.log_lines())
    got = fs.cat_ranges(paths, starts, ends)
    for p, s, e, g in zip(paths, starts, ends, got):
        if p == missing:
            assert isinstance(g, FileNotFoundError)
        else:
            assert g == content(p.rsplit("/", 1)[1], s, e - s)
    with pytest.raises(FileNotFoundError):
        fs.cat_ranges([missing], [0], [5], on_error="raise")
    # Three ranges of medium.bin far apart: one batch, pinned (a stat, then its three
    # transfers with If-Match).
    medium = nginx.requests_for("medium.bin", since)
    assert len(medium) == 4 and all('if_match="-"' not in line for line in medium[1:]), medium
    moto_fs = KaruFileSystem(options=moto.options(), hermetic=True)
    uri = moto.uri("medium.bin")
    assert moto_fs.cat_ranges([uri, uri], [0, 1_000_000], [8, 1_000_008]) == [
        content("medium.bin", 0, 8),
        content("medium.bin", 1_000_000, 8),
    ]


def test_listing_and_writing_name_the_operation(nginx: Nginx) -> None:
    fs = KaruFileSystem(hermetic=True)
    uri = f"{nginx.url}/small.bin"
    for op, call in [
        ("ls", lambda: fs.ls(nginx.url)),
        ("find", lambda: fs.find(nginx.url)),
        ("glob", lambda: fs.glob(nginx.url + "/*")),
        ("mkdir", lambda: fs.mkdir(uri + "/d")),
        ("rm", lambda: fs.rm(uri)),
        ("pipe_file", lambda: fs.pipe_file(uri, b"x")),
        ("put_file", lambda: fs.put_file("/etc/hostname", uri)),
        ("touch", lambda: fs.touch(uri)),
        ("open in mode 'wb'", lambda: fs.open(uri, "wb")),
    ]:
        with pytest.raises(NotImplementedError, match=op):
            call()
    assert fs.cat_file(uri, 0, 4) == content("small.bin", 0, 4)  # still reads


@pytest.fixture
def registered() -> Iterator[None]:
    """Undoes `register` (fsspec's registry of imported classes) after the test."""
    from fsspec.registry import _registry

    saved = dict(_registry)
    yield
    _registry.clear()
    _registry.update(saved)


def test_register_routes_protocols_to_karu(nginx: Nginx, registered: None) -> None:
    register("http", "https", "s3")
    fs, path = fsspec.core.url_to_fs(f"{nginx.url}/small.bin")
    assert isinstance(fs, KaruFileSystem) and path == f"{nginx.url}/small.bin"
    with fsspec.open(f"{nginx.url}/small.bin", "rb") as f:
        assert f.read() == content("small.bin", 0, 1000)
    assert isinstance(fsspec.filesystem("s3"), KaruFileSystem)


# --- Parquet through pyarrow and pandas -------------------------------------------------

COLUMNS = PARQUET_COLUMNS


def test_pyarrow_and_pandas_over_nginx(nginx: Nginx, parquet_file: Path) -> None:
    import pandas as pd
    import pyarrow.parquet as pq

    (nginx.www / "py-table.parquet").write_bytes(parquet_file.read_bytes())
    uri = f"{nginx.url}/py-table.parquet"
    want = pq.read_table(parquet_file, columns=COLUMNS)
    fs = KaruFileSystem(hermetic=True)
    since = len(nginx.log_lines())
    got = pq.read_table(uri, filesystem=fs, columns=COLUMNS)
    n_arrow = len(nginx.requests_for("py-table.parquet", since))
    assert got.equals(want)

    # pandas opens http(s) URLs with urllib unless given a filesystem.
    since = len(nginx.log_lines())
    fresh = KaruFileSystem(hermetic=True, skip_instance_cache=True)  # its own info and readers
    df = pd.read_parquet(uri, columns=COLUMNS, filesystem=fresh)
    n_pandas = len(nginx.requests_for("py-table.parquet", since))
    pd.testing.assert_frame_equal(df, want.to_pandas())
    print(f"parquet over nginx, columns {COLUMNS}: pyarrow {n_arrow} requests, pandas {n_pandas}")
    # A stat, the reader's first block and the block holding the rest: no more than fsspec's
    # HTTP filesystem with `blockcache` makes (a HEAD and two 5 MiB blocks).
    assert 0 < n_arrow <= 3 and 0 < n_pandas <= 3


def test_pyarrow_and_pandas_over_moto(moto: Moto, parquet_file: Path, registered: None) -> None:
    import pandas as pd
    import pyarrow.parquet as pq

    moto.put_public("py-table.parquet", parquet_file.read_bytes())
    uri = moto.uri("py-table.parquet")
    want = pq.read_table(parquet_file, columns=COLUMNS)
    fs = KaruFileSystem(options=moto.open_options(), hermetic=True)
    since = len(moto.log_lines("moto-open"))
    got = pq.read_table(uri, filesystem=fs, columns=COLUMNS)
    n_arrow = len(moto.requests_for("py-table.parquet", since, "moto-open"))
    assert got.equals(want)

    register("s3")
    since = len(moto.log_lines("moto-open"))
    df = pd.read_parquet(
        uri,
        columns=COLUMNS,
        storage_options={
            "options": moto.open_options(),
            "hermetic": True,
            "skip_instance_cache": True,
        },
    )
    n_pandas = len(moto.requests_for("py-table.parquet", since, "moto-open"))
    pd.testing.assert_frame_equal(df, want.to_pandas())
    print(f"parquet over moto, columns {COLUMNS}: pyarrow {n_arrow} requests, pandas {n_pandas}")
    # A stat, the reader's first block and the block holding the rest: no more than fsspec's
    # HTTP filesystem with `blockcache` makes (a HEAD and two 5 MiB blocks).
    assert 0 < n_arrow <= 3 and 0 < n_pandas <= 3
