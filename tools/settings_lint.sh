#!/bin/sh
# The one settings table (shim/core/config.c): no other object of the shim reads the environment.
# From what the linker knows (nm: an undefined getenv, secure_getenv or environ in any object but
# core/config.o), and from the sources (a getenv call a build left out).  Usage: settings_lint.sh
# [BUILD [SRC]] (defaults: build, shim).
set -eu
build=${1:-build} src=${2:-shim}
bad=0
for obj in $(find "$build/shim" -name '*.o' | sort); do
	case $obj in */shim/core/config.o) continue ;; esac
	syms=$(nm -u "$obj" | awk '{print $2}' | grep -E '^(getenv|secure_getenv|__libc_secure_getenv|environ|__environ|_environ)(@.*)?$' || true)
	for s in $syms; do
		echo "settings: ${obj#"$build"/} reads the environment ($s): add a row to the table in shim/core/config.c and read it with ms_cfg or ms_setting_text" >&2
		bad=1
	done
done
if grep -rnE '\b(secure_)?getenv[[:space:]]*\(|\benviron\b' "$src" --include='*.c' --include='*.h' |
	grep -v "^$src/core/config\.c:" | grep -vE '^[^:]*:[0-9]+:[[:space:]]*(/?\*|//)' >&2; then
	echo "settings: the lines above read the environment outside shim/core/config.c" >&2
	bad=1
fi
[ "$bad" -eq 0 ] && echo "settings: the environment is read only by shim/core/config.c"
exit "$bad"
