#!/bin/bash
# The storm (issue 28): N simulated machines (bmcsim/rack: IPMI and Redfish
# BMCs answering in 20-50 ms, simulated agents) taken enroll -> manage ->
# inspect -> provide -> deploy all at once against one castiron built from
# this tree, boot phase off (no DHCP/TFTP; iPXE scripts over HTTP). See
# bench/fleet/storm.go for what is measured.
#
# usage: bench/fleet/storm.sh
# env:   N=1000            machines
#        BOOT_DELAY=1s     simulated firmware time per power-on
#        FAILURE_RATE=0    probability a BMC request fails
#        STORM_TIMEOUT=30m give up after
#        PROTOCOLS=ipmi,redfish  BMC kinds in turn (PROTOCOLS=ipmi for 10,000:
#                          Redfish BMCs cost descriptors, 20,000 is too few)
#        BEFORE_REF=       a git revision to build "before" from: storms
#                          before and after in turn, in one run
#        RUNS=1            storms per binary
#        PPROF=            directory for castiron's profiles taken during
#                          each storm (--pprof-listen) and the bench's own
#        CPU_PROFILE=15s   length of castiron's CPU profile from the start
#        TRACE=0           length of an execution trace of castiron (PPROF)
#        TRACE_AT=5s       its start, from the storm's
#        BEFORE_ENV= AFTER_ENV=  NAME=value words added to castiron's
#                          environment (BEFORE_BIN=after: the same binary)
#        OUT=bench/results where storm-<date>.md and .jsonl go
# Run it under the machine's heavy-work lock (flock) on a shared machine.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
N="${N:-1000}"
BOOT_DELAY="${BOOT_DELAY:-1s}"
FAILURE_RATE="${FAILURE_RATE:-0}"
STORM_TIMEOUT="${STORM_TIMEOUT:-30m}"
PROTOCOLS="${PROTOCOLS:-ipmi,redfish}"
BEFORE_REF="${BEFORE_REF:-}"
RUNS="${RUNS:-1}"
PPROF="${PPROF:-}"
CPU_PROFILE="${CPU_PROFILE:-15s}"
TRACE="${TRACE:-0}"
TRACE_AT="${TRACE_AT:-5s}"
OUT="${OUT:-$ROOT/bench/results}"
TMP="$(mktemp -d /tmp/castiron-storm.XXXXXX)"
trap 'rm -rf "$TMP/bin" "$TMP/src"' EXIT

cd "$ROOT"
mkdir -p "$TMP/bin" "$OUT"
CGO_ENABLED=0 go build -trimpath -o "$TMP/bin/castiron" .
go build -o "$TMP/bin/fleet" ./bench/fleet
BEFORE_ARGS=()
if [ -n "$BEFORE_REF" ]; then
    mkdir -p "$TMP/src"
    git archive "$BEFORE_REF" | tar -x -C "$TMP/src"
    (cd "$TMP/src" && CGO_ENABLED=0 go build -trimpath -o "$TMP/bin/castiron-before" .)
    BEFORE_ARGS=(-before "$TMP/bin/castiron-before")
fi
if [ "${BEFORE_BIN:-}" = after ]; then
    BEFORE_ARGS=(-before "$TMP/bin/castiron")
fi
for e in ${BEFORE_ENV:-}; do BEFORE_ARGS+=(-storm-env-before "$e"); done
for e in ${AFTER_ENV:-}; do BEFORE_ARGS+=(-storm-env-after "$e"); done
PPROF_ARGS=()
[ -n "$PPROF" ] && PPROF_ARGS=(-storm-pprof "$PPROF" -storm-cpu-profile "$CPU_PROFILE" -storm-trace "$TRACE" -storm-trace-at "$TRACE_AT")

STAMP="$(date -u +%Y-%m-%dT%H%M)-n$N"
MD="$OUT/storm-$STAMP.md"
{
    echo "# bench/fleet storm $STAMP"
    echo
    [ -n "$BEFORE_REF" ] && echo "castiron before = \`$BEFORE_REF\` ($(git rev-parse --short "$BEFORE_REF")), storms before and after in turn, $RUNS each."
    [ "${BEFORE_BIN:-}" = after ] && echo "castiron before = this tree's binary too, storms before and after in turn, $RUNS each."
    [ -n "${BEFORE_ENV:-}${AFTER_ENV:-}" ] && echo "Environment: before ${BEFORE_ENV:-(none added)}, after ${AFTER_ENV:-(none added)}."
    echo "castiron = $(git rev-parse --abbrev-ref HEAD) ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', dirty')); N=$N, BMCs $PROTOCOLS in turn, boot delay $BOOT_DELAY, BMC failure rate $FAILURE_RATE, BMCs 20-50 ms, boot phase off."
    echo "Machine: $(nproc) cores; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)."
    echo "castiron's CPU and RSS are its own process's; the simulated rack and agents run in the bench process on the same cores (its CPU in the last column), the API sampler in a process of its own (as an operator's client; before 15:50 on 2026-11-28 it ran inside the bench process and queued behind the rack's goroutines), so the latencies include that contention."
} > "$MD"
"$TMP/bin/fleet" -storm "$N" -after "$TMP/bin/castiron" "${BEFORE_ARGS[@]}" "${PPROF_ARGS[@]}" -storm-runs "$RUNS" -storm-boot-delay "$BOOT_DELAY" \
    -storm-failure-rate "$FAILURE_RATE" -storm-timeout "$STORM_TIMEOUT" -storm-protocols "$PROTOCOLS" -base 127.50.0.1 -dir "$TMP" -jsonl "$OUT/storm-$STAMP.jsonl" | tee -a "$MD"
echo "Load average at end: $(cut -d' ' -f1-3 /proc/loadavg)." >> "$MD"
echo "results: $MD (work dir with logs: $TMP)" >&2
