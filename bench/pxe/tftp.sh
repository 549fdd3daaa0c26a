# shellcheck shell=bash
# TFTP part of bench/pxe (sourced by run.sh after lib.sh).
#
# tftp_once NAME: fresh server, one fan-out of TFTP_N concurrent fetches of
# TFTP_FILE by tftpload (Go, pin/tftp/v3 client, blksize 1432 + tsize as iPXE
# asks; every copy compared with the original), server stopped. run.sh calls
# it TFTP_RUNS times per server, servers interleaved.
# tftp_summary NAME -> "ok_min/N failed_total wall_s p50_s p99_s max_s MB/s"
# (medians over the runs, except ok = worst run and failed = sum).

TFTP_N=${TFTP_N:-200}
TFTP_FILE=${TFTP_FILE:-undionly.kpxe}
TFTP_RUNS=${TFTP_RUNS:-3}

tftp_once() {
	local name=$1
	local vals=$RAW/tftp-$name.vals
	if ! start_server "$name"; then
		echo "0 $TFTP_N nan nan nan nan nan" >>"$vals"
		return
	fi
	local json=$RAW/tftp-$name-$(date +%s%N).json
	in_cli timeout 300 "$TFTPLOAD" -addr "$SRV_IP:69" -file "$TFTP_FILE" -n "$TFTP_N" \
		-expect "$IPXE_DIR/$TFTP_FILE" -label "$name" >"$json" 2>>"$RAW/tftp-$name.log"
	stop_server
	tail -1 "$RAW/tftp-$name.log" | sed 's/^/  /' >&2
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["ok"], r["failed"]+r["corrupt"], r["wall_s"], r["p50_s"], r["p99_s"], r["max_s"], round(r["mb_per_s"],1))' \
		"$json" >>"$vals" 2>/dev/null || echo "0 $TFTP_N nan nan nan nan nan" >>"$vals"
}

tftp_summary() {
	local vals=$RAW/tftp-$1.vals
	[ -s "$vals" ] || return 0
	col() { awk -v c="$1" '{print $c}' "$vals" | median; }
	local okmin failsum
	okmin=$(awk 'NR==1||$1<m{m=$1} END{print m+0}' "$vals")
	failsum=$(awk '{s+=$2} END{print s+0}' "$vals")
	echo "$okmin/$TFTP_N $failsum $(col 3) $(col 4) $(col 5) $(col 6) $(col 7)"
}
