"""What tests/ml/ml.py and tests/cpython/cpython.py share: both run a test suite bare and under the
shim, compare every test's outcome, run what differs again and report it the same way.

Imported by path (each script puts tests/common on sys.path), so it needs no install; it runs under
every interpreter the scripts run under ($(PYTHON), /usr/bin/python3).
"""
import fnmatch
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading

METRICS_GLOB = "memshim_metrics.json*"


def clean_env():
    """The environment without the shim's settings or anything that changes Python's start."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("MEMSHIM_", "PYTHON")) and k != "LD_PRELOAD"}


class ShortTmpDirs:
    """A TMPDIR per run, numbered under one short directory in /tmp (a forkserver's AF_UNIX socket
    path, TMPDIR/.../listener-*, must fit in 108 bytes), made on first use."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.root = None
        self.count = 0
        self.lock = threading.Lock()

    def new(self):
        with self.lock:
            if self.root is None:
                self.root = tempfile.mkdtemp(prefix=self.prefix, dir="/tmp")
            self.count += 1
            return os.path.join(self.root, str(self.count))

    def remove(self):
        if self.root:
            shutil.rmtree(self.root, ignore_errors=True)


def run_in_session(cmd, cwd, env, output_path, timeout, stop_signal, grace):
    """Runs CMD in a session of its own, stdout and stderr to OUTPUT_PATH. Past TIMEOUT seconds its
    process group gets STOP_SIGNAL, and SIGKILL GRACE seconds later. Returns (the finished
    process, whether it ran past TIMEOUT)."""
    timed_out = False
    with open(output_path, "w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, stop_signal)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return proc, timed_out


def memshim_message(line):
    """The part of LINE from memshim's own `memshim:` prefix on, or None when it has none."""
    if "memshim:" not in line:
        return None
    return line[line.index("memshim:"):].rstrip()


def memshim_lines_by_kind(found):
    """[(test, [messages])], FOUND's (test, message) pairs grouped per test and per message with
    its numbers left out (one row for 'freed 12 bytes' and 'freed 40 bytes'), sorted."""
    seen = {}
    for test, msg in found:
        seen.setdefault((test, re.sub(r"\d+", "N", msg)), []).append(msg)
    return [(test, msgs) for (test, _kind), msgs in sorted(seen.items())]


def metrics_files_below(root):
    """Every metrics file anywhere under ROOT."""
    found = []
    for where, _dirs, files in os.walk(root):
        found += [os.path.join(where, f) for f in files if fnmatch.fnmatch(f, METRICS_GLOB)]
    return found


def metrics_files_in(directory):
    return glob.glob(os.path.join(directory, METRICS_GLOB))


def stage_called(path):
    """Whether the metrics file at PATH counts a call of stage `s`."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return False
    stages = data.get("stages")
    if isinstance(stages, dict):
        return ((stages.get("s") or {}).get("calls") or 0) > 0
    if isinstance(stages, list):
        return any(s.get("name") == "s" and (s.get("calls") or 0) > 0 for s in stages)
    return False


def differs_again(first, again):
    """Whether a test's (bare, mode) outcomes run again still differ, one side as the first time
    (a hang under the shim first and bare the second time is flaky, not a difference)."""
    return again[0] != again[1] and (again[0] == first[0] or again[1] == first[1])


def walls_against_bare(walls, modes, width):
    """'bare 12.0  shim 13.1 (1.09x)': each of MODES's wall time in WALLS, and against bare."""
    bare = walls.get("bare") or 0
    return "  ".join("%s %*.1f%s" % (m, width, walls[m], " (%.2fx)" % (walls[m] / bare)
                                     if m != "bare" and bare else "")
                     for m in modes if m in walls)


def capped(entries, key, limit):
    """ENTRIES in order as (entry, None), at most LIMIT of each KEY(entry); in place of a key's first
    entry past LIMIT, (None, (key, how many of that key are not shown))."""
    shown = {}
    for e in entries:
        k = key(e)
        shown[k] = shown.get(k, 0) + 1
        if shown[k] == limit + 1:
            yield None, (k, sum(1 for d in entries if key(d) == k) - limit)
        if shown[k] <= limit:
            yield e, None


class RunnerBase:
    """A run directory (ARGS.out or a new one) holding REPORT, and a lock for output lines from
    the threads that wait on runs."""

    def __init__(self, args, rundir_prefix, report):
        self.args = args
        self.lib = os.path.abspath(args.lib)
        self.rundir = args.out or tempfile.mkdtemp(prefix=rundir_prefix)
        os.makedirs(self.rundir, exist_ok=True)
        self.lock = threading.Lock()
        self.report = report

    def say(self, *a):
        with self.lock:
            print(*a, flush=True)

    def write_report(self):
        with open(self.report_path, "w") as f:
            json.dump(self.report, f, indent=1)

    @property
    def report_path(self):
        return os.path.join(self.rundir, "report.json")

    def clean_up(self, bad, tmp_dirs):
        """Everything the runs wrote goes, unless something differed or --keep."""
        if not bad and not self.args.keep:
            shutil.rmtree(self.rundir, ignore_errors=True)
            tmp_dirs.remove()


def add_common_arguments(ap, modes, lib_default, jobs_help):
    ap.add_argument("--lib", default=lib_default)
    ap.add_argument("--set", choices=("fast", "full"), default="fast")
    ap.add_argument("--modes", default=",".join(modes),
                    type=lambda s: [m for m in s.split(",") if m])
    ap.add_argument("--jobs", type=int, default=2, help=jobs_help)
    ap.add_argument("--out", help="run directory (default: a new one under $TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="keep the run directory")


def check_common_arguments(ap, args, modes):
    """Bare first (every other mode is compared with it), known modes, the library there."""
    if args.modes[0] != "bare" or any(m not in modes for m in args.modes):
        others = list(modes[1:])
        ap.error("--modes: bare first, then %s and/or %s" % (", ".join(others[:-1]), others[-1]))
    if not os.path.exists(args.lib):
        ap.error("%s not found (make build/libmemshim.so)" % args.lib)
