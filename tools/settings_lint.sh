#!/bin/sh
# The one settings table (shim/core/config.c): no other object of the shim reads the environment,
# and no object at all changes it (the program would see what the shim added: os.environ, env,
# every child's envp; what exec'd children need goes through lineage records, core/lineage.h).
# From what the linker knows (nm: an undefined getenv, secure_getenv or environ in any object but
# core/config.o; setenv, putenv, unsetenv or clearenv in any), and from the sources (a call a build
# left out).  Usage: settings_lint.sh [BUILD [SRC]] (defaults: build, shim).
set -eu
build=${1:-build} src=${2:-shim}
bad=0
for obj in $(find "$build/shim" -name '*.o' | sort); do
	syms=$(nm -u "$obj" | awk '{print $2}')
	for s in $(printf '%s\n' "$syms" | grep -E '^(setenv|putenv|unsetenv|clearenv)(@.*)?$' || true); do
		echo "settings: ${obj#"$build"/} changes the environment ($s): the program would see it; hand exec'd children what they need through the lineage record (shim/core/lineage.h)" >&2
		bad=1
	done
	case $obj in */shim/core/config.o) continue ;; esac
	for s in $(printf '%s\n' "$syms" | grep -E '^(getenv|secure_getenv|__libc_secure_getenv|environ|__environ|_environ)(@.*)?$' || true); do
		echo "settings: ${obj#"$build"/} reads the environment ($s): add a row to the table in shim/core/config.c and read it with ms_cfg or ms_setting_text" >&2
		bad=1
	done
done
uncommented() {
	grep -vE '^[^:]*:[0-9]+:[[:space:]]*(/?\*|//)'
}
if grep -rnE '\b(secure_)?getenv[[:space:]]*\(|\benviron\b' "$src" --include='*.c' --include='*.h' |
	grep -v "^$src/core/config\.c:" | uncommented >&2; then
	echo "settings: the lines above read the environment outside shim/core/config.c" >&2
	bad=1
fi
if grep -rnE '\b(setenv|putenv|unsetenv|clearenv)[[:space:]]*\(' "$src" --include='*.c' --include='*.h' |
	uncommented >&2; then
	echo "settings: the lines above change the environment, which the program would see" >&2
	bad=1
fi
[ "$bad" -eq 0 ] && echo "settings: the environment is read only by shim/core/config.c, and changed nowhere"
exit "$bad"
