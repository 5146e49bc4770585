#!/usr/bin/env bash
# tools/settings_lint.sh on throwaway trees: the environment read in core/config.c only passes; a
# getenv, a secure_getenv or environ anywhere else fails it, in an object or in a source, and so
# does a setenv, putenv or unsetenv anywhere (config.c included).
. "$(dirname "$0")/lib.sh"
tool=$PWD/tools/settings_lint.sh

# tree NAME FILE=SOURCE...: each shim/FOLDER/F.c compiled into build/shim/FOLDER/F.o
tree() {
	local t=$tmp/$1; shift
	for spec in "$@"; do
		local file=${spec%%=*} body=${spec#*=}
		mkdir -p "$t/$(dirname "$file")" "$t/build/$(dirname "$file")"
		printf '%b\n' "$body" > "$t/$file"
		(cd "$t" && cc -std=gnu11 -D_GNU_SOURCE -c "$file" -o "build/${file%.c}.o") || exit 2
	done
	echo "$t"
}

expect() {
	local want=$1 name=$2 dir=$3 got=0
	(cd "$dir" && "$tool" build shim >"$tmp/out" 2>&1) || got=$?
	tally "$name" "$want" "$got"
}

config='shim/core/config.c=#include <stdlib.h>\nconst char *ms_env(const char *n) { return secure_getenv(n); }'
expect 0 "the table reads it" "$(tree clean "$config" 'shim/output/a.c=const char *ms_env(const char *n);\nconst char *f(void) { return ms_env("TMPDIR"); }')"
expect 1 "getenv in output/" "$(tree get "$config" 'shim/output/a.c=#include <stdlib.h>\nconst char *f(void) { return getenv("TMPDIR"); }')"
expect 1 "secure_getenv at the top" "$(tree sec "$config" 'shim/top.c=#include <stdlib.h>\nconst char *f(void) { return secure_getenv("X"); }')"
expect 1 "environ walked in core/" "$(tree env "$config" 'shim/core/p.c=extern char **environ;\nchar *f(void) { return environ[0]; }')"
expect 1 "setenv in core/" "$(tree set "$config" 'shim/core/p.c=#include <stdlib.h>\nvoid f(void) { setenv("MEMSHIM_ROOT_PID", "1", 1); }')"
expect 1 "putenv in the table itself" "$(tree put 'shim/core/config.c=#include <stdlib.h>\nvoid f(char *v) { putenv(v); }')"
expect 1 "unsetenv in python/" "$(tree unset "$config" 'shim/python/t.c=#include <stdlib.h>\nvoid f(void) { unsetenv("X"); }')"
src=$(tree src "$config")
printf '#include <stdlib.h>\nstatic const char *f(void) { return getenv("X"); }\n' > "$src/shim/core/unbuilt.c"
expect 1 "a getenv in a source no object has" "$src"
verdict "settings lint"
