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
#     ${KARU_TEST_CACHE:-~/.cache/karu-test}/azurite-$AZURITE_VERSION (kept between runs);
#   * starts azurite-blob in memory on a free port of 127.0.0.1, telemetry off, with the
#     well-known development account (devstoreaccount1);
#   * creates the containers `karu` (private) and `karu-public` (anonymous read of blobs) and
#     uploads the same deterministic blobs to both with Shared Key (a small stdlib Python
#     signer): blob NAME holds `karu_testkit::content::bytes(NAME, 0, SIZE)` for
#     one.bin:1 small.bin:1000 medium.bin:1048583 "dir/a b.bin":4096;
#   * computes an account SAS (read and list, blob service, one day), checks one ranged read
#     with the SAS and one anonymous read of the public container, and writes (sourceable,
#     exported):
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

NAME=azurite
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

AZURITE_VERSION=3.37.0
ACCOUNT=devstoreaccount1
# The emulator's published development key (not a secret).
KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
BLOBS=("one.bin:1" "small.bin:1000" "medium.bin:1048583" "dir/a b.bin:4096")

# Prints the path of azurite-blob, installed with npm into CACHE unless it already is.
install_azurite() {
    install_commands node:nodejs npm curl python3
    local dir="$CACHE/azurite-$AZURITE_VERSION"
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
    begin_start
    generate "$W/files" "${BLOBS[@]}"

    local port
    port=$(freeport)
    # --skipApiVersionCheck: karu sends x-ms-version 2023-11-03, newer than some azurite
    # releases know. Telemetry would try to reach the internet: always off.
    "$bin" --blobHost 127.0.0.1 --blobPort "$port" --inMemoryPersistence --extentMemoryLimit 256 \
        --disableTelemetry --skipApiVersionCheck --silent </dev/null >"$W/azurite.log" 2>&1 &
    local pid=$!
    STARTED+=("$pid")
    local endpoint="http://127.0.0.1:$port/$ACCOUNT"
    waitfor "http://127.0.0.1:$port/" || fail "azurite did not answer" "$W/azurite.log"
    local sas
    sas=$(seed "$endpoint" "$W/files") || fail "seeding failed" "$W/azurite.log"

    # Self-check: a SAS range read and an anonymous one of the public container return the
    # uploaded bytes.
    check_range "$endpoint/karu/small.bin?$sas" "$W/files/small.bin" ||
        fail "self-check of the SAS read failed" "$W/azurite.log"
    check_range "$endpoint/karu-public/small.bin" "$W/files/small.bin" ||
        fail "self-check of the public read failed" "$W/azurite.log"
    end_start

    write_env "$out" "azurite $pid on $endpoint" <<EOF
export KARU_TEST_AZURITE_URL=$endpoint
export KARU_TEST_AZURITE_ACCOUNT=$ACCOUNT
export KARU_TEST_AZURITE_KEY='$KEY'
export KARU_TEST_AZURITE_SAS='$sas'
export KARU_TEST_AZURITE_CONTAINER=karu
export KARU_TEST_AZURITE_PUBLIC_CONTAINER=karu-public
export KARU_TEST_AZURITE_DIR=$W
export KARU_TEST_AZURITE_PID=$pid
EOF
}

# Only the process recorded at start, and only while it is still an azurite.
stop() { stop_recorded "${1:-}" KARU_TEST_AZURITE_PID KARU_TEST_AZURITE_DIR azurite; }

dispatch "$@"
