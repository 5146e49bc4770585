"""Instructions memshim's Python stage detection adds to call-heavy code whose process has no
function any target can match: recursive fib under callgrind, with and without the preloaded
library, MEMSHIM_STAGES unset (the Hugging Face Trainer names; the program never imports
transformers).  Startup is subtracted: each side is measured at fib(N) and at fib(0), and the
ratio is (shim N - shim 0) / (bare N - bare 0).  Callgrind counts are deterministic, so one run
of each is enough on a loaded machine.

usage: bench_ir.py LIB [--fib N] [--stages SPEC] [PYTHON...]
"""
import argparse
import os
import re
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHONS = [f"/root/.pyenv/versions/{v}/bin/python"
           for v in ("3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0")] + ["/usr/bin/python3"]


def instructions(python, n, lib, out, stages):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEMSHIM_", "PYTHON")) and k != "LD_PRELOAD"}
    env["PYTHONHASHSEED"] = "0"  # the same dict layouts in every run
    if lib:
        env.update(LD_PRELOAD=lib, MEMSHIM_OUTPUT=out)
        if stages is not None:
            env["MEMSHIM_STAGES"] = stages
    res = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", python,
                          os.path.join(HERE, "fib_child.py"), str(n)],
                         env=env, capture_output=True, text=True, check=True)
    m = re.search(r"Collected : (\d+)", res.stderr)
    if not m:
        raise RuntimeError(f"no callgrind total for {python}: {res.stderr[-500:]}")
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--fib", type=int, default=22)
    ap.add_argument("--stages", default=None,
                    help="MEMSHIM_STAGES for the shim runs (default: unset, the Trainer names)")
    ap.add_argument("pythons", nargs="*")
    a = ap.parse_intermixed_args()
    lib = os.path.abspath(a.lib)
    print(f"fib({a.fib}), MEMSHIM_STAGES={a.stages if a.stages is not None else '(unset)'}; "
          "instructions (M), startup (fib(0)) subtracted")
    print(f"{'python':<42} {'bare':>9} {'shim':>9} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "m.json")
        for python in a.pythons or PYTHONS:
            if not os.access(python, os.X_OK):
                print(f"{python:<42} skipped (not installed)")
                continue
            bare = instructions(python, a.fib, None, out, a.stages) - instructions(python, 0, None, out, a.stages)
            shim = instructions(python, a.fib, lib, out, a.stages) - instructions(python, 0, lib, out, a.stages)
            print(f"{python:<42} {bare / 1e6:9.2f} {shim / 1e6:9.2f} {shim / bare:7.3f}", flush=True)


if __name__ == "__main__":
    main()
