#!/usr/bin/env bash
# Starts nginx on 127.0.0.1 as the reference HTTP range server for karu's tests, or stops it.
#
#   scripts/nginx.sh [start] [ENV_FILE]   start; write the endpoints to ENV_FILE (or print them)
#   scripts/nginx.sh stop [ENV_FILE]      stop the instance described by ENV_FILE
#                                         (default: the last one started from this checkout)
#
# start:
#   * installs nginx (and curl) from Debian if missing: `apt-get update` once, then
#     `apt-get install -y --no-install-recommends nginx curl`;
#   * makes a temp dir with the config (`daemon off;`, error log to stderr -> error.log in the
#     temp dir, access log in the temp dir with Range/If-Match and the connection number);
#   * generates deterministic files with `karu-testkit-gen` (file NAME holds
#     `karu_testkit::content::bytes(NAME, 0, SIZE)`; set KARU_NGINX_FILES="name:size ..." to
#     change the set; probe.bin:1000 is always added for the self-check); the URL of file
#     NAME is $KARU_TEST_NGINX_URL/NAME;
#   * starts nginx in the background on free ports, waits until it answers, checks one ranged
#     read against the file, and writes (sourceable, exported):
#       KARU_TEST_NGINX_URL               default nginx: single range -> 206, multi-range -> 206
#                                         multipart/byteranges (one part per range, not merged)
#       KARU_TEST_NGINX_SINGLE_RANGE_URL  `max_ranges 1;`: single range -> 206, multi-range -> 200
#                                         with the whole file (nginx refuses multipart by
#                                         ignoring the Range header)
#       KARU_TEST_NGINX_NO_RANGE_URL      `max_ranges 0;`: every Range ignored -> 200 whole file
#       KARU_TEST_NGINX_DIR, KARU_TEST_NGINX_PID
#
# Other nginx 1.22 behaviour worth knowing (verified): suffix `bytes=-N` -> 206 of the last N
# bytes; end past EOF clamped; start past EOF -> 416 with `Content-Range: bytes */T`;
# `bytes=5-2` -> 416 (RFC 9110 says ignore); If-Match wrong -> 412; zero-length file with a
# range -> 200; ETag is "<mtime hex>-<size hex>".
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LAST="$ROOT/target/karu-nginx.env"

log() { echo "nginx.sh: $*" >&2; }

freeport() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
    else
        local p
        for _ in $(seq 1 100); do
            p=$(shuf -i 20000-60000 -n 1)
            if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
        done
        return 1
    fi
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
    command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || pkgs+=(nginx)
    command -v curl >/dev/null 2>&1 || pkgs+=(curl)
    if [ ${#pkgs[@]} -gt 0 ]; then
        log "installing ${pkgs[*]} from Debian"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2
    fi
}

start() {
    local out=${1:-}
    install_missing
    local nginx_bin
    nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

    local W
    W=$(mktemp -d "${TMPDIR:-/tmp}/karu-nginx.XXXXXX")
    mkdir -p "$W/www"
    local files=${KARU_NGINX_FILES:-"empty.bin:0 one.bin:1 small.bin:1000 medium.bin:1048583 large.bin:16777219 dir/nested.bin:4096"}
    log "generating files in $W/www"
    (cd "$ROOT" && cargo build -q -p karu-testkit --bin karu-testkit-gen)
    local gen
    gen="${CARGO_TARGET_DIR:-$ROOT/target}/debug/karu-testkit-gen"
    local spec name size
    for spec in $files probe.bin:1000; do
        name=${spec%:*}
        size=${spec##*:}
        mkdir -p "$(dirname "$W/www/$name")"
        "$gen" "$name" "$size" "$W/www/$name"
    done

    local P1 P2 P3
    P1=$(freeport)
    P2=$(freeport)
    P3=$(freeport)
    local user_line=""
    [ "$(id -u)" = 0 ] && user_line="user root root;  # workers must read the 0700 temp dir"
    cat > "$W/nginx.conf" <<EOF
daemon off;
$user_line
worker_processes 1;
pid $W/nginx.pid;
error_log stderr warn;
events { worker_connections 512; }
http {
  log_format karu '\$remote_addr [\$time_local] "\$request" \$status \$body_bytes_sent '
                  'range="\$http_range" if_match="\$http_if_match" conn=\$connection/\$connection_requests';
  access_log $W/access.log karu;
  client_body_temp_path $W/tmp_body; proxy_temp_path $W/tmp_proxy; fastcgi_temp_path $W/tmp_fcgi;
  uwsgi_temp_path $W/tmp_uwsgi; scgi_temp_path $W/tmp_scgi;
  default_type application/octet-stream;
  keepalive_requests 10000;
  root $W/www;
  server { listen 127.0.0.1:$P1; }
  server { listen 127.0.0.1:$P2; max_ranges 1; }
  server { listen 127.0.0.1:$P3; max_ranges 0; }
}
EOF
    "$nginx_bin" -t -q -e stderr -p "$W" -c "$W/nginx.conf"
    "$nginx_bin" -e stderr -p "$W" -c "$W/nginx.conf" </dev/null >>"$W/error.log" 2>&1 &
    local pid=$!
    if ! waitfor "http://127.0.0.1:$P1/probe.bin"; then
        log "nginx did not answer; error log:"
        cat "$W/error.log" >&2
        kill "$pid" 2>/dev/null || true
        exit 1
    fi

    # Self-check: a ranged read returns the file's bytes with the right Content-Range.
    local probe
    probe=$(curl -s -D "$W/probe.head" -r 10-19 "http://127.0.0.1:$P1/probe.bin" | od -An -tx1 | tr -d ' \n')
    local expect
    expect=$(dd if="$W/www/probe.bin" bs=1 skip=10 count=10 2>/dev/null | od -An -tx1 | tr -d ' \n')
    if [ "$probe" != "$expect" ] || ! grep -qi '^content-range: bytes 10-19/1000' "$W/probe.head"; then
        log "self-check failed: got $probe, expected $expect"
        cat "$W/probe.head" >&2
        kill "$pid" 2>/dev/null || true
        exit 1
    fi

    local env
    env=$(cat <<EOF
export KARU_TEST_NGINX_URL=http://127.0.0.1:$P1
export KARU_TEST_NGINX_SINGLE_RANGE_URL=http://127.0.0.1:$P2
export KARU_TEST_NGINX_NO_RANGE_URL=http://127.0.0.1:$P3
export KARU_TEST_NGINX_DIR=$W
export KARU_TEST_NGINX_PID=$pid
EOF
)
    mkdir -p "$(dirname "$LAST")"
    echo "$env" > "$LAST"
    if [ -n "$out" ]; then
        echo "$env" > "$out"
        log "nginx $pid on http://127.0.0.1:$P1 (endpoints in $out)"
    else
        echo "$env"
        log "nginx $pid on http://127.0.0.1:$P1"
    fi
}

stop() {
    local file=${1:-$LAST}
    if [ ! -f "$file" ]; then
        log "nothing to stop ($file not found)"
        return 0
    fi
    local pid dir
    pid=$(sed -n 's/^export KARU_TEST_NGINX_PID=//p' "$file")
    dir=$(sed -n 's/^export KARU_TEST_NGINX_DIR=//p' "$file")
    # Only the nginx master recorded at start, and only while its pid file still names it.
    if [ -n "$pid" ] && [ -f "$dir/nginx.pid" ] && [ "$(cat "$dir/nginx.pid")" = "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        log "stopped nginx $pid"
    fi
    case "$dir" in
        "${TMPDIR:-/tmp}"/karu-nginx.*) rm -rf "$dir" ;;
    esac
    if [ -f "$LAST" ] && grep -qx "export KARU_TEST_NGINX_PID=$pid" "$LAST"; then
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
