#!/bin/sh
# Runs memshim-format under valgrind memcheck on the golden inputs in every mode; any error or
# definite leak fails.
set -eu
fmt=${1:-build/memshim-format}
in=tests/formatter/golden/in
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
vg() {
	valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
		--suppressions="$(dirname "$0")/valgrind-fontconfig.supp" \
		--show-leak-kinds=definite "$fmt" "$@" >/dev/null 2>"$tmp/err" || {
		rc=$?
		# the formatter's own exit codes (1 regression, 2 bad input) are fine; 99 is valgrind's
		if [ "$rc" -eq 99 ]; then cat "$tmp/err" >&2; echo "valgrind: errors in: memshim-format $*" >&2; exit 1; fi
	}
}
n=0
for f in "$in"/*.json; do
	vg "$f"; n=$((n + 1))
done
vg --calls "$in"/calls.json
vg --merge "$in"/rank0.json "$in"/rank1.json "$in"/rank2.json
vg --diff "$in"/old.json "$in"/new.json
vg --diff "$in"/old.json "$in"/new.json --threshold 10MB
vg --json-dir "$tmp/results" "$in"/seed.json
vg --sites "$in"/sites.json "$in"/sites-rank0.json "$in"/sites-rank1.json "$in"/seed.json "$in"/timeout.json
vg --sites --auto-merge --top 2 --depth 1 "$in"/sites-rank0.json "$in"/sites-rank1.json
vg --sites "$in"/odd/sites-odd.json
vg --flame "$tmp/flame.svg" "$in"/sites.json
vg --flame "$tmp/flame.png" --gpu "$in"/sites.json
vg --flame "$tmp/odd.svg" "$in"/odd/sites-odd.json
echo "valgrind memcheck: memshim-format clean on $n inputs in every mode"
