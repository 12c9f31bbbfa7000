#!/usr/bin/env bash
# The fault soak of RELIABILITY.md: `karu-bench --soak`, built in release, run at nice 10.
#
#   scripts/soak.sh          1,000,000 reads; rewrites the soak table of RELIABILITY.md
#   scripts/soak.sh N        N reads (the quick mode CI runs); writes target/karu-soak-quick.md
#
# Further arguments go to karu-bench (e.g. `--soak-seed S`, `--out FILE`). The exit status is
# non-zero when a byte was wrong, a read hung, or a read failed in a way no injected fault
# explains.
set -euo pipefail
cd "$(dirname "$0")/.."
args=(--soak)
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
    args+=(--soak-reads "$1")
    shift
fi
exec nice -n 10 cargo run --release -q -p karu-bench -- "${args[@]}" "$@"
