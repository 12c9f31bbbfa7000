"""Fixtures of the Python package's tests: the servers scripts/test.sh starts (nginx, moto),
the test kit's fault server, deterministic content and nginx's request log.

Without a server's variable a test skips, except under CI (`CI` set), where it fails.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import numpy as np
import pytest

import karu

ROOT = Path(__file__).resolve().parents[3]


def need(var: str, script: str) -> str:
    """The value of `var`, or a skip (a failure under CI) when the server is not running."""
    value = os.environ.get(var)
    if value:
        # Only a URL loses its trailing slash: moto's random secrets may end in one (1 run
        # in 64 failed every moto test with a signature mismatch).
        return value.rstrip("/") if var.endswith("_URL") else value
    why = f"{var} is not set: run `bash scripts/test.sh` (or scripts/{script}.sh start)"
    if os.environ.get("CI"):
        pytest.fail(f"{why}; CI is set, so this fails")
    pytest.skip(why)


# Deterministic content, as karu_testkit::content computes it: the byte at offset o of object
# NAME is byte o % 8 of splitmix64(seed(NAME) + (o / 8) * golden), seed being FNV-1a of NAME.
_M64 = (1 << 64) - 1


def _seed(name: str) -> int:
    h = 0xCBF29CE484222325
    for b in name.encode():
        h = ((h ^ b) * 0x00000100000001B3) & _M64
    return h


def _word(seed: int, index: int) -> int:
    z = (seed + index * 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def content(name: str, offset: int, length: int) -> bytes:
    """`karu_testkit::content::bytes(name, offset, length)`."""
    if length <= 0:
        return b""
    s = _seed(name)
    first, last = offset // 8, (offset + length - 1) // 8
    words = b"".join(_word(s, i).to_bytes(8, "little") for i in range(first, last + 1))
    start = offset - first * 8
    return words[start : start + length]


@dataclass
class Nginx:
    url: str
    dir: Path

    @property
    def www(self) -> Path:
        return self.dir / "www"

    def log_lines(self) -> List[str]:
        path = self.dir / "access.log"
        return path.read_text().splitlines() if path.exists() else []

    def requests_for(self, name: str, since: int) -> List[str]:
        """The access-log lines for `/name` after the first `since` lines (nginx writes a line
        once the response is sent, so a short wait lets the last ones land)."""
        time.sleep(0.05)
        return [line for line in self.log_lines()[since:] if f" /{name} " in line]


@pytest.fixture(scope="session")
def nginx() -> Nginx:
    url = need("KARU_TEST_NGINX_URL", "nginx")
    return Nginx(url=url, dir=Path(need("KARU_TEST_NGINX_DIR", "nginx")))


# Files scripts/nginx.sh serves by default: name -> size.
NGINX_FILES: Dict[str, int] = {
    "small.bin": 1000,
    "medium.bin": 1048583,
    "dir/nested.bin": 4096,
}


@dataclass
class Moto:
    url: str
    key: str
    secret: str
    bucket: str
    dir: Path
    open_url: str

    def options(self) -> Dict[str, str]:
        return {
            "AWS_S3_ENDPOINT": self.url,
            "AWS_ACCESS_KEY_ID": self.key,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_VIRTUAL_HOSTING": "NO",
        }

    def client(self) -> karu.Client:
        return karu.Client(self.options(), hermetic=True)

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def open_options(self) -> Dict[str, str]:
        """Anonymous reads from the moto that checks no signature (public objects)."""
        return {
            "AWS_S3_ENDPOINT": self.open_url,
            "AWS_NO_SIGN_REQUEST": "YES",
            "AWS_VIRTUAL_HOSTING": "NO",
        }

    def put_public(self, key: str, data: bytes) -> None:
        """Stores a public-read object on the open moto (which takes unsigned requests)."""
        req = urllib.request.Request(
            f"{self.open_url}/{self.bucket}/{key}",
            data=data,
            method="PUT",
            # Not urllib's default form type, which the emulator would try to parse.
            headers={"x-amz-acl": "public-read", "Content-Type": "application/octet-stream"},
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 200, r.status

    def requests_for(self, key: str, since: int, server: str = "moto") -> List[str]:
        """The request-log lines of `server` ("moto" or "moto-open") for `key` after the
        first `since` lines."""
        time.sleep(0.05)
        lines = self.log_lines(server)[since:]
        return [line for line in lines if f"/{self.bucket}/{key} " in line]

    def log_lines(self, server: str = "moto") -> List[str]:
        path = self.dir / f"{server}.log"
        return path.read_text(errors="replace").splitlines() if path.exists() else []


@pytest.fixture(scope="session")
def moto() -> Moto:
    return Moto(
        url=need("KARU_TEST_MOTO_URL", "s3"),
        key=need("KARU_TEST_MOTO_ACCESS_KEY_ID", "s3"),
        secret=need("KARU_TEST_MOTO_SECRET_ACCESS_KEY", "s3"),
        bucket=need("KARU_TEST_S3_BUCKET", "s3"),
        dir=Path(need("KARU_TEST_S3_DIR", "s3")),
        open_url=need("KARU_TEST_MOTO_OPEN_URL", "s3"),
    )


# Objects scripts/s3.sh puts in every bucket: key -> size.
S3_OBJECTS: Dict[str, int] = {
    "small.bin": 1000,
    "medium.bin": 1048583,
    "dir/nested.bin": 4096,
}


def serve(*args: str) -> Iterator[str]:
    """Runs `karu-testkit-serve ARGS` (see crates/karu-testkit) and yields its base URL."""
    binary = os.environ.get("KARU_TESTKIT_SERVE") or str(
        ROOT / "target" / "debug" / "karu-testkit-serve"
    )
    if not Path(binary).exists():
        why = f"{binary} is missing: `cargo build -p karu-testkit --bin karu-testkit-serve`"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    proc = subprocess.Popen(
        [binary, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdin is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), url
    try:
        yield url
    finally:
        proc.stdin.close()  # it serves until its stdin closes
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def testkit() -> Iterator[str]:
    """The base URL of a `karu-testkit-serve` fault server."""
    yield from serve()


#: The round trip `slow_nginx` adds.
SLOW_RTT_MS = 100


@pytest.fixture(scope="session")
def slow_nginx(nginx: Nginx) -> Iterator[str]:
    """nginx behind the test kit's latency proxy, `SLOW_RTT_MS` ms of round trip away: the
    base URL of the proxy (nginx's log still counts the requests)."""
    yield from serve("--proxy", nginx.url.split("://", 1)[1], "--rtt-ms", str(SLOW_RTT_MS))


# --- Parquet ------------------------------------------------------------------------------

PARQUET_ROWS = 200_000

#: The column projection the Parquet tests read: 2 of 6 columns.
PARQUET_COLUMNS = ["id", "z"]


def parquet_bytes() -> bytes:
    """A 6.5 MB Parquet file: 6 columns, 4 row groups (as the benchmark's)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(7)
    table = pa.table(
        {
            "id": np.arange(PARQUET_ROWS, dtype=np.int64),
            "x": rng.random(PARQUET_ROWS),
            "y": rng.random(PARQUET_ROWS),
            "name": [f"row-{i % 977}" for i in range(PARQUET_ROWS)],
            "flag": rng.integers(0, 2, PARQUET_ROWS).astype(bool),
            "z": rng.normal(size=PARQUET_ROWS).astype(np.float32),
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=50_000, compression="snappy")
    return sink.getvalue().to_pybytes()


@pytest.fixture(scope="session")
def parquet_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("parquet") / "table.parquet"
    path.write_bytes(parquet_bytes())
    return path


@pytest.fixture
def local_file(tmp_path: Path) -> Path:
    """A local file of `content("local.bin", 0, 10000)`."""
    path = tmp_path / "local.bin"
    path.write_bytes(content("local.bin", 0, 10000))
    return path


def hermetic() -> karu.Client:
    return karu.Client(hermetic=True)
