#!/usr/bin/env bash
# Runs karu's whole test suite: starts the real servers the tests need, then cargo test.
# Servers already described by their variables (KARU_TEST_NGINX_URL, KARU_TEST_MOTO_URL) are
# used as they are. If a server cannot start, the run fails under CI; elsewhere its tests
# print a skip line.
set -euo pipefail
cd "$(dirname "$0")/.."

stops=()
cleanup() {
    local s
    for s in "${stops[@]}"; do eval "$s" || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_server NAME SCRIPT: runs `SCRIPT start ENV_FILE` and sources ENV_FILE.
start_server() {
    local name=$1 script=$2 env_file
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

[ -n "${KARU_TEST_NGINX_URL:-}" ] || start_server nginx scripts/nginx.sh
[ -n "${KARU_TEST_MOTO_URL:-}" ] || start_server s3 scripts/s3.sh

cargo test --workspace "$@"
