#!/usr/bin/env bash
# ir.sh BUILD [OPS]: the cost of native stages in instructions (callgrind; deterministic on a busy
# machine).  The churn loop (OPS operations, 1 thread) under the shim with a native stage vs the
# same run without stages, each with its start subtracted (the same command with 0 operations):
#   stage on the loop       bench/churn's worker (MEMSHIM_STAGES=train=worker)   target <= 1.10x
#   stage on the loop       nchurn's churn_epoch                                 target <= 1.10x
#   target found nowhere    train=no_such_function (waits for a dlopen)          target ~1.00x
#   target never called     train=never_called (found: checks on, loop outside)  reported only
#   through a helper        nchurn allocating through a small function (a new frame each time)
# then library functions bound to their calls through the GOT (whole process): stepcall, tokcall
# (~80 allocations a call, target <= 1.10x) and sqlite3 when installed.
# IR_EXACT=1: the features whose work the wall clock paces off in every run (timeline, call sites,
# live record, snapshots: callgrind's slowdown makes it ~50x more frequent and it follows the
# machine's load), so two builds compare within ~0.1-0.3% (a reported call every 10 ms remains).
set -euo pipefail
B=$(cd "${1:-build}" && pwd); ops=${2:-200000}
lib=$B/libmemshim.so
command -v valgrind >/dev/null || { echo "ir.sh: valgrind is needed" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
exact=()
[ "${IR_EXACT:-0}" = 1 ] && exact=(MEMSHIM_TIMELINE=0 MEMSHIM_SITES=0 MEMSHIM_LIVE=0 MEMSHIM_SNAPSHOT_INTERVAL=0)
# ir STAGES PROG ARGS...: instructions of the whole process
ir() {
	local stages=$1; shift
	env LD_PRELOAD="$lib" MEMSHIM_OUTPUT="$tmp/m.json" MEMSHIM_STAGES="$stages" "${exact[@]}" \
		valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$@" 2>&1 >/dev/null |
		sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
# loop STAGES PROG: instructions of OPS operations, the start subtracted
loop() { echo $(( $(ir "$1" "$2" 1 "$ops" "${@:3}") - $(ir "$1" "$2" 1 0 "${@:3}") )); }
row() { # LABEL STAGES PROG BASE [ARGS]
	local n; n=$(loop "$2" "$3" "${@:5}")
	awk -v l="$1" -v n="$n" -v b="$4" -v o="$ops" \
		'BEGIN {printf "%-44s %12d Ir %7.1f Ir/op  %6.3fx\n", l, n, (n - b) / o, n / b}'
}
[ ${#exact[@]} -eq 0 ] || echo "== IR_EXACT=1: ${exact[*]}"
echo "== native stages on the churn loop ($ops operations, 1 thread), instructions, start subtracted"
base=$(loop "" "$B/bench/churn")
row "churn: no stages" "" "$B/bench/churn" "$base"
row "churn: train=worker (target <= 1.10x)" "train=worker" "$B/bench/churn" "$base"
row "churn: x=no_such_function (target ~1.00x)" "x=no_such_function" "$B/bench/churn" "$base"
nbase=$(loop "" "$B/bench/native/nchurn")
row "nchurn: no stages" "" "$B/bench/native/nchurn" "$nbase"
row "nchurn: train=churn_epoch (target <= 1.10x)" "train=churn_epoch" "$B/bench/native/nchurn" "$nbase"
row "nchurn: train=never_called (loop outside)" "train=never_called" "$B/bench/native/nchurn" "$nbase"
hbase=$(loop "" "$B/bench/native/nchurn" helper)
row "nchurn helper: train=churn_epoch" "train=churn_epoch" "$B/bench/native/nchurn" "$hbase" helper
row "nchurn helper: train=never_called" "train=never_called" "$B/bench/native/nchurn" "$hbase" helper

# Issue 26: targets called through the PLT, bound to their calls (no stack walk per allocation).
# whole RUN: instructions of the whole process (the start included: the same in both runs).
whole() { ir "$@"; }
# paced: instructions of the last run's work paced by the wall clock (a stage call at least 10 ms
# after the last one that was recorded, the automatic snapshots): callgrind runs the program ~50x
# slower, so that work happens ~50x more often per instruction than in a real run.
paced() {
	callgrind_annotate --auto=no --inclusive=yes --threshold=100 "$tmp/cg.out" 2>/dev/null |
		awk '/lifecycle.c:after_boundary/ {gsub(",", "", $1); n = $1} END {print n + 0}'
}
# pline LABEL N BASE PACED BASE_PACED: the ratio, and the ratio without the clock-paced work
pline() {
	awk -v l="$1" -v n="$2" -v b="$3" -v p="$4" -v bp="$5" \
		'BEGIN {printf "%-44s %12.0f Ir %6.3fx  (%6.3fx without clock-paced work)\n", l, n, n / b, (n - p) / (b - bp)}'
}
prow() { # LABEL STAGES BASE BASE_PACED PROG ARGS...
	local n; n=$(whole "$2" "${@:5}")
	pline "$1" "$n" "$3" "$(paced)" "$4"
}
echo "== targets called through the PLT (whole process, instructions)"
calls=${STEP_CALLS:-3000}
sbase=$(whole "" "$B/bench/native/stepcall" "$calls"); spaced=$(paced)
prow "stepcall: no stages" "" "$sbase" "$spaced" "$B/bench/native/stepcall" "$calls"
prow "stepcall: s=step_work (target <= 1.10x)" "s=step_work" "$sbase" "$spaced" "$B/bench/native/stepcall" "$calls"
prow "stepcall: x=no_such_function (target 1.0x)" "x=no_such_function" "$sbase" "$spaced" "$B/bench/native/stepcall" "$calls"
# Issue 43: an ordinary library function doing ~80 allocations and frees a call, its live memory
# climbing through most of the call (each allocation a new high of the call's peak); found from the
# stack too (what a static or hidden function gets).
tcalls=${TOK_CALLS:-10000}
tbase=$(whole "" "$B/bench/native/tokcall" "$tcalls"); tpaced=$(paced)
prow "tokcall: t=tok_line (target <= 1.10x)" "t=tok_line" "$tbase" "$tpaced" "$B/bench/native/tokcall" "$tcalls"
MEMSHIM_NATIVE_PLT=0 prow "tokcall: t=tok_line, from the stack" "t=tok_line" "$tbase" "$tpaced" "$B/bench/native/tokcall" "$tcalls"
if command -v sqlite3 >/dev/null; then
	rows=${SQLITE_ROWS:-300000}
	{ echo "begin; create table t(a integer primary key, b text, c real);"
	  awk -v n="$rows" 'BEGIN {for (i = 0; i < n; i++) printf "insert into t(b, c) values(\x27row%dx%d\x27, %d.5);\n", i, i * 7, i}'
	  echo "commit; select count(*) from t;"; } > "$tmp/rows.sql"
	sq() { rm -f "$tmp/r.db"; ir "$1" sqlite3 "$tmp/r.db" < "$tmp/rows.sql"; }
	qbase=$(sq ""); qpaced=$(paced)
	for spec in "step=sqlite3_step" "exec=sqlite3_exec" "x=no_such_function"; do
		n=$(sq "$spec")
		pline "sqlite3 $rows rows: $spec" "$n" "$qbase" "$(paced)" "$qpaced"
	done
fi
