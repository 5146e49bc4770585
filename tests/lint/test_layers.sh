#!/usr/bin/env bash
# tools/layers.py on throwaway trees of objects: a clean one passes; an upward call, an upward
# include, a sibling call, a cycle across folders (through a listed exception, or between folders of
# no layer), a cycle inside one folder (unless listed) and a stale exception each fail it, in the
# shim's tree and the formatter's.
. "$(dirname "$0")/lib.sh"
tool=$PWD/tools/layers.py

# tree NAME FILE=SOURCE...: compiles each shim/FOLDER/F.c of the tree into build/shim/FOLDER/F.o,
# and each formatter/FOLDER/F.c into build/formatter/plain/FOLDER/F.o
tree() {
	local t=$tmp/$1; shift
	mkdir -p "$t"
	for spec in "$@"; do
		local file=${spec%%=*} src=${spec#*=}
		local obj=build/${file%.c}.o
		[ "${file#formatter/}" != "$file" ] && obj=build/formatter/plain/${file#formatter/} && obj=${obj%.c}.o
		mkdir -p "$t/$(dirname "$file")" "$t/$(dirname "$obj")"
		printf '%b\n' "$src" > "$t/$file"
		case $file in *.c) (cd "$t" && cc -std=gnu11 -MMD -MP -Ishim -Iformatter -c "$file" -o "$obj" -MF "${obj%.o}.d") || exit 2;; esac
	done
	echo "$t"
}

# expect STATUS NAME DIR [ALLOW]: layers.py's exit status in DIR
expect() {
	local want=$1 name=$2 dir=$3 allow=${4:-$tmp/none.allow}
	local got=0
	(cd "$dir" && python3 "$tool" build "$allow" >"$tmp/out" 2>&1) || got=$?
	tally "$name" "$want" "$got"
}

: > "$tmp/none.allow"
low='shim/core/low.c=int ms_low(void) { return 1; }'
clean=$(tree clean "$low" 'shim/output/high.c=int ms_low(void);\nint ms_high(void) { return ms_low(); }')
expect 0 "a downward call" "$clean"
up=$(tree up 'shim/core/low.c=int ms_high(void);\nint ms_low(void) { return ms_high(); }' 'shim/output/high.c=int ms_high(void) { return 2; }')
expect 1 "an upward call" "$up"
inc=$(tree inc 'shim/output/high.h=int ms_high(void);' 'shim/core/low.c=#include "output/high.h"\nint ms_low(void) { return 1; }')
expect 1 "an upward include" "$inc"
sib=$(tree sib 'shim/cuda/a.c=int ms_native_thing(void);\nint ms_cuda_thing(void) { return ms_native_thing(); }' 'shim/native/b.c=int ms_native_thing(void) { return 3; }')
expect 1 "a sibling call" "$sib"
printf 'shim/core/low.o ms_high  # seeded\n' > "$tmp/up.allow"
expect 0 "an upward call listed as an exception" "$up" "$tmp/up.allow"
printf 'shim/core/low.o ms_high  # seeded\n' > "$tmp/cyc.allow"
cyc=$(tree cyc 'shim/core/low.c=int ms_high(void);\nint ms_low(void) { return 1; }\nint ms_low_calls_up(void) { return ms_high(); }' 'shim/output/high.c=int ms_low(void);\nint ms_high(void) { return ms_low(); }')
expect 1 "a cycle across folders through a listed exception" "$cyc" "$tmp/cyc.allow"
odd=$(tree odd 'shim/extra/a.c=int ms_b(void);\nint ms_a(void) { return ms_b(); }' 'shim/other/b.c=int ms_a(void);\nint ms_b(void) { return ms_a(); }')
expect 1 "a cycle across folders of no layer" "$odd"
loop=$(tree loop 'shim/core/a.c=int ms_b(void);\nint ms_a(void) { return ms_b(); }' 'shim/core/b.c=int ms_a(void);\nint ms_b(void) { return ms_a(); }')
expect 1 "a cycle inside one folder" "$loop"
printf 'CYCLE shim/core/a.o+shim/core/b.o  # seeded\n' > "$tmp/loop.allow"
expect 0 "a cycle inside one folder listed as an exception" "$loop" "$tmp/loop.allow"
fclean=$(tree fclean 'formatter/base/low.c=int mf_low(void) { return 1; }' 'formatter/modes/high.c=int mf_low(void);\nint mf_high(void) { return mf_low(); }')
expect 0 "the formatter: a downward call" "$fclean"
fup=$(tree fup 'formatter/modes/high.h=int mf_high(void);' 'formatter/model/low.c=#include "modes/high.h"\nint mf_low(void) { return 1; }')
expect 1 "the formatter: an upward include" "$fup"
floop=$(tree floop 'formatter/modes/a.c=int mf_b(void);\nint mf_a(void) { return mf_b(); }' 'formatter/modes/b.c=int mf_a(void);\nint mf_b(void) { return mf_a(); }')
expect 1 "the formatter: a cycle inside one folder" "$floop"
printf 'shim/core/low.o ms_gone  # seeded, never used\n' > "$tmp/stale.allow"
expect 1 "a stale exception" "$clean" "$tmp/stale.allow"
printf 'shim/core/low.o ms_high  # no reason\n' | sed 's/  #.*//' > "$tmp/bad.allow"
expect 1 "an exception without a reason" "$up" "$tmp/bad.allow"
verdict "layers"
