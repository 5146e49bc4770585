#!/usr/bin/env bash
# On a machine with an NVIDIA GPU (not part of make check): the wheel from `make wheel` installed
# offline into a fresh venv there, then `pytest --memshim` on GPU budgets with the real driver
# (ctypes on libcuda.so.1: no torch needed).  PYTEST_DIR: pytest and its dependencies, made with
# `pip install --target DIR pytest` (the machine may reach no index).  Results under $OUT (or
# ./device-out): the pytest output, the metrics files and the formatter's dump.
# Prepare here:  make wheel && .venv-tools/bin/pip install --target build/device/pytest \
#                    pytest==9.0.3 exceptiongroup tomli
# then run it there with `dist` and `build/device` carried (both ignored paths).
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/device-out}
mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1
wheel=$(ls dist/memshim-*-py3-none-manylinux_*.whl | tail -1)
pytest_dir=${PYTEST_DIR:-$PWD/build/device/pytest}
echo "== machine"
uname -m; ldd --version | head -1; python3 --version; nvidia-smi -L || true
work=$(mktemp -d)
python3 -m venv "$work/v" || { echo "no venv module"; exit 2; }
PIP_NO_INDEX=1 PIP_CONFIG_FILE=/dev/null "$work/v/bin/python" -m pip install -q --no-index "$wheel" || exit 2
site=$("$work/v/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$pytest_dir" > "$site/zz-pytest.pth"
cat > "$work/test_gpu.py" <<'EOF'
import ctypes
import pytest

cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
ctx = ctypes.c_void_p()
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0 and cu.cuCtxSetCurrent(ctx) == 0


def device_alloc(size):
    p = ctypes.c_uint64()
    assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(size)) == 0
    return p


@pytest.mark.memshim_limit(gpu="256MB")
def test_gpu_small():
    cu.cuMemFree_v2(device_alloc(64 << 20))


@pytest.mark.memshim_limit(gpu="256MB")
def test_gpu_big():
    p, q = device_alloc(384 << 20), device_alloc(128 << 20)
    cu.cuMemFree_v2(p)
    cu.cuMemFree_v2(q)


@pytest.mark.memshim_limit(cpu="20MB")
def test_cpu_small():
    b = bytearray(4 << 20)
EOF
echo "== pytest --memshim (want: 1 failed, 2 passed; test_gpu_big over on device 0)"
(cd "$work" && MEMSHIM_OUTPUT="$out/m.json" "$work/v/bin/python" -m pytest -p no:cacheprovider --memshim test_gpu.py)
echo "pytest exit status: $?"
echo "== memshim-format"
"$work/v/bin/memshim-format" "$out"/m.json* | tail -40
rm -rf "$work"
