#!/bin/bash
# What /metrics costs the API, side by side: castiron serve with --metrics
# (and a scraper reading /metrics every SCRAPE seconds, as Prometheus would)
# and with --metrics=false, alternating over ROUNDS rounds so that drift in
# the machine's load hits both alike. Each round starts a fresh server,
# creates NODES nodes, then runs loadgen get and list for DURATION each and
# reads the server's CPU seconds around each run. Prints a markdown table:
# median req/s and median server CPU microseconds per request per side, and
# the ratio on/off.
#
# usage: bench/metrics.sh
# env:   ROUNDS=4 DURATION=10s NODES=1000 WORKERS=8 SCRAPE=5 PORT=16391
#        KEEP=0 (1: keep the temp dir with logs and raw records)
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
ROUNDS="${ROUNDS:-4}"
DURATION="${DURATION:-10s}"
NODES="${NODES:-1000}"
WORKERS="${WORKERS:-8}"
SCRAPE="${SCRAPE:-5}"
PORT="${PORT:-16391}"
KEEP="${KEEP:-0}"
TMP="$(mktemp -d /tmp/castiron-metrics-bench.XXXXXX)"
URL="http://127.0.0.1:$PORT"
PID=""
SCRAPER=""

cleanup() {
    [ -n "$SCRAPER" ] && kill "$SCRAPER" 2>/dev/null || true
    if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then kill -TERM "$PID"; wait "$PID" 2>/dev/null || true; fi
    if [ "$KEEP" = 1 ]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

cd "$ROOT"
CGO_ENABLED=0 go build -trimpath -o "$TMP/castiron" .
go build -o "$TMP/loadgen" ./bench/loadgen

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime+stime, clock ticks

run_side() { # run_side ROUND on|off
    local round=$1 side=$2 data="$TMP/data-$1-$2"
    "$TMP/castiron" serve --listen "127.0.0.1:$PORT" --data-dir "$data" --metrics="$([ "$side" = on ] && echo true || echo false)" \
        --log-level warn > "$TMP/castiron-$round-$side.log" 2>&1 < /dev/null &
    PID=$!
    "$TMP/loadgen" -url "$URL" ready -wait 60s
    "$TMP/loadgen" -url "$URL" -target "$side" create -n "$NODES" -workers "$WORKERS" > /dev/null
    if [ "$side" = on ]; then
        (while sleep "$SCRAPE"; do curl -sf "$URL/metrics" > /dev/null || true; done) &
        SCRAPER=$!
    fi
    for mode in get list; do
        local c0 c1 args=()
        [ "$mode" = list ] && args=(-limit 100 -marker none)
        c0=$(cpu "$PID")
        "$TMP/loadgen" -url "$URL" -target "$side" -label "round$round" "$mode" -duration "$DURATION" -workers "$WORKERS" "${args[@]}" \
            | sed "s/}\$/,\"cpu_ticks\":CPU}/" > "$TMP/rec"
        c1=$(cpu "$PID")
        sed "s/CPU/$((c1 - c0))/" "$TMP/rec" >> "$TMP/records.jsonl"
    done
    if [ -n "$SCRAPER" ]; then kill "$SCRAPER"; wait "$SCRAPER" 2>/dev/null || true; SCRAPER=""; fi
    kill -TERM "$PID"; wait "$PID" 2>/dev/null || true; PID=""
}

for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then order="off on"; else order="on off"; fi
    for side in $order; do
        echo "round $round: metrics $side" >&2
        run_side "$round" "$side"
    done
done

python3 - "$TMP/records.jsonl" "$ROUNDS" "$DURATION" "$NODES" "$WORKERS" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
tick = 1e6 / 100  # microseconds per clock tick (USER_HZ 100)
def col(side, mode, f):
    return [f(r) for r in recs if r["target"] == side and r["mode"] == mode]
print(f"metrics cost: {sys.argv[2]} rounds, {sys.argv[3]} per run, {sys.argv[4]} nodes, {sys.argv[5]} workers; medians\n")
print("| request | req/s off | req/s on | on/off | CPU µs/req off | CPU µs/req on | on/off |")
print("|---|---:|---:|---:|---:|---:|---:|")
for mode, what in (("get", "GET /v1/nodes/{uuid}"), ("list", "GET /v1/nodes?limit=100")):
    rps = {s: statistics.median(col(s, mode, lambda r: r["figures"]["rps"])) for s in ("off", "on")}
    cpu = {s: statistics.median(col(s, mode, lambda r: r["cpu_ticks"] * tick / r["figures"]["requests"])) for s in ("off", "on")}
    print(f"| {what} | {rps['off']:.0f} | {rps['on']:.0f} | {rps['on']/rps['off']:.3f} | {cpu['off']:.0f} | {cpu['on']:.0f} | {cpu['on']/cpu['off']:.3f} |")
PY
