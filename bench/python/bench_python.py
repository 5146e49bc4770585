"""Cost of memshim's Python stage detection: the same workload with and without the preloaded
library, runs alternating in one invocation, median of per-pair ratios.

usage: bench_python.py LIB [--rounds N] [--fib N] [--torch] [PYTHON...]
CPU time of the workload is compared (the children print it), so other load on the machine
disturbs less.  --torch also compares against the library without any Python target, which
separates the detection's cost from the allocation counting's.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHONS = [f"/root/.pyenv/versions/{v}/bin/python"
           for v in ("3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0")] + ["/usr/bin/python3"]


def run(python, script, args, lib, out, stages="bench=work"):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if lib:
        env.update(LD_PRELOAD=lib, MEMSHIM_STAGES=stages, MEMSHIM_OUTPUT=out)
    res = subprocess.run([python, os.path.join(HERE, script)] + args, env=env,
                         capture_output=True, text=True, check=True)
    return float(res.stdout.strip().splitlines()[-1])


def measure(python, script, args, lib, rounds, out, base_lib=None):
    """Median ratio of runs with the library (stage matched) to runs without it, or, with
    BASE_LIB, to runs with the library but no Python target (the cost of the detection alone)."""
    ratios, bare, shim = [], [], []
    run(python, script, args, None, out)  # warm the page cache
    for i in range(rounds):
        # alternate which goes first so drift hits both sides
        pair = [lambda: run(python, script, args, lib, out),
                lambda: run(python, script, args, base_lib, out, "nopython=/not/a/python/name")]
        if i % 2:
            b = pair[1]()
            s = pair[0]()
        else:
            s = pair[0]()
            b = pair[1]()
        bare.append(b)
        shim.append(s)
        ratios.append(s / b)
    return statistics.median(ratios), statistics.median(bare), statistics.median(shim)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--fib", type=int, default=25)
    ap.add_argument("--torch", action="store_true", help="PyTorch CPU training loop (/usr/bin/python3)")
    ap.add_argument("pythons", nargs="*")
    a = ap.parse_intermixed_args()
    lib = os.path.abspath(a.lib)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "m.json")
        if a.torch:
            jobs = [(p, "torch_child.py", []) for p in (a.pythons or ["/usr/bin/python3"])]
        else:
            jobs = [(p, "fib_child.py", [str(a.fib)]) for p in (a.pythons or PYTHONS)]
        print(f"{'python':<42} {'workload':<9} {'against':<22} {'base s':>8} {'shim s':>8} {'ratio':>6}")
        for python, script, args in jobs:
            if not os.access(python, os.X_OK):
                print(f"{python:<42} skipped (not installed)")
                continue
            against = [("no library", None)]
            if a.torch:
                against.append(("library, no Py target", lib))
            for what, base in against:
                r, b, s = measure(python, script, args, lib, a.rounds, out, base)
                print(f"{python:<42} {script[:-9]:<9} {what:<22} {b:8.4f} {s:8.4f} {r:6.3f}", flush=True)


if __name__ == "__main__":
    main()
