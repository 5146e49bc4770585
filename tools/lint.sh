#!/bin/sh
# The shim's include rule, then cppcheck and clang-tidy over shim/ and formatter/: any finding fails.
set -eu
cd "$(dirname "$0")/.."

# A file includes headers by folder, from its own layer or a lower one (doc/architecture.md);
# cuda/, python/ and native/ share a layer and never include each other.  sites/ sits above them;
# its hot-path header sites/hot.h (core/ only) is the one header wrappers below may include.
layer() {
	case $1 in
	core) echo 0 ;; intercept) echo 1 ;; cuda | python | native) echo 2 ;; sites) echo 3 ;; output) echo 4 ;; *) echo 5 ;;
	esac
}
bad=0
for f in shim/*.[ch] shim/*/*.[ch]; do
	dir=$(dirname "${f#shim/}")
	[ "$dir" = . ] && dir=top
	for inc in $(sed -n '/^#include "sites\/hot\.h"$/d; s/^#include "\([a-z]*\)\/[a-z_]*\.[a-z]*"$/\1/p' "$f"); do
		li=$(layer "$inc") lf=$(layer "$dir")
		if [ "$li" -gt "$lf" ] || { [ "$li" -eq 2 ] && [ "$lf" -eq 2 ] && [ "$inc" != "$dir" ]; }; then
			echo "lint: $f includes from $inc/, a layer it may not use" >&2
			bad=1
		fi
	done
done
[ "$bad" -eq 0 ] || exit 1

cflags="-std=gnu11 -D_GNU_SOURCE -Ishim -Iformatter -I/usr/local/cuda/include $(pkg-config --cflags jansson cairo 2>/dev/null)"
cppcheck -q --enable=warning,performance,portability --std=c11 -D_GNU_SOURCE -D__x86_64__ \
	--error-exitcode=1 --inline-suppr -Ishim -Iformatter --suppress=missingIncludeSystem shim formatter
# shellcheck disable=SC2086
clang-tidy --quiet shim/*.c shim/*/*.c formatter/*.c formatter/plot/*.c -- $cflags 2>&1 | grep -E "(error|warning):" && {
	echo "lint: clang-tidy findings above" >&2
	exit 1
}
echo "lint: include layers, cppcheck and clang-tidy clean on shim/ and formatter/"
