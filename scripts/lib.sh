# shellcheck shell=bash
# Shared by the server scripts (nginx.sh, s3.sh, gcs.sh, azure.sh); sourced, never run.
#
# The sourcing script sets NAME (it names the temp dir `karu-NAME.*` and the default env file
# target/karu-NAME.env), defines `start OUT` and `stop FILE`, and ends with `dispatch "$@"`.
# Sourcing sets ROOT (the checkout), LAST (the env file of the last start from it) and CACHE
# (installed tools kept between runs: ${KARU_TEST_CACHE:-~/.cache/karu-test}).

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC2153 # NAME comes from the sourcing script
LAST="$ROOT/target/karu-$NAME.env"
# shellcheck disable=SC2034 # for the sourcing scripts
CACHE=${KARU_TEST_CACHE:-$HOME/.cache/karu-test}
# Pids that `start` launched: killed again if it fails.
STARTED=()

log() { echo "$(basename "$0"): $*" >&2; }

# apt_install PACKAGE...: installs Debian packages (as root, with one `apt-get update`).
apt_install() {
    log "installing $* from Debian"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "$@" >&2
}

# install_commands COMMAND[:PACKAGE]...: installs the package of each command that is missing
# (the package is named like the command unless given).
install_commands() {
    local spec cmd pkgs=()
    for spec in "$@"; do
        cmd=${spec%%:*}
        command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || pkgs+=("${spec#*:}")
    done
    if [ ${#pkgs[@]} -gt 0 ]; then apt_install "${pkgs[@]}"; fi
}

# venv_install VENV MODULES REQUIREMENT...: unless VENV's python can `import MODULES` (a
# comma-separated list), makes VENV anew and pip-installs the requirements into it.
venv_install() {
    local venv=$1 modules=$2
    shift 2
    "$venv/bin/python" -c "import $modules" >/dev/null 2>&1 && return 0
    # Debian splits ensurepip (which venv needs) into python3-venv.
    python3 -c 'import ensurepip' >/dev/null 2>&1 || apt_install python3-venv
    log "installing $* into $venv"
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    if ! python3 -m venv "$venv" >&2; then
        log "python3 -m venv failed (is python3-venv installed?)"
        return 1
    fi
    "$venv/bin/pip" install -q --disable-pip-version-check "$@" >&2
}

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

# waitfor URL: returns 0 as soon as the server answers anything; bounded to ~20 s.
waitfor() {
    for _ in $(seq 1 200); do
        curl -s -o /dev/null "$1" && return 0
        sleep 0.1
    done
    return 1
}

# begin_start: makes the temp dir W (karu-NAME.*) and, until end_start, stops what was started
# if any command fails.
begin_start() {
    W=$(mktemp -d "${TMPDIR:-/tmp}/karu-$NAME.XXXXXX")
    trap 'log "start failed; logs in $W"; kill_started' ERR
}

end_start() { trap - ERR; }

kill_started() {
    local pid
    for pid in "${STARTED[@]}"; do kill "$pid" 2>/dev/null || true; done
}

# fail MESSAGE [LOG]: says why start failed (with LOG's content), stops what it started, exits.
fail() {
    log "$1${2:+; log:}"
    if [ -n "${2:-}" ]; then cat "$2" >&2; fi
    kill_started
    exit 1
}

# generate DIR NAME:SIZE...: file DIR/NAME holds `karu_testkit::content::bytes(NAME, 0, SIZE)`,
# written by `karu-testkit-gen`, whose path is then in GEN. `%20` in NAME stands for a space.
generate() {
    local dir=$1 spec name
    shift
    (cd "$ROOT" && cargo build -q -p karu-testkit --bin karu-testkit-gen)
    GEN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/karu-testkit-gen"
    log "generating files in $dir"
    for spec in "$@"; do
        name=${spec%:*}
        name=${name//%20/ }
        mkdir -p "$(dirname "$dir/$name")"
        "$GEN" "$name" "${spec##*:}" "$dir/$name"
    done
}

# check_range URL FILE [CURL_OPTION...]: a read of bytes 10-19 at URL returns those bytes of
# FILE, with `Content-Range: bytes 10-19/<size of FILE>`.
check_range() {
    local url=$1 file=$2
    shift 2
    local got expect head
    head=$(mktemp)
    got=$(curl -s -D "$head" -r 10-19 "$@" "$url" | od -An -tx1 | tr -d ' \n')
    expect=$(dd if="$file" bs=1 skip=10 count=10 2>/dev/null | od -An -tx1 | tr -d ' \n')
    if [ "$got" != "$expect" ] || ! grep -qi "^content-range: bytes 10-19/$(wc -c < "$file")" "$head"; then
        log "self-check failed for $url: got $got, expected $expect"
        cat "$head" >&2
        rm -f "$head"
        return 1
    fi
    rm -f "$head"
}

# write_env OUT SUMMARY: the `export` lines on stdin go to LAST and to OUT (or stdout); SUMMARY
# goes to the log.
write_env() {
    local out=$1 summary=$2 env
    env=$(cat)
    mkdir -p "$(dirname "$LAST")"
    echo "$env" > "$LAST"
    if [ -n "$out" ]; then
        echo "$env" > "$out"
        log "$summary (endpoints in $out)"
    else
        echo "$env"
        log "$summary"
    fi
}

# recorded FILE VAR: the value an env file gives VAR (quotes removed).
recorded() {
    sed -n "s/^export $2=//p" "$1" | tr -d "\"'"
}

# stop_recorded FILE PIDS_VAR DIR_VAR PATTERN: stops the servers an env file describes (each
# pid only while its command line still matches PATTERN, so that a reused pid is left alone),
# removes their temp dir, and forgets LAST when it described them.
stop_recorded() {
    local file=${1:-$LAST} pids_var=$2 dir_var=$3 pattern=$4
    if [ ! -f "$file" ]; then
        log "nothing to stop ($file not found)"
        return 0
    fi
    local pids dir pid
    pids=$(recorded "$file" "$pids_var")
    dir=$(recorded "$file" "$dir_var")
    for pid in $pids; do
        if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qE "$pattern"; then
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 1 50); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
            done
            log "stopped $pid"
        fi
    done
    case "$dir" in
        "${TMPDIR:-/tmp}"/karu-"$NAME".*) rm -rf "$dir" ;;
    esac
    if [ -f "$LAST" ] && [ "$(recorded "$LAST" "$pids_var")" = "$pids" ]; then
        rm -f "$LAST"
    fi
    return 0
}

# dispatch ARGS: `[start] [ENV_FILE]`, `stop [ENV_FILE]` or `-h` (the script's header).
dispatch() {
    case "${1:-start}" in
        start) shift || true; start "${1:-}" ;;
        stop) shift; stop "${1:-}" ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' ;;
        *) start "$1" ;;
    esac
}
