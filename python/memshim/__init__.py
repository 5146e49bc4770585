"""memshim from Python: the numbers so far, explicit stages, snapshots.

    import memshim

    memshim.active()             # True when libmemshim.so is preloaded and tracking this process
    memshim.metrics()            # the flat metrics so far: {"train_mem_cpu_alloc_delta": ..., ...}
    with memshim.stage("warmup"):
        ...

    @memshim.stage("step")
    def step(): ...              # also async def (one call per await of it) and generators (per stretch)

The library must be preloaded (LD_PRELOAD, `memshim run -- python ...`, or a kernel from `memshim
kernel install` in notebooks): loading it later with ctypes counts nothing, because the program's
calls are already bound.  Without it, metrics() and report() raise NotActive, stage() does nothing
(begin() and end() return 0, as the C API's) and active() is False.  Stage names are
[A-Za-z0-9_]+, at most 63 characters, not "process" (else ValueError).
"""
import ctypes
import functools
import inspect
import json
import os
import re

__all__ = ["NotActive", "active", "metrics", "report", "stage", "begin", "end", "snapshot", "library_path"]
from memshim._version import __version__

_NAME = re.compile(r"[A-Za-z0-9_]{1,63}\Z")
_NORMAL_ENDS = (StopIteration, StopAsyncIteration, GeneratorExit)
MAX_STAGES = 64  # distinct stage names a process may have (the library's MS_MAX_STAGES)


def library_path():
    """Where libmemshim.so is: inside this package (pip install), a checkout's build/, or
    PREFIX/lib beside PREFIX/lib/memshim/python (make install); else None."""
    here = os.path.dirname(os.path.abspath(__file__))
    for p in (os.path.join(here, "_bin", "libmemshim.so"),
              os.path.join(here, "..", "..", "build", "libmemshim.so"),
              os.path.join(here, "..", "..", "..", "libmemshim.so")):
        if os.path.isfile(p):
            return os.path.realpath(p)
    return None


class NotActive(RuntimeError):
    """libmemshim.so is not preloaded in this process (or is disabled, or stepped aside)."""


def _load():
    try:
        lib = ctypes.CDLL(None)
        api = (lib.memshim_stage_begin, lib.memshim_stage_end, lib.memshim_snapshot)
    except (OSError, AttributeError):
        return None, None
    for f in api[:2]:
        f.argtypes = [ctypes.c_char_p]
        f.restype = ctypes.c_int
    api[2].argtypes = []
    api[2].restype = ctypes.c_int
    labelled = getattr(lib, "memshim_stage_begin_labelled", None)
    if labelled is not None:
        labelled.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        labelled.restype = ctypes.c_int
    api += (labelled,)
    raised = getattr(lib, "memshim_stage_end_raised", None)  # libraries from 12-2026 on
    if raised is not None:
        raised.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        raised.restype = ctypes.c_int
    api += (raised,)
    live = (getattr(lib, "memshim_metrics_json", None), getattr(lib, "memshim_active", None),
            getattr(lib, "memshim_metrics_json_brief", None))  # the brief one: libraries from 12-2026 on
    for fn in (live[0], live[2]):
        if fn is not None:
            fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            fn.restype = ctypes.c_long
    if live[1] is not None:
        live[1].argtypes = []
        live[1].restype = ctypes.c_int
    return api, live


_api, _live = _load()


def active():
    """True when libmemshim.so is preloaded and tracking this process."""
    return bool(_live and _live[1] is not None and _live[1]())


def _not_active():
    if _api is None:
        return NotActive("libmemshim.so is not preloaded: run under `memshim run -- python ...` or "
                         "LD_PRELOAD=.../libmemshim.so (a notebook: `memshim kernel install`)")
    return NotActive("libmemshim.so is loaded but not tracking this process (MEMSHIM_DISABLE, a "
                     "sanitizer, an unfollowed child, or loaded after start)")


def report():
    """The whole metrics document so far, as the metrics file would hold it now ("reason": "live",
    "complete": False; open stages have "open": True and their numbers so far)."""
    return _document(_live[0] if _live else None)


def _document(fetch):
    if not active():
        raise _not_active()
    size = 1 << 16
    while True:
        buf = ctypes.create_string_buffer(size)
        n = fetch(buf, size)
        if n < 0:
            raise _not_active()
        if n < size:
            return json.loads(buf.value.decode("utf-8", "replace"))
        size = n + 1


def _open_stage_keys(stage):
    """The flat keys of an open stage's call so far (the file has them only once it completes)."""
    name, out = stage["name"], {}
    for comp in ("cpu", "gpu"):
        span = stage.get(comp)
        if isinstance(span, dict) and "alloc_delta" in span:
            out["%s_mem_%s_alloc_delta" % (name, comp)] = span["alloc_delta"]
            out["%s_mem_%s_peaked_delta" % (name, comp)] = span["peaked_delta"]
    if "runtime" in stage:
        out[name + "_runtime"] = stage["runtime"]
    return out


def metrics():
    """The flat metrics so far, with the metrics file's keys: completed calls of every stage, and
    open stages as they stand (their current call's numbers so far).  Read from the document without
    its timeline and call sites, so that asking inside a stage adds kilobytes to it, not megabytes."""
    doc = _document((_live[2] or _live[0]) if _live else None)
    flat = dict(doc.get("metrics", {}))
    for s in doc.get("stages", []):
        if s.get("open"):
            flat.update(_open_stage_keys(s))
    return flat


def _check(name):
    if not isinstance(name, str) or not _NAME.match(name) or name == "process":
        raise ValueError("memshim stage name %r: want [A-Za-z0-9_]+, at most 63 characters, not 'process' "
                         "(the process-wide metrics' prefix)" % (name,))
    return name.encode()


def begin(name, label=None):
    """Opens stage NAME; returns 0, or -1 (the stage table full).  LABEL (text) names the call this
    begin opens: its numbers go into the metrics file's "labelled_calls" under it.  Not tracking
    (library absent, disabled): does nothing and returns 0, as memshim_stage_begin."""
    encoded = _check(name)
    if not _api:
        return 0
    if label is not None and _api[3] is not None:
        return _api[3](encoded, str(label).encode("utf-8", "replace"))
    return _api[0](encoded)


def end(name, exception=None):
    """Closes stage NAME; returns 0, or -1 for an end without a begin.  Not tracking: returns 0.
    EXCEPTION (an exception, its type or its type's name) says the call ended by it: the metrics
    file records the call as "raised", and the dump says which calls ended so."""
    encoded = _check(name)
    if not _api:
        return 0
    if exception is not None and _api[4] is not None:
        if not isinstance(exception, str):
            exception = (exception if isinstance(exception, type) else type(exception)).__name__
        return _api[4](encoded, exception.encode("utf-8", "replace"))
    return _api[1](encoded)


def snapshot():
    """Writes the metrics file now as a snapshot ("complete": false); returns 0 or -1."""
    return _api[2]() if _api else -1


class stage:
    """Context manager and decorator: the block (or each call) is one call of stage NAME (labelled
    LABEL in the metrics file's "labelled_calls" when given).  A block an exception leaves is a call
    that "raised" (its type named in the metrics file).  Entering raises ValueError when the process
    has MAX_STAGES (64) stage names already and NAME is a new one: it could not be measured.

    On an `async def` function each call is one call of the stage, from the call until the awaited
    coroutine returns or raises, its awaits included: what other tasks and threads allocate while it
    is open counts, as for every stage.  On a generator function (or an async generator function)
    each stretch the generator runs is one call, as MEMSHIM_STAGES counts a generator target: from
    each next()/send()/throw() (asend()/athrow(), its awaits included) to the next yield, or the end;
    close() of a suspended generator runs its cleanup in one more call."""

    def __init__(self, name, label=None):
        _check(name)
        self.name = name
        self.label = label

    def __enter__(self):
        if begin(self.name, self.label) < 0:
            raise ValueError("memshim stage %r not opened: a process has at most %d stage names "
                             "(MEMSHIM_STAGES's and memshim.stage's together), and all are taken"
                             % (self.name, MAX_STAGES))
        return self

    def __exit__(self, exc_type, exc, tb):
        # a generator's end and close() are how the decorator's stretches end, not exceptions
        ended_by = None if exc_type is None or issubclass(exc_type, _NORMAL_ENDS) else exc_type
        end(self.name, ended_by)
        return False

    def __call__(self, func):
        if inspect.isasyncgenfunction(func):
            wrapper = self._async_generator(func)
        elif inspect.iscoroutinefunction(func):
            wrapper = self._coroutine(func)
        elif inspect.isgeneratorfunction(func):
            wrapper = self._generator(func)
        else:
            def wrapper(*args, **kwargs):
                with self:
                    return func(*args, **kwargs)
        return functools.wraps(func)(wrapper)

    def _coroutine(self, func):
        async def wrapper(*args, **kwargs):
            with self:
                return await func(*args, **kwargs)
        return wrapper

    def _generator(self, func):
        def wrapper(*args, **kwargs):
            return (yield from self._stretches(func(*args, **kwargs)))
        return wrapper

    def _stretches(self, gen):
        """Runs GEN as `yield from` would, each stretch inside the stage."""
        sent, thrown = None, None
        while True:
            try:
                with self:
                    item = gen.send(sent) if thrown is None else gen.throw(thrown)
            except StopIteration as stop:
                return stop.value
            sent, thrown = None, None
            try:
                sent = yield item
            except GeneratorExit:  # closed while suspended at a yield: its cleanup is a stretch too
                with self:
                    gen.close()
                raise
            except BaseException as exc:  # thrown in by the consumer: on to GEN
                thrown = exc

    def _async_generator(self, func):
        async def wrapper(*args, **kwargs):
            agen = func(*args, **kwargs)
            sent, thrown = None, None
            while True:
                try:
                    with self:
                        item = await (agen.asend(sent) if thrown is None else agen.athrow(thrown))
                except StopAsyncIteration:
                    return
                sent, thrown = None, None
                try:
                    sent = yield item
                except GeneratorExit:  # aclose() while suspended at a yield: its cleanup is a stretch too
                    with self:
                        await agen.aclose()
                    raise
                except BaseException as exc:  # thrown in by the consumer: on to the generator
                    thrown = exc
        return wrapper
