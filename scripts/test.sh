#!/usr/bin/env bash
# Runs karu's whole test suite: starts the real servers the tests need, then cargo test.
# A server already described by its variable (KARU_TEST_NGINX_URL, KARU_TEST_GCS_URL) is used
# as is. If a server cannot start, the run fails under CI; elsewhere its tests print a skip
# line.
set -euo pipefail
cd "$(dirname "$0")/.."

stops=()
cleanup() {
    local s
    for s in "${stops[@]}"; do eval "$s"; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME SCRIPT URL_VAR: starts a server with SCRIPT unless URL_VAR is set, and sources
# the endpoints it writes.
start() {
    local name=$1 script=$2 var=$3
    [ -z "${!var:-}" ] || return 0
    local env_file
    env_file=$(mktemp "${TMPDIR:-/tmp}/karu-test-$name.XXXXXX")
    stops+=("bash $script stop '$env_file'; rm -f '$env_file'")
    if bash "$script" start "$env_file"; then
        # shellcheck disable=SC1090
        source "$env_file"
    elif [ -n "${CI:-}" ]; then
        echo "test.sh: $name did not start (CI is set, so this fails the run)" >&2
        exit 1
    else
        echo "test.sh: WARNING: $name did not start; the $name tests will be skipped" >&2
    fi
}

start nginx scripts/nginx.sh KARU_TEST_NGINX_URL
start fake-gcs-server scripts/gcs.sh KARU_TEST_GCS_URL

cargo test --workspace "$@"
