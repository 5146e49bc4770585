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


class stage:
    """memshim stage NAME plus PyTorch's numbers at its begin and end."""

    def __init__(self, name):
        self.name = name

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
        }


def main():
    out = sys.argv[1]
    torch.cuda.init()
    dev = torch.device("cuda", 0)
    with stage("warmup"):
        w = torch.ones(1024, device=dev)
    with stage("alloc"):
        keep = [torch.empty(n * MiB // 4, dtype=torch.float32, device=dev) for n in (1, 3, 7, 10, 100)]
        small = [torch.empty(1000 + i, device=dev) for i in range(50)]
    with stage("compute"):
        a = torch.randn(2048, 2048, device=dev)
        b = torch.randn(2048, 2048, device=dev)
        for _ in range(3):
            c = a @ b
            d = torch.relu(c) + 1.0
            del c, d
        del a, b
    with stage("temporary"):
        t = torch.empty(300 * MiB // 4, device=dev)
        t.fill_(1.0)
        del t
    with stage("free"):
        del keep, small
    with stage("empty_cache"):
        torch.cuda.empty_cache()
    del w
    with open(out, "w") as f:
        json.dump(seen, f, indent=1)


if __name__ == "__main__":
    main()
