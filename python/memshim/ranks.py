"""Numbers across ranks, through the job's own engine: torch.distributed's all_gather_object.

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
"""
import numbers as _numbers
import sys

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
    every = [None] * size
    dist.all_gather_object(every, _numeric(numbers), group=group)
    if group is None:
        ranks = range(size)
    else:
        to_global = getattr(dist, "get_global_rank", None) or dist.distributed_c10d._get_global_rank
        ranks = [to_global(group, i) for i in range(size)]
    return combine(every, ranks)
