"""Explicit memshim stages from Python, for code that wants to name its own stages.

    import memshim

    with memshim.stage("warmup"):
        ...

    @memshim.stage("step")
    def step(): ...

The calls go to memshim_stage_begin/memshim_stage_end in libmemshim.so when that library is loaded
in this process (LD_PRELOAD); otherwise everything here does nothing.  Stage names are
[A-Za-z0-9_]+, at most 63 characters.
"""
import ctypes
import functools

__all__ = ["stage", "begin", "end", "snapshot", "active"]


def _load():
    try:
        lib = ctypes.CDLL(None)
        begin, end, snap = lib.memshim_stage_begin, lib.memshim_stage_end, lib.memshim_snapshot
    except (OSError, AttributeError):
        return None
    for f in (begin, end):
        f.argtypes = [ctypes.c_char_p]
        f.restype = ctypes.c_int
    snap.argtypes = []
    snap.restype = ctypes.c_int
    return begin, end, snap


_api = _load()


def active():
    """True when libmemshim.so is loaded in this process."""
    return _api is not None


def begin(name):
    """Opens stage NAME; returns 0, or -1 (invalid name, table full, library absent)."""
    return _api[0](name.encode()) if _api else -1


def end(name):
    """Closes stage NAME; returns 0, or -1 for an end without a begin (or library absent)."""
    return _api[1](name.encode()) if _api else -1


def snapshot():
    """Writes the metrics file now as a snapshot; returns 0 or -1."""
    return _api[2]() if _api else -1


class stage:
    """Context manager and decorator: the block (or each call) is one call of stage NAME."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        begin(self.name)
        return self

    def __exit__(self, *exc):
        end(self.name)
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return wrapper
