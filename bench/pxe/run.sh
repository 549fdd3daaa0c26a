#!/bin/bash
# PXE benchmark: castiron's DHCP, TFTP and boot-file HTTP side by side with
# dnsmasq and kea-dhcp4 (and busybox httpd / python http.server as HTTP
# baselines), in one run, inside two private network namespaces joined by a
# veth (10.206.0.0/16, see lib.sh). Writes bench/pxe/results/<date>.md.
#
# usage (as root): bench/pxe/run.sh
# env:
#   SERVERS="castiron kea dnsmasq dnsmasq-noleases"   in table order; castiron is
#            skipped with a note when its binary has no --pxe-interface
#   HTTP_BASELINES="busybox-httpd python-http"
#   PARTS="dhcp durability tftp http"
#   CASTIRON_BIN=<path>     default: go build -o <tmp>/castiron from the repo
#   CASTIRON_BASE_BIN=<path> with server castiron-base in SERVERS: an older castiron
#                           measured in the same rounds (DHCP and durability only)
#   CRASH_RATE=2000         kill -9 test rate when the DHCP sweep did not run
#   CASTIRON_ARGS=          extra `castiron serve` flags
#   CASTIRON_BOOT_ARGS=     flags that make castiron serve HTTP_KERNEL/HTTP_INITRAMFS
#                           (default: guessed from `castiron serve -h`)
#   CASTIRON_LEASE_SQL=     SQL counting castiron's leases (default: rows of
#                           every table named like %lease%)
#   HTTP_KERNEL, HTTP_INITRAMFS   files the HTTP baselines serve (default: the
#                           newest /boot/vmlinuz-*, /boot/initrd.img-*; when
#                           castiron serves its own, the baselines serve those bytes)
#   DHCP_DURATION=5 DHCP_CLIENTS=10000 DHCP_START=1000 DHCP_BISECT=2 DHCP_CONFIRM=2
#   DHCP_DROP_OK=1 DHCP_RECHECK=1 DHCP_MAX_RUNS=14 DHCP_RETRIES=0 DHCP_MAX_WAIT=40 DHCP_RETRY_BUDGET=240
#   DUR_N=500 DUR_RATE=100                         (dhcp.sh)
#   TFTP_N=200 TFTP_RUNS=3 TFTP_FILE=undionly.kpxe (tftp.sh)
#   HTTP_SEQ=3 HTTP_PAR=10 HTTP_ROUNDS=3           (http.sh)
#   NICE=-5 (servers and load generators; the machine is shared)
#   PIN=1 (server on CPU 0, load generators on CPU 1)  OUT=bench/pxe/results  KEEP=0
#
# It starts only its own processes inside its own namespaces and stops them
# by PID; on exit (also on Ctrl-C) the namespaces are deleted.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$HERE/lib.sh"
. "$HERE/dhcp.sh"
. "$HERE/tftp.sh"
. "$HERE/http.sh"

SERVERS=${SERVERS:-"castiron kea dnsmasq dnsmasq-noleases"}
HTTP_BASELINES=${HTTP_BASELINES-"busybox-httpd python-http"}
PARTS=${PARTS:-"dhcp durability tftp http"}
OUT=${OUT:-$HERE/results}
KEEP=${KEEP:-0}

[ "$(id -u)" = 0 ] || die "run as root (network namespaces)"
for t in ip perfdhcp kea-dhcp4 dnsmasq curl strace sqlite3 xxd go busybox python3 taskset; do
	command -v "$t" >/dev/null || die "missing tool: $t (Debian: kea-admin for perfdhcp, kea-dhcp4-server, dnsmasq, curl, strace, sqlite3, xxd, busybox-static)"
done
want() { [[ " $PARTS " == *" $1 "* ]]; }

BENCH_TMP=$(mktemp -d /tmp/cipx-bench.XXXXXX)
RAW=$BENCH_TMP/raw
mkdir -p "$RAW" "$OUT"
cleanup() {
	stop_server
	net_down
	if [ "$KEEP" = 1 ]; then log "kept $BENCH_TMP"; else rm -rf "$BENCH_TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
T_START=$EPOCHREALTIME
LOAD_BEFORE=$(cut -d" " -f1-3 /proc/loadavg)

# ------------------------------------------------------------------ builds
log "building tftpload"
(cd "$ROOT" && CGO_ENABLED=0 go build -o "$BENCH_TMP/tftpload" ./bench/pxe/tftpload) || die "cannot build bench/pxe/tftpload"
TFTPLOAD=$BENCH_TMP/tftpload

CASTIRON_NOTE=""
CASTIRON_HELP=""
if [[ " $SERVERS " == *" castiron "* ]]; then
	if [ -z "${CASTIRON_BIN:-}" ]; then
		log "building castiron"
		CASTIRON_BIN=$BENCH_TMP/castiron
		(cd "$ROOT" && CGO_ENABLED=0 go build -o "$CASTIRON_BIN" .) 2>"$RAW/castiron-build.log" ||
			CASTIRON_NOTE="castiron skipped: go build failed ($(head -c 300 "$RAW/castiron-build.log" | tr '\n' ' '))"
	fi
	# (help captured first: grep -q closing the pipe early would fail it under pipefail)
	[ -z "$CASTIRON_NOTE" ] && CASTIRON_HELP=$("$CASTIRON_BIN" serve -h 2>&1)
	if [ -z "$CASTIRON_NOTE" ] && [[ "$CASTIRON_HELP" != *-pxe-interface* ]]; then
		CASTIRON_NOTE="castiron skipped: $CASTIRON_BIN serve has no --pxe-interface yet"
	fi
	if [ -n "$CASTIRON_NOTE" ]; then
		log "$CASTIRON_NOTE"
		SERVERS=$(echo " $SERVERS " | sed 's/ castiron / /; s/^ *//; s/ *$//')
	fi
fi
CASTIRON_VERSION=""
[ -z "$CASTIRON_NOTE" ] && [ -n "${CASTIRON_BIN:-}" ] && [[ " $SERVERS " == *" castiron "* ]] &&
	CASTIRON_VERSION=$(cd "$ROOT" && git describe --always --dirty 2>/dev/null)

# ------------------------------------------------------------------ boot files
newest() { ls $1 2>/dev/null | sort -V | tail -1; }
HTTP_KERNEL=${HTTP_KERNEL:-$(newest '/boot/vmlinuz-*')}
HTTP_INITRAMFS=${HTTP_INITRAMFS:-$(newest '/boot/initrd.img-*')}
WWW_ROOT=$BENCH_TMP/www
mkdir -p "$WWW_ROOT/boot"
cp "$HTTP_KERNEL" "$WWW_ROOT/boot/vmlinuz" && cp "$HTTP_INITRAMFS" "$WWW_ROOT/boot/initramfs" ||
	die "cannot copy $HTTP_KERNEL / $HTTP_INITRAMFS"
# castiron serves DATA-DIR/ramdisk/{vmlinuz,initramfs} (or --ramdisk-dir) at
# /boot/: give it the same files as the baselines
if [ -z "${CASTIRON_BOOT_ARGS+x}" ] && [[ " $SERVERS " == *" castiron "* ]]; then
	CASTIRON_BOOT_ARGS=""
	if [[ "$CASTIRON_HELP" == *-ramdisk-dir* ]]; then
		CASTIRON_BOOT_ARGS="--ramdisk-dir $WWW_ROOT/boot"
	fi
	log "castiron boot-file flags: ${CASTIRON_BOOT_ARGS:-<none found>}"
fi

net_up

# ------------------------------------------------------------------ runs
# preflight: a server that does not come up (e.g. a castiron without a wired
# PXE stack) is dropped with a note instead of failing every run
SKIPPED=""
for s in $SERVERS $HTTP_BASELINES; do
	if start_server "$s"; then
		stop_server
	else
		SKIPPED+="$s (did not bind $(server_parts "$s") ports; output: $(tail -c 300 "$WORKDIR/server.out" | tr '\n' ' ')); "
		SERVERS=$(echo " $SERVERS " | sed "s/ $s / /")
		HTTP_BASELINES=$(echo " $HTTP_BASELINES " | sed "s/ $s / /")
	fi
done
[ -n "$SKIPPED" ] && log "skipped: $SKIPPED"

declare -A DHCP DUR CRASH TFTP HTTP
with_part() { # PART -> the servers (SERVERS, and HTTP_BASELINES for http) that serve it
	local s
	for s in $SERVERS; do has_part "$s" "$1" && echo "$s"; done
	[ "$1" = http ] && for s in $HTTP_BASELINES; do echo "$s"; done
}
DHCP_SERVERS=$(with_part dhcp)
TFTP_SERVERS=$(with_part tftp)
HTTP_SERVERS=$(with_part http)

if want dhcp && [ -n "$DHCP_SERVERS" ]; then
	log "== DHCP sweep: $(echo $DHCP_SERVERS) (${DHCP_DURATION}s runs, $DHCP_CLIENTS clients, relay, interleaved)"
	# shellcheck disable=SC2086
	dhcp_sweep_all $DHCP_SERVERS
fi
if want durability; then
	for s in $DHCP_SERVERS; do
		log "== $s: lease durability ($DUR_N clients at $DUR_RATE/s, then SIGKILL)"
		DUR[$s]=$(dhcp_durability "$s")
		# and at full speed: kill -9 the moment a run at the server's best
		# rate ends (CRASH_RATE when the sweep did not run)
		[ "$(lease_kind "$s")" = none ] && continue
		r=${CRASH_RATE:-2000}
		if [ -n "${DHCP[$s]:-}" ]; then
			read -r best _ <<<"${DHCP[$s]}"
			[ "$best" -gt 0 ] && r=$best
		fi
		log "== $s: kill -9 right after ${DHCP_DURATION}s at $r/s"
		CRASH[$s]=$(dhcp_crash "$s" "$r")
		CRASH[$s]+=" $r"
	done
fi
if want tftp && [ -n "$TFTP_SERVERS" ]; then
	log "== TFTP: $TFTP_N x $TFTP_FILE, $TFTP_RUNS runs each, interleaved: $(echo $TFTP_SERVERS)"
	for i in $(seq "$TFTP_RUNS"); do
		for s in $TFTP_SERVERS; do tftp_once "$s"; done
	done
	for s in $TFTP_SERVERS; do TFTP[$s]=$(tftp_summary "$s"); done
fi
if want http && [ -n "$HTTP_SERVERS" ]; then
	if [[ " $SERVERS " == *" castiron "* ]] && [ -z "$CASTIRON_BOOT_ARGS" ] && start_server castiron; then
		# castiron serves its own files: give the baselines exactly those bytes
		for f in vmlinuz initramfs; do
			in_cli curl -sf -o "$BENCH_TMP/c-$f" "http://$SRV_IP:$HTTP_PORT/boot/$f" || rm -f "$BENCH_TMP/c-$f"
		done
		stop_server
		if [ -s "$BENCH_TMP/c-vmlinuz" ] && [ -s "$BENCH_TMP/c-initramfs" ]; then
			mv "$BENCH_TMP/c-vmlinuz" "$WWW_ROOT/boot/vmlinuz"
			mv "$BENCH_TMP/c-initramfs" "$WWW_ROOT/boot/initramfs"
			HTTP_KERNEL="castiron's /boot/vmlinuz"
			HTTP_INITRAMFS="castiron's /boot/initramfs"
		fi
	fi
	log "== HTTP: kernel + initramfs, $HTTP_ROUNDS rounds, interleaved: $(echo $HTTP_SERVERS)"
	for i in $(seq "$HTTP_ROUNDS"); do
		for s in $HTTP_SERVERS; do http_once "$s"; done
	done
	for s in $HTTP_SERVERS; do HTTP[$s]=$(http_summary "$s"); done
fi
net_down
ELAPSED=$(awk -v a="$T_START" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.0f", b-a}')

# ------------------------------------------------------------------ report
n=$(date +%F)
RES=$OUT/$n.md
i=2
while [ -e "$RES" ]; do
	RES=$OUT/$n-$i.md
	i=$((i + 1))
done

durable_text() { # acks leases fsyncs server
	local a=$1 l=$2 f=$3 s=$4
	if [ "$l" = none ]; then
		echo "no (memory only)"
		return
	fi
	awk -v a="$a" -v l="$l" -v f="$f" -v s="$s" 'BEGIN{
		per = (a > 0) ? f / a : 0
		if (a == 0) { print "? (no ACKs)"; exit }
		if (l + 0 < a) { printf "no: %d/%d on disk after kill -9\n", l, a; exit }
		if (per >= 0.9) printf "yes: %d/%d after kill -9, fsync per lease (%.2f/ACK)\n", l, a, per
		else printf "crash-safe, not power-safe: %d/%d after kill -9, %.2f fsync/ACK\n", l, a, per }'
}
crash_text() { # acks leases acked_missing
	awk -v a="$1" -v l="$2" -v m="${3:--}" 'BEGIN{
		if (a == 0) { print "? (no ACKs)"; exit }
		if (m != "-") {
			if (m + 0 == 0 && l + 0 >= a) printf "every ACKed lease kept (%d ACKs, %d leases on disk, each captured ACK found)", a, l
			else printf "%d ACKed leases LOST (%d ACKs, %d leases on disk)", (m + 0 > 0 ? m : a - l), a, l
		} else if (l + 0 >= a) printf "kept: %d leases on disk for %d ACKs", l, a
		else printf "%d of %d ACKed LOST", a - l, a }'
}
lost() { # acks leases acked_missing -> true when an ACKed lease is missing
	awk -v a="$1" -v l="$2" -v m="${3:--}" 'BEGIN{ exit !(a == 0 || l + 0 < a || (m != "-" && m + 0 > 0)) }'
}
# goal_lines: issue 15's DHCP goal, from the figures of this run
goal_lines() {
	local c k b r co ko bo
	read -r co c _ <<<"${DHCP[castiron]:-0 0 nan}"
	read -r ko k _ <<<"${DHCP[kea]:-0 0 nan}"
	if [ -n "${DHCP[castiron]:-}" ] && [ -n "${DHCP[kea]:-}" ]; then
		# the verdict compares the offered rates each held (≤ DHCP_DROP_OK %
		# failed, median of its runs); achieved/s differ from them by the
		# failed share only
		r=$(awk -v c="$co" -v k="$ko" 'BEGIN{ if (k > 0) printf "%.2f", c / k; else print "nan" }')
		echo "- DHCP, same run: castiron held $(fmt_int "$co")/s (achieved $(fmt_int "$c")), kea-dhcp4 memfile held $(fmt_int "$ko")/s" \
			"(achieved $(fmt_int "$k")) at ≤${DHCP_DROP_OK}% failed: castiron/kea = ×$r;" \
			"goal (castiron ≥ kea): $(awk -v c="$co" -v k="$ko" 'BEGIN{ print (c >= k && c > 0) ? "met" : "not met" }')"
	fi
	if [ -n "${DHCP[castiron-base]:-}" ] && [ -n "${DHCP[castiron]:-}" ]; then
		read -r bo b _ <<<"${DHCP[castiron-base]}"
		echo "- castiron before/after, same run: base ($CASTIRON_BASE_BIN) held $(fmt_int "$bo")/s, this castiron $(fmt_int "$co")/s:" \
			"×$(awk -v c="$co" -v b="$bo" 'BEGIN{ if (b > 0) printf "%.2f", c / b; else print "nan" }');" \
			"server CPU µs/DORA (median of all runs): base $(srv_us castiron-base), this $(srv_us castiron), kea $(srv_us kea)"
	fi
	for s in $DHCP_SERVERS; do
		[ -n "${CRASH[$s]:-}" ] || continue
		read -r a l m r <<<"${CRASH[$s]}"
		echo "- $s, kill -9 the moment ${DHCP_DURATION}s of perfdhcp at $r/s ended: $(crash_text "$a" "$l" "$m")"
	done
	if [ -n "${CRASH[castiron]:-}" ]; then
		read -r a l m r <<<"${CRASH[castiron]}"
		echo "- goal (every ACKed lease present after kill -9 of castiron): $(lost "$a" "$l" "$m" && echo "not met" || echo met)"
	fi
}
# srv_us NAME -> median server CPU µs per DORA over NAME's DHCP runs
srv_us() { [ -s "$RAW/dhcp-$1.runs" ] && awk '$9 != "discarded" {print $6}' "$RAW/dhcp-$1.runs" | median || echo "?"; }
fmt_int() { awk -v x="$1" 'BEGIN{ if (x ~ /^[0-9.]+$/) { s=sprintf("%d", x); while (s ~ /[0-9][0-9][0-9][0-9]/) sub(/[0-9][0-9][0-9]$/, ",&", s); print s } else print x }'; }

{
	echo "# PXE benchmark $(date '+%F %H:%M')"
	echo
	echo "\`bench/pxe/run.sh\`, ${ELAPSED}s. Host: $(nproc) cores, load average before/after in the notes;"
	echo "the machine is shared, so single figures are noisy: compare rows of the same run."
	echo "Versions: $(dnsmasq --version | head -1 | awk '{print "dnsmasq", $3}'), kea-dhcp4 $(kea-dhcp4 -V 2>/dev/null | head -1),"
	echo "perfdhcp $(perfdhcp -v 2>&1 | head -1), castiron ${CASTIRON_VERSION:-not measured}, kernel $(uname -r)."
	[ -n "$CASTIRON_NOTE" ] && { echo; echo "**$CASTIRON_NOTE.**"; }
	[ -n "$SKIPPED" ] && { echo; echo "**Skipped (did not start): $SKIPPED**"; }
	echo
	goal_lines
	echo
	echo "| server | DORA/s at ≤${DHCP_DROP_OK}% failed (offered) | failed % | leases durable | TFTP ${TFTP_N}× $TFTP_FILE: ok, total s, p50 / p99 s | HTTP MB/s sequential / ${HTTP_PAR} parallel |"
	echo "|---|---:|---:|---|---|---:|"
	for s in $SERVERS $HTTP_BASELINES; do
		d="—" dp="—" du="—" tf="—" ht="—"
		if [ -n "${DHCP[$s]:-}" ]; then
			read -r rate ach drop nruns <<<"${DHCP[$s]}"
			if [ "$rate" -gt 0 ]; then
				d="$(fmt_int "$ach") ($(fmt_int "$rate"))"
				dp=$drop
			else
				d="none passed" dp="—"
			fi
		fi
		if [ -n "${DUR[$s]:-}" ]; then
			read -r a l f <<<"${DUR[$s]}"
			du=$(durable_text "$a" "$l" "$f" "$s")
		fi
		if [ -n "${CRASH[$s]:-}" ]; then
			read -r a l m r <<<"${CRASH[$s]}"
			du="$du; kill -9 after $r/s: $(crash_text "$a" "$l" "$m")"
		fi
		if [ -n "${TFTP[$s]:-}" ]; then
			read -r ok fails wall p50 p99 tmax mbs <<<"${TFTP[$s]}"
			tf="$ok, $(printf '%.2f, %.3f / %.3f' "$wall" "$p50" "$p99")"
			[ "$fails" != 0 ] && tf="$tf (⚠ $fails failed fetches over $TFTP_RUNS runs)"
		fi
		if [ -n "${HTTP[$s]:-}" ]; then
			read -r hs hp kb ib hf same <<<"${HTTP[$s]}"
			ht="$hs / $hp"
			[ "$hf" != 0 ] && ht="$ht ⚠ $hf failed"
		fi
		label=$s
		case $s in
		dnsmasq) label="dnsmasq, lease file" ;;
		dnsmasq-noleases) label="dnsmasq, leasefile-ro" ;;
		kea) label="kea-dhcp4, memfile" ;;
		castiron) label="**castiron**" ;;
		castiron-base) label="castiron base ($(basename "$CASTIRON_BASE_BIN"))" ;;
		busybox-httpd) label="busybox httpd (HTTP baseline)" ;;
		python-http) label="python3 -m http.server (HTTP baseline)" ;;
		esac
		echo "| $label | $d | $dp | $du | $tf | $ht |"
	done
	echo
	echo "## How"
	echo
	echo "- Two network namespaces joined by one veth, 10.206.0.1 (server) / 10.206.0.2 (clients), /16;"
	echo "  server pinned to CPU $SRV_CPU, load generators to CPU $CLI_CPU (PIN=$PIN), both at nice $NICE. Every part"
	echo "  runs the servers interleaved (round by round), so load from elsewhere on the machine hits them alike."
	echo "- DHCP: perfdhcp as a relay (giaddr 10.206.0.2, unicast to the server, replies to the relay),"
	echo "  $DHCP_CLIENTS client MACs, PXE options 60/93/94 of a BIOS ROM, full DORA. A fresh server (empty lease"
	echo "  store) per ${DHCP_DURATION}s run at a fixed offered rate; failed % = DISCOVERs without an ACK. Search per server:"
	echo "  double/halve from $DHCP_START/s, $DHCP_BISECT bisection steps (a failed run there is repeated once and the rate passes"
	echo "  if the repeat does), then $DHCP_CONFIRM more runs of the best passing rate; it"
	echo "  holds when the median of its runs passes (achieved and failed % shown are medians)."
	if [ "$DHCP_RETRIES" -gt 0 ]; then
		echo "  A run during which the server or perfdhcp waited for a CPU > $DHCP_MAX_WAIT % of the time was repeated"
		echo "  (≤ $DHCP_RETRIES times; \"discarded\" below)."
	fi
	echo "  Pool 10.206.1.0-10.206.255.254, 12 h leases. perfdhcp on its one CPU tops out near 10,000 DORA/s here"
	echo "  (perfdhcp wait ≥ 50 % in the run tables): rates near that are a limit of the load generator."
	echo "- Durability: fresh server, $DUR_N new clients at $DUR_RATE/s, fsync/fdatasync/sync_file_range/syncfs/msync calls"
	echo "  counted with strace -f, then SIGKILL; leases on disk (dnsmasq lease file lines, Kea memfile"
	echo "  distinct addresses, castiron rows of its lease table) vs ACKs perfdhcp received."
	echo "  \"crash-safe\" = every ACKed lease was on disk after kill -9; \"power-safe\" needs ~1 fsync per lease."
	echo "- TFTP: $TFTP_RUNS fan-outs (fresh server each) of $TFTP_N concurrent fetches (bench/pxe/tftpload: pin/tftp/v3"
	echo "  client, blksize 1432 + tsize like iPXE, start barrier, every copy compared byte for byte), medians"
	echo "  (ok: worst run);"
	echo "  total = barrier release to the last fetch's end. dnsmasq runs with its default tftp-max 50."
	echo "- HTTP: /boot/vmlinuz ($(stat -c %s "$WWW_ROOT/boot/vmlinuz") B) and /boot/initramfs ($(stat -c %s "$WWW_ROOT/boot/initramfs") B) ($HTTP_KERNEL, $HTTP_INITRAMFS);"
	echo "  sequential = $HTTP_SEQ curl runs each fetching both on one connection, bytes / summed time;"
	echo "  parallel = $HTTP_PAR such curls at once, all bytes / wall time; median of $HTTP_ROUNDS rounds (fresh server"
	echo "  each). Page cache warm; curl on its own CPU."
	echo "- Servers: dnsmasq with \`no-ping\`, \`dhcp-authoritative\`, \`dhcp-lease-max=100000\`, quiet logging, TFTP from"
	echo "  $IPXE_DIR; kea-dhcp4 single-threaded, UDP sockets, memfile (persist, LFC off), WARN logging."
	if [ -s "$BENCH_TMP/run-castiron/server.cmd" ]; then
		echo "  castiron: \`$(sed "s|$BENCH_TMP|<tmp>|g" "$BENCH_TMP/run-castiron/server.cmd" | tr -s ' ')\`."
	fi
	echo
	echo "## DHCP runs in order"
	echo
	echo "Server CPU µs per DORA from /proc; wait % = share of the run a process was runnable but without a CPU"
	echo "(other work on the machine, and its own threads: perfdhcp has two, castiron's Go runtime several)."
	echo
	for s in $SERVERS; do
		[ -s "$RAW/dhcp-$s.runs" ] || continue
		echo "**$s**"
		echo
		echo "| offered/s | achieved/s | failed % | D-O avg ms | R-A avg ms | server µs/DORA | server wait % | perfdhcp wait % | |"
		echo "|---:|---:|---:|---:|---:|---:|---:|---:|---|"
		awk '{printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9}' "$RAW/dhcp-$s.runs"
		echo
	done
	echo "## Notes"
	echo
	echo "- load average (1/5/15 min) before: $LOAD_BEFORE, after: $(cut -d" " -f1-3 /proc/loadavg)."
	for s in $TFTP_SERVERS; do
		[ -n "${TFTP[$s]:-}" ] && [ -s "$RAW/tftp-$s.log" ] && { echo "- TFTP $s runs:"; sed 's/^/  - /' "$RAW/tftp-$s.log"; }
	done
	for s in $SERVERS $HTTP_BASELINES; do
		[ -n "${HTTP[$s]:-}" ] || continue
		read -r hs hp kb ib hf same <<<"${HTTP[$s]}"
		echo "- HTTP $s: kernel $kb B, initramfs $ib B, same bytes as the baseline files: $same, failed downloads: $hf."
	done
} >"$RES"
cat "$RES"
goal_lines >&2
log "wrote $RES (${ELAPSED}s)"
