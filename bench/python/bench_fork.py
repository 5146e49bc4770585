#!/usr/bin/env python3
"""What a child process costs under the shim: fork + _exit, multiprocessing's fork Pools and
Processes, spawn and forkserver, each bare and under the library in several settings, measured in
the same run (rounds alternate between the settings) and printed as a ratio against bare.

    bench/python/bench_fork.py build/libmemshim.so [--python PY] [--rounds 5]

Settings: `shim` (defaults), `nosites` (MEMSHIM_SITES=0), `nofollow` (MEMSHIM_FOLLOW_CHILDREN=0:
children write no file), `notimeline` (MEMSHIM_TIMELINE=0). The difference between `shim` and
`nofollow` is what a tracked child adds (its fork handlers' reset and its report at exit).
Wall is the workload's own timer around its loop; cpu is user + system time of the whole run (the
interpreter's start included, children that were waited for), steadier on a loaded machine.
Not a test: the numbers move with the machine's load; only the ratios of one run mean much.
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

WORKLOADS = {
    "fork_exit": ("""
import os, time
n = 200
t = time.perf_counter()
for i in range(n):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
print((time.perf_counter() - t) / n)
""", "per fork + _exit + wait"),
    "mp_fork": ("""
import multiprocessing as mp, time
def work(x):
    return x * x
if __name__ == "__main__":
    ctx = mp.get_context("fork")
    t = time.perf_counter()
    for _ in range(5):
        with ctx.Pool(2) as p:
            p.map(work, range(20))
    for _ in range(6):
        pr = ctx.Process(target=work, args=(1,))
        pr.start()
        pr.join()
    print(time.perf_counter() - t)
""", "5 fork Pools(2) + 6 fork Processes"),
    "mp_spawn": ("""
import multiprocessing as mp, time
def work(x):
    return x * x
if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    t = time.perf_counter()
    for _ in range(3):
        pr = ctx.Process(target=work, args=(1,))
        pr.start()
        pr.join()
    print(time.perf_counter() - t)
""", "3 spawn Processes"),
    "mp_forkserver": ("""
import multiprocessing as mp, time
def work(x):
    return x * x
if __name__ == "__main__":
    ctx = mp.get_context("forkserver")
    t = time.perf_counter()
    for _ in range(6):
        pr = ctx.Process(target=work, args=(1,))
        pr.start()
        pr.join()
    print(time.perf_counter() - t)
""", "forkserver start + 6 Processes"),
}

SETTINGS = {
    "bare": {},
    "shim": {},
    "nosites": {"MEMSHIM_SITES": "0"},
    "nofollow": {"MEMSHIM_FOLLOW_CHILDREN": "0"},
    "notimeline": {"MEMSHIM_TIMELINE": "0"},
}


def run_once(py, lib, script, setting, outdir):
    """Seconds the workload reports; the script runs from a file (spawn re-imports __main__)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MEMSHIM_") and k != "LD_PRELOAD"}
    if setting != "bare":
        env["LD_PRELOAD"] = lib
        env["MEMSHIM_OUTPUT"] = os.path.join(outdir, setting, "m.json")
        env.update(SETTINGS[setting])
    shutil.rmtree(os.path.join(outdir, setting), ignore_errors=True)  # a fresh directory per run:
    os.makedirs(os.path.join(outdir, setting))  # file creation slows as one fills up
    path = os.path.join(outdir, "workload_%d.py" % (hash(script) & 0xffffff))
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(script)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([py, path], env=env, cwd=outdir, stdout=subprocess.PIPE,
                         universal_newlines=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return float(out.stdout.split()[-1]), cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("lib")
    ap.add_argument("--python", default="/root/.pyenv/versions/3.12.1/bin/python")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    args = ap.parse_args()
    lib = os.path.abspath(args.lib)
    settings = args.settings.split(",")
    print("bench_fork: %s, %d rounds, median; ratio against bare in the same rounds" % (
        args.python, args.rounds))
    with tempfile.TemporaryDirectory(prefix="memshim-bench-fork-") as outdir:
        for name in args.workloads.split(","):
            script, what = WORKLOADS[name]
            times = {s: [] for s in settings}
            cpus = {s: [] for s in settings}
            for _ in range(args.rounds):
                for s in settings:
                    wall, cpu = run_once(args.python, lib, script, s, outdir)
                    times[s].append(wall)
                    cpus[s].append(cpu)
            for label, data, unit in (("wall", times, 1e3), ("cpu", cpus, 1e3)):
                med = {s: statistics.median(v) for s, v in data.items()}
                base = med.get("bare")
                print("%-14s %-4s " % (name, label) + "  ".join(
                    "%s %.2f ms%s" % (s, med[s] * unit,
                                      " (%.2fx)" % (med[s] / base) if base and s != "bare" else "")
                    for s in settings), flush=True)
            print("%-14s      (%s; cpu: the whole run's processes, user + system)" % ("", what))
    return 0


if __name__ == "__main__":
    sys.exit(main())
