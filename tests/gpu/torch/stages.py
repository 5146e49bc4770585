"""PyTorch workload for tests/gpu/run.sh: explicit memshim stages, and PyTorch's own view of each
stage (memory_reserved / max_memory_reserved, memory_allocated / max_memory_allocated) written to
the JSON file named by argv[1].  Runs without the shim too (the stage calls then do nothing)."""
import ctypes
import json
import sys

import torch

MiB = 1 << 20

try:
    _lib = ctypes.CDLL(None)
    _begin, _end = _lib.memshim_stage_begin, _lib.memshim_stage_end
    _begin.argtypes = _end.argtypes = [ctypes.c_char_p]
except (AttributeError, OSError):
    _begin = _end = None

seen = {}


def nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


class stage:
    """memshim stage NAME plus PyTorch's numbers at its begin and end, and the tensor bytes the
    workload itself knows it kept (DELTA) and held at its highest (RISE): the oracle when PyTorch
    keeps no statistics (PYTORCH_NO_CUDA_MEMORY_CACHING=1)."""

    def __init__(self, name, delta=None, rise=None):
        self.name, self.delta, self.rise = name, delta, rise

    def __enter__(self):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        self.reserved_begin = torch.cuda.memory_reserved()
        self.allocated_begin = torch.cuda.memory_allocated()
        if _begin:
            _begin(self.name.encode())

    def __exit__(self, *exc):
        torch.cuda.synchronize()
        if _end:
            _end(self.name.encode())
        seen[self.name] = {
            "reserved_begin": self.reserved_begin,
            "reserved_end": torch.cuda.memory_reserved(),
            "reserved_peak": torch.cuda.max_memory_reserved(),
            "allocated_begin": self.allocated_begin,
            "allocated_end": torch.cuda.memory_allocated(),
            "allocated_peak": torch.cuda.max_memory_allocated(),
            "tensors_delta": self.delta() if callable(self.delta) else self.delta,
            "tensors_rise": self.rise() if callable(self.rise) else self.rise,
        }


def main():
    out = sys.argv[1]
    torch.cuda.init()
    dev = torch.device("cuda", 0)
    with stage("warmup"):
        # the first matrix product makes cuBLAS's handles and workspaces (32 MiB each on Hopper),
        # device memory the driver hands out beside PyTorch's allocator: memshim counts it here
        w = torch.ones(1024, device=dev)
        x = torch.ones(2048, 2048, device=dev)
        y = torch.relu(x @ x) + 1.0
        del x, y
    held = []
    with stage("alloc", lambda: nbytes(held), lambda: nbytes(held)):
        keep = [torch.empty(n * MiB // 4, dtype=torch.float32, device=dev) for n in (1, 3, 7, 10, 100)]
        small = [torch.empty(1000 + i, device=dev) for i in range(50)]
        held = keep + small
    square = 2048 * 2048 * 4
    with stage("compute", 0, 5 * square):  # a, b, c, relu(c), relu(c) + 1
        a = torch.randn(2048, 2048, device=dev)
        b = torch.randn(2048, 2048, device=dev)
        for _ in range(3):
            c = a @ b
            d = torch.relu(c) + 1.0
            del c, d
        del a, b
    with stage("temporary", 0, 300 * MiB):
        t = torch.empty(300 * MiB // 4, device=dev)
        t.fill_(1.0)
        del t
    kept = nbytes(held)
    with stage("free", -kept, 0):
        del keep, small, held
    with stage("empty_cache"):
        torch.cuda.empty_cache()
    del w
    with open(out, "w") as f:
        json.dump(seen, f, indent=1)


if __name__ == "__main__":
    main()
