#!/bin/sh
# The layer rules of the shim and the formatter (tools/layers.py), the one settings table
# (tools/settings_lint.sh), one setter per hook (tools/hooks_lint.py), the format (.clang-format),
# then cppcheck and clang-tidy over shim/ and formatter/: any finding fails.
set -eu
cd "$(dirname "$0")/.."

# The layer rule on what the compiler and linker know: includes from the .d files, symbols from nm
# on the objects, no call cycle across folders or inside one; exceptions in tools/layers.allow, each
# with a reason.
python3 tools/layers.py "${BUILD:-build}"
# The one settings table: only shim/core/config.c reads the environment.
tools/settings_lint.sh "${BUILD:-build}" shim
# Every upward hook listed once (shim/hooks.def), each with exactly one setter.
python3 tools/hooks_lint.py shim

# The format (.clang-format): every C file of shim/ and formatter/, each folder and the top.  A
# region clang-format would make worse (a hand-aligned table, an assembly listing) is marked
# /* clang-format off */ ... /* clang-format on */.
formatted="shim/*.[ch] shim/*/*.[ch] formatter/*.[ch] formatter/*/*.[ch]"
# shellcheck disable=SC2086
clang-format --dry-run --Werror $formatted || {
	echo "lint: clang-format would change the lines above (clang-format -i FILE)" >&2
	exit 1
}

cflags="-std=gnu11 -D_GNU_SOURCE -Ishim -Iformatter -I/usr/local/cuda/include $(pkg-config --cflags jansson cairo 2>/dev/null)"
cppcheck -q --enable=warning,performance,portability --std=c11 -D_GNU_SOURCE -D__x86_64__ \
	--error-exitcode=1 --inline-suppr -Ishim -Iformatter --suppress=missingIncludeSystem shim formatter
# clang-tidy one file at a time, as many at once as there are CPUs.  A file whose preprocessed text,
# flags, checks and clang-tidy are those of an earlier clean run is not analysed again: its findings
# could only be the same, none.
# LINT_ANALYZE names the folders the static analyzer (clang-analyzer-*, 5 s a file against 0.2 s
# for the other checks) reads too: all by default, none when set empty; `make check` gives it shim/
# alone, the code that runs inside other people's programs (the formatter has ASan, UBSan,
# valgrind and the fuzzers).
cache="${BUILD:-build}/lint-clean"
mkdir -p "$cache"
export LINT_CFLAGS="$cflags" LINT_CACHE="$cache" LINT_ANALYZE="${LINT_ANALYZE-shim formatter}"
# shellcheck disable=SC2016,SC2086
ls shim/*.c shim/*/*.c formatter/*.c formatter/*/*.c | xargs -P "$(nproc 2>/dev/null || echo 2)" -n 1 sh -c '
	checks=-clang-analyzer-*
	for d in $LINT_ANALYZE; do case $1 in "$d"/*) checks= ;; esac; done
	key=$({ clang-tidy --version; cat .clang-tidy; echo "$checks $LINT_CFLAGS"; clang -E $LINT_CFLAGS "$1"; } 2>&1 | sha256sum)
	key=${key%% *}
	[ -e "$LINT_CACHE/$key" ] && exit 0
	clang-tidy --quiet ${checks:+--checks="$checks"} "$1" -- $LINT_CFLAGS > "$LINT_CACHE/$key.out" 2>&1
	grep -E "(error|warning):" "$LINT_CACHE/$key.out" && exit 1
	mv "$LINT_CACHE/$key.out" "$LINT_CACHE/$key"' _ || {
	echo "lint: clang-tidy findings above" >&2
	exit 1
}
echo "lint: layers, settings, hooks, format, cppcheck and clang-tidy clean"
