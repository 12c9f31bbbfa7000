#!/usr/bin/env python3
"""Generates the HDF5 test files of karu's reader tests (issue 14) and prints their directory.

    "$(bash scripts/pyenv.sh)/bin/python" scripts/h5files.py [--out DIR]

Run in the venv of scripts/pyenv.sh (h5py, numpy). The files mirror a design study's:

  a.h5   superblock v0; 21 objects (the root, 4 groups, 16 datasets); /data is a 2-D float64
         dataset of 1000 x 1000 in 25 deflated chunks of 200 x 200 (~8 MB).
  b.h5   netCDF-4 style: superblock v2; dimension scales time, y, x; one variable /var of
         780 deflated chunks (1 x 120 x 128 float32, ~56 KiB each) written chunk by chunk,
         so the chunk index interleaves with the data (~45 MB).
  c.h5   superblock v3; 35,001 groups (named 0, 1, ... in base 36) in one dense root group,
         and the scalar dataset /DATASET_NAME.
  bp.h5  b.h5 repacked with paged aggregation (`h5repack -S PAGE -G 65536`, from Debian's
         hdf5-tools, installed with apt-get when missing).

Beside them, expected.json holds what h5py sees: for each file, every object (path, kind,
shape, dtype) and for each dataset the SHA-256 of `dset[()].tobytes()` (native byte order).

The files are cached in ${KARU_TEST_CACHE:-~/.cache/karu-test}/h5/<key>, the key being a hash
of this script and of the h5py, HDF5 and numpy versions, so a run regenerates them only when
one of those changes (not when another test requirement is added). Content is deterministic (seeded), except HDF5's own timestamps.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def cache_key():
    h = hashlib.sha256()
    with open(os.path.abspath(__file__), "rb") as f:
        h.update(f.read())
    h.update(f"h5py {h5py.version.version}, HDF5 {h5py.version.hdf5_version}, "
             f"numpy {np.__version__}".encode())
    return h.hexdigest()[:16]


def make_a(path):
    rng = np.random.default_rng(1)
    with h5py.File(path, "w", libver="earliest") as f:
        # Smooth values plus noise: deflate shrinks them a little, as with real measurements.
        y, x = np.mgrid[0:1000, 0:1000]
        data = np.sin(x / 50.0) * np.cos(y / 70.0) + rng.normal(0, 1e-3, (1000, 1000))
        d = f.create_dataset("data", data=data, chunks=(200, 200), compression="gzip",
                             compression_opts=4)
        d.attrs["units"] = "K"
        for g in range(4):
            grp = f.create_group(f"group{g}")
            grp.attrs["index"] = g
            for k in range(4 if g < 3 else 3):
                name = f"small{k}"
                kind = k % 3
                if kind == 0:
                    grp.create_dataset(name, data=rng.integers(0, 1000, size=100, dtype=np.int32))
                elif kind == 1:
                    grp.create_dataset(name, data=rng.random((10, 20)).astype(np.float32))
                else:
                    grp.create_dataset(name, data=np.int64(g * 10 + k))


def make_b(path):
    rng = np.random.default_rng(2)
    nt, ny, nx = 780, 120, 128
    with h5py.File(path, "w", libver=("v108", "v108")) as f:
        t = f.create_dataset("time", data=np.arange(nt, dtype=np.float64))
        yy = f.create_dataset("y", data=np.linspace(-60, 60, ny, dtype=np.float32))
        xx = f.create_dataset("x", data=np.linspace(0, 360, nx, endpoint=False,
                                                    dtype=np.float32))
        for s, n in ((t, "time"), (yy, "y"), (xx, "x")):
            s.make_scale(n)
        v = f.create_dataset("var", shape=(nt, ny, nx), dtype=np.float32,
                             chunks=(1, ny, nx), compression="gzip", compression_opts=1,
                             fillvalue=np.float32(-9999))
        v.attrs["long_name"] = "test variable"
        for i, s in enumerate((t, yy, xx)):
            v.dims[i].attach_scale(s)
        for i in range(nt):
            # Normal noise: deflate keeps each chunk near 56 KiB of its 60 KiB.
            v[i] = rng.standard_normal((ny, nx), dtype=np.float32)


def base36(i):
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = digits[i % 36]
    while i >= 36:
        i //= 36
        out = digits[i % 36] + out
    return out


def make_c(path):
    # Names of at most 3 characters keep the link heap (fractal heap) within the direct rows
    # of its root indirect block: hdf5-reader 0.12.1 misreads links stored past them (names
    # like g00000 reach them after about 30,800 groups).
    with h5py.File(path, "w", libver=("v110", "v110")) as f:
        for i in range(35001):
            f.create_group(base36(i))
        f.create_dataset("DATASET_NAME", data=np.float64(42.5))


def repack_paged(src, dst):
    if shutil.which("h5repack") is None:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        print("h5files.py: installing hdf5-tools from Debian", file=sys.stderr)
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env,
                       stdout=sys.stderr)
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                        "hdf5-tools"], check=True, env=env, stdout=sys.stderr)
    subprocess.run(["h5repack", "-S", "PAGE", "-G", "65536", src, dst], check=True,
                   stdout=sys.stderr)


def describe(path):
    objects = []
    datasets = {}

    def visit(name, obj):
        p = "/" + name
        if isinstance(obj, h5py.Dataset):
            objects.append({"path": p, "kind": "dataset", "shape": list(obj.shape),
                            "dtype": obj.dtype.str})
            data = obj[()]
            raw = data.tobytes() if isinstance(data, np.ndarray) else np.asarray(data).tobytes()
            datasets[p] = {"shape": list(obj.shape), "dtype": obj.dtype.str,
                           "sha256": hashlib.sha256(raw).hexdigest()}
        else:
            objects.append({"path": p, "kind": "group"})

    with h5py.File(path, "r") as f:
        objects.append({"path": "/", "kind": "group"})
        f.visititems(visit)
        superblock = f.id.get_create_plist().get_version()[0]
    return {"size": os.path.getsize(path), "superblock": superblock, "objects": objects,
            "datasets": datasets}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cache = os.environ.get("KARU_TEST_CACHE", os.path.expanduser("~/.cache/karu-test"))
    ap.add_argument("--out", default=os.path.join(cache, "h5", cache_key()))
    out = ap.parse_args().out
    if os.path.exists(os.path.join(out, "expected.json")):
        print(out)
        return
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".h5files-", dir=os.path.dirname(os.path.abspath(out)))
    try:
        make_a(os.path.join(tmp, "a.h5"))
        make_b(os.path.join(tmp, "b.h5"))
        make_c(os.path.join(tmp, "c.h5"))
        repack_paged(os.path.join(tmp, "b.h5"), os.path.join(tmp, "bp.h5"))
        expected = {name: describe(os.path.join(tmp, name))
                    for name in ("a.h5", "b.h5", "c.h5", "bp.h5")}
        with open(os.path.join(tmp, "expected.json"), "w") as f:
            json.dump(expected, f, indent=1, sort_keys=True)
        if os.path.exists(out):
            shutil.rmtree(out)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(out)


if __name__ == "__main__":
    main()
