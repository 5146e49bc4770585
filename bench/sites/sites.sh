#!/bin/sh
# Cost of call-site sampling (issue 16): instructions of the churn loop (the worker function and
# everything it calls, so start-up and the report at exit are left out) under callgrind,
# deterministic even on a loaded machine, with MEMSHIM_SITES=0 and with sites on at the default
# and larger rates.
# Two loops: bench-ir's (issue 13's: mostly 16 B - 2 KiB, one in 64 up to 1 MiB; the target) and
# bench/churn.c's (log-uniform 16 B - 1 MiB, 185 KiB on average: one allocation in six sampled, the
# worst case for sampling).  Issue 24 asks <= +3% on both at the default rate.  Last, exact mode
# (MEMSHIM_SITES=exact: every allocation recorded) and an exact stage (MEMSHIM_SITES=exact:STAGE):
# init, which these programs never end, so its window covers the loop, and one never begun (the
# floor is read, never raised: the sampled path's cost).
# Usage: bench/sites/sites.sh LIBMEMSHIM CHURN [OPS [MIX]]
set -eu
lib=$1 churn_bin=$2 ops=${3:-200000} mix=${4:-}
count() {
	env "$@" MEMSHIM_OUTPUT=/dev/null valgrind --tool=callgrind --callgrind-out-file=/dev/null \
		--trace-children=yes --toggle-collect=worker env LD_PRELOAD="$lib" "$churn" 1 "$ops" 2>&1 |
		sed -n 's/.*I *refs: *//p' | tail -1 | tr -d ,
}
loop() { # NAME BINARY TARGET
	churn=$2
	off=$(count MEMSHIM_SITES=0)
	echo "$1, 1 thread, $ops ops: sites off $off instructions"
	for rate in 524288 2097152 4194304; do
		on=$(count MEMSHIM_SITES_RATE=$rate)
		awk -v on="$on" -v off="$off" -v r="$rate" -v t="$3" 'BEGIN {
			printf "  sites on, rate %7d: %d instructions, %.3fx off (%+.1f%%)%s\n", r, on, on / off,
				100 * (on / off - 1), r == 524288 ? " (default" t ")" : "" }'
	done
	for mode in exact exact:init exact:absent; do
		on=$(count MEMSHIM_SITES=$mode)
		awk -v on="$on" -v off="$off" -v m="$mode" 'BEGIN {
			printf "  sites %-18s%d instructions, %.3fx off (%+.1f%%)\n", m ":", on, on / off, 100 * (on / off - 1) }'
	done
}
[ -n "$mix" ] && loop "bench-ir's churn loop (mostly small blocks)" "$mix" "; target <= +3%"
loop "bench/churn.c (large blocks, worst case)" "$churn_bin" "; target <= +3%"
