#!/usr/bin/env bash
# Starts the S3 emulators karu's tests read from, on 127.0.0.1, or stops them.
#
#   scripts/s3.sh [start] [ENV_FILE]   start; write the endpoints to ENV_FILE (or print them)
#   scripts/s3.sh stop [ENV_FILE]      stop the servers described by ENV_FILE
#                                      (default: the last ones started from this checkout)
#
# start:
#   * installs what is missing, caching it under ${KARU_TEST_CACHE:-~/.cache/karu-test}:
#     python3, python3-venv and curl from Debian; a venv with moto 5.2.5 and boto3 from PyPI
#     (~30 s); s3s-fs 0.14.1 with `cargo install --locked` (3 to 5 minutes of both cores;
#     0.15 and later need a newer rustc);
#   * generates deterministic objects with `karu-testkit-gen` (object KEY holds
#     `karu_testkit::content::bytes(KEY, 0, SIZE)`, the same bytes in every bucket; the set is
#     $KARU_TEST_S3_OBJECTS below);
#   * starts three servers on free ports, each with the buckets $KARU_TEST_S3_BUCKET (a plain
#     name, usable in virtual-host style) and $KARU_TEST_S3_DOTTED_BUCKET (a dotted name):
#       - moto in server mode with signature checking: INITIAL_NO_AUTH_ACTION_COUNT=3 allows
#         exactly the three IAM calls that create a user, its access key and an allow-all
#         policy, so readiness is probed on /moto-api/ only (a probe of the S3 API would use
#         up a free call). Every later request must be signed with that key. If-Match
#         mismatches give 412. No clock-skew or region checks.
#       - moto in its default mode, which checks no signature, for anonymous reads (with auth
#         on, moto answers an unsigned GET with 403, or 500 for a public-read object).
#       - s3s-fs with one access key: strict SigV4 including clock skew (15 min); ignores
#         If-Match. Virtual hosts are `BUCKET.localhost:PORT` (its --domain includes the
#         port); dotted buckets work there too.
#     Virtual-hosted names under `.localhost` resolve to loopback inside karu (RFC 6761);
#     moto takes the first label of the host as the bucket, so dotted buckets are path-style
#     only on moto.
#   * checks one signed ranged read on each server against the generated file, and writes
#     (sourceable, exported):
#       KARU_TEST_MOTO_URL, KARU_TEST_MOTO_ACCESS_KEY_ID, KARU_TEST_MOTO_SECRET_ACCESS_KEY
#       KARU_TEST_MOTO_OPEN_URL
#       KARU_TEST_S3S_URL, KARU_TEST_S3S_ACCESS_KEY_ID, KARU_TEST_S3S_SECRET_ACCESS_KEY
#       KARU_TEST_S3_BUCKET, KARU_TEST_S3_DOTTED_BUCKET, KARU_TEST_S3_OBJECTS ("key:size ...",
#       keys may contain spaces encoded as %20)
#       KARU_TEST_S3_DIR, KARU_TEST_S3_PIDS
#     URLs use 127.0.0.1; for virtual hosting use http://localhost:PORT as the endpoint.
set -euo pipefail

NAME=s3
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

MOTO_VERSION=5.2.5
VENV="$CACHE/moto-$MOTO_VERSION-venv"
S3S_VERSION=0.14.1
S3S_ROOT="$CACHE/s3s-fs-$S3S_VERSION"
BUCKET=karu-data
DOTTED=karu.dotted.bucket
# key:size; %20 stands for a space (kept out of the shell's word splitting).
OBJECTS="small.bin:1000 medium.bin:1048583 dir/nested.bin:4096 odd/a%20b+c.bin:3001"

install_missing() {
    install_commands curl python3
    venv_install "$VENV" "moto, boto3, flask_cors" \
        "moto[s3]==$MOTO_VERSION" boto3 flask flask-cors
    if ! [ -x "$S3S_ROOT/bin/s3s-fs" ]; then
        log "building s3s-fs $S3S_VERSION into $S3S_ROOT (takes 3 to 5 minutes)"
        cargo install -q s3s-fs --version "$S3S_VERSION" --features binary --locked \
            --root "$S3S_ROOT" >&2
    fi
}

# Seeds a moto server: with `--bootstrap`, first the three free IAM calls (user, access key,
# allow-all policy) whose key then signs everything else. Prints "ACCESS_KEY SECRET".
seed_moto() {
    "$VENV/bin/python" - "$@" <<'EOF'
import json, sys, urllib.parse
import boto3
from botocore.config import Config

url, objects_dir, buckets, objects, bootstrap = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split(), sys.argv[5] == "--bootstrap"
config = Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"})
ak, sk = "open", "open"
# The open server serves anonymous reads only of public objects.
acl = {} if bootstrap else {"ACL": "public-read"}
if bootstrap:
    iam = boto3.client("iam", endpoint_url=url, region_name="us-east-1", config=config,
                       aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
    iam.create_user(UserName="karu")
    key = iam.create_access_key(UserName="karu")["AccessKey"]
    iam.put_user_policy(UserName="karu", PolicyName="all", PolicyDocument=json.dumps(
        {"Version": "2012-10-17",
         "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    ak, sk = key["AccessKeyId"], key["SecretAccessKey"]
s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1", config=config,
                  aws_access_key_id=ak, aws_secret_access_key=sk)
for bucket in buckets:
    s3.create_bucket(Bucket=bucket)
    for spec in objects:
        key = urllib.parse.unquote(spec.rsplit(":", 1)[0])
        with open(f"{objects_dir}/{key}", "rb") as f:
            s3.put_object(Bucket=bucket, Key=key, Body=f.read(), **acl)
print(ak, sk)
EOF
}

# Reads bytes 10-19 of small.bin from BUCKET at URL, signed, and compares with the file.
check_read() {
    "$VENV/bin/python" - "$@" <<'EOF'
import http.client, sys, urllib.parse
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

url, ak, sk, bucket, path = sys.argv[1:6]
u = urllib.parse.urlsplit(url)
req = AWSRequest(method="GET", url=f"{url}/{bucket}/small.bin", headers={"Range": "bytes=10-19"})
req.headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
SigV4Auth(Credentials(ak, sk), "s3", "us-east-1").add_auth(req)
headers = dict(req.headers.items())
headers["Host"] = u.netloc
c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
c.request("GET", f"/{bucket}/small.bin", headers=headers)
r = c.getresponse()
body = r.read()
with open(path, "rb") as f:
    want = f.read()[10:20]
if r.status != 206 or body != want:
    sys.exit(f"{url}: HTTP {r.status}, {body[:200]!r}; wanted 206 with {want!r}")
EOF
}

start() {
    local out=${1:-}
    install_missing

    begin_start
    # shellcheck disable=SC2086 # one word per object
    generate "$W/objects" $OBJECTS

    # moto with signature checks.
    local P_MOTO P_OPEN P_S3S
    P_MOTO=$(freeport)
    INITIAL_NO_AUTH_ACTION_COUNT=3 "$VENV/bin/moto_server" -H 127.0.0.1 -p "$P_MOTO" \
        </dev/null >"$W/moto.log" 2>&1 &
    STARTED+=($!)
    # moto without checks, for anonymous reads.
    P_OPEN=$(freeport)
    "$VENV/bin/moto_server" -H 127.0.0.1 -p "$P_OPEN" </dev/null >"$W/moto-open.log" 2>&1 &
    STARTED+=($!)
    # s3s-fs: buckets are directories of the data dir.
    local S3S_AK=KARUS3SACCESSKEY S3S_SK=karu-s3s-secret-key-0123456789
    local b
    for b in "$BUCKET" "$DOTTED"; do
        mkdir -p "$W/s3s/$b"
        cp -R "$W/objects/." "$W/s3s/$b/"
    done
    P_S3S=$(freeport)
    "$S3S_ROOT/bin/s3s-fs" --host 127.0.0.1 --port "$P_S3S" --access-key "$S3S_AK" \
        --secret-key "$S3S_SK" --domain "localhost:$P_S3S" "$W/s3s" \
        </dev/null >"$W/s3s.log" 2>&1 &
    STARTED+=($!)

    waitfor "http://127.0.0.1:$P_MOTO/moto-api/" || fail "moto did not answer" "$W/moto.log"
    waitfor "http://127.0.0.1:$P_OPEN/moto-api/" || fail "open moto did not answer" "$W/moto-open.log"
    waitfor "http://127.0.0.1:$P_S3S/" || fail "s3s-fs did not answer" "$W/s3s.log"

    log "seeding moto"
    local MOTO_AK MOTO_SK
    read -r MOTO_AK MOTO_SK < <(seed_moto "http://127.0.0.1:$P_MOTO" "$W/objects" \
        "$BUCKET $DOTTED" "$OBJECTS" --bootstrap)
    [ -n "$MOTO_SK" ] || fail "moto bootstrap failed" "$W/moto.log"
    seed_moto "http://127.0.0.1:$P_OPEN" "$W/objects" "$BUCKET $DOTTED" "$OBJECTS" - >/dev/null

    # Self-check: a signed ranged read returns the file's bytes on each server.
    check_read "http://127.0.0.1:$P_MOTO" "$MOTO_AK" "$MOTO_SK" "$BUCKET" "$W/objects/small.bin"
    check_read "http://127.0.0.1:$P_OPEN" open open "$DOTTED" "$W/objects/small.bin"
    check_read "http://127.0.0.1:$P_S3S" "$S3S_AK" "$S3S_SK" "$DOTTED" "$W/objects/small.bin"
    end_start

    write_env "$out" "moto on :$P_MOTO, open moto on :$P_OPEN, s3s-fs on :$P_S3S" <<EOF
export KARU_TEST_MOTO_URL=http://127.0.0.1:$P_MOTO
export KARU_TEST_MOTO_ACCESS_KEY_ID=$MOTO_AK
export KARU_TEST_MOTO_SECRET_ACCESS_KEY=$MOTO_SK
export KARU_TEST_MOTO_OPEN_URL=http://127.0.0.1:$P_OPEN
export KARU_TEST_S3S_URL=http://127.0.0.1:$P_S3S
export KARU_TEST_S3S_ACCESS_KEY_ID=$S3S_AK
export KARU_TEST_S3S_SECRET_ACCESS_KEY=$S3S_SK
export KARU_TEST_S3_BUCKET=$BUCKET
export KARU_TEST_S3_DOTTED_BUCKET=$DOTTED
export KARU_TEST_S3_OBJECTS="$OBJECTS"
export KARU_TEST_S3_DIR=$W
export KARU_TEST_S3_PIDS="${STARTED[*]}"
EOF
}

# Only processes this script started: their command lines name the servers.
stop() { stop_recorded "${1:-}" KARU_TEST_S3_PIDS KARU_TEST_S3_DIR 'moto_server|s3s-fs'; }

dispatch "$@"
