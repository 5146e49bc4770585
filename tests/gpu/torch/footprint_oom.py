"""PyTorch workload for tests/gpu/run.sh: the GPU footprint and a real out-of-memory.  Writes to the
JSON file named by argv[1]: nvidia-smi's used_memory for this pid while 1 GiB is held inside stage
"hold", the bytes asked in stage "train" (more than the device has free; the OutOfMemoryError is
caught), and the least time of a stage boundary before and after CUDA was used (the footprint's
reading is the difference).  Stage "after" follows: the program went on."""
import ctypes
import json
import os
import subprocess
import sys
import time

import torch

MiB = 1 << 20
_lib = ctypes.CDLL(None)
_begin, _end = _lib.memshim_stage_begin, _lib.memshim_stage_end
_begin.argtypes = _end.argtypes = [ctypes.c_char_p]


def boundary_ns(name, calls=60):
    best = float("inf")
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        _begin(name.encode())
        _end(name.encode())
        best = min(best, time.perf_counter_ns() - t0)
    return best / 2


def smi_used_mib(pid):
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, env=env, check=True).stdout
    for line in out.splitlines():
        p, used = (f.strip() for f in line.split(","))
        if p == str(pid):
            return int(used)
    return None


def main():
    res = {"cold_ns": boundary_ns("cold")}
    x = torch.empty(1024 * MiB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    res["hot_ns"] = boundary_ns("hot")
    _begin(b"hold")
    res["smi_used_mib"] = smi_used_mib(os.getpid())
    _end(b"hold")
    del x
    torch.cuda.empty_cache()
    _begin(b"train")
    free, total = torch.cuda.mem_get_info()
    res["asked"] = free + 1024 * MiB
    try:
        torch.empty(res["asked"], dtype=torch.uint8, device="cuda")
        res["caught"] = False
    except torch.cuda.OutOfMemoryError:
        res["caught"] = True
    _end(b"train")
    _begin(b"after")
    y = torch.empty(16 * MiB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    _end(b"after")
    del y
    json.dump(res, open(sys.argv[1], "w"))


main()
