#!/usr/bin/env bash
# Starts azurite (the Azure Storage emulator, blob service only) on 127.0.0.1 for karu's
# Azure tests, or stops it.
#
#   scripts/azure.sh [start] [ENV_FILE]   start; write the endpoints to ENV_FILE (or print them)
#   scripts/azure.sh stop [ENV_FILE]      stop the instance described by ENV_FILE
#                                         (default: the last one started from this checkout)
#
# start:
#   * installs node and npm from Debian if missing, and azurite $AZURITE_VERSION from npm into
#     ${XDG_CACHE_HOME:-~/.cache}/karu-test/azurite-$AZURITE_VERSION (kept between runs);
#   * starts azurite-blob in memory on a free port of 127.0.0.1, telemetry off, with the
#     well-known development account (devstoreaccount1);
#   * creates the containers `karu` (private) and `karu-public` (anonymous read of blobs) and
#     uploads the same deterministic blobs to both with Shared Key (a small stdlib Python
#     signer): blob NAME holds `karu_testkit::content::bytes(NAME, 0, SIZE)` for
#     one.bin:1 small.bin:1000 medium.bin:1048583 "dir/a b.bin":4096;
#   * computes an account SAS (read and list, blob service, one day), checks one ranged read
#     with Shared Key and one with the SAS, and writes (sourceable, exported):
#       KARU_TEST_AZURITE_URL        blob endpoint, path style: http://127.0.0.1:PORT/devstoreaccount1
#       KARU_TEST_AZURITE_ACCOUNT    devstoreaccount1
#       KARU_TEST_AZURITE_KEY        its base64 key
#       KARU_TEST_AZURITE_SAS        the account SAS (no leading '?')
#       KARU_TEST_AZURITE_CONTAINER, KARU_TEST_AZURITE_PUBLIC_CONTAINER
#       KARU_TEST_AZURITE_DIR, KARU_TEST_AZURITE_PID
#
# Azurite behaviour worth knowing (3.37): suffix ranges `bytes=-N` -> 500 (karu never sends
# them to Azure); a start equal to the size -> empty 206 (Azure sends 416); any range of an
# empty blob -> 206 with `Content-Range: bytes 0--1/0`, which karu rightly calls malformed (so
# no empty blob is uploaded; the tests use the test kit for that case); no auth -> 403;
# wrong key -> 403 AuthorizationFailure; If-Match mismatch -> 412.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LAST="$ROOT/target/karu-azurite.env"
AZURITE_VERSION=3.37.0
ACCOUNT=devstoreaccount1
# The emulator's published development key (not a secret).
KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
BLOBS=("one.bin:1" "small.bin:1000" "medium.bin:1048583" "dir/a b.bin:4096")

log() { echo "azure.sh: $*" >&2; }

freeport() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Returns 0 as soon as the server answers anything; bounded to ~20 s.
waitfor() {
    for _ in $(seq 1 200); do
        curl -s -o /dev/null "$1" && return 0
        sleep 0.1
    done
    return 1
}

install_azurite() {
    local pkgs=()
    command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
    command -v npm >/dev/null 2>&1 || pkgs+=(npm)
    command -v curl >/dev/null 2>&1 || pkgs+=(curl)
    command -v python3 >/dev/null 2>&1 || pkgs+=(python3)
    if [ ${#pkgs[@]} -gt 0 ]; then
        log "installing ${pkgs[*]} from Debian"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2
    fi
    local dir="${XDG_CACHE_HOME:-$HOME/.cache}/karu-test/azurite-$AZURITE_VERSION"
    if [ ! -x "$dir/node_modules/.bin/azurite-blob" ]; then
        log "installing azurite $AZURITE_VERSION into $dir"
        mkdir -p "$dir"
        (cd "$dir" && npm install --no-audit --no-fund --no-save --loglevel=error "azurite@$AZURITE_VERSION" >&2)
    fi
    echo "$dir/node_modules/.bin/azurite-blob"
}

# Creates the containers, uploads the blobs, prints the SAS. Arguments: endpoint, files dir.
seed() {
    python3 - "$1" "$2" "$ACCOUNT" "$KEY" "${BLOBS[@]}" <<'PY'
import base64, datetime, hashlib, hmac, sys, urllib.parse, urllib.request
endpoint, files, account, key, *blobs = sys.argv[1:]
secret = base64.b64decode(key)
VERSION = "2021-08-06"

def sign(s):
    return base64.b64encode(hmac.new(secret, s.encode(), hashlib.sha256).digest()).decode()

def put(path, query, headers, body=b""):
    """A Shared Key PUT of `body` to `<endpoint>/<path>?<query>`."""
    headers = dict(headers)
    headers["x-ms-date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")
    headers["x-ms-version"] = VERSION
    headers["Content-Type"] = "application/octet-stream"
    url_path = urllib.parse.urlsplit(endpoint).path + "/" + urllib.parse.quote(path)
    canon_headers = "".join(f"{k}:{v}\n" for k, v in sorted(headers.items()) if k.startswith("x-ms-"))
    canon_query = "".join(f"\n{k}:{v}" for k, v in sorted(query.items()))
    length = str(len(body)) if body else ""
    to_sign = ("PUT\n\n\n" + length + "\n\napplication/octet-stream\n\n\n\n\n\n\n"
               + canon_headers + f"/{account}{url_path}" + canon_query)
    headers["Authorization"] = f"SharedKey {account}:{sign(to_sign)}"
    url = endpoint + "/" + urllib.parse.quote(path) + ("?" + urllib.parse.urlencode(query) if query else "")
    req = urllib.request.Request(url, data=body, method="PUT", headers=headers)
    with urllib.request.urlopen(req) as r:
        assert r.status in (200, 201), (url, r.status)

put("karu", {"restype": "container"}, {})
put("karu-public", {"restype": "container"}, {"x-ms-blob-public-access": "blob"})
for spec in blobs:
    name, _ = spec.rsplit(":", 1)
    with open(f"{files}/{name}", "rb") as f:
        data = f.read()
    for container in ("karu", "karu-public"):
        put(f"{container}/{name}", {}, {"x-ms-blob-type": "BlockBlob"}, data)

# An account SAS: blob service, container and object resources, read and list, one day.
expiry = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
fields = {"sv": VERSION, "ss": "b", "srt": "co", "sp": "rl", "se": expiry, "spr": "https,http"}
to_sign = "\n".join([account, fields["sp"], fields["ss"], fields["srt"], "", expiry, "", fields["spr"], VERSION, "", ""])
fields["sig"] = sign(to_sign)
print(urllib.parse.urlencode(fields))
PY
}

start() {
    local out=${1:-}
    local bin
    bin=$(install_azurite)
    local W
    W=$(mktemp -d "${TMPDIR:-/tmp}/karu-azurite.XXXXXX")
    log "generating blobs in $W/files"
    (cd "$ROOT" && cargo build -q -p karu-testkit --bin karu-testkit-gen)
    local gen="${CARGO_TARGET_DIR:-$ROOT/target}/debug/karu-testkit-gen"
    local spec name
    for spec in "${BLOBS[@]}"; do
        name=${spec%:*}
        mkdir -p "$(dirname "$W/files/$name")"
        "$gen" "$name" "${spec##*:}" "$W/files/$name"
    done

    local port
    port=$(freeport)
    # --skipApiVersionCheck: karu sends x-ms-version 2023-11-03, newer than some azurite
    # releases know. Telemetry would try to reach the internet: always off.
    "$bin" --blobHost 127.0.0.1 --blobPort "$port" --inMemoryPersistence --extentMemoryLimit 256 \
        --disableTelemetry --skipApiVersionCheck --silent </dev/null >"$W/azurite.log" 2>&1 &
    local pid=$!
    local endpoint="http://127.0.0.1:$port/$ACCOUNT"
    if ! waitfor "http://127.0.0.1:$port/"; then
        log "azurite did not answer; its log:"
        cat "$W/azurite.log" >&2
        kill "$pid" 2>/dev/null || true
        exit 1
    fi
    local sas
    if ! sas=$(seed "$endpoint" "$W/files"); then
        log "seeding failed; azurite log:"
        cat "$W/azurite.log" >&2
        kill "$pid" 2>/dev/null || true
        exit 1
    fi

    # Self-check: a SAS range read and an anonymous one of the public container return the
    # uploaded bytes.
    local expect got
    expect=$(dd if="$W/files/small.bin" bs=1 skip=10 count=10 2>/dev/null | od -An -tx1 | tr -d ' \n')
    got=$(curl -s -r 10-19 "$endpoint/karu/small.bin?$sas" | od -An -tx1 | tr -d ' \n')
    local public
    public=$(curl -s -r 10-19 "$endpoint/karu-public/small.bin" | od -An -tx1 | tr -d ' \n')
    if [ "$got" != "$expect" ] || [ "$public" != "$expect" ]; then
        log "self-check failed: SAS read $got, public read $public, expected $expect"
        kill "$pid" 2>/dev/null || true
        exit 1
    fi

    local env
    env=$(cat <<EOF
export KARU_TEST_AZURITE_URL=$endpoint
export KARU_TEST_AZURITE_ACCOUNT=$ACCOUNT
export KARU_TEST_AZURITE_KEY='$KEY'
export KARU_TEST_AZURITE_SAS='$sas'
export KARU_TEST_AZURITE_CONTAINER=karu
export KARU_TEST_AZURITE_PUBLIC_CONTAINER=karu-public
export KARU_TEST_AZURITE_DIR=$W
export KARU_TEST_AZURITE_PID=$pid
EOF
)
    mkdir -p "$(dirname "$LAST")"
    echo "$env" > "$LAST"
    if [ -n "$out" ]; then
        echo "$env" > "$out"
        log "azurite $pid on $endpoint (endpoints in $out)"
    else
        echo "$env"
        log "azurite $pid on $endpoint"
    fi
}

stop() {
    local file=${1:-$LAST}
    if [ ! -f "$file" ]; then
        log "nothing to stop ($file not found)"
        return 0
    fi
    local pid dir
    pid=$(sed -n 's/^export KARU_TEST_AZURITE_PID=//p' "$file")
    dir=$(sed -n 's/^export KARU_TEST_AZURITE_DIR=//p' "$file")
    # Only the process recorded at start, and only while it is still an azurite.
    if [ -n "$pid" ] && grep -q azurite "/proc/$pid/cmdline" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        log "stopped azurite $pid"
    fi
    case "$dir" in
        "${TMPDIR:-/tmp}"/karu-azurite.*) rm -rf "$dir" ;;
    esac
    if [ -f "$LAST" ] && grep -qx "export KARU_TEST_AZURITE_PID=$pid" "$LAST"; then
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
