"""Numbers across ranks, through the job's own engine: torch.distributed's all_gather.

    from memshim import ranks
    numbers = {"train_mem_cpu_peaked_delta": 123, "train_runtime": 4.5}
    numbers.update(ranks.gather(numbers))
    # {"train_mem_cpu_peaked_delta_max": ..., "train_mem_cpu_peaked_delta_max_rank": 3,
    #  "train_mem_cpu_peaked_delta_sum": ..., "train_runtime_max": ..., ...}

gather() is a collective: when torch.distributed is initialised with more than one rank, every rank
of the group must call it at the same point (its dict may differ, keys too); every rank gets the
same answer: for each numeric key, the largest value over the ranks that have it (`KEY_max`), the
global rank that had it (`KEY_max_rank`, the lowest on a tie) and the sum (`KEY_sum`).  Without
torch.distributed initialised, or with one rank, it returns {} and costs nothing: torch is never
imported here.  The group is the job's own (the default one unless given): no process group,
store or file of memshim's.  Used by memshim.lightning's callback; combine() is the same without
the collective.

Not all_gather_object: its tensors are dropped by Python while the backend's worker thread may
still hold them, and the worker's release then needs the interpreter.  A gather just before the
program ends (a Lightning callback's at predict end) then met interpreter finalization: the worker
thread was ended inside a destructor and the process aborted ("terminate called without an active
exception"; 6 runs in 20 of two gloo ranks gathering and leaving, without memshim).  Here the
numbers travel as JSON in tensors that Python keeps until the backend has let go of them: checked
at each gather, and waited for at the end (an atexit handler, before the interpreter finalizes), so
a gather costs no wait.
"""
import atexit
import json
import numbers as _numbers
import sys
import time

__all__ = ["distributed", "gather", "combine"]


def _dist():
    return sys.modules.get("torch.distributed")


def distributed(group=None):
    """True when torch.distributed is imported, initialised, and GROUP has more than one rank."""
    dist = _dist()
    try:
        return bool(dist and dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1)
    except (RuntimeError, ValueError, AttributeError):
        return False


def _numeric(numbers):
    return {k: v for k, v in numbers.items()
            if isinstance(v, _numbers.Real) and not isinstance(v, bool)}


def combine(per_rank, ranks=None):
    """The gathered keys from PER_RANK (one dict per rank, in group order); RANKS: the global rank of
    each (default 0, 1, ...)."""
    ranks = list(range(len(per_rank))) if ranks is None else list(ranks)
    out = {}
    keys = sorted({k for d in per_rank for k in _numeric(d or {})})
    for key in keys:
        have = [(d[key], r) for d, r in zip(per_rank, ranks) if d and key in _numeric(d)]
        best, best_rank = max(have, key=lambda vr: (vr[0], -vr[1]))
        out[key + "_max"] = best
        out[key + "_max_rank"] = best_rank
        out[key + "_sum"] = sum(v for v, _ in have)
    return out


def gather(numbers, group=None):
    """Every rank's numeric NUMBERS gathered over GROUP (a collective); {} when not distributed."""
    if not distributed(group):
        return {}
    dist = _dist()
    size = dist.get_world_size(group)
    every = _all_gather_json(dist, _numeric(numbers), size, group)
    if group is None:
        ranks = range(size)
    else:
        to_global = getattr(dist, "get_global_rank", None) or dist.distributed_c10d._get_global_rank
        ranks = [to_global(group, i) for i in range(size)]
    return combine(every, ranks)


# The tensors of past gathers a backend may still hold: Python lets go of each only once the backend
# has (at a later gather, or at the end, before the interpreter finalizes).
_parked = []
_exit_wait_registered = False
_PARKED_WAIT = 2.0  # seconds the end waits for a backend that still holds one


def _device(dist, group):
    """Where GROUP's backend takes tensors: NCCL's on the current GPU, the others' on the CPU."""
    import torch
    pick = getattr(dist.distributed_c10d, "_get_object_coll_device", None)
    if pick is not None:
        try:
            return torch.device(pick(group))
        except (RuntimeError, ValueError, TypeError):
            pass
    if str(dist.get_backend(group)) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _all_gather_json(dist, mine, size, group):
    """MINE from every rank of GROUP, in group order."""
    import torch
    device = _device(dist, group)
    # numpy's and other Real types as Python's own (JSON knows only those), ints kept exact
    plain = {k: int(v) if isinstance(v, _numbers.Integral) else float(v) for k, v in mine.items()}
    payload = json.dumps(plain, sort_keys=True).encode()
    length = torch.tensor([len(payload)], dtype=torch.int64, device=device)
    lengths = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(size)]
    dist.all_gather(lengths, length, group=group)
    counts = [int(n.item()) for n in lengths]
    data = torch.zeros(max(counts), dtype=torch.uint8)
    data[:len(payload)] = torch.tensor(list(payload), dtype=torch.uint8)
    data = data.to(device)
    gathered = [torch.empty(max(counts), dtype=torch.uint8, device=device) for _ in range(size)]
    dist.all_gather(gathered, data, group=group)
    every = [json.loads(bytes(g[:n].tolist()).decode()) for g, n in zip(gathered, counts)]
    _park([length, data] + lengths + gathered)
    return every


def _held_elsewhere(tensor):
    """Whether something beside Python (the backend's worker) still holds TENSOR."""
    return tensor._use_count() > 1


def _park(tensors):
    """Keeps TENSORS (and earlier ones still held) until the backend has let go of them."""
    global _exit_wait_registered
    if not _exit_wait_registered:  # atexit runs before finalization, while the backend's threads may take the GIL
        atexit.register(_release_parked)
        _exit_wait_registered = True
    if all(hasattr(t, "_use_count") for t in tensors):
        _parked[:] = [t for t in _parked if _held_elsewhere(t)] + list(tensors)
    else:  # a torch without use counts: the last gather's, long released by the next
        _parked[:] = list(tensors)


def _release_parked():
    """At the end: waits (at most _PARKED_WAIT) for the backend to let go, then lets go."""
    deadline = time.monotonic() + _PARKED_WAIT
    pause = 0.0001
    while any(hasattr(t, "_use_count") and _held_elsewhere(t) for t in _parked) and time.monotonic() < deadline:
        time.sleep(pause)
        pause = min(pause * 2, 0.01)
    del _parked[:]
