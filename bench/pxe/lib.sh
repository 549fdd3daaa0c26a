# shellcheck shell=bash
# Shared part of bench/pxe (sourced by run.sh): the two namespaces, the
# servers under test and small helpers. Nothing here runs on its own.
#
# Topology (created by net_up, removed by net_down; names carry a random
# suffix so parallel runs cannot collide):
#
#   [cipx-s-XXXX] cipxs0 10.206.0.1/16 <==veth==> cipxc0 10.206.0.2/16 [cipx-c-XXXX]
#
# The veth is created inside the server namespace and its peer moved straight
# into the client namespace: nothing is added to the root namespace, neither
# namespace has a default route, so no packet can leave them.
#
# Server contract: server_cmd NAME prints the command that runs NAME in the
# foreground inside the server namespace (config files go to $WORKDIR, which
# is emptied before every start); server_parts NAME prints which of dhcp,
# tftp, http it serves. start_server NAME starts it pinned to $SRV_CPU and
# waits until every port of its parts is bound. To add a server, add one case
# to each of the two functions.

SUFFIX=${SUFFIX:-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')}
SRV_NS=cipx-s-$SUFFIX
CLI_NS=cipx-c-$SUFFIX
SRV_IF=cipxs0
CLI_IF=cipxc0
SRV_IP=10.206.0.1
CLI_IP=10.206.0.2
NET_CIDR=10.206.0.0/16
POOL_START=10.206.1.0
POOL_END=10.206.255.254
HTTP_PORT=${HTTP_PORT:-8080} # inside the server namespace only
BOOT_FILE=undionly.kpxe
IPXE_DIR=${IPXE_DIR:-/usr/lib/ipxe}
PIN=${PIN:-1}
# Servers and load generators run at this nice level: the machine is shared,
# and a higher CFS weight keeps other work from deciding the figures.
NICE=${NICE:--5}
SRV_CPU=${SRV_CPU:-0}
CLI_CPU=${CLI_CPU:-1}
CLK_TCK=$(getconf CLK_TCK)
SERVER_PID=""
SERVER_NAME=""

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { log "error: $*"; exit 1; }

srv_taskset() {
	echo "nice -n $NICE"
	[ "$PIN" = 1 ] && echo "taskset -c $SRV_CPU"
}
cli_taskset() {
	echo "nice -n $NICE"
	[ "$PIN" = 1 ] && echo "taskset -c $CLI_CPU"
}
# in_cli CMD...: run CMD inside the client namespace, on the client CPU
in_cli() {
	# shellcheck disable=SC2046
	ip netns exec "$CLI_NS" $(cli_taskset) "$@"
}

# ------------------------------------------------------------------ network
net_up() {
	ip netns add "$SRV_NS"
	ip netns add "$CLI_NS"
	NET_CREATED=1
	ip -n "$SRV_NS" link add "$SRV_IF" type veth peer name "$CLI_IF" netns "$CLI_NS"
	ip -n "$SRV_NS" link set lo up
	ip -n "$CLI_NS" link set lo up
	ip -n "$SRV_NS" addr add "$SRV_IP/16" dev "$SRV_IF"
	ip -n "$CLI_NS" addr add "$CLI_IP/16" dev "$CLI_IF"
	ip -n "$SRV_NS" link set "$SRV_IF" up
	ip -n "$CLI_NS" link set "$CLI_IF" up
	for ns in "$SRV_NS" "$CLI_NS"; do
		# per-netns knobs only; many TFTP/HTTP sockets, no ICMP rate limit
		ip netns exec "$ns" sysctl -qw net.ipv4.ip_local_port_range="10000 65000" || true
		ip netns exec "$ns" sysctl -qw net.ipv4.icmp_ratelimit=0 || true
	done
	local _
	for _ in $(seq 50); do
		ip -n "$CLI_NS" link show "$CLI_IF" | grep -q 'state UP' && break
		sleep 0.1
	done
	if command -v ping >/dev/null; then
		ip netns exec "$CLI_NS" ping -c1 -W2 "$SRV_IP" >/dev/null || die "veth not working"
	fi
	log "network up: $SRV_NS/$SRV_IF=$SRV_IP <-> $CLI_NS/$CLI_IF=$CLI_IP"
}

# net_down: stop what is left in our namespaces (by PID: they are ours) and
# delete them.
net_down() {
	[ "${NET_CREATED:-0}" = 1 ] || return 0
	local ns p
	for ns in "$SRV_NS" "$CLI_NS"; do
		ip netns list | grep -qw "$ns" || continue
		for p in $(ip netns pids "$ns" 2>/dev/null); do kill "$p" 2>/dev/null; done
		sleep 0.3
		for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
		ip netns del "$ns"
	done
	NET_CREATED=0
	log "network down"
}

# ------------------------------------------------------------------ servers
# server_parts NAME -> words among "dhcp tftp http"
server_parts() {
	case "$1" in
	castiron) echo "dhcp tftp http" ;;
	castiron-base) echo "dhcp" ;; # CASTIRON_BASE_BIN: an older castiron, A/B in the same run
	kea) echo "dhcp" ;;
	dnsmasq | dnsmasq-noleases) echo "dhcp tftp" ;;
	busybox-httpd | python-http) echo "http" ;;
	*) echo "" ;;
	esac
}

# server_cmd NAME -> command line (writes config into $WORKDIR)
server_cmd() {
	case "$1" in
	castiron | castiron-base)
		local bin=$CASTIRON_BIN
		[ "$1" = castiron-base ] && bin=$CASTIRON_BASE_BIN
		# log level warn: dnsmasq and Kea run with per-packet logging off too
		echo "$bin serve --listen $SRV_IP:$HTTP_PORT --data-dir $WORKDIR/data" \
			"--insecure-noauth --public-url http://$SRV_IP:$HTTP_PORT --log-level ${CASTIRON_LOG_LEVEL:-warn}" \
			"--pxe-interface $SRV_IF --dhcp-mode full --dhcp-range $POOL_START,$POOL_END --pxe-discovery" \
			"--ipxe-dir $IPXE_DIR ${CASTIRON_BOOT_ARGS:-} ${CASTIRON_ARGS:-}"
		;;
	dnsmasq | dnsmasq-noleases)
		{
			echo "port=0" # no DNS
			echo "interface=$SRV_IF"
			echo "bind-interfaces"
			echo "dhcp-range=$POOL_START,$POOL_END,255.255.0.0,12h"
			echo "dhcp-lease-max=100000" # default 1000 would refuse most of 10,000 clients
			if [ "$1" = dnsmasq ]; then
				echo "dhcp-leasefile=$WORKDIR/dnsmasq.leases" # rewritten + fsync'd on every change
			else
				echo "leasefile-ro" # leases only in memory
			fi
			echo "no-ping"
			echo "dhcp-authoritative"
			echo "dhcp-boot=$BOOT_FILE,,$SRV_IP"
			echo "log-facility=$WORKDIR/dnsmasq.log"
			echo "quiet-dhcp"
			echo "quiet-tftp"
			echo "user=root"
			echo "enable-tftp"
			echo "tftp-root=$IPXE_DIR"
			[ -n "${DNSMASQ_TFTP_MAX:-}" ] && echo "tftp-max=$DNSMASQ_TFTP_MAX" # default 50
		} >"$WORKDIR/dnsmasq.conf"
		echo "dnsmasq -k -C $WORKDIR/dnsmasq.conf"
		;;
	kea)
		cat >"$WORKDIR/kea-dhcp4.json" <<EOF
{ "Dhcp4": {
  "interfaces-config": { "interfaces": [ "$SRV_IF" ], "dhcp-socket-type": "udp" },
  "lease-database": { "type": "memfile", "persist": true,
                      "name": "$WORKDIR/leases4.csv", "lfc-interval": 0 },
  "valid-lifetime": 43200, "renew-timer": 21600, "rebind-timer": 37800,
  "authoritative": true,
  "next-server": "$SRV_IP",
  "boot-file-name": "$BOOT_FILE",
  "subnet4": [ { "id": 1, "subnet": "$NET_CIDR",
      "pools": [ { "pool": "$POOL_START - $POOL_END" } ],
      "option-data": [ { "name": "routers", "data": "$SRV_IP" } ] } ],
  "loggers": [ { "name": "kea-dhcp4",
      "output_options": [ { "output": "$WORKDIR/kea.log" } ], "severity": "WARN" } ]
} }
EOF
		echo "env KEA_PIDFILE_DIR=$WORKDIR KEA_LOCKFILE_DIR=$WORKDIR kea-dhcp4 -c $WORKDIR/kea-dhcp4.json"
		;;
	busybox-httpd) echo "busybox httpd -f -p $SRV_IP:$HTTP_PORT -h $WWW_ROOT" ;;
	python-http) echo "python3 -m http.server --bind $SRV_IP --directory $WWW_ROOT $HTTP_PORT" ;;
	*) echo "" ;;
	esac
}

has_part() { [[ " $(server_parts "$1") " == *" $2 "* ]]; }

# start_server NAME: fresh $WORKDIR, start, wait until its ports are bound.
# Returns 1 (with the server's output in the log) when it does not come up.
start_server() {
	local name=$1 cmd
	WORKDIR=$BENCH_TMP/run-$name
	rm -rf "$WORKDIR"
	mkdir -p "$WORKDIR"
	cmd=$(server_cmd "$name")
	[ -n "$cmd" ] || die "unknown server $name"
	echo "$cmd" >"$WORKDIR/server.cmd"
	# shellcheck disable=SC2046
	setsid ip netns exec "$SRV_NS" $(srv_taskset) bash -c "ulimit -n \$(ulimit -Hn); exec $cmd" \
		>"$WORKDIR/server.out" 2>&1 </dev/null &
	SERVER_PID=$!
	SERVER_NAME=$name
	local want=() part t
	for part in $(server_parts "$name"); do
		case $part in
		dhcp) want+=("u:67") ;;
		tftp) want+=("u:69") ;;
		http) want+=("t:$HTTP_PORT") ;;
		esac
	done
	for t in $(seq 150); do
		if ! kill -0 "$SERVER_PID" 2>/dev/null; then
			log "$name exited during start-up:"
			tail -15 "$WORKDIR/server.out" >&2
			SERVER_PID=""
			return 1
		fi
		local all=1 w
		for w in "${want[@]}"; do
			if [ "${w%%:*}" = u ]; then
				ip netns exec "$SRV_NS" ss -Hlun "sport = :${w#u:}" | grep -q . || all=0
			else
				ip netns exec "$SRV_NS" ss -Hltn "sport = :${w#t:}" | grep -q . || all=0
			fi
		done
		[ $all = 1 ] && break
		sleep 0.1
	done
	[ "$t" -lt 150 ] || {
		log "$name: ports ${want[*]} not all bound after 15 s"
		stop_server
		return 1
	}
	sleep "${SETTLE:-0.3}"
}

# stop_server [KILL]: SIGTERM (or SIGKILL with KILL=1: a crash), wait, then
# anything left in the server namespace (started by us) is killed by PID.
stop_server() {
	[ -n "$SERVER_PID" ] || return 0
	local sig=TERM _ p
	[ "${1:-0}" = 1 ] && sig=KILL
	kill -s "$sig" "$SERVER_PID" 2>/dev/null
	for _ in $(seq 50); do
		kill -0 "$SERVER_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$SERVER_PID" 2>/dev/null
	wait "$SERVER_PID" 2>/dev/null
	for p in $(ip netns pids "$SRV_NS" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
	SERVER_PID=""
}

# sched_wait_ns PID: nanoseconds PID's threads spent runnable but waiting
# for a CPU (/proc/PID/task/*/schedstat field 2): how much other work got in
# the way.
sched_wait_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s+=$2} END{printf "%d\n", s}'; }

# srv_ticks: CPU ticks (user+sys, threads included) of the server process
srv_ticks() { awk '{print $14+$15}' "/proc/$SERVER_PID/stat" 2>/dev/null || echo 0; }

# median of numbers on stdin
median() { sort -g | awk '{a[NR]=$1} END{ if(NR==0){print "nan"; exit} if(NR%2) print a[(NR+1)/2]; else printf "%.6g\n", (a[NR/2]+a[NR/2+1])/2 }'; }
