#!/usr/bin/env bash
# bench/run.sh: each workload bare and under each tool, alternating, BENCH_PAIRS rounds; prints the
# median wall time, the median ratio to bare, and the peak each tool reports, as one markdown table
# (also written to bench/results.md).  Run through `make bench`.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=${BUILD:-$here/../build}
LIB=$(cd "$B" && pwd)/libmemshim.so
PAIRS=${BENCH_PAIRS:-5}
PY311=${PY311:-/root/.pyenv/versions/3.11.7/bin/python}
PY312=${PY312:-/root/.pyenv/versions/3.12.1/bin/python}
DEBPY=/usr/bin/python3
VENVPY=${VENVPY:-$here/../.venv/bin/python}
FIL=${FIL:-$here/../.venv-tools/bin/fil-profile} # Fil (filprofiler, packaging/requirements-tools.txt)
OUT=${BENCH_OUT:-$here/results.md}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
W=$here/workloads/workload.py

now_us() { echo $(( $(date +%s%N) / 1000 )); }

# run TOOL CMD...: one timed run; leaves the tool's peak (bytes) in $tmp/peak.TOOL.
run() {
	local tool=$1; shift
	local t0 t1 rc=0
	rm -rf "$tmp/ms.json" "$tmp"/ht.* "$tmp/massif.out" "$tmp/fil"
	t0=$(now_us)
	case $tool in
	bare) "$@" >"$tmp/stdout" 2>/dev/null || rc=$? ;;
	memshim) env LD_PRELOAD="$LIB" MEMSHIM_OUTPUT="$tmp/ms.json" MEMSHIM_STAGES= "$@" >"$tmp/stdout" 2>/dev/null || rc=$? ;;
	memshim+stages) env LD_PRELOAD="$LIB" MEMSHIM_OUTPUT="$tmp/ms.json" MEMSHIM_STAGES="$STAGES" "$@" >"$tmp/stdout" 2>/dev/null || rc=$? ;;
	heaptrack) heaptrack -o "$tmp/ht" "$@" >"$tmp/stdout" 2>/dev/null || rc=$? ;;
	massif) timeout 120 valgrind --tool=massif --pages-as-heap=no --massif-out-file="$tmp/massif.out" "$@" >"$tmp/stdout" 2>/dev/null || rc=$? ;;
	rss-sampler) "$@" rss >"$tmp/stdout" 2>/dev/null || rc=$? ;;
	memray) "$VENVPY" -m memray run -q -o "$tmp/mr.bin" --force "${@:2}" >"$tmp/stdout" 2>/dev/null || rc=$? ;;
	fil) "$FIL" --no-browser -o "$tmp/fil" run "${@:2}" >"$tmp/stdout" 2>/dev/null || rc=$? ;;
	esac
	t1=$(now_us)
	echo $((t1 - t0)) >>"$tmp/time.$tool"
	[ $rc -eq 0 ] || echo "bench: $tool failed (status $rc) on: $*" >&2
	peak_of "$tool" >"$tmp/peak.$tool" 2>/dev/null || true
}

peak_of() {
	case $1 in
	memshim|memshim+stages) "$DEBPY" -c 'import json,sys; m=json.load(open(sys.argv[1]))["metrics"]; print(m["process_mem_cpu_malloc_peak"], m["process_mem_cpu_peak"])' "$tmp/ms.json" ;;
	heaptrack) heaptrack_print "$tmp"/ht.* 2>/dev/null | awk '/^peak heap memory consumption:/ {print $5}' | numfmt --from=si ;;
	massif) awk -F= '/^mem_heap_B=/ {if ($2 + 0 > max) max = $2 + 0} END {print max}' "$tmp/massif.out" ;;
	memray) "$VENVPY" -m memray stats --json -o "$tmp/mr.json" --force "$tmp/mr.bin" >/dev/null 2>&1 &&
		"$DEBPY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["peak_memory"])' "$tmp/mr.json" ;;
	fil) awk '{s += $NF} END {print s}' "$tmp"/fil/*/peak-memory.prof ;;
	rss-sampler) "$DEBPY" -c 'import json,sys; m=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(m["work_mem_cpu_alloc_delta"] + m["work_mem_cpu_peaked_delta"])' "$tmp/stdout" ;;
	esac
}

median() { sort -n "$1" | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }
mib() { awk -v b="$1" 'BEGIN { if (b == "") print "-"; else printf "%.1f MiB", b / 1048576 }'; }

# workload NAME TOOLS STAGES CMD...: alternates the tools PAIRS times (massif once), adds a row.
workload() {
	local name=$1 tools=$2; STAGES=$3; shift 3
	rm -f "$tmp"/time.* "$tmp"/peak.*
	echo "bench: $name" >&2
	for ((i = 0; i < PAIRS; i++)); do
		for tool in bare $tools; do
			[ "$tool" = massif ] && [ $i -gt 0 ] && continue
			run "$tool" "$@"
		done
	done
	local base; base=$(median "$tmp/time.bare")
	local row="| $name | $(awk -v b="$base" 'BEGIN {printf "%.2f", b / 1e6}')"
	for tool in memshim memshim+stages heaptrack massif rss-sampler memray fil; do
		if [ -f "$tmp/time.$tool" ]; then
			row+=" | $(awk -v m="$(median "$tmp/time.$tool")" -v b="$base" 'BEGIN {printf "%.2fx", m / b}')"
		else
			row+=" | -"
		fi
	done
	local ms ht
	ms=$(awk '{print $1}' "$tmp/peak.memshim" 2>/dev/null)
	ht=$(cat "$tmp/peak.heaptrack" 2>/dev/null)
	row+=" | $(mib "$ms") | $(mib "$(awk '{print $2}' "$tmp/peak.memshim" 2>/dev/null)") | $(mib "$ht")"
	row+=" | $(mib "$(cat "$tmp/peak.massif" 2>/dev/null)") | $(mib "$(cat "$tmp/peak.rss-sampler" 2>/dev/null)")"
	row+=" | $(mib "$(cat "$tmp/peak.memray" 2>/dev/null)") | $(mib "$(cat "$tmp/peak.fil" 2>/dev/null)")"
	if [ -n "$ms" ] && [ -n "$ht" ]; then
		row+=" | $(awk -v a="$ms" -v b="$ht" 'BEGIN {printf "%+.1f%%", (a - b) * 100 / b}')"
	else
		row+=" | -"
	fi
	echo "$row |" >>"$tmp/rows"
}

prepare_inputs() {
	seq 1 600000 | awk 'BEGIN {srand(7)} {printf "%08d %s\n", int(rand() * 1e8), $1}' >"$tmp/sort.in"
	head -c 1000000 "$tmp/sort.in" >"$tmp/xz.in"
}

main() {
	make -s -C "$here/.." "$B/bench/churn" "$B/bench/larson" "$B/libmemshim.so" >/dev/null
	prepare_inputs
	: >"$tmp/rows"
	workload "churn, 1 thread" "memshim memshim+stages heaptrack" "work=worker" "$B/bench/churn" 1 1000000
	workload "churn, 2 threads" "memshim memshim+stages heaptrack" "work=worker" "$B/bench/churn" 2 1000000
	workload "cross-thread frees" "memshim heaptrack" "" "$B/bench/larson" 1000000
	workload "churn, 1 thread, small (massif)" "memshim heaptrack massif" "" "$B/bench/churn" 1 100000
	for py in "$PY311" "$PY312"; do
		[ -x "$py" ] || continue
		v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
		peers="memshim memshim+stages rss-sampler"
		# memray runs in the project venv, whose interpreter is this one
		[ "$v" = 3.11 ] && [ -x "$VENVPY" ] && [ "$("$VENVPY" -c 'import sys; print(sys.executable)' 2>/dev/null)" ] &&
			"$VENVPY" -c 'import memray' 2>/dev/null && peers+=" memray"
		# Fil runs in the tools venv, whose interpreter is this one
		[ "$v" = 3.11 ] && [ -x "$FIL" ] && peers+=" fil"
		workload "Python $v fib (call-heavy)" "$peers" "work=run_stage" "$py" "$W" fib
		workload "Python $v dicts and lists" "$peers" "work=run_stage" "$py" "$W" alloc
	done
	if "$DEBPY" -c 'import torch' 2>/dev/null; then
		workload "PyTorch CPU training loop" "memshim memshim+stages rss-sampler" "work=run_stage,train=train,eval=evaluate" "$DEBPY" "$W" torch
	fi
	workload "sort -S 64M" "memshim heaptrack" "" sort -S 64M -o /dev/null "$tmp/sort.in"
	workload "xz -6" "memshim heaptrack" "" xz -6 -k -c "$tmp/xz.in"
	workload "Python: 50 MB of bytes" "memshim heaptrack rss-sampler" "" "$DEBPY" "$W" bytes
	[ -x "$VENVPY" ] && "$here/trainer.sh" >"$tmp/trainer.md"
	BUILD=$B "$here/peers.sh" >"$tmp/peers.md"
	{
		echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo),"
		echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $PAIRS alternating rounds, median."
		echo
		echo "| workload | bare s | memshim | memshim + stages | heaptrack | massif | sampled RSS | memray | Fil | memshim malloc peak | memshim cpu peak | heaptrack peak | massif peak | sampled RSS stage need | memray peak | Fil peak | malloc peak vs heaptrack |"
		echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
		cat "$tmp/rows"
		[ -s "$tmp/trainer.md" ] && { echo; cat "$tmp/trainer.md"; }
		[ -s "$tmp/peers.md" ] && { echo; cat "$tmp/peers.md"; }
	} >"$OUT"
	cat "$OUT"
}

main "$@"
