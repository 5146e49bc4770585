#!/usr/bin/env bash
# pair.sh RUNS THREADS PAIRS: the pair benchmark bare and under the shim, alternating RUNS times in
# the same invocation; prints median wall ns per pair per thread and CPU ns per pair for both, the
# ratio and the ns the shim adds.
set -euo pipefail
runs=$1 threads=$2 pairs=$3
build=${BUILD:-build}
lib=$(cd "$build" && pwd)/libmemshim.so
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH="$build/gpu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for ((i = 0; i < runs; i++)); do
	"$build/bench/cuda_pair" "$threads" "$pairs" >> "$tmp/bare"
	LD_PRELOAD="$lib" MEMSHIM_OUTPUT="$tmp/m.json" "$build/bench/cuda_pair" "$threads" "$pairs" >> "$tmp/shim"
done
median() { # file, column
	awk -v c="$2" '{print $c}' "$1" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
}
report() { # label, column
	local b s; b=$(median "$tmp/bare" "$2"); s=$(median "$tmp/shim" "$2")
	awk -v t="$threads" -v l="$1" -v b="$b" -v s="$s" 'BEGIN {
		printf "%d thread(s), %s: bare %.1f ns/pair, memshim %.1f ns/pair, ratio %.3f, added %.1f ns/pair\n",
		       t, l, b, s, s / b, s - b }'
}
report "wall per thread" 1
report "CPU per pair   " 2
