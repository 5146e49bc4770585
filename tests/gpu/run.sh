#!/usr/bin/env bash
# tests/gpu/run.sh: on a machine with an NVIDIA GPU and PyTorch.  Builds libmemshim.so from this
# working tree, runs tests/gpu/torch/stages.py under it in PyTorch's four allocator modes and
# compares every stage with torch.cuda.memory_reserved()/max_memory_reserved() (memory_allocated
# for the cudaMallocAsync backend).  Exit status: 0 all matched, 1 a mismatch, 77 no GPU/PyTorch.
# Environment: PYTHON (default python3), BUILD (default <repo>/build), MEMSHIM_GPU_TOLERANCE (bytes),
# MEMSHIM_LIB (a libmemshim.so built elsewhere: nothing is built; a GPU machine may lack the headers),
# MEMSHIM_GPU_KEEP (a directory: each mode's metrics file and PyTorch's numbers are copied there).
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
if [ -n "${MEMSHIM_GPU_KEEP:-}" ]; then
	mkdir -p "$MEMSHIM_GPU_KEEP" && cp "$tmp"/*.json "$MEMSHIM_GPU_KEEP"/ 2>/dev/null || true
fi
exit $status
