#!/usr/bin/env bash
# Runs karu's whole test suite: starts the real servers the tests need, then cargo test.
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

cargo test --workspace "$@"
# The Parquet reader of the object_store adapter sits behind its feature.
cargo test -p karu-io-object-store --features parquet --test parquet "$@"
