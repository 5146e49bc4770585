#!/usr/bin/env bash
# bench/trainer.sh: the real Hugging Face Trainer (examples/hf_trainer.py) three ways, alternating
# BENCH_PAIRS rounds: bare (skip_memory_metrics=True), HF's own tracker (False), memshim (True, the
# library preloaded, default stage names).  Prints a markdown table: median wall and CPU time, their
# ratios to bare, and each tool's per-stage numbers from the last round.  Run by bench/run.sh.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=${BUILD:-$here/../build}
LIB=$(cd "$B" && pwd)/libmemshim.so
PAIRS=${BENCH_PAIRS:-5}
VENVPY=${VENVPY:-$here/../.venv/bin/python}
SCRIPT=$here/../examples/hf_trainer.py
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# run TOOL: one timed run; "wall user sys" appended to $tmp/time.TOOL, metrics left in $tmp.
run() {
	local tool=$1 skip=--skip-hf-memory preload=
	[ "$tool" = hf ] && skip=
	[ "$tool" = memshim ] && preload=$LIB
	rm -f "$tmp/ms.json" "$tmp/hf.json"
	HF_HUB_OFFLINE=1 /usr/bin/time -f "%e %U %S" -a -o "$tmp/time.$tool" \
		env ${preload:+LD_PRELOAD=$preload} MEMSHIM_OUTPUT="$tmp/ms.json" "$VENVPY" "$SCRIPT" $skip --hf-metrics "$tmp/hf.json" --output-dir "$tmp/out" >/dev/null 2>&1 ||
		echo "bench: trainer under $tool failed" >&2
	cp "$tmp/hf.json" "$tmp/last-hf.$tool" 2>/dev/null
	cp "$tmp/ms.json" "$tmp/last-ms.$tool" 2>/dev/null
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }
wall() { awk '{print $1}' "$tmp/time.$1" | median; }
cpu() { awk '{print $2 + $3}' "$tmp/time.$1" | median; }

# The stage numbers a tool reported: "train alloc/peaked | eval alloc/peaked | test alloc/peaked".
stages() {
	python3 - "$1" "$tmp/last-hf.$1" "$tmp/last-ms.$1" <<'PY'
import json, sys
tool, hf, ms = sys.argv[1:]
try:
    m = json.load(open(ms))["metrics"] if tool == "memshim" else {}
    if tool == "hf":
        for split in json.load(open(hf))["metrics"].values():
            m.update(split)
except OSError:
    m = {}
cells = []
for s in ("train", "eval", "test"):
    a, p = m.get(s + "_mem_cpu_alloc_delta"), m.get(s + "_mem_cpu_peaked_delta")
    cells.append("-" if a is None else "%d / %d MB" % (a >> 20, p >> 20))
print(" | ".join(cells))
PY
}

for ((i = 0; i < PAIRS; i++)); do
	for tool in bare hf memshim; do run $tool; done
done
bw=$(wall bare) bc=$(cpu bare)
echo "The real Hugging Face Trainer (examples/hf_trainer.py: GPT-2 4 x 256 from a config, 2 epochs"
echo "with evaluation, evaluate, predict; torch $("$VENVPY" -c 'import torch; print(torch.__version__)'),"
echo "transformers $("$VENVPY" -c 'import transformers; print(transformers.__version__)'); $PAIRS alternating rounds, median):"
echo
echo "| Trainer run | wall s | wall vs bare | CPU s | CPU vs bare | train alloc / peaked | eval alloc / peaked | test alloc / peaked |"
echo "|---|---|---|---|---|---|---|---|"
for tool in bare hf memshim; do
	case $tool in
	bare) label="bare (skip_memory_metrics=True)" ;;
	hf) label="HF's tracker (skip_memory_metrics=False)" ;;
	memshim) label="memshim (skip_memory_metrics=True)" ;;
	esac
	w=$(wall $tool) c=$(cpu $tool)
	printf '| %s | %.2f | %s | %.2f | %s | %s |\n' "$label" "$w" \
		"$(awk -v a="$w" -v b="$bw" 'BEGIN {printf "%.3fx", a / b}')" "$c" \
		"$(awk -v a="$c" -v b="$bc" 'BEGIN {printf "%.3fx", a / b}')" "$(stages $tool)"
done
