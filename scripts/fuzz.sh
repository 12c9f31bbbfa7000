#!/usr/bin/env bash
# Runs karu's fuzz targets (fuzz/, libFuzzer through cargo-fuzz).
#
#   scripts/fuzz.sh TARGET SECONDS   fuzz one target for SECONDS (wall time)
#   scripts/fuzz.sh all SECONDS      fuzz every target in turn, SECONDS each
#   scripts/fuzz.sh build            build every target (once; runs reuse the build)
#   scripts/fuzz.sh cmin TARGET      fold what the runs found into TARGET's committed corpus and
#                                    minimise it: one input per covered edge (hit counts
#                                    ignored), which keeps it small
#   scripts/fuzz.sh list             print the targets
#
# * installs cargo-fuzz with `cargo install --locked` into
#   ${KARU_TEST_CACHE:-~/.cache/karu-test}/cargo-fuzz when it is missing (a minute or two);
# * sets RUSTC_BOOTSTRAP=1: cargo-fuzz passes nightly-only flags, which the stable toolchain
#   accepts only so;
# * builds in release mode with debug assertions and overflow checks, without a sanitizer
#   (the fuzzed code is safe Rust: AddressSanitizer would only halve the executions), into
#   target/fuzz (beside the workspace's build, never committed; a clean build takes about
#   270 CPU-seconds: karu's dependencies again, with coverage instrumentation);
# * reads the committed corpus fuzz/corpus/TARGET and adds new interesting inputs to
#   target/fuzz/corpus/TARGET, so a run leaves the checkout clean (`cmin` folds them into the
#   committed corpus); a crash leaves its input in fuzz/artifacts/TARGET/ and fails the script;
# * prints libFuzzer's final stats, then one line per target:
#   "TARGET: N executions in S s, corpus F files (B bytes), 0 crashes".
#
# Reproduce a crash: RUSTC_BOOTSTRAP=1 cargo fuzz run -s none --target-dir target/fuzz TARGET
# fuzz/artifacts/TARGET/FILE (from the repository root, with cargo-fuzz on PATH).
set -euo pipefail

NAME=fuzz
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

CARGO_FUZZ_VERSION=0.13.2
FUZZ_ROOT="$CACHE/cargo-fuzz"
export PATH="$FUZZ_ROOT/bin:$PATH"
export RUSTC_BOOTSTRAP=1
BUILD="${CARGO_TARGET_DIR:-$ROOT/target}/fuzz"

install_cargo_fuzz() {
    if ! cargo fuzz --version >/dev/null 2>&1; then
        log "installing cargo-fuzz $CARGO_FUZZ_VERSION into $FUZZ_ROOT"
        cargo install -q cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked \
            --root "$FUZZ_ROOT" >&2
    fi
}

targets() { (cd "$ROOT" && cargo fuzz list); }

build() { (cd "$ROOT" && cargo fuzz build -s none --target-dir "$BUILD"); }

# run TARGET SECONDS
run() {
    local target=$1 seconds=$2 out corpus="$ROOT/fuzz/corpus/$1" found="$BUILD/corpus/$1"
    mkdir -p "$corpus" "$found"
    out=$(mktemp)
    log "fuzzing $target for $seconds s"
    # libFuzzer writes (and reduces) only in the first directory: the scratch one.
    if ! (cd "$ROOT" && cargo fuzz run -s none --target-dir "$BUILD" "$target" "$found" "$corpus" -- \
        -max_total_time="$seconds" -timeout=10 -print_final_stats=1) 2>"$out"; then
        tail -n 60 "$out" >&2
        log "$target: crashed (input in fuzz/artifacts/$target/)"
        rm -f "$out"
        return 1
    fi
    grep -E '^(Done|stat::)' "$out" >&2 || true
    local runs files bytes
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out")
    files=$(find "$corpus" "$found" -type f | wc -l)
    bytes=$(find "$corpus" "$found" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
    rm -f "$out"
    echo "$target: ${runs:-?} executions in $seconds s, corpus $files files ($bytes bytes), 0 crashes"
}

cmin() {
    local target=$1 found="$BUILD/corpus/$1"
    if [ -d "$found" ]; then cp -rn "$found"/. "$ROOT/fuzz/corpus/$target"/; fi
    (cd "$ROOT" && cargo fuzz cmin -s none --target-dir "$BUILD" "$target" \
        "fuzz/corpus/$target" -- -use_counters=0)
}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d'; }

case "${1:-}" in
    ""|-h|--help) usage ;;
    list) install_cargo_fuzz; targets ;;
    build) install_cargo_fuzz; build ;;
    cmin) install_cargo_fuzz; cmin "${2:?cmin needs a target}" ;;
    all)
        install_cargo_fuzz
        build
        for t in $(targets); do run "$t" "${2:?all needs SECONDS}"; done
        ;;
    *) install_cargo_fuzz; run "$1" "${2:?usage: scripts/fuzz.sh TARGET SECONDS}" ;;
esac
