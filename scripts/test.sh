#!/usr/bin/env bash
# Runs karu's whole test suite: starts the real servers the tests need, makes the HDF5 test
# files (scripts/pyenv.sh, scripts/h5files.py), then cargo test, then the Python package's
# tests (pytest).
# A server already described by its variable (KARU_TEST_NGINX_URL, KARU_TEST_MOTO_URL,
# KARU_TEST_AZURITE_URL, KARU_TEST_GCS_URL) is used as is. If a server cannot start, the run
# fails under CI; elsewhere its tests print a skip line.
set -euo pipefail
cd "$(dirname "$0")/.."

stops=()
cleanup() {
    local s
    for s in "${stops[@]}"; do eval "$s" || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_server NAME VAR: unless VAR is set, starts scripts/NAME.sh, sources the endpoints it
# writes, and stops it on exit.
start_server() {
    local name=$1 var=$2
    [ -n "${!var:-}" ] && return 0
    local env_file
    env_file=$(mktemp "${TMPDIR:-/tmp}/karu-test-$name.XXXXXX")
    stops+=("bash scripts/$name.sh stop '$env_file'; rm -f '$env_file'")
    if bash "scripts/$name.sh" start "$env_file"; then
        # shellcheck disable=SC1090
        source "$env_file"
    elif [ -n "${CI:-}" ]; then
        echo "test.sh: $name did not start (CI is set, so this fails the run)" >&2
        exit 1
    else
        echo "test.sh: WARNING: $name did not start; its tests will be skipped" >&2
    fi
}

start_server nginx KARU_TEST_NGINX_URL
start_server s3 KARU_TEST_MOTO_URL
start_server azure KARU_TEST_AZURITE_URL
start_server gcs KARU_TEST_GCS_URL

# The HDF5 files of the reader's tests (crates/karu/tests/h5.rs), made once by h5py in the
# tests' venv and cached (scripts/h5files.py).
if [ -z "${KARU_TEST_H5_DIR:-}" ]; then
    if venv=$(bash scripts/pyenv.sh) && h5_dir=$("$venv/bin/python" scripts/h5files.py); then
        export KARU_TEST_H5_DIR=$h5_dir
    elif [ -n "${CI:-}" ]; then
        echo "test.sh: the HDF5 test files could not be made (CI is set, so this fails the run)" >&2
        exit 1
    else
        echo "test.sh: WARNING: no HDF5 test files; their tests will be skipped" >&2
    fi
fi

# Feature hdf5 builds karu::h5 and its tests (the CLI enables it anyway).
cargo test --workspace --features karu-io/hdf5 "$@"
# The Parquet reader of the object_store adapter sits behind its feature.
cargo test -p karu-io-object-store --features parquet --test parquet "$@"

# ---- The Python package (crates/karu-python) ----------------------------------------------
# Its tests run in the cached venv of scripts/pyenv.sh, against the servers started above and
# the test kit's fault server (karu-testkit-serve). The extension is built into the venv once
# per run by `maturin develop` (a debug build, incremental in target/). KARU_SKIP_PYTHON=1
# skips this part (never under CI); outside CI a venv that cannot be made is a warning.
python_tests() {
    local venv
    if ! venv=$(bash scripts/pyenv.sh); then
        if [ -n "${CI:-}" ]; then
            echo "test.sh: the Python venv could not be made (CI is set, so this fails)" >&2
            exit 1
        fi
        echo "test.sh: WARNING: the Python venv could not be made; Python tests skipped" >&2
        return 0
    fi
    cargo build -q -p karu-testkit --bin karu-testkit-serve
    export KARU_TESTKIT_SERVE="${CARGO_TARGET_DIR:-$PWD/target}/debug/karu-testkit-serve"
    (cd crates/karu-python && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" maturin develop -q)
    "$venv/bin/python" -m pytest -q -p no:cacheprovider crates/karu-python/tests
}
if [ -z "${KARU_SKIP_PYTHON:-}" ] || [ -n "${CI:-}" ]; then
    python_tests
fi
