#!/usr/bin/env python3
"""CPython's own regression tests, bare and under the shim: per-test outcomes must be the same.

memshim promises a program behaves the same with and without it. This runs a selection of
CPython's regression test modules (selection.txt) with `python -m test` on every installed
interpreter that ships its `test` package, in three modes:

  bare   no library;
  shim   LD_PRELOAD=libmemshim.so with every setting at its default (MEMSHIM_OUTPUT unset: the
         files land in the run's own directory, where the regrtest process starts);
  stage  LD_PRELOAD with a stage whose target every test runs (MEMSHIM_STAGES=s=TestCase.run),
         MEMSHIM_OUTPUT in the run's directory.

Each test's outcome (ok, failure, error, skipped, expected failure, unexpected success; from
regrtest's --junit-xml, and from the FAIL:/ERROR: headers unittest prints, which name failing
subtests the XML leaves unnamed) and each module's result (passed, failed, env changed, skipped,
...) is compared with the bare run. Any line of memshim's own in the output (-v shows every test's
output) is a difference too, even where no test looks at it. A difference is run a second time in both modes (the differing tests
alone, or the module when only its result differed); one that differs again is reported with the
test's name and fails the run, one that agrees the second time is listed as flaky. Tests that
cannot be compared (exclude.txt) are not run, and are listed with their reason.

Everything a run writes (the tests' working directories, TMPDIR, metrics files, logs) is under one
directory per run, removed when everything agreed (--keep keeps it).
"""
import argparse
import concurrent.futures
import glob
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "common"))
from suite_runner import (RunnerBase, ShortTmpDirs, add_common_arguments, capped,  # noqa: E402
                          check_common_arguments, clean_env, differs_again, memshim_lines_by_kind,
                          memshim_message, metrics_files_below, metrics_files_in, run_in_session,
                          stage_called, walls_against_bare)

MODES = ("bare", "shim", "stage")
STAGE_SPEC = "s=TestCase.run"
EXTRA_DIR = os.path.join(HERE, "extra")
# Modules some installs leave out (pyenv's 3.11.7 and 3.12.1), run from EXTRA_DIR under these names
# when the interpreter has test/_test_multiprocessing.py.
EXTRA = {"test_multiprocessing_fork": "test_mp_fork",
         "test_multiprocessing_spawn": "test_mp_spawn",
         "test_multiprocessing_forkserver": "test_mp_forkserver"}
MAX_SHOWN = 10      # differences printed per interpreter, mode and module (all in report.json)


def parse_versions(spec):
    """'3.12-' / '3.8' / 'all' -> predicate on a (major, minor) tuple."""
    if spec == "all":
        return lambda v: True
    lo, dash, hi = spec.partition("-")
    lo_v = tuple(int(x) for x in lo.split(".")) if lo else (0, 0)
    if not dash:
        return lambda v: v[:2] == lo_v
    hi_v = tuple(int(x) for x in hi.split(".")) if hi else (99, 99)
    return lambda v: lo_v <= v[:2] <= hi_v


def read_table(name, columns):
    rows = []
    with open(os.path.join(HERE, name)) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                rows.append(line.split(None, columns - 1))
    return rows


def selection(which, version, only):
    """{module: test id glob or None} of set WHICH (`fast=GLOB` in the sets column: only those
    tests of the module in that set)."""
    mods = {}
    for module, sets, versions, _why in read_table("selection.txt", 4):
        for entry in sets.split(","):
            name, _eq, match = entry.partition("=")
            if name == which and parse_versions(versions)(version) and (not only or module in only):
                mods[module] = match or None
    return mods


def exclusions(version):
    return [(pat, why) for versions, pat, why in read_table("exclude.txt", 3)
            if parse_versions(versions)(version)]


class Python:
    def __init__(self, path, version, testdir):
        self.path, self.version, self.testdir = path, version, testdir
        self.name = "%s (%s)" % (".".join(map(str, version)), path)
        self.tag = ".".join(map(str, version)) + ("-" + path.strip("/").replace("/", "_")
                                                   if not path.startswith("/root/.pyenv/") else "")

    def source(self, module):
        """(regrtest's name for MODULE, the --testdir to give) or None when this Python lacks it."""
        base = os.path.join(self.testdir, module)
        if os.path.isdir(base) or os.path.exists(base + ".py"):
            return module, None
        if module in EXTRA and os.path.exists(os.path.join(self.testdir,
                                                           "_test_multiprocessing.py")):
            return EXTRA[module], EXTRA_DIR
        return None


def find_pythons(paths):
    """Every given interpreter, 3.8 or newer, whose test package has regrtest (deduplicated)."""
    found, seen = [], set()
    for path in paths:
        if not os.path.exists(path) or os.path.realpath(path) in seen:
            continue
        probe = ("import sys, os, test.libregrtest, test.support;"
                 "print(*sys.version_info[:3]); print(os.path.dirname(test.support.__file__))")
        try:
            out = subprocess.run([path, "-c", probe], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, env=clean_env(), timeout=60,
                                 universal_newlines=True)
        except (OSError, subprocess.TimeoutExpired):
            continue
        lines = out.stdout.split("\n")
        if out.returncode != 0 or len(lines) < 2:
            continue
        version = tuple(int(x) for x in lines[0].split())
        testdir = os.path.dirname(lines[1])
        if version < (3, 8) or not os.path.exists(os.path.join(testdir, "test_signal.py")):
            continue
        seen.add(os.path.realpath(path))
        found.append(Python(path, version, testdir))
    return found


def default_pythons():
    return sorted(glob.glob("/root/.pyenv/versions/3.*/bin/python"),
                  key=lambda p: [int(x) for x in re.findall(r"\d+", p.split("/")[-3])]) + \
        ["/usr/bin/python3"]


class Job:
    """One `python -m test` run: an interpreter, a mode, modules, optional test ids to match."""
    # TMPDIR: short, or the forkserver tests' sockets (TMPDIR/test_python_*/pymp-*/listener-*) fail
    # bare and under the shim alike
    tmp_dirs = ShortTmpDirs("mscpy")

    def __init__(self, py, mode, modules, args, rundir, label, match=(), ignore=(), testdir=None):
        self.py, self.mode, self.modules, self.args = py, mode, modules, args
        self.testdir = testdir
        self.match, self.ignore = list(match), list(ignore)
        self.dir = os.path.join(rundir, py.tag, label, mode)
        self.wall = None
        self.rc = None
        self.timed_out = False
        self.tmp = Job.tmp_dirs.new()

    def env(self, lib):
        env = clean_env()
        env["TMPDIR"] = self.tmp
        if self.mode != "bare":
            env["LD_PRELOAD"] = lib
            # the records of processes the tests kill stay with the run, out of the user's `memshim top`
            env["MEMSHIM_LIVE_DIR"] = os.path.join(self.dir, "live")
        if self.mode == "stage":
            env["MEMSHIM_STAGES"] = STAGE_SPEC
            env["MEMSHIM_OUTPUT"] = os.path.join(self.dir, "metrics", "memshim_metrics.json")
        return env

    def command(self):
        cmd = [self.py.path, "-m", "test", "-v", "--junit-xml", os.path.join(self.dir, "junit.xml"),
               "--tempdir", os.path.join(self.dir, "work"), "--fail-env-changed"]
        cmd += ["-j", str(self.args.workers if len(self.modules) > 1 else 1)]
        cmd += ["--timeout", str(self.args.timeout)]
        if self.args.use:
            cmd += ["-u", self.args.use]
        if self.testdir:
            cmd += ["--testdir", self.testdir]
        for pat in self.match:
            cmd += ["-m", pat]
        for pat in self.ignore:
            cmd += ["-i", pat]
        return cmd + self.modules

    def run(self, lib):
        for sub in ("work", "metrics"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        os.makedirs(self.tmp, exist_ok=True)
        start = time.monotonic()
        # regrtest's workers are in sessions of their own: SIGINT makes it stop them
        proc, self.timed_out = run_in_session(
            self.command(), self.dir, self.env(lib), os.path.join(self.dir, "log.txt"),
            timeout=self.args.timeout * 2 + 120, stop_signal=signal.SIGINT, grace=60)
        self.rc = proc.returncode
        self.wall = time.monotonic() - start
        return self

    # --- results -------------------------------------------------------------------------------

    def test_outcomes(self):
        """test id -> outcome."""
        out = {}
        try:
            root = ET.parse(os.path.join(self.dir, "junit.xml")).getroot()
        except (OSError, ET.ParseError):
            root = None
        if root is not None:
            for case in root.iter("testcase"):
                name = case.get("name")
                if name:
                    out[name] = junit_outcome(case)
        for test_id, kind, sub in failure_headers(os.path.join(self.dir, "log.txt")):
            if out.get(test_id, "ok") == "ok":
                out[test_id] = kind + (" (subtest)" if sub else "")
        return out

    def module_outcomes(self):
        """module -> outcome, from regrtest's summary; modules it never reported: 'no result'."""
        with open(os.path.join(self.dir, "log.txt"), errors="replace") as f:
            text = f.read()
        res, done = parse_summary(text)
        for m in self.modules:
            if not any(k == m or k.startswith(m + ".") for k in res):
                res[m] = "passed" if done else "no result (rc %s%s)" % (
                    self.rc, ", killed after timeout" if self.timed_out else "")
        return res

    def messages(self):
        """memshim's own lines in the run's output (-v: every test's output is there), each with
        the test running when it came ('-' before the first)."""
        found, current = [], "-"
        with open(os.path.join(self.dir, "log.txt"), errors="replace") as f:
            for line in f:
                m = RUNNING.match(line)
                if m:
                    method, where = m.group(1), m.group(2)
                    current = where if where.endswith("." + method) else where + "." + method
                msg = memshim_message(line)
                if msg is not None:
                    found.append((current, msg))
        return found

    def metrics_files(self):
        return metrics_files_in(os.path.join(self.dir, "metrics" if self.mode == "stage" else ""))

    def stray_metrics_files(self):
        """Metrics files anywhere but where this mode's settings put them."""
        stray = metrics_files_below(os.path.join(self.dir, "work")) + metrics_files_below(self.tmp)
        if self.mode == "stage":
            stray += metrics_files_in(self.dir)
        return stray


def junit_outcome(case):
    tags = {c.tag for c in case}
    for tag, outcome in (("error", "error"), ("failure", "failure"), ("skipped", "skipped"),
                         ("outcome", "unexpected success"), ("output", "expected failure")):
        if tag in tags:
            return outcome
    return "ok"


RUNNING = re.compile(r"^(\w+) \(([\w.]+)\).*\.\.\. ")
HEADER = re.compile(r"^(FAIL|ERROR|UNEXPECTED SUCCESS): (\S+) \(([\w.]+)\)(.*)$")


def failure_headers(path):
    """unittest's error list headers: 'FAIL: test_x (mod.Class.test_x) (i=1)' (3.11+) or
    'FAIL: test_x (mod.Class)' (3.8-3.10), as (test id, outcome, is a subtest)."""
    kinds = {"FAIL": "failure", "ERROR": "error", "UNEXPECTED SUCCESS": "unexpected success"}
    try:
        f = open(path, errors="replace")
    except OSError:
        return
    with f:
        for line in f:
            m = HEADER.match(line.rstrip("\n"))
            if not m:
                continue
            method, where, rest = m.group(2), m.group(3), m.group(4).strip()
            test_id = where if where.endswith("." + method) else where + "." + method
            yield test_id, kinds[m.group(1)], bool(rest)


SECTION = re.compile(r"^(?:All )?\d+ (?:tests?|test files?) (.+?):$")


def parse_summary(text):
    """regrtest's end summary: '2 tests failed:' followed by indented module names."""
    res, category = {}, None
    done = "== Tests result" in text or re.search(r"^Total duration", text, re.M) is not None
    tail = text[text.rfind("== Tests result"):] if "== Tests result" in text else text
    for line in tail.split("\n"):
        m = SECTION.match(line)
        if m:
            category = normalise_category(m.group(1))
            continue
        if category and line.startswith("    ") and line.strip():
            for name in line.split():
                res[name] = category
        elif not line.startswith("    "):
            category = None
    return res, done


def normalise_category(text):
    if "environment" in text:
        return "env changed"
    if text.startswith("skipped"):
        return "skipped"
    return text


# --- the run -----------------------------------------------------------------------------------

class Runner(RunnerBase):
    def __init__(self, args):
        super().__init__(args, "memshim-cpython-", {"differences": [], "flaky": [], "excluded": [],
                                                    "problems": [], "walls": []})

    def jobs_for(self, py, modules):
        """[[a job per mode] per group]: a group per module (--per-module), else one group of the
        standard modules and one per module run from EXTRA_DIR or with a test id glob."""
        ignore = [pat for pat, _why in exclusions(py.version)]
        where = {m: py.source(m) for m in modules}
        alone = [m for m in modules if where[m][1] is not None or modules[m]]
        std = [where[m][0] for m in modules if m not in alone]
        groups = [([m], m) for m in std] if self.args.per_module else ([(std, None)] if std else [])
        groups += [([where[m][0]], m) for m in alone]
        jobs = []
        for names, module in groups:
            label = names[0] if len(names) == 1 else "all"
            testdir = where[module][1] if module else None
            match = [modules[module]] if module and modules[module] else []
            jobs.append([Job(py, mode, names, self.args, self.rundir, label, ignore=ignore,
                             testdir=testdir, match=match) for mode in self.modes_for(py)])
        return jobs

    def modes_for(self, py):
        """The modes PY runs in: without `stage` when --stage-python names other interpreters."""
        chosen = [os.path.realpath(p) for p in self.args.stage_python or []]
        if not chosen or os.path.realpath(py.path) in chosen:
            return self.args.modes
        return [m for m in self.args.modes if m != "stage"]

    def run_jobs(self, jobs):
        with concurrent.futures.ThreadPoolExecutor(self.args.jobs) as pool:
            for job in pool.map(lambda j: j.run(self.lib), jobs):
                self.say("  %-7s %-5s %-45s %6.1fs rc=%s%s" % (
                    job.py.tag, job.mode, " ".join(job.modules)[:45], job.wall, job.rc,
                    " (killed)" if job.timed_out else ""))

    def main(self):
        pythons = find_pythons(self.args.python or default_pythons())
        if not pythons:
            print("cpython: no interpreter with its test package found", file=sys.stderr)
            return 1
        groups = []
        for py in pythons:
            chosen = selection(self.args.set, py.version, self.args.module)
            mods = {m: match for m, match in chosen.items() if py.source(m)}
            missing = [m for m in chosen if not py.source(m)]
            if missing:
                self.report["problems"].append("%s has no %s" % (py.name, " ".join(missing)))
            for pat, why in exclusions(py.version):
                self.report["excluded"].append("%s: %s (%s)" % (py.tag, pat, why))
            groups += self.jobs_for(py, mods)
        self.say("cpython: %d interpreters (%s), modes %s, run directory %s" % (
            len(pythons), ", ".join(p.tag for p in pythons), ",".join(self.args.modes),
            self.rundir))
        start = time.monotonic()
        # The modes of one group run side by side, so they see the same load.
        self.run_jobs([j for g in groups for j in g])
        plans = []
        for g in groups:
            self.check_shim_ran(g)
            plans += self.compare(g)
        if plans:
            self.recheck(plans)
        self.print_walls(groups)
        return self.finish(time.monotonic() - start)

    def check_shim_ran(self, group):
        """A shim run that wrote no metrics file compared nothing: say so."""
        for job in group:
            if job.mode == "bare":
                continue
            files = job.metrics_files()
            if not files:
                self.report["problems"].append("%s %s %s: no metrics file written" % (
                    job.py.tag, job.mode, " ".join(job.modules)))
            elif job.mode == "stage" and not any(stage_called(f) for f in files):
                self.report["problems"].append(
                    "%s stage %s: stage s (%s) never called in %d metrics files" % (
                        job.py.tag, " ".join(job.modules), STAGE_SPEC, len(files)))
            for test, msgs in memshim_lines_by_kind(job.messages()):
                self.report["differences"].append({
                    "python": job.py.tag, "mode": job.mode, "module": " ".join(job.modules),
                    "test": test, "bare": "-", "log": job.dir,
                    "shim": "%d line(s) from memshim in the output: %s" % (len(msgs), msgs[0])})
            for path in job.stray_metrics_files():
                self.report["differences"].append({
                    "python": job.py.tag, "mode": job.mode, "module": " ".join(job.modules),
                    "test": "-", "bare": "-", "shim": "metrics file left at %s" % path,
                    "log": job.dir})

    def compare(self, group):
        """Reruns to make of what differs from bare in GROUP (see recheck)."""
        bare = group[0]
        assert bare.mode == "bare"
        b_tests, b_mods = bare.test_outcomes(), bare.module_outcomes()
        plans = []
        for job in group[1:]:
            tests, mods = job.test_outcomes(), job.module_outcomes()
            diff_tests = sorted(t for t in set(b_tests) | set(tests)
                                if b_tests.get(t, "absent") != tests.get(t, "absent"))
            diff_mods = sorted(m for m in set(b_mods) | set(mods)
                               if b_mods.get(m, "absent") != mods.get(m, "absent"))
            if diff_tests or diff_mods:
                plans += self.plan_recheck(job, diff_tests, diff_mods, (b_tests, tests),
                                           (b_mods, mods))
        return plans

    def plan_recheck(self, job, diff_tests, diff_mods, first_tests, first_mods):
        """A pair of runs (bare, JOB's mode) per module: its differing tests alone, or the whole
        module when only its result differed."""
        py = job.py
        by_module = {}
        for t in diff_tests:
            by_module.setdefault(owner_module(t, job.modules), []).append(t)
        for m in diff_mods:
            by_module.setdefault(m.split(".")[0], [])
        plans = []
        for module, tests in sorted(by_module.items()):
            match = sorted({base_id(t) for t in tests}) or list(job.match)
            label = "rerun-%s-%s" % (job.mode, module)
            ignore = [pat for pat, _why in exclusions(py.version)]
            pair = [Job(py, mode, [module], self.args, self.rundir, label, match=match,
                        ignore=ignore, testdir=job.testdir) for mode in ("bare", job.mode)]
            mods = [m for m in diff_mods if m.split(".")[0] == module]
            plans.append((job, module, tests, mods, first_tests, first_mods, pair, bool(tests)))
            self.say("  rerunning %s %s in bare and %s: %s" % (
                py.tag, module, job.mode, shorten(match) if match else "the whole module"))
        return plans

    def recheck(self, plans):
        """Runs every planned pair at once, then keeps as differences what differs again."""
        self.run_jobs([j for plan in plans for j in plan[6]])
        for job, module, tests, mods, first_tests, first_mods, pair, some in plans:
            r_b, r_s = pair[0].test_outcomes(), pair[1].test_outcomes()
            rm_b, rm_s = pair[0].module_outcomes(), pair[1].module_outcomes()
            agreed = True
            for t in tests:
                first = (first_tests[0].get(t, "absent"), first_tests[1].get(t, "absent"))
                again = (r_b.get(t, "absent"), r_s.get(t, "absent"))
                agreed = agreed and again[0] == again[1]
                self.record(job.py, job, module, t, first, again, pair[1].dir)
            for m in mods:
                first = (first_mods[0].get(m, "absent"), first_mods[1].get(m, "absent"))
                if some:  # a run of some tests says nothing of the module's result: theirs does
                    again = (first[0], first[0]) if agreed else first
                else:
                    again = (rm_b.get(m, rm_b.get(module, "absent")),
                             rm_s.get(m, rm_s.get(module, "absent")))
                self.record(job.py, job, module, "(module result)", first, again, pair[1].dir)

    def record(self, py, job, module, test, first, again, logdir):
        """A difference when the second runs differ again the same way (one side's outcome as
        the first time): a hang under the shim first and bare the second time is flaky."""
        entry = {"python": py.tag, "mode": job.mode, "module": module, "test": test,
                 "bare": first[0], "shim": first[1], "rerun": list(again), "log": logdir}
        if differs_again(first, again):
            self.report["differences"].append(entry)
        else:
            self.report["flaky"].append(entry)

    def print_walls(self, groups):
        rows = []
        for g in groups if self.args.per_module else []:
            if len(g[0].modules) != 1:
                continue
            walls = {j.mode: j.wall for j in g}
            rows.append({"python": g[0].py.tag, "module": g[0].modules[0], "walls": walls})
        self.report["walls"] = rows
        if not rows:
            return
        self.say("cpython: wall time per module (s), and against bare")
        for r in rows:
            self.say("  %-8s %-40s " % (r["python"], r["module"]) +
                     walls_against_bare(r["walls"], self.args.modes, 7))

    def finish(self, elapsed):
        rep = self.report
        self.write_report()
        for p in rep["problems"]:
            self.say("cpython: note: " + p)
        for e in rep["excluded"]:
            self.say("cpython: excluded: " + e)
        for e in rep["flaky"]:
            self.say("cpython: flaky (agreed when run again): %(python)s %(mode)s %(module)s "
                     "%(test)s: bare %(bare)s, %(mode)s %(shim)s" % e)
        for e, left_out in capped(rep["differences"],
                                  lambda d: (d["python"], d["mode"], d["module"]), MAX_SHOWN):
            if left_out:
                key, more = left_out
                self.say("cpython: DIFFERENCE %s %s %s: %d more tests (report.json)" % (
                    key + (more,)))
                continue
            self.say("cpython: DIFFERENCE %(python)s %(mode)s %(module)s %(test)s: bare %(bare)s, "
                     "%(mode)s %(shim)s (again: %(rerun)s); logs %(log)s" % e
                     if "rerun" in e else
                     "cpython: DIFFERENCE %(python)s %(mode)s %(module)s %(test)s: %(shim)s" % e)
        bad = rep["differences"] or any("no metrics file" in p or "never called" in p
                                        for p in rep["problems"])
        self.say("cpython: %s in %.0f s (report %s)" % (
            "%d differences" % len(rep["differences"]) if rep["differences"] else
            ("the shim did not run" if bad else "every test agreed"), elapsed, self.report_path))
        self.clean_up(bad, Job.tmp_dirs)
        return 1 if bad else 0


def shorten(names, n=5):
    return ", ".join(names[:n]) + (" and %d more" % (len(names) - n) if len(names) > n else "")


def owner_module(test_id, modules):
    parts = test_id.split(".")
    name = parts[1] if parts[0] == "test" and len(parts) > 1 else parts[0]
    return name if name in modules or len(modules) != 1 else modules[0]


def base_id(test_id):
    return test_id.split(" ")[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_arguments(ap, MODES, "build/libmemshim.so", "regrtest runs at once")
    ap.add_argument("--python", action="append", help="interpreter (repeatable; default: all)")
    ap.add_argument("--stage-python", action="append",
                    help="run the stage mode only on this interpreter (repeatable; default: all)")
    ap.add_argument("--module", action="append", help="only this module (repeatable)")
    ap.add_argument("--workers", type=int, default=4, help="regrtest -j in a multi-module run")
    ap.add_argument("--per-module", action="store_true",
                    help="one regrtest run per module (wall time per module)")
    ap.add_argument("--timeout", type=int, default=300, help="regrtest --timeout per test file")
    ap.add_argument("--use", default="", help="regrtest -u resources (e.g. network,subprocess)")
    args = ap.parse_args()
    check_common_arguments(ap, args, MODES)
    return Runner(args).main()


if __name__ == "__main__":
    sys.exit(main())
