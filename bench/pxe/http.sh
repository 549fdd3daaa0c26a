# shellcheck shell=bash
# HTTP part of bench/pxe (sourced by run.sh after lib.sh).
#
# http_once NAME: fresh server serving /boot/vmlinuz and /boot/initramfs on
# SRV_IP:HTTP_PORT; curl runs in the client namespace (its own CPU):
#   sequential: HTTP_SEQ times one curl fetching both files (one keep-alive
#               connection), MB/s = bytes / summed time;
#   parallel:   HTTP_PAR curls at once, each fetching both files,
#               MB/s = all bytes / wall time from the first start to the last end.
# Every download must be 200 with the size of the checked copy; the checked
# copy must equal what the baselines serve. run.sh calls it HTTP_ROUNDS times
# per server, servers interleaved.
# http_summary NAME -> "seq_MB/s par_MB/s kernel_bytes initramfs_bytes failures same_bytes"
# (medians of the MB/s, failures summed).

HTTP_SEQ=${HTTP_SEQ:-3}
HTTP_PAR=${HTTP_PAR:-10}
HTTP_ROUNDS=${HTTP_ROUNDS:-3}

http_once() {
	local name=$1
	local base="http://$SRV_IP:$HTTP_PORT/boot" d=$RAW/http-$name
	mkdir -p "$d"
	if ! start_server "$name"; then
		echo "nan nan 0 0 1 no" >>"$d.vals"
		return
	fi
	# one checked copy of each file first (also warms the page cache)
	local f kb ib sha=yes
	for f in vmlinuz initramfs; do
		in_cli curl -sf -o "$d/$f" "$base/$f" || log "http $name: GET /boot/$f failed"
		cmp -s "$d/$f" "$WWW_ROOT/boot/$f" || sha=no
	done
	kb=$(stat -c %s "$d/vmlinuz" 2>/dev/null || echo 0)
	ib=$(stat -c %s "$d/initramfs" 2>/dev/null || echo 0)
	rm -f "$d/vmlinuz" "$d/initramfs"
	local fmt='%{http_code} %{size_download} %{time_total}\n' i
	: >"$d/seq"
	for i in $(seq "$HTTP_SEQ"); do
		in_cli curl -s -o /dev/null -o /dev/null -w "$fmt" "$base/vmlinuz" "$base/initramfs" >>"$d/seq"
	done
	: >"$d/par"
	local t0 t1
	t0=$EPOCHREALTIME
	# shellcheck disable=SC2016
	in_cli bash -c 'for i in $(seq "$1"); do curl -s -o /dev/null -o /dev/null -w "$2" "$3/vmlinuz" "$3/initramfs" & done; wait' \
		par "$HTTP_PAR" "$fmt" "$base" >>"$d/par"
	t1=$EPOCHREALTIME
	stop_server
	local fails seq par
	fails=$(cat "$d/seq" "$d/par" | awk -v kb="$kb" -v ib="$ib" '$1!=200 || ($2!=kb && $2!=ib) {n++} END{print n+0}')
	fails=$((fails + 2 * (HTTP_SEQ + HTTP_PAR) - $(cat "$d/seq" "$d/par" | wc -l)))
	seq=$(awk '{b+=$2; t+=$3} END{ if (t>0) printf "%.0f", b/t/1e6; else print "nan" }' "$d/seq")
	par=$(awk -v w="$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" '{b+=$2} END{ if (w>0) printf "%.0f", b/w/1e6; else print "nan" }' "$d/par")
	log "http $name: sequential ${seq} MB/s, ${HTTP_PAR} parallel ${par} MB/s, kernel=$kb initramfs=$ib failures=$fails same_bytes_as_baseline=$sha"
	echo "$seq $par $kb $ib $fails $sha" >>"$d.vals"
}

http_summary() {
	local v=$RAW/http-$1.vals
	[ -s "$v" ] || return 0
	local seq par last fails same
	seq=$(awk '{print $1}' "$v" | median)
	par=$(awk '{print $2}' "$v" | median)
	last=$(tail -1 "$v" | awk '{print $3, $4}')
	fails=$(awk '{s+=$5} END{print s+0}' "$v")
	same=$(awk '$6!="yes"{n++} END{print (n ? "no" : "yes")}' "$v")
	printf '%.0f %.0f %s %s %s\n' "$seq" "$par" "$last" "$fails" "$same"
}
