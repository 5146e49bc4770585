#!/usr/bin/env bash
# bench/peers.sh: call sites next to the peers (issue 24) on known answers: 60, 30 and 10 MiB from
# three functions, live together at the peak of "work".  The C fixture (tests/sites'
# sites_fixture: one block per site, or blocks of 64 KiB - 1 MiB) under memshim and heaptrack; the
# same in Python (bench/workloads/shares.py) under memshim, memray and Fil; memshim also with
# MEMSHIM_SITES=exact (every allocation recorded), as memshim-exact.  Each tool runs
# alternately with bare BENCH_PAIRS times; prints a markdown table: median wall time over bare, the
# shares of the last run, and the worst deviation from 60/30/10 over all runs (points).  A peer
# that is not installed is listed as skipped.  Run by bench/run.sh (`make bench`) or alone.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=${BUILD:-$here/../build}
LIB=$(cd "$B" && pwd)/libmemshim.so
FIX=$B/sites/sites_fixture
PAIRS=${BENCH_PAIRS:-5}
TOOLS_BIN=${TOOLS_BIN:-$here/../.venv-tools/bin}
PY=$TOOLS_BIN/python
[ -x "$PY" ] || PY=python3
SHARES="$PY $here/peers_shares.py"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

now_us() { echo $(($(date +%s%N) / 1000)); }

have() { # TOOL: whether it can run here
	case $1 in
	bare|memshim|memshim-exact) return 0 ;;
	heaptrack) command -v heaptrack >/dev/null && command -v heaptrack_print >/dev/null ;;
	memray) "$PY" -c 'import memray' 2>/dev/null ;;
	fil) [ -x "$TOOLS_BIN/fil-profile" ] ;;
	esac
}

# run TOOL CMD...: one timed run; appends its wall time, and its site bytes to $tmp/sites.TOOL.
run() {
	local tool=$1 t0 t1 rc=0 report=
	shift
	rm -rf "$tmp/out" && mkdir "$tmp/out"
	t0=$(now_us)
	case $tool in
	bare) "$@" >/dev/null 2>&1 || rc=$? ;;
	memshim) env LD_PRELOAD="$LIB" MEMSHIM_OUTPUT="$tmp/out/ms.json" MEMSHIM_STAGES=work=work "$@" >/dev/null 2>&1 || rc=$? ;;
	memshim-exact) env LD_PRELOAD="$LIB" MEMSHIM_OUTPUT="$tmp/out/ms.json" MEMSHIM_STAGES=work=work MEMSHIM_SITES=exact \
		"$@" >/dev/null 2>&1 || rc=$? ;;
	heaptrack) heaptrack -o "$tmp/out/ht" "$@" >/dev/null 2>&1 || rc=$? ;;
	memray) "$PY" -m memray run -q -o "$tmp/out/mr.bin" --force "${@:2}" >/dev/null 2>&1 || rc=$? ;;
	fil) "$TOOLS_BIN/fil-profile" --no-browser -o "$tmp/out/fil" run "${@:2}" >/dev/null 2>&1 || rc=$? ;;
	esac
	t1=$(now_us)
	[ $rc -eq 0 ] || { echo $rc >>"$tmp/failed.$tool"; echo "peers: $tool failed (status $rc) on: $*" >&2; return; }
	echo $((t1 - t0)) >>"$tmp/time.$tool"
	case $tool in
	memshim|memshim-exact) report=$tmp/out/ms.json ;;
	heaptrack) heaptrack_print -f "$tmp"/out/ht.* --print-peaks 1 --print-allocators 0 --print-temporary 0 \
		--print-leaks 0 >"$tmp/out/ht.txt" 2>/dev/null && report=$tmp/out/ht.txt ;;
	memray) report=$tmp/out/mr.bin ;;
	fil) report=$(ls "$tmp"/out/fil/*/peak-memory.prof 2>/dev/null | head -1) ;;
	esac
	[ -n "$report" ] && $SHARES "${tool%-exact}" "$report" >>"$tmp/sites.$tool" 2>/dev/null
}

median() { sort -n "$1" | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }

# workload NAME TOOLS CMD...: the rows of one workload.
workload() {
	local name=$1 tools=$2 tool
	shift 2
	rm -f "$tmp"/time.* "$tmp"/sites.* "$tmp"/failed.*
	echo "peers: $name" >&2
	for ((i = 0; i < PAIRS; i++)); do
		for tool in bare $tools; do
			have "$tool" && run "$tool" "$@"
		done
	done
	local base; base=$(median "$tmp/time.bare")
	for tool in $tools; do
		if ! have "$tool"; then
			echo "| $name | $tool | skipped (not installed) | - | - |"
			continue
		fi
		if [ -s "$tmp/failed.$tool" ]; then # a failed run's time would read as a speed-up
			echo "| $name | $tool | failed in $(wc -l <"$tmp/failed.$tool") of $PAIRS runs (status $(tail -1 "$tmp/failed.$tool")) | - | - |"
			continue
		fi
		local ratio shares="-" worst="-"
		ratio=$(awk -v m="$(median "$tmp/time.$tool")" -v b="$base" 'BEGIN {printf "%.2fx (%.2f s)", m / b, m / 1e6}')
		if [ -s "$tmp/sites.$tool" ]; then
			shares=$(tail -1 "$tmp/sites.$tool" | awk '{s = $1 + $2 + $3; if (s > 0) printf "%.1f / %.1f / %.1f", 100 * $1 / s, 100 * $2 / s, 100 * $3 / s}')
			worst=$(awk '{s = $1 + $2 + $3; if (s <= 0) {w = 100; next}
				split("60 30 10", t); for (k = 1; k <= 3; k++) {d = 100 * $k / s - t[k]; d = d < 0 ? -d : d; if (d > w) w = d}}
				END {printf "%.1f (%d runs)", w, NR}' "$tmp/sites.$tool")
		fi
		echo "| $name | $tool | $ratio | $shares | $worst |"
	done
}

main() {
	make -s -C "$here/.." "$FIX" "$LIB" >/dev/null || exit 1
	echo "Call sites against the peers (bench/peers.sh): 60/30/10 MiB live at the peak of \"work\" from"
	echo "three functions; $PAIRS alternating rounds with bare, median wall time; shares of the last run,"
	echo "worst deviation from 60/30/10 over all runs. $(date -u +%Y-%m-%d), $(nproc) cores."
	echo
	echo "| workload | tool | wall vs bare (median) | shares 60/30/10 (last run) | worst deviation, points |"
	echo "|---|---|---|---|---|"
	workload "C, one block per site" "memshim memshim-exact heaptrack" "$FIX" single
	workload "C, 64 KiB - 1 MiB blocks" "memshim memshim-exact heaptrack" "$FIX" shares
	workload "Python, one bytearray per site" "memshim memshim-exact memray fil" "$PY" "$here/workloads/shares.py" single
	workload "Python, 64 KiB - 1 MiB bytearrays" "memshim memshim-exact memray fil" "$PY" "$here/workloads/shares.py" shares
}

main "$@"
