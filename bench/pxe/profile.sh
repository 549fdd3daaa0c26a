#!/bin/bash
# Where castiron's DHCP CPU goes: one run of perfdhcp (relay mode, the PXE
# options and 10,000 clients of the sweep) at a fixed rate against a fresh
# castiron, with `perf record -g` on the server, then the share of the
# server's samples under each part of the packet path.
#
# usage (as root): bench/pxe/profile.sh [RATE] [SECONDS]     (default 4000 8)
# env: CASTIRON_BIN (default: go build), PERF_DATA=<file> keeps perf's data,
#      SERVER=castiron-base with CASTIRON_BASE_BIN profiles an older castiron,
#      NICE, PIN, SRV_CPU, CLI_CPU as in run.sh.
# Needs perf (Debian: linux-perf) and the tools run.sh needs for DHCP.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$HERE/lib.sh"
. "$HERE/dhcp.sh"

RATE=${1:-4000}
DUR=${2:-8}
SERVER=${SERVER:-castiron}
[ "$(id -u)" = 0 ] || die "run as root (network namespaces)"
for t in ip perfdhcp perf go; do command -v "$t" >/dev/null || die "missing tool: $t"; done

BENCH_TMP=$(mktemp -d /tmp/cipx-prof.XXXXXX)
trap 'stop_server; net_down; rm -rf "$BENCH_TMP"' EXIT
trap 'exit 130' INT TERM
if [ -z "${CASTIRON_BIN:-}" ]; then
	CASTIRON_BIN=$BENCH_TMP/castiron
	(cd "$ROOT" && CGO_ENABLED=0 go build -o "$CASTIRON_BIN" .) || die "go build failed"
fi
CASTIRON_BOOT_ARGS=""
PERF_DATA=${PERF_DATA:-$BENCH_TMP/perf.data}

net_up
start_server "$SERVER" || die "$SERVER did not start"
t0=$(srv_ticks)
perf record -F 1999 -g -p "$SERVER_PID" -o "$PERF_DATA" -- sleep "$((DUR + 1))" >/dev/null 2>&1 &
perf_pid=$!
# shellcheck disable=SC2046
ip netns exec "$CLI_NS" $(cli_taskset) perfdhcp -4 -l "$CLI_IP" "${PXE_OPTS[@]}" -s "$DHCP_SEED" -r "$RATE" -p "$DUR" \
	-R "$DHCP_CLIENTS" -W 500000 "$SRV_IP" >"$BENCH_TMP/perfdhcp.out" 2>&1
t1=$(srv_ticks)
wait "$perf_pid"
read -r dos _ _ rar doa raa < <(parse_perfdhcp "$BENCH_TMP/perfdhcp.out")
awk -v s="$SERVER" -v r="$RATE" -v dos="$dos" -v rar="$rar" -v d="$DUR" -v tk="$((t1 - t0))" -v hz="$CLK_TCK" -v doa="$doa" -v raa="$raa" 'BEGIN{
	printf "%s at %d/s offered: achieved %.0f/s, failed %.2f %%, server %.0f µs CPU per DORA (with perf running), D-O %s ms, R-A %s ms\n",
		s, r, rar / d, 100 * (1 - rar / dos), 1e6 * tk / hz / rar, doa, raa }'

# Each sample counts once under every part whose function is on its stack
# (parts overlap: the SQLite writer holds the timeline and the leases).
perf script -i "$PERF_DATA" -F ip,sym 2>/dev/null | awk '
BEGIN {
	n = split("packet loop: read+decide+send|batchLoop).read;" \
		"  parse (dhcpv4.FromBytes)|dhcpv4.FromBytes;" \
		"  decide (gate, lease index, reply)|dhcp.(*Server).decide;" \
		"  timeline events recorded|dhcp.recordEvent;" \
		"  encode answers|dhcp.appendPacket;" \
		"  send (sendto)|sendto;" \
		"  recvmmsg|recvmmsg;" \
		"packet loop: commit + ACKs|batchLoop).commit;" \
		"SQLite writer (group commit)|committer).run;" \
		"  boot timeline rows|AddBootEvents;" \
		"  lease upserts|leaseTable).PutLeases;" \
		"  commits (WAL, checkpoints)|sql.(*Tx).Commit;" \
		"GC background workers|gcBgMarkWorker;" \
		"allocation (mallocgc, anywhere)|runtime.mallocgc;" \
		"Go sysmon|runtime.sysmon;" \
		"scheduler, idle|runtime.findRunnable", parts, ";")
	for (i = 1; i <= n; i++) { split(parts[i], kv, "|"); name[i] = kv[1]; pat[i] = kv[2] }
}
function flush(   i) {
	if (stack == "") return
	total++
	for (i = 1; i <= n; i++) if (index(stack, pat[i])) hit[i]++
	stack = ""
}
NF == 0 { flush(); next }
{ stack = stack "\n" $2 }
END {
	flush()
	printf "%d samples of the server; share of them under each part:\n", total
	for (i = 1; i <= n; i++) printf "  %-40s %5.1f %%\n", name[i], total ? 100 * hit[i] / total : 0
}'
