#!/usr/bin/env bash
# start.sh BUILD [PYTHON]: the fixed cost per process of LD_PRELOAD=libmemshim.so with no
# configuration (targets: <= 0.3 ms on /bin/true, <= 1 ms on python3 -c pass).
#   instructions: callgrind over the whole process (ld.so, start, exit report), bare vs preloaded;
#   wall:         bench/start, alternating bare and preloaded runs, paired median difference (the
#                 metrics file goes to tmpfs when /dev/shm exists, else to $TMPDIR: a disk file
#                 system adds its own cost of replacing a file, which the shim does not control).
set -euo pipefail
B=$(cd "${1:-build}" && pwd); PY=${2:-/usr/bin/python3}
lib=$B/libmemshim.so
dir=$(mktemp -d "$( [ -d /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}" )/memshim-start.XXXXXX")
trap 'rm -rf "$dir"' EXIT
ir() { # ir PRELOAD CMD...: instructions of the whole process
	local pre=$1; shift
	env ${pre:+LD_PRELOAD=$pre} MEMSHIM_OUTPUT="$dir/m.json" valgrind --tool=callgrind \
		--callgrind-out-file="$dir/cg.out" "$@" 2>&1 >/dev/null | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
row() { # LABEL CMD...
	local label=$1; shift
	if command -v valgrind >/dev/null; then
		local bare shim; bare=$(ir "" "$@"); shim=$(ir "$lib" "$@")
		awk -v l="$label" -v b="$bare" -v s="$shim" \
			'BEGIN {printf "%-22s instructions: bare %d, memshim %d (+%d, %.2fx)\n", l, b, s, s - b, s / b}'
	fi
	printf '%-22s ' "$label"
	"$B/bench/start" "$lib" "$ROUNDS" "$dir" -- "$@"
}
echo "== fixed cost per process, no configuration (metrics file in ${dir%/*})"
ROUNDS=${START_ROUNDS_TRUE:-400} row "/bin/true" /bin/true
ROUNDS=${START_ROUNDS_PY:-100} row "python3 -c pass" "$PY" -c pass
