#!/bin/bash
# The API's share of the bare net/http ceiling (issue 28), side by side in
# one run: castiron BEFORE and AFTER (two binaries, e.g. main's and this
# tree's) each on SQLite with N fake-hardware nodes, and the ceiling:
# /work/shared/api-limit's bare handler serving the very bytes castiron
# answered (LIMIT_DIR). wrk -t2 -c4, rounds alternating between targets.
#
# usage: bench/ceiling/run.sh BEFORE_BIN AFTER_BIN
# env:   N=1000 S=5 (seconds per wrk run) ROUNDS=2 LIMIT_DIR=/work/shared/api-limit
# Run it under the machine's heavy-work lock (flock) on a shared machine.
set -euo pipefail
BEFORE=$1; AFTER=$2
N=${N:-1000}; S=${S:-5}; ROUNDS=${ROUNDS:-2}
LIMIT_DIR=${LIMIT_DIR:-/work/shared/api-limit}
H='X-OpenStack-Ironic-API-Version: latest'
command -v wrk >/dev/null || { echo "needs wrk (Debian package wrk)" >&2; exit 1; }
W=$(mktemp -d /tmp/castiron-ceiling.XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$W"' EXIT
(cd "$LIMIT_DIR" && CGO_ENABLED=0 go build -o "$W/limit" .)

start() { # name bin port
    "$2" serve --listen "127.0.0.1:$3" --data-dir "$W/$1" --conductor-name "$1" --log-level warn >"$W/$1.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do curl -fs "http://127.0.0.1:$3/v1" >/dev/null && return; sleep 0.1; done
    echo "$1 did not start" >&2; exit 1
}
enroll() { # port
    seq "$N" | xargs -P8 -I{} curl -fs -o /dev/null -H "$H" -H 'Content-Type: application/json' \
        -d '{"name": "n{}", "driver": "fake-hardware", "properties": {"cpus": 32, "memory_mb": 131072}}' \
        "http://127.0.0.1:$1/v1/nodes"
}
start before "$BEFORE" 7391; enroll 7391
start after "$AFTER" 7392; enroll 7392
U=$(curl -fsS -H "$H" "http://127.0.0.1:7392/v1/nodes?limit=1" | python3 -c 'import json,sys;print(json.load(sys.stdin)["nodes"][0]["uuid"])')
UB=$(curl -fsS -H "$H" "http://127.0.0.1:7391/v1/nodes?limit=1" | python3 -c 'import json,sys;print(json.load(sys.stdin)["nodes"][0]["uuid"])')
curl -fsS -H "$H" "http://127.0.0.1:7392/v1/nodes/$U" >"$W/get.json"
curl -fsS -H "$H" "http://127.0.0.1:7392/v1/nodes?limit=100" >"$W/list.json"
"$W/limit" -listen 127.0.0.1:7390 -route "/v1/nodes/$U=$W/get.json" -route "/v1/nodes?limit=100=$W/list.json" &
PIDS+=($!); sleep 0.5
rps() { wrk -t2 -c4 -d"${S}s" -H "$H" "$1" | awk '/Requests\/sec/{printf "%.0f", $2}'; }
echo "N=$N nodes, wrk -t2 -c4 -d${S}s; GET node $(wc -c <"$W/get.json") bytes, list100 $(wc -c <"$W/list.json") bytes; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| round | request | ceiling /s | before /s (share) | after /s (share) |"
echo "|---|---|---|---|---|"
for r in $(seq "$ROUNDS"); do
    for what in get list; do
        if [ $what = get ]; then pc="/v1/nodes/$U"; pb="/v1/nodes/$UB"; else pc="/v1/nodes?limit=100"; pb=$pc; fi
        c=$(rps "http://127.0.0.1:7390$pc"); b=$(rps "http://127.0.0.1:7391$pb"); a=$(rps "http://127.0.0.1:7392$pc")
        python3 -c "import sys;c,b,a=map(float,sys.argv[1:4]);print(f'| {sys.argv[4]} | {sys.argv[5]} | {c:.0f} | {b:.0f} ({b/c:.2f}) | {a:.0f} ({a/c:.2f}) |')" "$c" "$b" "$a" "$r" "$what"
    done
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
