#!/usr/bin/env bash
# tests/gpu/run.sh: on a machine with an NVIDIA GPU and PyTorch.  Builds libmemshim.so from this
# working tree, runs tests/gpu/torch/stages.py under it in PyTorch's four allocator modes and
# compares every stage with torch.cuda.memory_reserved()/max_memory_reserved() (memory_allocated
# for the cudaMallocAsync backend); then runs tests/gpu/torch/footprint_oom.py: the GPU footprint
# memshim read (NVML) against nvidia-smi --query-compute-apps=pid,used_memory, a real out-of-memory
# (more than the free memory, caught) whose report must be recorded and printed first by
# memshim-format, and a stage boundary's cost with the footprint's reading.
# Exit status: 0 all matched, 1 a mismatch, 77 no GPU/PyTorch.
# Environment: PYTHON (default python3), BUILD (default <repo>/build), MEMSHIM_GPU_TOLERANCE (bytes),
# MEMSHIM_LIB (a libmemshim.so built elsewhere: nothing is built; a GPU machine may lack the headers),
# MEMSHIM_GPU_KEEP (a directory: each mode's metrics file and PyTorch's numbers are copied there),
# MEMSHIM_FORMAT (a memshim-format binary; built here unless MEMSHIM_LIB is set, else the dump is
# not checked), MEMSHIM_GPU_FOOTPRINT_TOLERANCE (bytes).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$repo/build}
py=${PYTHON:-python3}

if ! "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	echo "tests/gpu/run.sh: no CUDA device or no PyTorch here; nothing to do" >&2
	exit 77
fi
if [ -n "${MEMSHIM_LIB:-}" ]; then
	lib=$(readlink -f "$MEMSHIM_LIB")
else
	make -C "$repo" --no-print-directory BUILD="$build" "$build/libmemshim.so" >/dev/null
	lib=$(cd "$build" && pwd)/libmemshim.so
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$py" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name(0))'

status=0
for mode in default nocache expandable async; do
	unset PYTORCH_NO_CUDA_MEMORY_CACHING PYTORCH_CUDA_ALLOC_CONF
	case $mode in
	nocache) export PYTORCH_NO_CUDA_MEMORY_CACHING=1 ;;
	expandable) export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True ;;
	async) export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync ;;
	esac
	if ! LD_PRELOAD="$lib" MEMSHIM_OUTPUT="$tmp/$mode.json" "$py" "$repo/tests/gpu/torch/stages.py" \
		"$tmp/$mode.torch.json" 2>"$tmp/$mode.err"; then
		echo "== $mode: the workload failed under the shim"; cat "$tmp/$mode.err"; status=1; continue
	fi
	if [ -s "$tmp/$mode.err" ]; then
		echo "== $mode: stderr:"; cat "$tmp/$mode.err"
	fi
	"$py" "$repo/tests/gpu/torch/compare.py" "$mode" "$tmp/$mode.json" "$tmp/$mode.torch.json" || status=1
done
unset PYTORCH_NO_CUDA_MEMORY_CACHING PYTORCH_CUDA_ALLOC_CONF

# The footprint against nvidia-smi, and a real out of memory (the default caching allocator).
fmt=${MEMSHIM_FORMAT:-}
if [ -z "$fmt" ] && [ -z "${MEMSHIM_LIB:-}" ] &&
	make -C "$repo" --no-print-directory BUILD="$build" "$build/memshim-format" >/dev/null 2>&1; then
	fmt=$(cd "$build" && pwd)/memshim-format
fi
if ! command -v nvidia-smi >/dev/null 2>&1; then
	echo "== footprint: no nvidia-smi here; the footprint and out-of-memory checks are skipped"
elif ! LD_PRELOAD="$lib" MEMSHIM_OUTPUT="$tmp/footprint.json" "$py" "$repo/tests/gpu/torch/footprint_oom.py" \
	"$tmp/footprint.torch.json" 2>"$tmp/footprint.err"; then
	echo "== footprint: the workload failed under the shim"; cat "$tmp/footprint.err"; status=1
else
	dump=()
	if [ -n "$fmt" ] && "$fmt" "$tmp/footprint.json" >"$tmp/footprint.dump.txt"; then
		dump=("$tmp/footprint.dump.txt")
		head -n 6 "$tmp/footprint.dump.txt"; grep '^GPU [0-9]* footprint' "$tmp/footprint.dump.txt" || true
	else
		echo "== footprint: no memshim-format (set MEMSHIM_FORMAT); the dump is not checked"
	fi
	"$py" "$repo/tests/gpu/torch/check_footprint.py" footprint "$tmp/footprint.json" "$tmp/footprint.torch.json" \
		${dump[@]+"${dump[@]}"} || status=1
fi
if [ -n "${MEMSHIM_GPU_KEEP:-}" ]; then
	mkdir -p "$MEMSHIM_GPU_KEEP" && cp "$tmp"/*.json "$MEMSHIM_GPU_KEEP"/ 2>/dev/null || true
fi
exit $status
