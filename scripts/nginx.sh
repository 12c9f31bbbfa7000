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

NAME=nginx
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

start() {
    local out=${1:-}
    install_commands nginx curl
    local nginx_bin
    nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

    begin_start
    local files=${KARU_NGINX_FILES:-"empty.bin:0 one.bin:1 small.bin:1000 medium.bin:1048583 large.bin:16777219 dir/nested.bin:4096"}
    # shellcheck disable=SC2086 # one word per file
    generate "$W/www" $files probe.bin:1000

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
    STARTED+=("$pid")
    waitfor "http://127.0.0.1:$P1/probe.bin" || fail "nginx did not answer" "$W/error.log"
    # Self-check: a ranged read returns the file's bytes with the right Content-Range.
    check_range "http://127.0.0.1:$P1/probe.bin" "$W/www/probe.bin" || fail "self-check failed"
    end_start

    write_env "$out" "nginx $pid on http://127.0.0.1:$P1" <<EOF
export KARU_TEST_NGINX_URL=http://127.0.0.1:$P1
export KARU_TEST_NGINX_SINGLE_RANGE_URL=http://127.0.0.1:$P2
export KARU_TEST_NGINX_NO_RANGE_URL=http://127.0.0.1:$P3
export KARU_TEST_NGINX_DIR=$W
export KARU_TEST_NGINX_PID=$pid
EOF
}

# Only the nginx master recorded at start, and only while it still is one.
stop() { stop_recorded "${1:-}" KARU_TEST_NGINX_PID KARU_TEST_NGINX_DIR nginx; }

dispatch "$@"
