#!/usr/bin/env bash
# sqlite.sh BUILD [ROWS]: what a stack-detected native stage costs on a real program nobody here
# wrote (issue 26): the sqlite3 shell building a table of ROWS rows (one INSERT statement each, in
# one transaction, with an index), in instructions (callgrind: deterministic on a busy machine).
# Each run under the shim with MEMSHIM_STAGES=step=sqlite3_step (every statement's sqlite3_step is
# a stage call) against the same run under the shim without stages, in the same invocation: bound
# through the GOT (the default: sqlite3_step is called through libsqlite3's own PLT), and found from
# the stack (MEMSHIM_NATIVE_PLT=0, as for a static or hidden function).   target <= 1.25x
set -euo pipefail
B=$(cd "${1:-build}" && pwd); rows=${2:-10000}
lib=$B/libmemshim.so
command -v valgrind >/dev/null || { echo "sqlite.sh: valgrind is needed" >&2; exit 1; }
command -v sqlite3 >/dev/null || { echo "sqlite.sh: sqlite3 not installed: skipped"; exit 0; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
awk -v n="$rows" 'BEGIN {
	srand(1)
	print "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL);"
	print "CREATE INDEX t_name ON t(name);"
	print "BEGIN;"
	for (i = 0; i < n; i++)
		printf "INSERT INTO t(name, v) VALUES(\x27name%d\x27, %.6f);\n", int(rand() * 1e9), rand()
	print "COMMIT;"
	print "SELECT count(*) FROM t;"
}' >"$tmp/build.sql"
# ir STAGES [VAR=VALUE...]: instructions of the whole run (a fresh database each time)
ir() {
	local stages=$1
	shift
	rm -f "$tmp/db"
	env LD_PRELOAD="$lib" MEMSHIM_OUTPUT="$tmp/m.json" MEMSHIM_STAGES="$stages" "$@" \
		valgrind --tool=callgrind --callgrind-out-file=/dev/null sqlite3 "$tmp/db" <"$tmp/build.sql" 2>&1 >/dev/null |
		sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
base=$(ir "")
staged=$(ir "step=sqlite3_step")
calls=$(sed -n 's/.*"step_calls": *\([0-9]*\).*/\1/p' "$tmp/m.json" | head -1)
stack=$(ir "step=sqlite3_step" MEMSHIM_NATIVE_PLT=0)
stack_calls=$(sed -n 's/.*"step_calls": *\([0-9]*\).*/\1/p' "$tmp/m.json" | head -1)
echo "== sqlite3 shell, $rows INSERT statements, instructions of the whole run"
awk -v b="$base" -v s="$staged" -v k="$stack" -v r="$rows" -v c="${calls:-?}" -v kc="${stack_calls:-?}" 'BEGIN {
	printf "%-44s %14d Ir\n", "shim, no stages", b
	printf "%-44s %14d Ir %8.1f Ir/row  %6.3fx  (target <= 1.25x)\n", "shim, step=sqlite3_step (bound: plt)", s, (s - b) / r, s / b
	printf "%-44s %14d Ir %8.1f Ir/row  %6.3fx  (target <= 1.25x)\n", "shim, step=sqlite3_step, MEMSHIM_NATIVE_PLT=0", k, (k - b) / r, k / b
	printf "%-44s %14s (plt), %s (stack)\n", "step_calls (one per statement)", c, kc
}'
