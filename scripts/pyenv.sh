#!/usr/bin/env bash
# Makes (or reuses) the Python venv of karu's tests and prints its directory.
#
#   scripts/pyenv.sh            ensure the venv; print its path (use "$(bash scripts/pyenv.sh)/bin/python")
#
# The venv lives in ${KARU_TEST_CACHE:-~/.cache/karu-test}/venv/<key> and holds the pins of
# scripts/requirements-test.txt, the key being a hash of that file: a changed file gets its
# own venv (checkouts with different pins on one machine do not rebuild each other's), and an
# unchanged one reuses it once a stamp says it was completed. python3 and python3-venv come
# from Debian when missing (as root, like the server scripts).
set -euo pipefail

NAME=pyenv
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

REQUIREMENTS="$ROOT/scripts/requirements-test.txt"
want=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
VENV="$CACHE/venv/${want:0:16}"
STAMP="$VENV/.karu-requirements.sha256"

install_commands python3
if [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
    echo "$VENV"
    exit 0
fi
# Debian splits ensurepip (which venv needs) into python3-venv.
python3 -c 'import ensurepip' >/dev/null 2>&1 || apt_install python3-venv
log "installing $REQUIREMENTS into $VENV"
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
python3 -m venv "$VENV" >&2
"$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQUIREMENTS" >&2
echo "$want" > "$STAMP"
echo "$VENV"
