#!/usr/bin/env bash
# Runs karu's whole test suite: starts the real servers the tests need, then cargo test.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace "$@"
