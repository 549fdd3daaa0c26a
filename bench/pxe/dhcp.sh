# shellcheck shell=bash
# DHCP part of bench/pxe (sourced by run.sh after lib.sh).
#
# perfdhcp (Kea's load generator) acts as a DHCP relay: it sends from
# CLI_IP:67 straight to SRV_IP:67 with giaddr=CLI_IP, so the server answers
# the relay by unicast, and one interface simulates DHCP_CLIENTS different
# MACs (-R). Every exchange is a full DORA with the options a BIOS PXE ROM
# sends (vendor class PXEClient, arch 0, UNDI 2.1).
#
# dhcp_sweep_all NAME...: per server, the highest offered rate at which the
#   median of its runs has at most DHCP_DROP_OK % failed exchanges (failed =
#   DISCOVERs sent without an ACK at the end), over DHCP_CONFIRM+1 runs. Each
#   run is a fresh server (empty lease store) and DHCP_DURATION seconds of
#   perfdhcp at a fixed rate. Search: double from DHCP_START (or halve) until
#   one rate passes and one fails, DHCP_BISECT bisection steps, then
#   confirmation runs of the best passing rate (if its median fails, the next
#   lower passing rate is tried). The servers' searches advance in rounds,
#   one run each per round. Each run records how long the server and
#   perfdhcp were runnable but waiting for a CPU; that includes waiting for
#   their own threads (perfdhcp's two, Go's runtime threads on one pinned
#   CPU), so it is a diagnostic. With DHCP_RETRIES>0 a run where either
#   waited more than DHCP_MAX_WAIT % is repeated (only during the first
#   DHCP_RETRY_BUDGET seconds).
# dhcp_durability NAME: fresh server, DUR_N distinct clients at DUR_RATE/s
#   with fsync-like syscalls counted (strace), then the server is killed with
#   SIGKILL (a crash) and the leases found on disk are compared with the ACKs
#   perfdhcp received.

DHCP_DURATION=${DHCP_DURATION:-5}
DHCP_CLIENTS=${DHCP_CLIENTS:-10000}
DHCP_START=${DHCP_START:-1000}
DHCP_MIN=${DHCP_MIN:-25}
DHCP_MAX=${DHCP_MAX:-32000}
DHCP_BISECT=${DHCP_BISECT:-2}
DHCP_CONFIRM=${DHCP_CONFIRM:-2}
DHCP_MAX_RUNS=${DHCP_MAX_RUNS:-14}
DHCP_MAX_WAIT=${DHCP_MAX_WAIT:-40}
DHCP_RETRIES=${DHCP_RETRIES:-0} # >0: repeat runs with wait% > DHCP_MAX_WAIT
DHCP_RECHECK=${DHCP_RECHECK:-1}
DHCP_RETRY_BUDGET=${DHCP_RETRY_BUDGET:-240} # seconds of sweep after which runs are no longer repeated
DHCP_DROP_OK=${DHCP_DROP_OK:-1}
DHCP_SEED=${DHCP_SEED:-42}
DUR_N=${DUR_N:-500}
DUR_RATE=${DUR_RATE:-100}

# what a BIOS PXE ROM sends: vendor class, client arch 0 (x86 BIOS), UNDI 2.1
PXE_OPTS=(-o "60,$(printf 'PXEClient:Arch:00000:UNDI:002001' | xxd -p | tr -d '\n')" -o 93,0000 -o 94,010201)

# parse_perfdhcp FILE -> "do_sent do_recv ra_sent ra_recv do_avg_ms ra_avg_ms"
parse_perfdhcp() {
	awk '
    /Statistics for: DISCOVER-OFFER/ {s="do"} /Statistics for: REQUEST-ACK/ {s="ra"}
    s!="" && /^sent packets:/ {v[s"sent"]=$3}
    s!="" && /^received packets:/ {v[s"recv"]=$3}
    s!="" && /^avg delay:/ {v[s"avg"]=$3}
    END { printf "%d %d %d %d %s %s\n", v["dosent"], v["dorecv"], v["rasent"], v["rarecv"],
          (v["doavg"]==""?"nan":v["doavg"]), (v["raavg"]==""?"nan":v["raavg"]) }' "$1"
}

# dhcp_run NAME RATE -> one line
#   "rate achieved/s failed% do_avg_ms ra_avg_ms srv_us_per_dora srv_wait% cli_wait%"
# where *_wait% is the share of the run the server / perfdhcp spent runnable
# but waiting for a CPU (other work on the machine, or perfdhcp's own two
# threads). The whole perfdhcp output is kept in $RAW.
dhcp_run() {
	local name=$1 rate=$2 out t0 t1 w0 w1 cw=0 x ppid T0 T1
	out=$RAW/dhcp-$name-r$rate-$(date +%s%N).out
	start_server "$name" || {
		echo "$rate 0 100 nan nan nan 0 0"
		return
	}
	t0=$(srv_ticks)
	w0=$(sched_wait_ns "$SERVER_PID")
	T0=$EPOCHREALTIME
	# shellcheck disable=SC2046
	timeout $((DHCP_DURATION + 30)) ip netns exec "$CLI_NS" $(cli_taskset) \
		perfdhcp -4 -l "$CLI_IP" "${PXE_OPTS[@]}" -s "$DHCP_SEED" -r "$rate" -p "$DHCP_DURATION" \
		-R "$DHCP_CLIENTS" -W 500000 "$SRV_IP" >"$out" 2>&1 &
	ppid=$!
	# timeout forks perfdhcp: sample the child's wait until it is gone
	while kill -0 "$ppid" 2>/dev/null; do
		for x in $(cat /proc/"$ppid"/task/*/children 2>/dev/null); do
			x=$(sched_wait_ns "$x")
			[ -n "$x" ] && [ "$x" -gt 0 ] && cw=$x
		done
		sleep 0.2
	done
	wait "$ppid"
	T1=$EPOCHREALTIME
	t1=$(srv_ticks)
	w1=$(sched_wait_ns "$SERVER_PID")
	stop_server
	[ -s "$WORKDIR/server.out" ] && cp "$WORKDIR/server.out" "$out.server"
	local dos dor ras rar doa raa
	read -r dos dor ras rar doa raa < <(parse_perfdhcp "$out")
	awk -v r="$rate" -v dos="$dos" -v rar="$rar" -v d="$DHCP_DURATION" -v doa="$doa" -v raa="$raa" \
		-v tk="$((t1 - t0))" -v hz="$CLK_TCK" -v sw="$((w1 - w0))" -v cw="$cw" -v el="$(awk -v a="$T0" -v b="$T1" 'BEGIN{print b-a}')" 'BEGIN{
		drop = (dos > 0) ? 100 * (1 - rar / dos) : 100
		us = (rar > 0) ? 1e6 * tk / hz / rar : 0
		printf "%s %.0f %.2f %s %s %.0f %.1f %.1f\n", r, rar / d, drop, doa, raa, us, sw / 1e7 / el, cw / 1e7 / el }'
}

drop_ok() { awk -v x="$1" -v ok="$DHCP_DROP_OK" 'BEGIN{exit !(x <= ok)}'; }

# Rate search state per server (one search per server, run interleaved so
# that load from elsewhere on the machine hits every server alike).
# SW_DROPS/SW_ACHS["NAME:RATE"] hold the failed % / achieved/s of every kept
# run at that rate.
declare -A SW_LO SW_HI SW_NEXT SW_PHASE SW_LEFT SW_RUNS SW_DROPS SW_ACHS

med() { tr ' ' '\n' | grep . | median; }
rate_drop() { echo "${SW_DROPS[$1]:-}" | med; } # NAME:RATE -> median failed %
rate_ach() { echo "${SW_ACHS[$1]:-}" | med; }

# dhcp_sweep_all NAME... -> sets DHCP[NAME]="best_rate achieved/s failed% runs"
# ("0 0 nan 0" when no rate passed); per-run lines go to $RAW/dhcp-NAME.runs.
# Each round runs the next rate of every unfinished server.
dhcp_sweep_all() {
	local s active
	SW_T0=$SECONDS
	for s in "$@"; do
		: >"$RAW/dhcp-$s.runs"
		SW_LO[$s]=0 SW_HI[$s]=0 SW_NEXT[$s]=$DHCP_START SW_PHASE[$s]=bracket SW_LEFT[$s]=$DHCP_BISECT SW_RUNS[$s]=0
	done
	while :; do
		active=0
		for s in "$@"; do
			[ "${SW_PHASE[$s]}" = done ] && continue
			active=1
			sweep_step "$s"
		done
		[ $active = 1 ] || break
	done
	for s in "$@"; do
		local lo=${SW_LO[$s]} k
		k=$s:$lo
		if [ "$lo" -gt 0 ] && drop_ok "$(rate_drop "$k")"; then
			DHCP[$s]="$lo $(rate_ach "$k") $(rate_drop "$k") $(echo ${SW_DROPS[$k]} | wc -w)"
		else
			DHCP[$s]="0 0 nan 0"
		fi
	done
}

# sweep_step NAME: one run at SW_NEXT (repeated up to DHCP_RETRIES times
# when the server or perfdhcp waited for a CPU more than DHCP_MAX_WAIT % of
# the run), then the next state:
#   bracket: double while passing, halve while failing, until lo and hi exist
#   bisect:  DHCP_BISECT midpoints (rounded to 25/s)
#   (in these two, a failed run is repeated once with DHCP_RECHECK=1 and the
#   rate passes if the repeat does)
#   confirm: DHCP_CONFIRM more runs of lo; lo holds when the median of its
#            runs passes, else the next lower rate whose runs pass is tried
#            (or the search keeps halving)
# sweep_run NAME RATE: one kept run (see dhcp_run), recorded in SW_DROPS /
# SW_ACHS and the runs file; SW_LAST = its failed %.
sweep_run() {
	local s=$1 r=$2 l a b sw cw try=0
	while :; do
		l=$(dhcp_run "$s" "$r")
		read -r _ a b _ _ _ sw cw <<<"$l"
		if [ "$try" -lt "$DHCP_RETRIES" ] && [ $((SECONDS - SW_T0)) -lt "$DHCP_RETRY_BUDGET" ] && awk -v x="$sw" -v y="$cw" -v m="$DHCP_MAX_WAIT" 'BEGIN{exit !(x>m || y>m)}'; then
			log "dhcp $s offered=$r/s: run discarded, waited for a CPU (server ${sw}%, perfdhcp ${cw}%) ($l)"
			echo "$l discarded" >>"$RAW/dhcp-$s.runs"
			try=$((try + 1))
			continue
		fi
		break
	done
	echo "$l" >>"$RAW/dhcp-$s.runs"
	log "dhcp $s offered=$r/s achieved=$a/s failed=$b%  [${SW_PHASE[$s]}] ($l)"
	SW_DROPS[$s:$r]+=" $b"
	SW_ACHS[$s:$r]+=" $a"
	SW_RUNS[$s]=$((SW_RUNS[$s] + 1))
	SW_LAST=$b
}

sweep_step() {
	local s=$1 r=${SW_NEXT[$1]} pass=0
	sweep_run "$s" "$r"
	drop_ok "$SW_LAST" && pass=1
	# while searching, a failed run gets one second chance: a single burst
	# of load elsewhere must not cap the search (the median of the
	# confirmation runs guards the other direction)
	if [ $pass = 0 ] && [ "$DHCP_RECHECK" = 1 ] && [[ ${SW_PHASE[$s]} == bracket || ${SW_PHASE[$s]} == bisect ]]; then
		sweep_run "$s" "$r"
		drop_ok "$SW_LAST" && pass=1
	fi
	local k=$s:$r
	case ${SW_PHASE[$s]} in
	bracket)
		if [ $pass = 1 ]; then
			SW_LO[$s]=$r
			SW_NEXT[$s]=$((r * 2))
			if [ "${SW_HI[$s]}" -gt 0 ] || [ "${SW_NEXT[$s]}" -gt "$DHCP_MAX" ]; then sweep_refine "$s"; fi
		else
			SW_HI[$s]=$r
			SW_NEXT[$s]=$((r / 2))
			if [ "${SW_LO[$s]}" -gt 0 ]; then
				sweep_refine "$s"
			elif [ "${SW_NEXT[$s]}" -lt "$DHCP_MIN" ]; then
				SW_PHASE[$s]=done
			fi
		fi
		;;
	bisect)
		if [ $pass = 1 ]; then SW_LO[$s]=$r; else SW_HI[$s]=$r; fi
		SW_LEFT[$s]=$((SW_LEFT[$s] - 1))
		sweep_refine "$s"
		;;
	confirm)
		SW_LEFT[$s]=$((SW_LEFT[$s] - 1))
		[ "${SW_LEFT[$s]}" -gt 0 ] && return
		if drop_ok "$(rate_drop "$k")"; then
			SW_PHASE[$s]=done
			return
		fi
		SW_HI[$s]=$r
		local next=0 key x
		for key in "${!SW_DROPS[@]}"; do
			[ "${key%:*}" = "$s" ] || continue
			x=${key##*:}
			if [ "$x" -lt "$r" ] && [ "$x" -gt "$next" ] && drop_ok "$(rate_drop "$key")"; then next=$x; fi
		done
		SW_LO[$s]=$next
		if [ "$next" -gt 0 ]; then
			SW_LEFT[$s]=$DHCP_CONFIRM
			SW_NEXT[$s]=$next
		else
			SW_PHASE[$s]=bracket
			SW_NEXT[$s]=$((r / 2))
			[ "${SW_NEXT[$s]}" -ge "$DHCP_MIN" ] || SW_PHASE[$s]=done
		fi
		;;
	esac
	if [ "${SW_PHASE[$s]}" != done ] && [ "${SW_RUNS[$s]}" -ge "$DHCP_MAX_RUNS" ]; then
		log "dhcp $s: $DHCP_MAX_RUNS runs done, stopping its search"
		SW_PHASE[$s]=done
	fi
}

# sweep_refine NAME: bisect if allowed and useful, else confirm lo, else done
sweep_refine() {
	local s=$1 lo=${SW_LO[$1]} hi=${SW_HI[$1]} mid
	mid=$(((lo + hi) / 2 / 25 * 25))
	if [ "${SW_PHASE[$s]}" != confirm ] && [ "${SW_LEFT[$s]}" -gt 0 ] && [ "$lo" -gt 0 ] && [ "$hi" -gt 0 ] &&
		[ "$mid" -gt "$lo" ] && [ "$mid" -lt "$hi" ]; then
		SW_PHASE[$s]=bisect
		SW_NEXT[$s]=$mid
	elif [ "$lo" -gt 0 ] && [ "$DHCP_CONFIRM" -gt 0 ]; then
		SW_PHASE[$s]=confirm
		SW_LEFT[$s]=$DHCP_CONFIRM
		SW_NEXT[$s]=$lo
	else
		SW_PHASE[$s]=done
	fi
}

# lease_kind NAME -> "none" for a server that keeps its leases in memory only
lease_kind() {
	case "$1" in
	dnsmasq-noleases) echo none ;;
	*) echo disk ;;
	esac
}

# lease_count NAME -> number of leases the server has on disk in $WORKDIR
# (call after the server is gone), or "none" when it keeps none.
lease_count() {
	case "$1" in
	dnsmasq) # (grep -c prints 0 and fails on an empty file)
		local n
		n=$(grep -c . "$WORKDIR/dnsmasq.leases" 2>/dev/null)
		echo "${n:-0}"
		;;
	dnsmasq-noleases) echo none ;;
	kea) # memfile CSV: header + one line per lease change; count distinct addresses
		awk -F, 'NR>1 && $1!="" {a[$1]=1} END{print length(a)}' "$WORKDIR/leases4.csv" 2>/dev/null || echo 0 ;;
	castiron | castiron-base)
		local db=$WORKDIR/data/castiron.db t sum=0 n
		[ -f "$db" ] || {
			echo 0
			return
		}
		if [ -n "${CASTIRON_LEASE_SQL:-}" ]; then
			sqlite3 "$db" "$CASTIRON_LEASE_SQL"
			return
		fi
		# every table with "lease" in its name (opening replays the WAL)
		for t in $(sqlite3 "$db" "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE '%lease%'"); do
			n=$(sqlite3 "$db" "SELECT count(*) FROM \"$t\"") && sum=$((sum + n))
		done
		echo "$sum"
		;;
	*) echo none ;;
	esac
}

# dhcp_crash NAME RATE -> "acks leases_on_disk acked_missing": a fresh
# server, DHCP_DURATION seconds of perfdhcp at RATE (the server's best rate
# from the sweep) without strace, SIGKILL the moment perfdhcp ends, then the
# leases on disk against the ACKs perfdhcp received. Client MACs are drawn
# from 4e9. With tcpdump, every ACK the clients' side saw is captured and
# each ACKed (MAC, address) must be a lease on disk: acked_missing counts
# those that are not ("-" without tcpdump or a lease list for NAME).
dhcp_crash() {
	local name=$1 rate=$2 out=$RAW/crash-$1.out pcap=$RAW/crash-$1.pcap tpid=""
	start_server "$name" || {
		echo "0 0 -"
		return
	}
	if command -v tcpdump >/dev/null; then
		ip netns exec "$CLI_NS" tcpdump -i "$CLI_IF" -n -s 600 -U -w "$pcap" "udp and src host $SRV_IP and src port 67" 2>/dev/null &
		tpid=$!
		sleep 0.5
	fi
	timeout $((DHCP_DURATION + 30)) ip netns exec "$CLI_NS" $(cli_taskset) \
		perfdhcp -4 -l "$CLI_IP" "${PXE_OPTS[@]}" -s "$DHCP_SEED" -r "$rate" -p "$DHCP_DURATION" \
		-R 4000000000 -W 500000 "$SRV_IP" >"$out" 2>&1
	stop_server 1
	local dos dor ras rar doa raa leases missing=-
	read -r dos dor ras rar doa raa < <(parse_perfdhcp "$out")
	leases=$(lease_count "$name")
	if [ -n "$tpid" ]; then
		sleep 0.3
		kill -INT "$tpid" 2>/dev/null
		wait "$tpid" 2>/dev/null
		acked_pairs "$pcap" >"$RAW/crash-$name.acked"
		if lease_pairs "$name" >"$RAW/crash-$name.leases"; then
			missing=$(sort -u "$RAW/crash-$name.acked" | comm -23 - <(sort -u "$RAW/crash-$name.leases") | wc -l)
		fi
	fi
	log "crash $name at $rate/s: acks=$rar leases_on_disk_after_SIGKILL=$leases acked_not_on_disk=$missing (captured ACKs: $(wc -l <"$RAW/crash-$name.acked" 2>/dev/null))"
	echo "$rar $leases $missing"
}

# acked_pairs PCAP -> "mac ip" of every DHCPACK in the capture
acked_pairs() {
	tcpdump -r "$1" -n -vv 2>/dev/null | awk '
	/^[0-9][0-9]:[0-9][0-9]:/ { if (ack && mac != "" && ip != "") print mac, ip; mac = ""; ip = ""; ack = 0 }
	/Client-Ethernet-Address/ { mac = tolower($2) }
	/Your-IP/ { ip = $2 }
	/DHCP-Message/ && / ACK/ { ack = 1 }
	END { if (ack && mac != "" && ip != "") print mac, ip }'
}

# lease_pairs NAME -> "mac ip" of every lease NAME has on disk in $WORKDIR
# (after it is gone); fails for a server without a lease list here.
lease_pairs() {
	case "$1" in
	castiron | castiron-base)
		sqlite3 "$WORKDIR/data/castiron.db" "SELECT lower(mac) || ' ' || ip FROM dhcp_leases" ;;
	kea) # address,hwaddr,...
		awk -F, 'NR>1 && $1!="" {print tolower($2), $1}' "$WORKDIR/leases4.csv" ;;
	dnsmasq) awk '{print tolower($2), $3}' "$WORKDIR/dnsmasq.leases" ;;
	*) return 1 ;;
	esac
}

# dhcp_durability NAME -> "acks leases_on_disk fsyncs" after a SIGKILL
dhcp_durability() {
	local name=$1
	local out=$RAW/durability-$name.out st=$RAW/durability-$name.strace spid
	start_server "$name" || {
		echo "0 0 nan"
		return
	}
	# count the calls that make data survive power loss, in every thread
	strace -f -qq -c -o "$st" -e trace=fsync,fdatasync,sync_file_range,syncfs,msync -p "$SERVER_PID" 2>/dev/null &
	spid=$!
	sleep 0.5
	# distinct MACs: 16M possible clients, DUR_N of them
	timeout 120 ip netns exec "$CLI_NS" $(cli_taskset) \
		perfdhcp -4 -l "$CLI_IP" "${PXE_OPTS[@]}" -s "$DHCP_SEED" -r "$DUR_RATE" -n "$DUR_N" \
		-R 16000000 -W 1000000 "$SRV_IP" >"$out" 2>&1
	stop_server 1 # crash: no chance to flush anything on the way out
	wait "$spid" 2>/dev/null
	local dos dor ras rar doa raa leases fs
	read -r dos dor ras rar doa raa < <(parse_perfdhcp "$out")
	leases=$(lease_count "$name")
	fs=$(awk '$NF ~ /^(fsync|fdatasync|sync_file_range|syncfs|msync)$/ {n += $4} END{print n+0}' "$st" 2>/dev/null)
	log "durability $name: acks=$rar leases_on_disk_after_SIGKILL=$leases fsync_calls=$fs"
	echo "$rar $leases $fs"
}
