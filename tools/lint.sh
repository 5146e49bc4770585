#!/bin/sh
# The shim's layer rule (tools/layers.py), the one settings table (tools/settings_lint.sh), then cppcheck and clang-tidy over shim/ and formatter/: any finding fails.
set -eu
cd "$(dirname "$0")/.."

# The layer rule on what the compiler and linker know: includes from the .d files, symbols from nm
# on the objects, no call cycle across folders; exceptions in tools/layers.allow, each with a reason.
python3 tools/layers.py "${BUILD:-build}"
# The one settings table: only shim/core/config.c reads the environment.
tools/settings_lint.sh "${BUILD:-build}" shim

cflags="-std=gnu11 -D_GNU_SOURCE -Ishim -Iformatter -I/usr/local/cuda/include $(pkg-config --cflags jansson cairo 2>/dev/null)"
cppcheck -q --enable=warning,performance,portability --std=c11 -D_GNU_SOURCE -D__x86_64__ \
	--error-exitcode=1 --inline-suppr -Ishim -Iformatter --suppress=missingIncludeSystem shim formatter
# shellcheck disable=SC2086
clang-tidy --quiet shim/*.c shim/*/*.c formatter/*.c formatter/plot/*.c -- $cflags 2>&1 | grep -E "(error|warning):" && {
	echo "lint: clang-tidy findings above" >&2
	exit 1
}
echo "lint: layers, cppcheck and clang-tidy clean on shim/ and formatter/"
