#!/usr/bin/env bash
# bench/ir/run.sh: the hot path in instructions (callgrind: deterministic on noisy machines) and in
# wall time.  The churn loop (mix.c) bare, under a floor wrapper (floor.c: forward, usable size at
# both ends, one atomic add and a CAS max) and under memshim; startup subtracted (a run of 0
# operations); memshim printed as a ratio to the floor, and with a native stage on the loop as a
# ratio to memshim without it.  Then paired wall runs, memshim vs floor, on 1 and 2 threads.  Run
# through `make bench-ir` (BENCH_IR_OPS, BENCH_IR_WALL_OPS, BENCH_IR_PAIRS; 0 pairs: no wall runs).
set -euo pipefail
B=${BUILD:?}
LIB=$B/libmemshim.so FLOOR=$B/bench/ir/floor.so MIX=$B/bench/ir/mix
OPS=${BENCH_IR_OPS:-600000}
WALL_OPS=${BENCH_IR_WALL_OPS:-8000000}
PAIRS=${BENCH_IR_PAIRS:-41} # 2 threads on a shared 2-core VM move by 2-5% between rounds
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export MEMSHIM_OUTPUT=$tmp/m.json

# ir ENV... : instructions of `mix 1 OPS` minus `mix 1 0` under the given environment.
ir() {
	local n full empty
	for n in "$OPS" 0; do
		env "$@" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$MIX" 1 "$n" 2>"$tmp/cg" >/dev/null
		awk '/Collected :/ {print $4}' "$tmp/cg" >"$tmp/ir.$n"
	done
	full=$(cat "$tmp/ir.$OPS") empty=$(cat "$tmp/ir.0")
	echo $((full - empty))
}

bare=$(ir)
floor=$(ir LD_PRELOAD="$FLOOR")
pairs=$((OPS / 2))
row() { # label instructions
	awk -v l="$1" -v i="$2" -v b="$bare" -v f="$floor" -v p="$pairs" \
		'BEGIN {printf "%-28s %12d %9.1f %8.3f\n", l, i, (i - b) / p, i / f}'
}
echo "== instructions: churn loop, $pairs malloc+free pairs, 1 thread (target: memshim <= 1.07x floor)"
printf '%-28s %12s %9s %8s\n' variant instructions per_pair x_floor
row bare "$bare"
row floor "$floor"
ms=$(ir LD_PRELOAD="$LIB")
row memshim "$ms"
row "memshim, timeline off" "$(ir LD_PRELOAD="$LIB" MEMSHIM_TIMELINE=0)"
row "memshim, call sites off" "$(ir LD_PRELOAD="$LIB" MEMSHIM_SITES=0)"
# A native stage on the loop's thread function (found from the stack): against memshim without it.
native=$(ir LD_PRELOAD="$LIB" MEMSHIM_STAGES=train=worker)
row "memshim, native stage" "$native"
awk -v n="$native" -v m="$ms" 'BEGIN {printf "native stage / memshim: %.3fx (target <= 1.10x)\n", n / m}'
for extra in ${BENCH_IR_EXTRA:-}; do # NAME=VALUE settings to compare, e.g. MEMSHIM_SITES=0
	row "memshim, $extra" "$(ir LD_PRELOAD="$LIB" "$extra")"
done

now() { date +%s%N; }
# wall THREADS: paired medians of floor, memshim and memshim without call sites, alternating; each
# round starts with the next variant, so none always runs right after another.
wall() {
	local t0 t1 i k v variants=(floor memshim nosites)
	rm -f "$tmp"/w.*
	for ((i = 0; i < PAIRS; i++)); do
		for ((k = 0; k < 3; k++)); do
			v=${variants[(i + k) % 3]}
			local pre=$LIB sites=1; [ $v = floor ] && pre=$FLOOR; [ $v = nosites ] && sites=0
			t0=$(now); MEMSHIM_SITES=$sites LD_PRELOAD=$pre "$MIX" "$1" "$WALL_OPS"; t1=$(now)
			echo $(((t1 - t0) / 1000)) >>"$tmp/w.$v"
		done
	done
	for v in memshim nosites; do
		paste "$tmp/w.floor" "$tmp/w.$v" | awk '{print $2 / $1}' | sort -n >"$tmp/w.ratio"
		awk -v t="$1" -v l="$v" '{a[NR] = $1} END {m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2;
			printf "wall, %d thread(s), %d pairs: %s / floor median %.3f (min %.3f, max %.3f)\n", t, NR,
			l == "memshim" ? "memshim" : "memshim, call sites off", m, a[1], a[NR]}' "$tmp/w.ratio"
	done
}
[ "$PAIRS" -gt 0 ] || exit 0
echo "== wall: churn loop, $WALL_OPS operations per thread (target: within 5% of the floor)"
wall 1
wall 2
