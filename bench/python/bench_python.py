"""Cost of memshim's Python stage detection: the same workload with and without the preloaded
library, runs alternating in one invocation, median of per-round ratios to the run without it.

usage: bench_python.py LIB [--rounds N] [--fib N] [--torch | --torch-stages] [--stages SPEC] [--also LIB]
                        [PYTHON...]
CPU time of the workload is compared (the children print it), so other load on the machine
disturbs less.  --torch (a training loop inside one stage) and --torch-stages (a Trainer-shaped
script, MEMSHIM_STAGES="init=build,train=train,eval=evaluate") also compare against the library
without any Python target, which separates the detection's cost from the allocation counting's.
--also adds another library (a build of main, say) to the same rounds, so before and after are
measured against the same bare runs.  --stages replaces the workload's MEMSHIM_STAGES (for fib,
"bench=work,warm=warm" keeps another stage closed while fib runs: 3.11's frame hook stays in).
"""
import argparse
import os
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHONS = [f"/root/.pyenv/versions/{v}/bin/python"
           for v in ("3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0")] + ["/usr/bin/python3"]
NO_PY_TARGET = "nopython=/not/a/python/name"  # ignored (no Python, no native name): no target


def run(python, script, args, lib, out, stages):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if lib:
        env.update(LD_PRELOAD=lib, MEMSHIM_STAGES=stages, MEMSHIM_OUTPUT=out)
    res = subprocess.run([python, os.path.join(HERE, script)] + args, env=env,
                         capture_output=True, text=True, check=True)
    return float(res.stdout.strip().splitlines()[-1])


def measure(python, script, args, settings, rounds, out):
    """Median CPU seconds of each setting (label, lib, stages; the first is the baseline, no
    library) and the median of its per-round ratios to the baseline; the order rotates per round
    so drift hits every setting."""
    times = {label: [] for label, _, _ in settings}
    run(python, script, args, None, out, "")  # warm the page cache
    for i in range(rounds):
        k = i % len(settings)
        for label, lib, stages in settings[k:] + settings[:k]:
            times[label].append(run(python, script, args, lib, out, stages))
    base = times[settings[0][0]]
    return {label: (statistics.median(t), statistics.median([s / b for s, b in zip(t, base)]))
            for label, t in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--fib", type=int, default=25)
    ap.add_argument("--torch", action="store_true", help="PyTorch CPU training loop (/usr/bin/python3)")
    ap.add_argument("--torch-stages", action="store_true",
                    help="a Trainer-shaped PyTorch script, three stages (/usr/bin/python3)")
    ap.add_argument("--epochs", type=int, default=40, help="--torch-stages: epochs")
    ap.add_argument("--stages", help="MEMSHIM_STAGES instead of the workload's own")
    ap.add_argument("--also", help="another library measured in the same rounds")
    ap.add_argument("pythons", nargs="*")
    a = ap.parse_intermixed_args()
    lib = os.path.abspath(a.lib)
    torch = a.torch or a.torch_stages
    if a.torch_stages:
        script, args, stages = "torch_stages_child.py", [str(a.epochs)], "init=build,train=train,eval=evaluate"
    elif a.torch:
        script, args, stages = "torch_child.py", [], "bench=work"
    else:
        script, args, stages = "fib_child.py", [str(a.fib)], "bench=work"
    stages = a.stages or stages
    settings = [("no library", None, ""), ("library", lib, stages)]
    if a.also:
        settings.append((f"also {os.path.basename(a.also)}", os.path.abspath(a.also), stages))
    if torch:
        settings.append(("library, no Py target", lib, NO_PY_TARGET))
    print(f"{script[:-3]} {' '.join(args)}, MEMSHIM_STAGES={stages}; CPU s, median of {a.rounds} rounds; "
          "ratio: median of per-round ratios to no library")
    print(f"{'python':<42} {'setting':<28} {'cpu s':>8} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "m.json")
        for python in a.pythons or (["/usr/bin/python3"] if torch else PYTHONS):
            if not os.access(python, os.X_OK):
                print(f"{python:<42} skipped (not installed)")
                continue
            res = measure(python, script, args, settings, a.rounds, out)
            for label, (t, r) in res.items():
                print(f"{python:<42} {label:<28} {t:8.4f} {r:6.3f}", flush=True)


if __name__ == "__main__":
    main()
