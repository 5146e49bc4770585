#!/bin/sh
# Cost of call-site sampling (issue 16): instructions of the churn loop (the worker function and
# everything it calls, so start-up and the report at exit are left out) under callgrind,
# deterministic even on a loaded machine, with MEMSHIM_SITES=0 and with sites on at the default
# and larger rates.
# Usage: bench/sites/sites.sh LIBMEMSHIM CHURN [OPS]
set -eu
lib=$1 churn=$2 ops=${3:-200000}
count() {
	env "$@" MEMSHIM_OUTPUT=/dev/null valgrind --tool=callgrind --callgrind-out-file=/dev/null \
		--trace-children=yes --toggle-collect=worker env LD_PRELOAD="$lib" "$churn" 1 "$ops" 2>&1 |
		sed -n 's/.*I *refs: *//p' | tail -1 | tr -d ,
}
off=$(count MEMSHIM_SITES=0)
echo "churn loop, 1 thread, $ops ops: sites off $off instructions"
for rate in 524288 2097152 4194304; do
	on=$(count MEMSHIM_SITES_RATE=$rate)
	awk -v on="$on" -v off="$off" -v r="$rate" 'BEGIN {
		printf "sites on, rate %7d: %d instructions, %.3fx off (%+.1f%%)%s\n", r, on, on / off,
			100 * (on / off - 1), r == 524288 ? " (default; target <= +3%)" : "" }'
done
