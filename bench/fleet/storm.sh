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
#        BOOT=http         boot phase: http (iPXE script over HTTP only) or
#                          pxe (as root: castiron on a provisioning network
#                          in a namespace of its own, every machine doing
#                          DHCP DORA, TFTP of the boot file, iPXE's DORA,
#                          then script, kernel, initramfs over HTTP from a
#                          second namespace; see bench/README.md)
#        KERNEL_MIB=4 INITRD_MIB=12  BOOT=pxe: sizes of the kernel and
#                          initramfs every boot downloads
#        PXE_NET=10.253    BOOT=pxe: the /16 of the provisioning network
#        CASTIRON_CPUS= BENCH_CPUS=  pin castiron and the bench (rack,
#                          agents, client, API sampler) to CPUs of their
#                          own (taskset -c lists, e.g. 0 and 1); other
#                          processes on the machine are not moved
#        PIN_TURNS=0       1: every storm unpinned, then pinned, in turn
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
CASTIRON_CPUS="${CASTIRON_CPUS:-}"
BENCH_CPUS="${BENCH_CPUS:-}"
PIN_TURNS="${PIN_TURNS:-0}"
OUT="${OUT:-$ROOT/bench/results}"
BOOT="${BOOT:-http}"
KERNEL_MIB="${KERNEL_MIB:-4}"
INITRD_MIB="${INITRD_MIB:-12}"
PXE_NET="${PXE_NET:-10.253}"
TMP="$(mktemp -d /tmp/castiron-storm.XXXXXX)"
FLEET_PID=""
SRV_NS="" CLI_NS=""
cleanup() {
    # Only what this run started: the bench process (by PID) and whatever
    # still runs in the namespaces it created (castiron, the sampler).
    if [ -n "$FLEET_PID" ] && kill -0 "$FLEET_PID" 2>/dev/null; then
        kill "$FLEET_PID" 2>/dev/null || true
        sleep 1
    fi
    for ns in $SRV_NS $CLI_NS; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -rf "$TMP/bin" "$TMP/src"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
case "$BOOT" in
http | pxe) ;;
*) echo "BOOT=$BOOT: want http or pxe" >&2; exit 2 ;;
esac

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
PIN_ARGS=(-storm-castiron-cpus "$CASTIRON_CPUS" -storm-bench-cpus "$BENCH_CPUS")
[ "$PIN_TURNS" = 1 ] && PIN_ARGS+=(-storm-pin-turns)

RUN=()
BOOT_ARGS=(-storm-boot "$BOOT")
BOOT_DESC="boot phase off (iPXE script over HTTP only)"
if [ "$BOOT" = pxe ]; then
    [ "$(id -u)" = 0 ] || { echo "BOOT=pxe needs root (network namespaces)" >&2; exit 2; }
    SFX="$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
    SRV_NS="cistorm-s-$SFX" CLI_NS="cistorm-c-$SFX"
    ip netns add "$SRV_NS"
    ip netns add "$CLI_NS"
    ip link add "csts$SFX" netns "$SRV_NS" type veth peer name "cstc$SFX" netns "$CLI_NS"
    ip -n "$SRV_NS" addr add "$PXE_NET.0.1/16" dev "csts$SFX"
    ip -n "$CLI_NS" addr add "$PXE_NET.0.2/16" dev "cstc$SFX"
    for l in "$SRV_NS csts$SFX" "$SRV_NS lo" "$CLI_NS cstc$SFX" "$CLI_NS lo"; do
        set -- $l
        ip -n "$1" link set "$2" up
    done
    # castiron, the rack's BMCs (127.x on the namespace's own loopback) and
    # the bench run in the server namespace; the machines' firmware sockets
    # are opened in the client one.
    RUN=(ip netns exec "$SRV_NS")
    BOOT_ARGS+=(-storm-pxe-interface "csts$SFX" -storm-pxe-addr "$PXE_NET.0.1" -storm-dhcp-range "$PXE_NET.16.1,$PXE_NET.63.254"
        -storm-pxe-netns "$CLI_NS" -storm-pxe-client-interface "cstc$SFX" -storm-kernel-mib "$KERNEL_MIB" -storm-initrd-mib "$INITRD_MIB")
    BOOT_DESC="boot phase on: DHCP DORA as the PXE ROM, TFTP of the boot file, DORA as iPXE, script + kernel ($KERNEL_MIB MiB) + initramfs ($INITRD_MIB MiB) over HTTP, from a network namespace ($PXE_NET.0.0/16, castiron --pxe-interface on a veth, DHCP range $PXE_NET.16.1-$PXE_NET.63.254)"
fi

SUFFIX=""
[ "$BOOT" = pxe ] && SUFFIX=-pxe
STAMP="$(date -u +%Y-%m-%dT%H%M)-n$N$SUFFIX"
MD="$OUT/storm-$STAMP.md"
{
    echo "# bench/fleet storm $STAMP"
    echo
    [ -n "$BEFORE_REF" ] && echo "castiron before = \`$BEFORE_REF\` ($(git rev-parse --short "$BEFORE_REF")), storms before and after in turn, $RUNS each."
    [ "${BEFORE_BIN:-}" = after ] && echo "castiron before = this tree's binary too, storms before and after in turn, $RUNS each."
    [ -n "${BEFORE_ENV:-}${AFTER_ENV:-}" ] && echo "Environment: before ${BEFORE_ENV:-(none added)}, after ${AFTER_ENV:-(none added)}."
    echo "castiron = $(git rev-parse --abbrev-ref HEAD) ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', dirty')); N=$N, BMCs $PROTOCOLS in turn, boot delay $BOOT_DELAY, BMC failure rate $FAILURE_RATE, BMCs 20-50 ms, $BOOT_DESC."
    echo "Machine: $(nproc) cores; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)."
    if [ -n "$CASTIRON_CPUS$BENCH_CPUS" ]; then
        echo "Pinned: castiron on CPUs ${CASTIRON_CPUS:-all} (GOMAXPROCS follows), the bench and the API sampler on CPUs ${BENCH_CPUS:-all}$([ "$PIN_TURNS" = 1 ] && echo ', every storm unpinned then pinned, in turn'); other processes on the machine (other work) run anywhere."
    fi
    echo "castiron's CPU and RSS are its own process's; the simulated rack and agents run in the bench process on the same cores unless pinned (its CPU in the last column), the API sampler in a process of its own (as an operator's client; before 15:50 on 2026-11-28 it ran inside the bench process and queued behind the rack's goroutines), so the latencies include that contention."
} > "$MD"
"${RUN[@]}" "$TMP/bin/fleet" "${BOOT_ARGS[@]}" -storm "$N" -after "$TMP/bin/castiron" "${BEFORE_ARGS[@]}" "${PPROF_ARGS[@]}" "${PIN_ARGS[@]}" -storm-runs "$RUNS" -storm-boot-delay "$BOOT_DELAY" \
    -storm-failure-rate "$FAILURE_RATE" -storm-timeout "$STORM_TIMEOUT" -storm-protocols "$PROTOCOLS" -base 127.50.0.1 -dir "$TMP" -jsonl "$OUT/storm-$STAMP.jsonl" >"$TMP/table.out" &
FLEET_PID=$!
wait "$FLEET_PID"
FLEET_PID=""
tee -a "$MD" <"$TMP/table.out"
echo "Load average at end: $(cut -d' ' -f1-3 /proc/loadavg)." >> "$MD"
echo "results: $MD (work dir with logs: $TMP)" >&2
