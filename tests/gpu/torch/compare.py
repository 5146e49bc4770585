"""compare.py MODE METRICS.json TORCH.json: per stage, memshim's device memory next to PyTorch's.

memshim counts what the driver handed out; PyTorch's reserved memory is the same thing for the
caching allocator (default, expandable_segments).  Without caching (PYTORCH_NO_CUDA_MEMORY_CACHING=1)
and with backend:cudaMallocAsync, every tensor is its own driver allocation, which PyTorch reports as
allocated memory; the pool's reserved memory is in the file's gpu_pools when stages sample it.
Compared per stage: the change (alloc_delta) and the rise to the stage's peak (peak - begin), both
independent of what was live before.  The "warmup" stage makes cuBLAS's handles and workspaces,
which the driver hands out beside PyTorch's allocator: memshim must count at least PyTorch's
memory there, and the rest is printed as the libraries' own.
Exit status 1 when any difference exceeds the tolerance (MEMSHIM_GPU_TOLERANCE bytes, 2 MiB)."""
import json
import os
import sys

MiB = 1 << 20


def main():
    mode, metrics_path, torch_path = sys.argv[1:4]
    m = json.load(open(metrics_path))
    t = json.load(open(torch_path))
    tol = int(os.environ.get("MEMSHIM_GPU_TOLERANCE", 2 * MiB))
    kind = {"async": "allocated", "nocache": "tensor bytes"}.get(mode, "reserved")
    stages = {s["name"]: s for s in m.get("stages", [])}
    if not m.get("gpu_used"):
        print(f"{mode}: metrics file says the GPU was not used")
        return 1
    bad = 0
    print(f"== {mode}: memshim device memory vs torch {kind} (MiB; tolerance {tol / MiB:.1f})")
    print(f"{'stage':<12} {'shim_delta':>11} {'torch_delta':>11} {'shim_rise':>10} {'torch_rise':>10}  verdict")
    for name, tv in t.items():
        s = stages.get(name)
        if not s or "gpu" not in s:
            print(f"{name:<12} missing in the metrics file")
            bad += 1
            continue
        g = s["gpu"]
        shim_delta, shim_rise = g["alloc_delta"], g["peak"] - g["begin"]
        if mode == "nocache":  # PyTorch keeps no statistics then: the tensors' own bytes
            if tv.get("tensors_delta") is None:
                print(f"{name:<12} {shim_delta / MiB:11.2f} {'-':>11} {shim_rise / MiB:10.2f} {'-':>10}  (no oracle)")
                continue
            torch_delta, torch_rise = tv["tensors_delta"], tv["tensors_rise"]
        else:
            torch_delta = tv[f"{kind}_end"] - tv[f"{kind}_begin"]
            torch_rise = tv[f"{kind}_peak"] - tv[f"{kind}_begin"]
        if name == "warmup":
            ok = shim_delta >= torch_delta - tol and shim_rise >= torch_rise - tol
            verdict = f"ok, libraries' own {(shim_delta - torch_delta) / MiB:.2f} MiB" if ok else "MISMATCH"
        else:
            ok = abs(shim_delta - torch_delta) <= tol and abs(shim_rise - torch_rise) <= tol
            verdict = "ok" if ok else "MISMATCH"
        bad += not ok
        print(f"{name:<12} {shim_delta / MiB:11.2f} {torch_delta / MiB:11.2f} {shim_rise / MiB:10.2f} "
              f"{torch_rise / MiB:10.2f}  {verdict}")
    for p in m.get("gpu_pools", []):
        for row in p.get("stages", []):
            tv = t.get(row["stage"])
            if tv:
                print(f"   pool {p['pool']} (device {p['device']}) {row['stage']}: reserved "
                      f"{row['reserved_begin'] / MiB:.2f} -> {row['reserved_end'] / MiB:.2f} MiB, "
                      f"torch reserved {tv['reserved_begin'] / MiB:.2f} -> {tv['reserved_end'] / MiB:.2f} MiB")
    failed = m.get("gpu_events", [])
    if failed:
        print(f"   {len(failed)} failed GPU allocation(s) recorded")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
