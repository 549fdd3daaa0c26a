#!/bin/bash
# Power sync against simulated IPMI BMCs, side by side in one run (issue 28):
# castiron as on main (sequential loop, one session per read) / castiron as
# in this tree / Ironic 21.4 (its ipmi driver, where it can run). See
# bench/fleet/main.go for what is measured.
#
# usage: bench/fleet/run.sh
# env:   BMC=ipmi             ipmi or redfish (castiron's Redfish emulator,
#                           state-only, one HTTP BMC per 127.x.y.z)
#        N=100,1000,10000   fleet sizes
#        TARGETS=before,after,ironic
#        IRONIC_MAX_N=1000  largest N Ironic runs at (creating and syncing
#                           10,000 nodes takes it far longer than a window)
#        WINDOW=60s COLD_CAP=90s
#        BEFORE_REF=main    the git revision "before" is built from
#        OUT=bench/results  where fleet-<date>.md and .jsonl go
#        IRONIC_REF=<repo>/../shared/ironic-reference (or ../../shared for
#                   a worktree one folder deeper)
# Run it under the machine's heavy-work lock (flock) on a shared machine. It starts
# only its own servers and stops exactly those.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
N="${N:-100,1000,10000}"
BMC="${BMC:-ipmi}"
TARGETS="${TARGETS:-before,after,ironic}"
IRONIC_MAX_N="${IRONIC_MAX_N:-1000}"
WINDOW="${WINDOW:-60s}"
COLD_CAP="${COLD_CAP:-90s}"
BEFORE_REF="${BEFORE_REF:-main}"
OUT="${OUT:-$ROOT/bench/results}"
if [ -z "${IRONIC_REF:-}" ]; then
    for d in "$ROOT/../shared/ironic-reference" "$ROOT/../../shared/ironic-reference"; do
        [ -d "$d" ] && IRONIC_REF="$(cd "$d" && pwd)" && break
    done
fi
IRONIC_REF="${IRONIC_REF:-/nonexistent}"
TMP="$(mktemp -d /tmp/castiron-fleet.XXXXXX)"
trap 'rm -rf "$TMP/src" "$TMP/bin"' EXIT

cd "$ROOT"
mkdir -p "$TMP/src" "$TMP/bin" "$OUT"
git archive "$BEFORE_REF" | tar -x -C "$TMP/src"
(cd "$TMP/src" && CGO_ENABLED=0 go build -trimpath -o "$TMP/bin/castiron-before" .)
CGO_ENABLED=0 go build -trimpath -o "$TMP/bin/castiron-after" .
go build -o "$TMP/bin/fleet" ./bench/fleet

IRONIC_ARGS=()
if [ -x "$IRONIC_REF/start.sh" ] && [ -x /usr/bin/ironic ]; then
    IRONIC_ARGS=(-ironic-ref "$IRONIC_REF" -ironic-max-n "$IRONIC_MAX_N")
else
    echo "Ironic reference not runnable here ($IRONIC_REF, /usr/bin/ironic): castiron only" >&2
fi

STAMP="$(date -u +%Y-%m-%dT%H%M)"
MD="$OUT/fleet-$BMC-$STAMP.md"
{
    echo "# bench/fleet $STAMP"
    echo
    echo "castiron before = \`$BEFORE_REF\` ($(git rev-parse --short "$BEFORE_REF")), after = $(git rev-parse --abbrev-ref HEAD) ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', dirty'))."
    echo "Machine: $(nproc) cores; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)."
} > "$MD"
"$TMP/bin/fleet" -before "$TMP/bin/castiron-before" -after "$TMP/bin/castiron-after" "${IRONIC_ARGS[@]}" \
    -bmc "$BMC" -targets "$TARGETS" -n "$N" -window "$WINDOW" -cold-cap "$COLD_CAP" -dir "$TMP" \
    -jsonl "$OUT/fleet-$BMC-$STAMP.jsonl" | tee -a "$MD"
echo "Load average at end: $(cut -d' ' -f1-3 /proc/loadavg)." >> "$MD"
echo "results: $MD (work dir with logs: $TMP)" >&2
