#!/bin/bash
# Side-by-side benchmark: the real OpenStack Ironic 21.4 (Debian packages,
# single process, SQLite, noauth, fake-hardware) against castiron, on loopback,
# one target after the other with the same workload:
#
#   start-up (launch -> first GET /v1 200, median of STARTUP_REPS)
#   RSS idle
#   lifecycle: LIFECYCLE_N nodes create -> manage -> manageable -> provide -> available
#   creates/s filling to SMALL nodes, then list/get at SMALL nodes
#   creates/s filling to LARGE nodes, then list/get at LARGE nodes
#   RSS (and CPU seconds) after load
#
# and writes a markdown table to bench/results/<date>.md (+ the raw JSON lines
# in <date>.jsonl).
#
# usage: bench/run.sh            (from anywhere)
# env:   TARGETS="ironic castiron"   which targets, in column order
#        IRONIC_PORT=16385 CASTIRON_PORT=16386
#        WORKERS=8 DURATION=10s STARTUP_REPS=3
#        SMALL=1000 LARGE=10000 LIFECYCLE_N=100 LIFECYCLE_POLL=50ms
#        API_VERSION=1.78
#        BUILD=1        run `make build` first (0: use ./castiron as it is)
#        CASTIRON_BIN=  castiron binary to run (default: ./castiron, built by BUILD=1)
#        CASTIRON_BASE_BIN=  a second castiron binary (e.g. main's build), run as
#                       target castiron-base: TARGETS="ironic castiron-base castiron"
#                       gives before/after columns, each with its ratio to Ironic
#        CASTIRON_ARGS= extra `castiron serve` flags (e.g. --automated-clean=false,
#                       which the Ironic reference config has)
#        KEEP=0         1: keep the temporary directory (data dirs, logs)
#        OUT=bench/results
#        IRONIC_REF=<repo>/../shared/ironic-reference
#
# It starts only its own servers, remembers their PIDs, and stops exactly
# those on exit (Ironic through the reference stop.sh, which reads the PID
# file start.sh wrote). castiron is skipped with a message when it cannot be
# built or does not answer GET /v1.
set -uo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
TARGETS="${TARGETS:-ironic castiron}"
IRONIC_PORT="${IRONIC_PORT:-16385}"
CASTIRON_PORT="${CASTIRON_PORT:-16386}"
WORKERS="${WORKERS:-8}"
DURATION="${DURATION:-10s}"
STARTUP_REPS="${STARTUP_REPS:-3}"
SMALL="${SMALL:-1000}"
LARGE="${LARGE:-10000}"
LIFECYCLE_N="${LIFECYCLE_N:-100}"
LIFECYCLE_POLL="${LIFECYCLE_POLL:-50ms}"
API_VERSION="${API_VERSION:-1.78}"
BUILD="${BUILD:-1}"
CASTIRON_ARGS="${CASTIRON_ARGS:-}"
KEEP="${KEEP:-0}"
OUT="${OUT:-$HERE/results}"
IRONIC_REF="${IRONIC_REF:-$(cd "$ROOT/.." && pwd)/shared/ironic-reference}"

TMP="$(mktemp -d /tmp/castiron-bench.XXXXXX)"
LOG="$TMP/run.log"
JSONL="$TMP/results.jsonl"
LG="$TMP/loadgen"
CASTIRON_PID=""
CASTIRON_TARGET=castiron
CASTIRON_BUILT="not run"
IRONIC_STARTED=0
PROBLEMS=0

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$CASTIRON_PID" ] && kill -0 "$CASTIRON_PID" 2>/dev/null; then
        echo "cleanup: stopping castiron pid $CASTIRON_PID"
        kill -TERM "$CASTIRON_PID" 2>/dev/null
        for _ in $(seq 1 100); do kill -0 "$CASTIRON_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$CASTIRON_PID" 2>/dev/null
    fi
    if [ "$IRONIC_STARTED" = 1 ]; then
        echo "cleanup: stopping ironic"
        "$IRONIC_REF/stop.sh" "$IRONIC_PORT" "$TMP/ironic"
    fi
    if [ "$KEEP" = 1 ] || [ "$rc" != 0 ] || [ "$PROBLEMS" != 0 ]; then
        echo "kept $TMP (data dirs, logs)"
    else
        rm -rf "$TMP"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "interrupted"; exit 130' INT TERM

exec > >(tee -a "$LOG") 2>&1

say() { printf '\n=== %s\n' "$*"; }
problem() { PROBLEMS=$((PROBLEMS + 1)); echo "!!! $*"; }

# label 1000 -> 1k, 10000 -> 10k
label() { if [ $(($1 % 1000)) = 0 ]; then echo "$(($1 / 1000))k"; else echo "$1"; fi; }

# note TARGET MODE TEXT: a record without figures (skips, crashes) for the table
note() {
    local text=${3//\\/\\\\}
    text=${text//\"/\\\"}
    printf '{"time":"%s","target":"%s","mode":"%s","ok":false,"params":{},"figures":{},"note":"%s"}\n' \
        "$(date -u +%FT%TZ)" "$1" "$2" "$text" >> "$JSONL"
}

port_busy() { ss -ltn "( sport = :$1 )" | grep -q LISTEN; }

# ---------------------------------------------------------------- workload
# workload TARGET URL ALIVE_FN RSS_FN: the measurements after start-up, on a
# running server with an empty database.
workload() {
    local t=$1 url=$2 alive=$3 rss=$4
    lg() {
        local m=$1; shift
        "$LG" -url "$url" -target "$t" -api-version "$API_VERSION" "$@" >> "$JSONL" \
            || problem "$t: loadgen ${*} failed (exit $?)"
        if ! "$alive"; then
            problem "$t died during: loadgen $m $*"
            note "$t" crash "server process died during $m $*; see log"
            return 1
        fi
    }
    sleep 3
    "$rss" idle
    say "$t: lifecycle of $LIFECYCLE_N nodes"
    lg lifecycle lifecycle -n "$LIFECYCLE_N" -workers "$WORKERS" -poll "$LIFECYCLE_POLL" || return 1
    local have=$LIFECYCLE_N
    for size in "$SMALL" "$LARGE"; do
        local l n
        l=$(label "$size")
        n=$((size - have))
        if [ "$n" -gt 0 ]; then
            say "$t: create $n nodes (to $size)"
            lg create -label "$l" create -n "$n" -workers "$WORKERS" || return 1
            have=$size
        fi
        say "$t: list and get at $l nodes"
        lg list -label "$l" list -duration "$DURATION" -workers "$WORKERS" -limit 100 || return 1
        lg get -label "$l" get -duration "$DURATION" -workers "$WORKERS" || return 1
    done
    "$rss" after-load
}

# ---------------------------------------------------------------- ironic
ironic_alive() {
    local p
    for p in $(cat "$TMP/ironic/ironic.pids" 2>/dev/null); do kill -0 "$p" 2>/dev/null || return 1; done
    [ -f "$TMP/ironic/ironic.pids" ]
}
ironic_rss() {
    # The same process-tree walk as rss.sh (whose line stays in the log to
    # compare), through loadgen so that Ironic's anonymous and file-backed
    # memory are recorded as castiron's are.
    echo "ironic rss.sh ($1): $("$IRONIC_REF/rss.sh" "$IRONIC_PORT" "$TMP/ironic")"
    "$LG" -target ironic -label "$1" rss -pidfile "$TMP/ironic/ironic.pids" >> "$JSONL"
}

bench_ironic() {
    local url="http://127.0.0.1:$IRONIC_PORT" dir="$TMP/ironic" out
    say "ironic on $url"
    if [ ! -x /usr/bin/ironic ] || [ ! -x "$IRONIC_REF/start.sh" ]; then
        problem "ironic skipped: /usr/bin/ironic or $IRONIC_REF/start.sh missing (apt-get install -y ironic-api ironic-conductor python3-ironicclient python3-openstackclient)"
        note ironic skipped "not installed"
        return
    fi
    if port_busy "$IRONIC_PORT"; then
        problem "ironic skipped: port $IRONIC_PORT is in use"
        note ironic skipped "port $IRONIC_PORT in use"
        return
    fi
    # 1. fresh data dir, config and schema; start.sh's own start-up figure
    IRONIC_STARTED=1
    if ! out=$(FRESH=1 "$IRONIC_REF/start.sh" "$IRONIC_PORT" "$dir" 2>&1); then
        echo "$out"
        problem "ironic skipped: start.sh failed"
        note ironic skipped "start.sh failed"
        return
    fi
    echo "$out"
    "$IRONIC_REF/stop.sh" "$IRONIC_PORT" "$dir"
    IRONIC_STARTED=0
    # 2. start-up measured the same way as castiron's (same config and DB)
    say "ironic: start-up x$STARTUP_REPS"
    "$LG" -url "$url" -target ironic startup -warmup 1 -reps "$STARTUP_REPS" -log "$dir/log/startup-runs.log" \
        -cmd "exec /usr/bin/ironic --config-file '$dir/ironic.conf'" >> "$JSONL" \
        || problem "ironic: start-up measurement failed"
    # 3. the instance the workload runs against
    IRONIC_STARTED=1
    if ! "$IRONIC_REF/start.sh" "$IRONIC_PORT" "$dir"; then
        problem "ironic: start.sh failed"
        note ironic crash "start.sh failed after the start-up runs"
        return
    fi
    workload ironic "$url" ironic_alive ironic_rss
    "$IRONIC_REF/stop.sh" "$IRONIC_PORT" "$dir"
    IRONIC_STARTED=0
}

# ---------------------------------------------------------------- castiron
castiron_alive() { kill -0 "$CASTIRON_PID" 2>/dev/null; }
castiron_rss() { "$LG" -target "$CASTIRON_TARGET" -label "$1" rss -pids "$CASTIRON_PID" >> "$JSONL"; }

# bench_castiron [TARGET BIN]: castiron (the build of this tree, or
# $CASTIRON_BIN), or castiron-base ($CASTIRON_BASE_BIN, e.g. main's build,
# never built here) for before/after figures in the same run.
bench_castiron() {
    local t=${1:-castiron} bin=${2:-${CASTIRON_BIN:-$ROOT/castiron}}
    local url="http://127.0.0.1:$CASTIRON_PORT"
    CASTIRON_TARGET=$t
    say "$t on $url"
    if [ "$t" != castiron ] || [ -n "${CASTIRON_BIN:-}" ]; then
        CASTIRON_BUILT="BUILD not applied: binary as given"
    elif [ "$BUILD" = 1 ] && [ -f "$ROOT/Makefile" ]; then
        echo "make build (log: $TMP/make-build.log)"
        if ! (cd "$ROOT" && make build) > "$TMP/make-build.log" 2>&1; then
            tail -20 "$TMP/make-build.log"
            problem "castiron skipped: make build failed (see above)"
            note castiron skipped "make build failed"
            return
        fi
        CASTIRON_BUILT="built by make build"
    elif [ "$BUILD" = 1 ]; then
        echo "no $ROOT/Makefile yet: using ./castiron as it is"
        CASTIRON_BUILT="no Makefile yet: binary as found"
    else
        CASTIRON_BUILT="BUILD=0: binary as found"
    fi
    if [ ! -x "$bin" ]; then
        problem "$t skipped: $bin does not exist yet (no Makefile or make build did not produce it)"
        note "$t" skipped "$bin not built yet"
        return
    fi
    echo "binary: $bin ($(stat -c '%s bytes, built %y' "$bin"))"
    if port_busy "$CASTIRON_PORT"; then
        problem "$t skipped: port $CASTIRON_PORT is in use"
        note "$t" skipped "port $CASTIRON_PORT in use"
        return
    fi
    # Measured as Ironic's is: on a data dir whose (empty) database an
    # earlier, uncounted start created (Ironic's start.sh runs dbsync). The
    # start that creates the database is recorded as well (label new-db).
    say "$t: start-up x$STARTUP_REPS (each with a new empty data dir: the database is created at start)"
    if ! "$LG" -url "$url" -target "$t" -label new-db startup -reps "$STARTUP_REPS" -log "$TMP/castiron-startup.log" \
        -cmd "exec '$bin' serve --listen 127.0.0.1:$CASTIRON_PORT --data-dir \"\$(mktemp -d '$TMP/castiron-startup.XXXX')\" $CASTIRON_ARGS" \
        >> "$JSONL"; then
        tail -20 "$TMP/castiron-startup.log"
        problem "$t skipped: './castiron serve' did not answer GET /v1 with 200 (log above)"
        return
    fi
    say "$t: start-up x$STARTUP_REPS (on the database an uncounted first start created, as Ironic's)"
    mkdir -p "$TMP/$t-restart"
    if ! "$LG" -url "$url" -target "$t" startup -warmup 1 -reps "$STARTUP_REPS" -log "$TMP/castiron-startup.log" \
        -cmd "exec '$bin' serve --listen 127.0.0.1:$CASTIRON_PORT --data-dir '$TMP/$t-restart' $CASTIRON_ARGS" \
        >> "$JSONL"; then
        tail -20 "$TMP/castiron-startup.log"
        problem "$t: start-up on an existing database failed (log above)"
    fi
    mkdir -p "$TMP/$t"
    # shellcheck disable=SC2086 # CASTIRON_ARGS is a list of flags
    "$bin" serve --listen "127.0.0.1:$CASTIRON_PORT" --data-dir "$TMP/$t" $CASTIRON_ARGS > "$TMP/$t.log" 2>&1 < /dev/null &
    CASTIRON_PID=$!
    if ! "$LG" -url "$url" -target "$t" ready -wait 60s; then
        tail -20 "$TMP/$t.log"
        problem "$t: did not come up"
        note "$t" crash "did not answer GET /v1 after start"
        return
    fi
    workload "$t" "$url" castiron_alive castiron_rss || tail -30 "$TMP/$t.log"
    if castiron_alive; then
        kill -TERM "$CASTIRON_PID"
        for _ in $(seq 1 100); do castiron_alive || break; sleep 0.1; done
        if castiron_alive; then
            problem "$t did not exit within 10 s of SIGTERM; SIGKILL"
            kill -KILL "$CASTIRON_PID"
        fi
    fi
    wait "$CASTIRON_PID" 2>/dev/null
    echo "$t exited with status $?"
    CASTIRON_PID=""
    if grep -qiE 'panic|fatal' "$TMP/$t.log"; then
        problem "$t log mentions panic/fatal:"
        grep -iE -m5 -A5 'panic|fatal' "$TMP/$t.log"
    fi
}

# ---------------------------------------------------------------- main
say "building loadgen"
(cd "$ROOT" && go build -o "$LG" ./bench/loadgen) || { echo "cannot build bench/loadgen"; exit 1; }
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
STARTED=$(date -u +'%F %T UTC')
for t in $TARGETS; do
    case "$t" in
        ironic) bench_ironic ;;
        castiron) bench_castiron ;;
        castiron-base)
            if [ -z "${CASTIRON_BASE_BIN:-}" ]; then echo "castiron-base needs CASTIRON_BASE_BIN"; exit 2; fi
            bench_castiron castiron-base "$CASTIRON_BASE_BIN" ;;
        *) echo "unknown target $t"; exit 2 ;;
    esac
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

mkdir -p "$OUT"
base="$OUT/$(date +%F)"
i=1
while [ -e "$base.md" ]; do i=$((i + 1)); base="$OUT/$(date +%F)-$i"; done
cp "$JSONL" "$base.jsonl"
{
    echo "# castiron vs Ironic, $STARTED"
    echo
    echo "Machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r); load average before $LOAD_BEFORE, after $LOAD_AFTER (the machine is shared)."
    echo "Ironic: $(dpkg-query -W -f='${Version}' ironic-common 2>/dev/null || echo '?') (Debian), single process, SQLite, noauth, fake-hardware; castiron: \`./castiron serve${CASTIRON_ARGS:+ $CASTIRON_ARGS}\` ($CASTIRON_BUILT)."
    echo "Client: bench/loadgen, $WORKERS workers, closed loop, keep-alive, X-OpenStack-Ironic-API-Version: $API_VERSION; list/get $DURATION each; lifecycle poll $LIFECYCLE_POLL."
    echo "Targets ran one after the other, each on a fresh empty database."
    echo
    "$LG" table -in "$JSONL" -targets "$(echo "$TARGETS" | tr ' ' ',')"
    echo
    echo "Raw records: $(basename "$base").jsonl"
    echo
    echo "<details><summary>run log</summary>"
    echo
    echo '```'
    grep -E '^(\[|=== |!!! |ironic |startup_seconds|castiron exited|binary:|no .*Makefile)' "$LOG" | sed "s#$TMP#\$TMP#g"
    echo '```'
    echo "</details>"
} > "$base.md"
say "results: $base.md"
cat "$base.md"
if [ "$PROBLEMS" != 0 ]; then
    echo
    echo "$PROBLEMS problem(s), see the '!!!' lines above and $LOG"
fi
exit 0
