# What the lint tools' tests share (sourced by test_*.sh): the repository as the working directory,
# a throwaway directory $tmp, and the tally of expectations.
set -u
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

# tally NAME WANT GOT: a pass when the tool exited GOT as WANTed, else a failure shown with the
# tool's output ($tmp/out)
tally() {
	if [ "$3" -eq "$2" ]; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1)); echo "FAIL $1: exit $3, wanted $2"; cat "$tmp/out"
	fi
}

# verdict WHAT: the counts, and a failing status when an expectation failed
verdict() {
	echo "$1: $pass passed, $fail failed"
	[ "$fail" -eq 0 ]
}
