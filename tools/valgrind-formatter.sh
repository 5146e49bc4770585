#!/bin/sh
# Runs memshim-format under valgrind memcheck on the golden inputs in every mode; any error or
# definite leak fails.  The runs go as many at once as there are CPUs.
set -eu
fmt=${1:-build/memshim-format}
in=tests/formatter/golden/in
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
n=0
for f in "$in"/*.json; do
	echo "$f"; n=$((n + 1))
done > "$tmp/runs"
cat >> "$tmp/runs" <<RUNS
--calls $in/calls.json
--merge $in/rank0.json $in/rank1.json $in/rank2.json
--diff $in/old.json $in/new.json
--diff $in/old.json $in/new.json --threshold 10MB
--json-dir $tmp/results $in/seed.json
--sites $in/sites.json $in/sites-rank0.json $in/sites-rank1.json $in/seed.json $in/timeout.json
--sites --auto-merge --top 2 --depth 1 $in/sites-rank0.json $in/sites-rank1.json
--sites $in/odd/sites-odd.json
--sites --native $in/sites-lines.json
--pprof $tmp/lines.pb.gz $in/sites-lines.json
--flame $tmp/flame.svg $in/sites.json
--flame $tmp/flame.png --gpu $in/sites.json
--flame $tmp/odd.svg $in/odd/sites-odd.json
RUNS
# One run per line of arguments above.  The formatter's own exit codes (1 regression, 2 bad input)
# are fine; 99 is valgrind's.
export VG_FMT="$fmt" VG_SUPP="$(dirname "$0")/valgrind-fontconfig.supp" VG_TMP="$tmp"
# shellcheck disable=SC2016
xargs -P "$(nproc 2>/dev/null || echo 2)" -L 1 sh -c '
	err=$(mktemp -p "$VG_TMP")
	rc=0
	valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
		--suppressions="$VG_SUPP" --show-leak-kinds=definite "$VG_FMT" "$@" >/dev/null 2>"$err" || rc=$?
	if [ "$rc" -eq 99 ]; then cat "$err" >&2; echo "valgrind: errors in: memshim-format $*" >&2; exit 1; fi' _ \
	< "$tmp/runs"
echo "valgrind memcheck: memshim-format clean on $n inputs in every mode"
