#!/usr/bin/env bash
# tools/hooks_lint.py on copies of shim/: the tree as it is passes; a second setter of a hook (a
# store, an atomic store, a second call of a setter function), a hook without its setter, and a
# pointer set from another file without a row in hooks.def each fail it.
. "$(dirname "$0")/lib.sh"
tool=$PWD/tools/hooks_lint.py

# expect WANT NAME [FILE TEXT]...: a copy of shim/ with TEXT appended to each FILE (shim/-relative)
expect() {
	local want=$1 name=$2 got=0 t=$tmp/$pass.$fail
	shift 2
	cp -r shim "$t"
	while [ $# -ge 2 ]; do
		printf '%b\n' "$2" >> "$t/$1"
		shift 2
	done
	python3 "$tool" "$t" >"$tmp/out" 2>&1 || got=$?
	tally "$name" "$want" "$got"
	rm -rf "$t"
}

expect 0 "shim/ as it is"
expect 0 "a comparison and a comment are no setters" \
	output/report.c 'static int f(void) { return ms_stage_observer == 0; } /* ms_stage_observer = x; */'
expect 1 "a second store, in output/" \
	output/report.c 'static void f(void) { ms_stage_observer = 0; }'
expect 1 "a second atomic store, in the setter's own file" \
	native/arm.c 'static void f(void) { __atomic_store_n(&ms_on_dlopen, 0, __ATOMIC_RELEASE); }'
expect 1 "a second call of a setter function" \
	output/live.c 'static void f(void) { ms_signals_cover(0); }'
expect 1 "a row whose hook is never set" \
	hooks.def 'MS_UPWARD_HOOK(ms_timeline_set_clock, core/timeline.c, output/live.c, "never")'
expect 1 "a row naming a file that does not define it" \
	hooks.def 'MS_UPWARD_HOOK(ms_cfg_hook, core/config.c, lifecycle.c, "nowhere")'
expect 1 "a new pointer set from above without a row" \
	core/stages.h 'extern void (*ms_new_hook)(void);' \
	core/stages.c 'void (*ms_new_hook)(void);' \
	lifecycle.c 'static void g(void) {}\nstatic void f(void) { ms_new_hook = g; }'
verdict "hooks lint"
