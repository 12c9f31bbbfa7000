#!/usr/bin/env python3
"""The Python table of BENCHMARKS.md: h5py and pandas through karu against fsspec's HTTP
filesystem, at a round trip of 0 and 20 ms.

    source ENV_FILE_OF_scripts/nginx.sh   # KARU_TEST_NGINX_URL, KARU_TEST_NGINX_DIR
    "$(bash scripts/pyenv.sh)/bin/python" crates/karu-python/bench/bench.py [--runs 3] \
        [--rtts 0 20] [--workloads pandas ...] [--readers karu.open ...]

Run it with karu built in release mode into that venv (`maturin develop --release` in
crates/karu-python). Every reader goes through the test kit's latency proxy in front of nginx
(`karu-testkit-serve --proxy`, with 0 ms it only counts), which counts the HTTP requests.
Workloads: h5py opening file A of scripts/h5files.py (open and visit every object), h5py
reading the variable of file B (780 chunks), and pandas reading two of six columns of a 6.5 MB
Parquet file. Readers: karu.open, karu's fsspec filesystem, fsspec's HTTPFileSystem with its
default cache and with `cache_type="blockcache"`, and obstore's fsspec store if installed.
Prints a Markdown table: requests and the median wall time of the runs, each run with a fresh
client (new connections, empty caches). `--workloads` and `--readers` keep the rows whose
names contain one of the words given (`--workloads pandas --readers karu blockcache` re-runs
the Parquet cells of both karu readers and of fsspec's `blockcache`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import fsspec
import h5py
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import karu
from karu.fsspec import KaruFileSystem

ROOT = Path(__file__).resolve().parents[3]
COLUMNS = ["id", "z"]


def parquet_bytes() -> bytes:
    rows = 200_000
    rng = np.random.default_rng(7)
    table = pa.table(
        {
            "id": np.arange(rows, dtype=np.int64),
            "x": rng.random(rows),
            "y": rng.random(rows),
            "name": [f"row-{i % 977}" for i in range(rows)],
            "flag": rng.integers(0, 2, rows).astype(bool),
            "z": rng.normal(size=rows).astype(np.float32),
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=50_000, compression="snappy")
    return sink.getvalue().to_pybytes()


class Proxy:
    """karu-testkit-serve --proxy: a latency proxy that counts requests."""

    def __init__(self, target: str, rtt_ms: int) -> None:
        binary = os.environ.get("KARU_TESTKIT_SERVE") or str(
            ROOT / "target" / "debug" / "karu-testkit-serve"
        )
        self.proc = subprocess.Popen(
            [binary, "--proxy", target, "--rtt-ms", str(rtt_ms)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout and self.proc.stdin
        self.url = self.proc.stdout.readline().strip()

    def requests(self) -> int:
        assert self.proc.stdout and self.proc.stdin
        self.proc.stdin.write("requests\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def open_a(f: Any) -> Any:
    seen: List[Tuple[str, Any]] = []
    with h5py.File(f, "r") as h:
        h.visititems(lambda name, obj: seen.append((name, getattr(obj, "shape", None))))
    return seen


def read_b(f: Any) -> Any:
    with h5py.File(f, "r") as h:
        return h["var"][()]


def readers() -> Dict[str, Callable[[str], Any]]:
    """Each reader's way to a file object (fresh client or filesystem each time); obstore's
    fsspec store when obstore is installed (`pip install obstore`; not a test requirement)."""
    out: Dict[str, Callable[[str], Any]] = {
        "karu.open": lambda url: karu.open(url, client=karu.Client(hermetic=True)),
        "karu fsspec": lambda url: KaruFileSystem(hermetic=True, skip_instance_cache=True).open(
            url, "rb"
        ),
        "fsspec http (default cache)": lambda url: fsspec.filesystem(
            "http", skip_instance_cache=True
        ).open(url, "rb"),
        "fsspec http (blockcache)": lambda url: fsspec.filesystem(
            "http", skip_instance_cache=True
        ).open(url, "rb", cache_type="blockcache"),
    }
    try:
        from obstore.fsspec import FsspecStore
    except ImportError:
        return out
    out["obstore fsspec"] = lambda url: FsspecStore(
        "http", client_options={"allow_http": True}, skip_instance_cache=True
    ).open(url, "rb")
    return out


def pandas_read(reader: str, url: str) -> pd.DataFrame:
    if reader == "karu fsspec":
        fs = KaruFileSystem(hermetic=True, skip_instance_cache=True)
        return pd.read_parquet(url, columns=COLUMNS, filesystem=fs)
    with readers()[reader](url) as f:
        return pd.read_parquet(f, columns=COLUMNS)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rtts", type=int, nargs="+", default=[0, 20], help="round trips, ms")
    ap.add_argument("--workloads", nargs="+", default=[""], help="words of workload names")
    ap.add_argument("--readers", nargs="+", default=[""], help="words of reader names")
    args = ap.parse_args()
    chosen = [r for r in readers() if any(w in r for w in args.readers)]
    nginx_url = os.environ["KARU_TEST_NGINX_URL"].rstrip("/")
    www = Path(os.environ["KARU_TEST_NGINX_DIR"]) / "www"
    h5 = Path(
        subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "h5files.py")],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout.strip()
    )
    for name, src in [("bench-a.h5", h5 / "a.h5"), ("bench-b.h5", h5 / "b.h5")]:
        if not (www / name).exists():
            os.symlink(src, www / name)
    (www / "bench.parquet").write_bytes(parquet_bytes())
    want_a = open_a(str(h5 / "a.h5"))
    want_b = read_b(str(h5 / "b.h5"))
    want_table = pq.read_table(www / "bench.parquet", columns=COLUMNS).to_pandas()

    workloads: Dict[str, Tuple[str, Callable[[str, str], None]]] = {
        "h5py: open file A": ("bench-a.h5", lambda r, u: check(open_a(readers()[r](u)) == want_a)),
        "h5py: read file B": (
            "bench-b.h5",
            lambda r, u: check(np.array_equal(read_b(readers()[r](u)), want_b)),
        ),
        "pandas: Parquet, 2 of 6 columns": (
            "bench.parquet",
            lambda r, u: check(pandas_read(r, u).equals(want_table)),
        ),
    }
    workloads = {k: v for k, v in workloads.items() if any(w in k for w in args.workloads)}
    target = nginx_url.split("://", 1)[1]
    results: Dict[Tuple[str, str, int], Tuple[int, float]] = {}
    for rtt in args.rtts:
        proxy = Proxy(target, rtt)
        try:
            for workload, (name, run) in workloads.items():
                url = f"{proxy.url}/{name}"
                counts: Dict[str, List[int]] = {r: [] for r in chosen}
                walls: Dict[str, List[float]] = {r: [] for r in chosen}
                # The readers take turns, run after run: a change of the machine's load
                # meanwhile touches them all alike.
                for _ in range(args.runs):
                    for reader in chosen:
                        before = proxy.requests()
                        t0 = time.perf_counter()
                        run(reader, url)
                        walls[reader].append(time.perf_counter() - t0)
                        time.sleep(0.05)
                        counts[reader].append(proxy.requests() - before)
                for reader in chosen:
                    results[(workload, reader, rtt)] = (
                        max(counts[reader]),
                        statistics.median(walls[reader]),
                    )
        finally:
            proxy.close()
    head = [
        f"{'RTT 0' if rtt == 0 else f'RTT {rtt} ms'}: {what}"
        for rtt in args.rtts
        for what in ("requests", "wall")
    ]
    print("| workload | reader | " + " | ".join(head) + " |")
    print("|---" * (2 + len(head)) + "|")
    for workload in workloads:
        for reader in chosen:
            cells = []
            for rtt in args.rtts:
                n, wall = results[(workload, reader, rtt)]
                cells += [str(n), f"{wall * 1000:.0f} ms"]
            print(f"| {workload} | {reader} | " + " | ".join(cells) + " |")


def check(ok: bool) -> None:
    if not ok:
        raise SystemExit("a reader returned other data than the local file holds")


if __name__ == "__main__":
    main()
