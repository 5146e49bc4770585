#!/bin/sh
# Cost of call-site sampling (issue 16): instructions of the churn loop (the worker function and
# everything it calls, so start-up and the report at exit are left out) under callgrind,
# deterministic even on a loaded machine, with MEMSHIM_SITES=0 and with sites on at the default
# and larger rates.
# Two loops: bench-ir's (issue 13's: mostly 16 B - 2 KiB, one in 64 up to 1 MiB; the target) and
# bench/churn.c's (log-uniform 16 B - 1 MiB, 185 KiB on average: one allocation in six sampled, the
# worst case for sampling).  Issue 24 asked <= +3% on both at the default rate.  Last, exact mode
# (MEMSHIM_SITES=exact: every allocation recorded) and an exact stage (MEMSHIM_SITES=exact:STAGE):
# init, which these programs never end, so its window covers the loop, and one never begun (the
# floor is read, never raised: the sampled path's cost).
# Then issue 43's two figures: a sample with its free, in instructions (churn.c at the default rate
# against sites off, over the samples taken; target <= 350), and churn.c's sizes with each block
# written once, as programs use what they allocate (bench/sites/written.c; target <= +3%).
# Usage: bench/sites/sites.sh LIBMEMSHIM CHURN [OPS [MIX [WRITTEN]]]
set -eu
lib=$1 churn_bin=$2 ops=${3:-200000} mix=${4:-} written=${5:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Instructions of $churn's worker with the settings given; callgrind's file into $out/cg when
# KEEP is set (its calls name the samples).
count() {
	env "$@" MEMSHIM_OUTPUT=/dev/null valgrind --tool=callgrind --callgrind-out-file="${KEEP:-/dev/null}" \
		--trace-children=yes --toggle-collect=worker env LD_PRELOAD="$lib" "$churn" 1 "$ops" 2>&1 |
		sed -n 's/.*I *refs: *//p' | tail -1 | tr -d ,
}
# Calls of function $2 in callgrind file $1 (names are compressed: "(id) name" at first use).
calls() {
	awk -v want="$2" '/^c?fn=/ { id = $1; sub(/^c?fn=/, "", id); if (NF > 1) name[id] = $2 }
		/^cfn=/ { cur = id; next }
		/^calls=/ { split($1, a, "="); n[cur] += a[2] }
		END { for (i in n) if (name[i] == want) s += n[i]; print s + 0 }' "$1"
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
[ -n "$mix" ] && loop "bench-ir's churn loop (mostly small blocks)" "$mix" "; issue 24: <= +3%"
loop "bench/churn.c (large blocks, worst case)" "$churn_bin" "; issue 24: <= +3%"

# The timeline and the live record pace some work by the clock (+-0.5% of the loop): both off on
# both sides here, so what is left between them is the samples' own cost.
churn=$churn_bin
off=$(count MEMSHIM_SITES=0 MEMSHIM_TIMELINE=0 MEMSHIM_LIVE=0)
on=$(KEEP="$out/cg" count MEMSHIM_TIMELINE=0 MEMSHIM_LIVE=0)
samples=$(calls "$out/cg" ms_sample_take)
awk -v on="$on" -v off="$off" -v s="$samples" 'BEGIN {
	printf "a sample with its free (bench/churn.c, default rate, timeline and live record off): %d more instructions over %d samples: %.0f a sample (issue 43: <= 350)\n",
		on - off, s, (on - off) / s }'

if [ -n "$written" ]; then
	churn=$written
	off=$(count MEMSHIM_SITES=0)
	on=$(count MEMSHIM_SITES=1)
	awk -v on="$on" -v off="$off" -v o="$ops" 'BEGIN {
		printf "bench/churn.c'"'"'s sizes, each block written once (bench/sites/written.c), 1 thread, %d ops: sites off %d, on %d instructions, %.4fx off (%+.2f%%; issue 43: <= +3%%)\n",
			o, off, on, on / off, 100 * (on / off - 1) }'
fi
