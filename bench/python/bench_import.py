"""Instructions memshim adds to `import pandas` (about a hundred extension modules, each a dlopen
and a dlsym) with no stages, with plain targets (the README's `train=train_loop` form: each is
also a native target, bound through the GOT of every object loaded) and with the same names
qualified `__main__:` (Python only), under callgrind against the same import without the library.
OpenBLAS and OpenMP run one thread so that the counts are deterministic.  Goal (issue 43): <= 1.08x
with three plain targets.

usage: bench_import.py LIB [--python PYTHON] [--module pandas]
"""
import argparse
import os
import re
import subprocess
import tempfile

CASES = [
    ("no stages", None),
    ("one plain target", "train=train_loop"),
    ("three plain targets", "init=build_model,train=train_loop,eval=evaluate"),
    ("three __main__: targets", "init=__main__:build_model,train=__main__:train_loop,eval=__main__:evaluate"),
]


def instructions(python, module, lib, out, stages):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEMSHIM_", "PYTHON")) and k != "LD_PRELOAD"}
    env.update(PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    if lib:
        env.update(LD_PRELOAD=lib, MEMSHIM_OUTPUT=out)
        if stages is not None:
            env["MEMSHIM_STAGES"] = stages
    res = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", python,
                          "-c", f"import {module}"], env=env, capture_output=True, text=True, check=True)
    m = re.search(r"Collected : (\d+)", res.stderr)
    if not m:
        raise RuntimeError(f"no callgrind total: {res.stderr[-500:]}")
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--python", default=".venv-ml/bin/python")
    ap.add_argument("--module", default="pandas")
    a = ap.parse_args()
    lib = os.path.abspath(a.lib)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "m.json")
        bare = instructions(a.python, a.module, None, out, None)
        print(f"import {a.module} ({a.python}), instructions (M) under callgrind")
        print(f"{'case':<28} {'instructions':>12} {'ratio':>7}")
        print(f"{'bare':<28} {bare / 1e6:12.1f} {1:7.3f}", flush=True)
        for name, stages in CASES:
            n = instructions(a.python, a.module, lib, out, stages)
            print(f"{name:<28} {n / 1e6:12.1f} {n / bare:7.3f}", flush=True)


if __name__ == "__main__":
    main()
