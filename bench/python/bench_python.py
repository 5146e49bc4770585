"""Cost of memshim's Python stage detection: the same workload with and without the preloaded
library, runs alternating in one invocation, median of per-pair ratios.

usage: bench_python.py LIB [--rounds N] [--fib N] [--torch] [PYTHON...]
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


def run(python, script, args, lib, out):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if lib:
        env.update(LD_PRELOAD=lib, MEMSHIM_STAGES="bench=work", MEMSHIM_OUTPUT=out)
    res = subprocess.run([python, os.path.join(HERE, script)] + args, env=env,
                         capture_output=True, text=True, check=True)
    return float(res.stdout.strip().splitlines()[-1])


def measure(python, script, args, lib, rounds, out):
    ratios, bare, shim = [], [], []
    run(python, script, args, None, out)  # warm the page cache
    for i in range(rounds):
        # alternate which goes first so drift hits both sides
        if i % 2:
            b = run(python, script, args, None, out)
            s = run(python, script, args, lib, out)
        else:
            s = run(python, script, args, lib, out)
            b = run(python, script, args, None, out)
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
        print(f"{'python':<42} {'workload':<14} {'bare s':>9} {'shim s':>9} {'ratio':>6}")
        for python, script, args in jobs:
            if not os.access(python, os.X_OK):
                print(f"{python:<42} skipped (not installed)")
                continue
            r, b, s = measure(python, script, args, lib, a.rounds, out)
            print(f"{python:<42} {script[:-9]:<14} {b:9.4f} {s:9.4f} {r:6.3f}", flush=True)


if __name__ == "__main__":
    main()
