#!/usr/bin/env bash
# ratio.sh PAIRS -- COMMAND...: runs COMMAND bare and under the shim (and under each tool in
# $TOOLS: heaptrack) alternately PAIRS times; prints the median wall time and median ratio to bare.
set -euo pipefail
pairs=$1; shift; [ "$1" = "--" ] && shift
lib=${MEMSHIM_LIB:-$(cd "$(dirname "$0")/.." && pwd)/build/libmemshim.so}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
now() { date +%s%N; }
time_one() { # label, then the command line
	local label=$1; shift
	local t0 t1; t0=$(now); "$@" >/dev/null 2>&1; t1=$(now)
	echo $(( (t1 - t0) / 1000 )) >> "$tmp/$label"
}
for ((i = 0; i < pairs; i++)); do
	time_one bare "$@"
	time_one memshim env LD_PRELOAD="$lib" MEMSHIM_OUTPUT="$tmp/m.json" "$@"
	for tool in ${TOOLS:-}; do
		case $tool in
		heaptrack) time_one heaptrack heaptrack -o "$tmp/ht" "$@"; rm -f "$tmp"/ht*;;
		esac
	done
done
median() { sort -n "$1" | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
base=$(median "$tmp/bare")
printf '%-10s %10s %8s\n' tool median_ms ratio
for label in bare memshim ${TOOLS:-}; do
	m=$(median "$tmp/$label")
	awk -v l="$label" -v m="$m" -v b="$base" 'BEGIN {printf "%-10s %10.1f %8.3f\n", l, m/1000, m/b}'
done
