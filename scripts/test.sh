#!/usr/bin/env bash
# Runs karu's whole test suite: starts the real servers the tests need, then cargo test.
# An nginx already described by KARU_TEST_NGINX_URL is used as is. If nginx cannot start,
# the run fails under CI; elsewhere the nginx tests print a skip line.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${KARU_TEST_NGINX_URL:-}" ]; then
    env_file=$(mktemp "${TMPDIR:-/tmp}/karu-test-nginx.XXXXXX")
    trap 'bash scripts/nginx.sh stop "$env_file"; rm -f "$env_file"' EXIT
    trap 'exit 130' INT TERM
    if bash scripts/nginx.sh start "$env_file"; then
        # shellcheck disable=SC1090
        source "$env_file"
    elif [ -n "${CI:-}" ]; then
        echo "test.sh: nginx did not start (CI is set, so this fails the run)" >&2
        exit 1
    else
        echo "test.sh: WARNING: nginx did not start; the nginx tests will be skipped" >&2
    fi
fi

cargo test --workspace "$@"
