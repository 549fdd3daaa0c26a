#!/bin/bash
# Wall time to take N fake-hardware nodes from a file to "available":
#   1. castiron's own client: `castiron import FILE --provide` (one command)
#   2. the `openstack baremetal` CLI in a shell loop: node create, port create,
#      manage --wait, provide --wait, one node after the other
# each against a fresh castiron on a free loopback port.
#
# usage: [CASTIRON_BIN=path] bench/cli/import-vs-openstack.sh [N_CASTIRON=500] [N_OPENSTACK=500]
# (the openstack loop costs ~4 CLI start-ups per node, ~2 s each on a 2-core
# machine: give a smaller N_OPENSTACK for a quick comparison)
set -euo pipefail
N=${1:-500}
NOS=${2:-500}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
bin=${CASTIRON_BIN:-}
if [ -z "$bin" ]; then
	bin=$work/castiron
	(cd "$root" && CGO_ENABLED=0 go build -o "$bin" .)
fi

pid=
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi; }
trap 'stop; rm -rf "$work"' EXIT

start() { # start a fresh castiron, set URL
	local port
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	rm -rf "$work/data"
	"$bin" serve --listen "127.0.0.1:$port" --data-dir "$work/data" --log-level warn 2>"$work/serve.log" &
	pid=$!
	URL=http://127.0.0.1:$port
	for _ in $(seq 100); do curl -sf "$URL/v1" >/dev/null && return; sleep 0.05; done
	echo "castiron did not start" >&2; cat "$work/serve.log" >&2; exit 1
}

available() { # nodes in available, read with castiron's own client
	"$bin" node list -o json --url "$URL" |
		python3 -c 'import json,sys; print(sum(n["provision_state"] == "available" for n in json.load(sys.stdin)))'
}

mac() { printf '52:54:00:%02x:%02x:%02x' $(($1 / 65536 % 256)) $(($1 / 256 % 256)) $(($1 % 256)); }

python3 - "$N" >"$work/nodes.json" <<'PY'
import json, sys
n = int(sys.argv[1])
print(json.dumps({"nodes": [{"name": f"rack-{i:04d}", "pm_type": "fake-hardware",
    "mac": ["52:54:00:%02x:%02x:%02x" % (i // 65536 % 256, i // 256 % 256, i % 256)],
    "cpu": 8, "memory": 16384, "disk": 100, "arch": "x86_64"} for i in range(n)]}))
PY

start
t0=$(date +%s.%N)
"$bin" import "$work/nodes.json" --provide --url "$URL" >"$work/import.out"
t1=$(date +%s.%N)
avail=$(available)
tail -1 "$work/import.out"
printf 'castiron import --provide: %d nodes, %d available, %.1f s\n' "$N" "$avail" "$(echo "$t1 - $t0" | bc)"
stop

start
os=(openstack --os-auth-type none --os-endpoint "$URL" baremetal)
t0=$(date +%s.%N)
for i in $(seq 0 $((NOS - 1))); do
	uuid=$("${os[@]}" node create --driver fake-hardware --name "os-$i" \
		--property cpus=8 --property memory_mb=16384 --property local_gb=100 --property cpu_arch=x86_64 \
		-f value -c uuid)
	"${os[@]}" port create --node "$uuid" "$(mac "$i")" >/dev/null
	"${os[@]}" node manage --wait 600 "$uuid"
	"${os[@]}" node provide --wait 600 "$uuid"
done
t1=$(date +%s.%N)
avail=$(available)
printf 'openstack baremetal shell loop: %d nodes, %d available, %.1f s\n' "$NOS" "$avail" "$(echo "$t1 - $t0" | bc)"
