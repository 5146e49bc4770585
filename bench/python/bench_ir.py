"""Instructions memshim's Python stage detection adds to call-heavy code: recursive fib under
callgrind, with and without the preloaded library.  Startup is subtracted: each side is measured at
fib(N) and at fib(0), and the ratio is (shim N - shim 0) / (bare N - bare 0).  Callgrind counts are
deterministic but for memshim's sampled call sites (about 1M instructions of a run's exit), so N of
22 or more keeps that below 2%, 25 below 0.5%.

usage: bench_ir.py LIB [--fib N] [--stages SPEC]... [--noop-hook LIB] [PYTHON...]

Each --stages is a column (the default: MEMSHIM_STAGES unset, the Hugging Face Trainer names, which
a program without transformers never matches): "bench=work" is fib inside a matched stage, and
"bench=work,warm=warm" the same with another stage closed meanwhile (fib_child.py calls warm
first).  --noop-hook adds the column of a frame evaluation hook that does nothing
(bench/python/noop_evalhook.c, 3.9-3.11), run without memshim: the least a frame hook costs.
"""
import argparse
import os
import re
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHONS = [f"/root/.pyenv/versions/{v}/bin/python"
           for v in ("3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0")] + ["/usr/bin/python3"]
UNSET = "(unset)"


def instructions(python, n, env_extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEMSHIM_", "PYTHON", "BENCH_")) and k != "LD_PRELOAD"}
    env["PYTHONHASHSEED"] = "0"  # the same dict layouts in every run
    env.update(env_extra)
    res = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", python,
                          os.path.join(HERE, "fib_child.py"), str(n)],
                         env=env, capture_output=True, text=True)
    m = re.search(r"Collected : (\d+)", res.stderr)
    if res.returncode != 0 or not m:
        return None  # e.g. no frame evaluation hook API (3.8, 3.12+) for the no-op hook
    return int(m.group(1))


def fib_cost(python, n, env_extra):
    """Instructions of fib(N) alone: the run at N minus the run at 0."""
    top, base = instructions(python, n, env_extra), instructions(python, 0, env_extra)
    return None if top is None or base is None else top - base


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--fib", type=int, default=22)
    ap.add_argument("--stages", action="append",
                    help="MEMSHIM_STAGES for a column of shim runs (repeatable; default: unset)")
    ap.add_argument("--noop-hook", help="the no-op frame hook library (bench/python/noop_evalhook.c)")
    ap.add_argument("pythons", nargs="*")
    a = ap.parse_intermixed_args()
    lib = os.path.abspath(a.lib)
    stages = a.stages or [UNSET]
    print(f"fib({a.fib}): instructions against no library, startup (fib(0)) subtracted; "
          "columns: MEMSHIM_STAGES" + (", then a frame hook that does nothing" if a.noop_hook else ""))
    cols = [s for s in stages] + (["no-op frame hook"] if a.noop_hook else [])
    print(f"{'python':<42} {'bare M':>9} " + " ".join(f"{c:>{max(len(c), 7)}}" for c in cols))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "m.json")
        for python in a.pythons or PYTHONS:
            if not os.access(python, os.X_OK):
                print(f"{python:<42} skipped (not installed)")
                continue
            bare = fib_cost(python, a.fib, {})
            cells = []
            for s in stages:
                env = {"LD_PRELOAD": lib, "MEMSHIM_OUTPUT": out}
                if s != UNSET:
                    env["MEMSHIM_STAGES"] = s
                cells.append(fib_cost(python, a.fib, env))
            if a.noop_hook:
                cells.append(fib_cost(python, a.fib, {"BENCH_NOOP_EVALHOOK": os.path.abspath(a.noop_hook)}))
            print(f"{python:<42} {bare / 1e6:9.2f} " +
                  " ".join(f"{(f'{c / bare:.3f}' if c is not None else '-'):>{max(len(col), 7)}}"
                           for c, col in zip(cells, cols)), flush=True)


if __name__ == "__main__":
    main()
