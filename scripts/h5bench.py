#!/usr/bin/env python3
"""The H5 workload of BENCHMARKS.md (issue 14): karu's reader through hdf5-reader against
h5py (libhdf5) over fsspec's HTTPFileSystem, on nginx at RTT 0 and 20 ms.

    "$(bash scripts/pyenv.sh)/bin/python" scripts/h5bench.py [--reps N]

Workloads, on the files of scripts/h5files.py:
  A list     open a.h5 and list every object with its shape and dtype
  B read     open b.h5 and read all of /var (780 deflated chunks)
  C lookup   open c.h5 (35,001 groups) and read /DATASET_NAME

Readers:
  karu                 `karu h5 ls|read URL` (1 MiB blocks, 64 MiB cache; a new process a run)
  h5py+fsspec block    h5py.File over HTTPFileSystem.open(cache_type="blockcache", 1 MiB blocks)
  h5py+fsspec default  h5py.File over HTTPFileSystem.open() (its default cache and block size)

Requests and bytes are counted in nginx's access log (every method; bytes are response
bodies); wall time is the median of --reps runs, each from a cold start (new process or new
filesystem instance, no shared cache). RTT 20 ms goes through karu-testkit-proxy (10 ms each
way). Uses $KARU_TEST_NGINX_URL and $KARU_TEST_NGINX_DIR when set, otherwise starts
scripts/nginx.sh itself; builds the release `karu` and `karu-testkit-proxy` with cargo.
Prints a Markdown table.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import fsspec
import h5py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20


def nginx():
    """(url, dir, stop): the running nginx, or one started for this run."""
    url, d = os.environ.get("KARU_TEST_NGINX_URL"), os.environ.get("KARU_TEST_NGINX_DIR")
    if url and d:
        return url, d, lambda: None
    env = tempfile.mktemp(prefix="karu-h5bench-nginx.")
    subprocess.run(["bash", os.path.join(ROOT, "scripts/nginx.sh"), "start", env], check=True,
                   stdout=sys.stderr)
    values = {}
    with open(env) as f:
        for line in f:
            if line.startswith("export "):
                k, _, v = line[len("export "):].strip().partition("=")
                values[k] = v.strip("\"'")

    def stop():
        subprocess.run(["bash", os.path.join(ROOT, "scripts/nginx.sh"), "stop", env],
                       stdout=sys.stderr)
        os.unlink(env)

    return values["KARU_TEST_NGINX_URL"], values["KARU_TEST_NGINX_DIR"], stop


def logged(nginx_dir, token):
    """(requests, body bytes) nginx logged for URLs holding `token`."""
    requests = body = 0
    with open(os.path.join(nginx_dir, "access.log")) as f:
        for line in f:
            if token in line:
                requests += 1
                # ... "GET /path HTTP/1.1" STATUS BYTES range=...
                body += int(line.split('" ', 1)[1].split()[1])
    return requests, body


def karu_run(karu, workload, url):
    args = {"A list": ["ls", url], "B read": ["read", url, "/var"],
            "C lookup": ["read", url, "/DATASET_NAME"]}[workload]
    subprocess.run([karu, "--hermetic", "h5", *args], check=True, stdout=subprocess.DEVNULL)


def h5py_run(cache, workload, url):
    fs = fsspec.filesystem("http", skip_instance_cache=True)
    options = {"cache_type": "blockcache", "block_size": MIB} if cache == "block" else {}
    with fs.open(url, "rb", **options) as raw, h5py.File(raw, "r") as f:
        if workload == "A list":
            seen = []
            f.visititems(lambda name, obj: seen.append(
                (name, getattr(obj, "shape", None), getattr(obj, "dtype", None))))
        elif workload == "B read":
            f["var"][()]
        else:
            f["DATASET_NAME"][()]


FILES = {"A list": "a.h5", "B read": "b.h5", "C lookup": "c.h5"}
READERS = ["karu", "h5py+fsspec block", "h5py+fsspec default"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    reps = ap.parse_args().reps
    subprocess.run(["cargo", "build", "-q", "--release", "-p", "karu-cli", "-p", "karu-testkit",
                    "--bin", "karu", "--bin", "karu-testkit-proxy"], cwd=ROOT, check=True)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    karu = os.path.join(target, "release", "karu")
    proxy_bin = os.path.join(target, "release", "karu-testkit-proxy")
    h5_dir = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/h5files.py")],
                            check=True, capture_output=True, text=True).stdout.strip()
    url, nginx_dir, stop = nginx()
    served = f"h5bench-{os.getpid()}"
    link = os.path.join(nginx_dir, "www", served)
    os.symlink(h5_dir, link)
    proxy = subprocess.Popen([proxy_bin, url.split("//", 1)[1].rstrip("/"), "10"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        proxy_url = proxy.stdout.readline().strip().rstrip("/")
        rows = []
        for rtt, base in ((0, url.rstrip("/")), (20, proxy_url)):
            for workload, name in FILES.items():
                for reader in READERS:
                    walls, counts = [], None
                    for _ in range(reps):
                        token = f"bench={uuid.uuid4().hex}"
                        u = f"{base}/{served}/{name}?{token}"
                        start = time.perf_counter()
                        if reader == "karu":
                            karu_run(karu, workload, u)
                        else:
                            h5py_run(reader.rsplit(" ", 1)[1], workload, u)
                        walls.append(time.perf_counter() - start)
                        counts = counts or logged(nginx_dir, token)
                    rows.append((rtt, workload, reader, counts[0], counts[1],
                                 statistics.median(walls)))
                    print(f"h5bench: RTT {rtt} ms, {workload}, {reader}: {counts[0]} requests, "
                          f"{counts[1]} bytes, {statistics.median(walls):.3f} s", file=sys.stderr)
    finally:
        proxy.stdin.close()
        proxy.wait()
        os.unlink(link)
        stop()
    print("| RTT | workload | reader | requests | MB fetched | wall (s) |")
    print("|---:|---|---|---:|---:|---:|")
    for rtt, workload, reader, n, body, wall in rows:
        print(f"| {rtt} ms | {workload} | {reader} | {n} | {body / 1e6:.1f} | {wall:.3f} |")


if __name__ == "__main__":
    main()
