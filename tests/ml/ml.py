#!/usr/bin/env python3
"""The ML stack's own test suites, bare and under the shim: every test's outcome must be the same.

memshim promises a program behaves the same with and without it. The Python packages that load
C++ libraries RTLD_LOCAL and throw C++ exceptions through them (torch, jax's XLA, pyarrow, scipy's
C++ parts, pandas over pyarrow) are where an interposed library can break that (every
exception caught inside such a library aborted the process). This runs their own test suites, as
their wheels install them (tests/ml/suites.py), and batteries of our own (test_*_battery.py), with
pytest in four modes:

  bare   no library;
  shim   LD_PRELOAD=libmemshim.so with every setting at its default (MEMSHIM_OUTPUT unset: the
         files land in the run's working directory);
  stage  LD_PRELOAD with the suite's stage, `s`, on functions its tests reach (MEMSHIM_STAGES,
         suites.py), MEMSHIM_OUTPUT in the run's directory;
  exact  the same with MEMSHIM_SITES=exact:s (a stack recorded per allocation inside the stage).

Each test's outcome (passed, failed, error, skipped, xfailed, or both failed and error) comes from
pytest's junit XML; a run that died (a signal, an abort, a kill after the suite's time) has no XML,
and then a progress log of our pytest plugin (memshim_ml_plugin.py) gives the outcomes of the tests
that ended and names the test that was running. Any outcome that differs from bare, a run that
died or ended otherwise (exit status), a `memshim:` line in the output, a shim run that wrote no
metrics file, a stage that was never called, or a metrics file left where the settings do not put
it, is a difference. Differing tests are run again, alone, bare and in the mode: one that differs
again is reported with its name and fails the run, one that agrees is listed as flaky (a difference
is never retried under the shim alone). Everything a run writes is under one directory per run
(removed when everything agreed, kept with --keep).
"""
import argparse
import concurrent.futures
import fnmatch
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "common"))
from suites import SUITES  # noqa: E402
from suite_runner import (RunnerBase, ShortTmpDirs, add_common_arguments, capped,  # noqa: E402
                          check_common_arguments, clean_env, differs_again, memshim_lines_by_kind,
                          memshim_message, metrics_files_below, metrics_files_in, run_in_session,
                          stage_called, walls_against_bare)

MODES = ("bare", "shim", "stage", "exact")
MAX_SHOWN = 10          # differences printed per suite and mode (all of them in report.json)
MAX_RERUN = 200         # differing tests run again per suite and mode; beyond: differences as is
TEST_TIMEOUT = 600      # pytest-timeout per test: a hang fails its test, named


def venv_python(args, venv):
    return os.path.join(os.path.abspath(args.venv_cuda if venv == "cuda" else args.venv),
                        "bin", "python")


def site_packages(python):
    out = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         stdout=subprocess.PIPE, universal_newlines=True, env=clean_env(),
                         check=True)
    return out.stdout.strip()


def mangle(nodeid):
    """pytest junitxml's (classname, name) of NODEID, as one key 'classname::name'."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]) + "::" + names[-1]


class Selection:
    """What one suite runs in one set: paths (absolute) and pytest arguments."""

    def __init__(self, suite, which, site):
        spec = suite.get(which, True if which == "full" else None)
        if spec is True:
            spec = {}
        self.root = HERE if suite["paths"][0].startswith("here:") else site
        paths = spec.get("paths") or suite["paths"]
        self.paths = [os.path.join(HERE, p[5:]) if p.startswith("here:") else os.path.join(site, p)
                      for p in paths]
        self.args = list(suite.get("args", []))
        if spec.get("k"):
            self.args += ["-k", spec["k"]]


class Job:
    """One pytest run: a suite, a mode, its selection or some test ids."""
    tmp_dirs = ShortTmpDirs("msml")

    def __init__(self, runner, suite, sel, mode, label, nodeids=None):
        self.runner, self.suite, self.sel, self.mode = runner, suite, sel, mode
        self.nodeids = nodeids
        self.dir = os.path.join(runner.rundir, suite["name"], label, mode)
        self.python = venv_python(runner.args, suite["venv"])
        self.wall = self.rc = None
        self.timed_out = False
        self.tmp = Job.tmp_dirs.new()

    @property
    def timeout(self):
        return self.suite.get("timeout", 1800) * self.runner.args.timeout_scale

    def env(self):
        env = clean_env()
        env["TMPDIR"] = self.tmp
        env["PYTHONPATH"] = HERE                     # memshim_ml_plugin
        env["PYTHONDONTWRITEBYTECODE"] = "1"         # the venv stays as it was installed
        env["PYTHONHASHSEED"] = "0"
        for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[k] = "1"    # two runs at once on 2 cores; spinning BLAS threads would fight
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(self.tmp, "inductor")
        if self.mode != "bare":
            env["LD_PRELOAD"] = self.runner.lib
        if self.mode in ("stage", "exact"):
            env["MEMSHIM_STAGES"] = self.suite["stage"]
            env["MEMSHIM_OUTPUT"] = os.path.join(self.dir, "metrics", "memshim_metrics.json")
        if self.mode == "exact":
            env["MEMSHIM_SITES"] = "exact:s"
        return env

    def command(self):
        cmd = [self.python, "-m", "pytest", "-c", os.path.join(HERE, "pytest.ini"),
               "--rootdir", self.sel.root, "--confcutdir", self.sel.root,
               "-p", "memshim_ml_plugin", "--ml-log", self.log_path,
               "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist",
               "--junitxml", self.junit_path, "--timeout", str(TEST_TIMEOUT),
               "-q", "-rfE", "--tb=short", "-W", "ignore::DeprecationWarning"]
        cmd += self.sel.args
        if self.nodeids is not None:     # the tests by id: no -k EXPR
            drop = [i for i, c in enumerate(cmd) if c == "-k"]
            cmd = [c for i, c in enumerate(cmd) if i not in drop and i - 1 not in drop]
            return cmd + [os.path.join(self.sel.root, n) for n in self.nodeids]
        return cmd + self.sel.paths

    @property
    def junit_path(self):
        return os.path.join(self.dir, "junit.xml")

    @property
    def log_path(self):
        return os.path.join(self.dir, "progress.log")

    def run(self):
        for sub in ("work", "metrics"):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        os.makedirs(self.tmp, exist_ok=True)
        start = time.monotonic()
        proc, self.timed_out = run_in_session(
            self.command(), os.path.join(self.dir, "work"), self.env(),
            os.path.join(self.dir, "output.txt"), timeout=self.timeout,
            stop_signal=signal.SIGTERM, grace=30)
        self.rc = proc.returncode
        # whatever the run left behind (workers of a killed run) goes with it
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.wall = time.monotonic() - start
        return self

    # --- results -------------------------------------------------------------------------------

    def progress(self):
        """(tests collected, {key: outcome} of the tests that ended, {key: nodeid}, the test
        that was running when the run ended or None, whether pytest finished)."""
        reports, started, ids, collected, finished = {}, [], {}, None, False
        try:
            f = open(self.log_path, errors="replace")
        except OSError:
            return None, {}, {}, None, False
        with f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if parts[0] == "collected" and len(parts) == 2:
                    collected = int(parts[1])
                elif parts[0] == "start" and len(parts) == 2:
                    started.append(parts[1])
                    ids[mangle(parts[1])] = parts[1]
                elif parts[0] == "report" and len(parts) == 5:
                    reports.setdefault(parts[4], []).append(tuple(parts[1:4]))
                elif parts[0] == "finished":
                    finished = True
        outcomes, running = {}, None
        for nodeid in started:
            reps = reports.get(nodeid, [])
            if not any(when == "teardown" for when, _o, _x in reps):
                running = nodeid      # started, never torn down: the run ended inside it
                continue
            outcomes[mangle(nodeid)] = outcome_of_reports(reps)
        return collected, outcomes, ids, running, finished

    def outcomes(self):
        """{key: outcome}: from the junit XML when pytest wrote it, else from the progress log."""
        try:
            root = ET.parse(self.junit_path).getroot()
        except (OSError, ET.ParseError):
            return self.progress()[1], False
        out = {}
        for case in root.iter("testcase"):
            key = "%s::%s" % (case.get("classname", ""), case.get("name", ""))
            n = 2
            base = key
            while key in out:
                key, n = "%s#%d" % (base, n), n + 1
            out[key] = junit_outcome(case)
        return out, True

    def memshim_lines(self):
        """memshim's own lines: in pytest's output, and in each test's captured stderr."""
        found = []
        with open(os.path.join(self.dir, "output.txt"), errors="replace") as f:
            for line in f:
                msg = memshim_message(line)
                if msg is not None:
                    found.append(("-", msg))
        try:
            root = ET.parse(self.junit_path).getroot()
        except (OSError, ET.ParseError):
            root = None
        for case in (root.iter("testcase") if root is not None else ()):
            for err in case.iter("system-err"):
                for line in (err.text or "").split("\n"):
                    msg = memshim_message(line)
                    if msg is not None:
                        found.append(("%s::%s" % (case.get("classname"), case.get("name")), msg))
        return found

    def metrics_files(self):
        return metrics_files_in(os.path.join(
            self.dir, "metrics" if self.mode in ("stage", "exact") else "work"))

    def stray_metrics_files(self):
        stray = metrics_files_below(self.tmp)
        if self.mode in ("stage", "exact"):
            stray += metrics_files_in(os.path.join(self.dir, "work"))
        return stray

    def ended(self):
        """How the run ended, in words, when not by pytest's own exit."""
        if self.timed_out:
            return "killed after %d s (a hang)" % self.timeout
        if self.rc is not None and self.rc < 0:
            try:
                return "killed by %s" % signal.Signals(-self.rc).name
            except ValueError:
                return "killed by signal %d" % -self.rc
        if self.rc is not None and self.rc > 5:
            return "exit status %d" % self.rc
        return None


def outcome_of_reports(reps):
    kinds = set()
    for when, outcome, xfail in reps:
        if outcome == "failed":
            kinds.add("failed" if when == "call" else "error")
        elif outcome == "skipped":
            kinds.add("xfailed" if xfail == "xfail" else "skipped")
    return "+".join(sorted(kinds)) or "passed"


def junit_outcome(case):
    kinds = set()
    for child in case:
        if child.tag == "failure":
            kinds.add("failed")
        elif child.tag == "error":
            kinds.add("error")
        elif child.tag == "skipped":
            kinds.add("xfailed" if child.get("type") == "pytest.xfail" else "skipped")
    return "+".join(sorted(kinds)) or "passed"


class Runner(RunnerBase):
    def __init__(self, args):
        super().__init__(args, "memshim-ml-",
                         {"differences": [], "flaky": [], "problems": [], "suites": []})
        self.sites = {}

    def suites(self):
        chosen = []
        for s in SUITES:
            if self.args.suite and not any(fnmatch.fnmatch(s["name"], p) for p in self.args.suite):
                continue
            spec = s.get(self.args.set, True if self.args.set == "full" else None)
            if spec is None or spec is False:
                continue
            chosen.append(s)
        return chosen

    def site(self, venv):
        if venv not in self.sites:
            py = venv_python(self.args, venv)
            if not os.path.exists(py):
                raise SystemExit("ml: %s not found (make the venv: see tests/ml/ml.mk)" % py)
            self.sites[venv] = site_packages(py)
        return self.sites[venv]

    def run_jobs(self, jobs):
        with concurrent.futures.ThreadPoolExecutor(self.args.jobs) as pool:
            for job in pool.map(lambda j: j.run(), jobs):
                self.say("  %-22s %-5s %-14s %7.1fs rc=%s%s" % (
                    job.suite["name"], job.mode,
                    "(%d tests)" % len(job.nodeids) if job.nodeids is not None else "",
                    job.wall, job.rc, " (killed after its time)" if job.timed_out else ""))

    def main(self):
        suites = self.suites()
        if not suites:
            print("ml: no suite selected", file=sys.stderr)
            return 1
        groups = []
        for s in suites:
            sel = Selection(s, self.args.set, self.site(s["venv"]))
            groups.append([Job(self, s, sel, mode, "run", None) for mode in self.args.modes])
        self.say("ml: %d suites (%s set), modes %s, %d runs at once, run directory %s" % (
            len(groups), self.args.set, ",".join(self.args.modes), self.args.jobs, self.rundir))
        start = time.monotonic()
        self.run_jobs([j for g in groups for j in g])
        plans = []
        for g in groups:
            plans += self.compare(g)
        if plans:
            self.recheck(plans)
        self.print_table(groups)
        return self.finish(time.monotonic() - start)

    def difference(self, job, test, bare, shim, **more):
        entry = dict(suite=job.suite["name"], mode=job.mode, test=test, bare=bare, shim=shim,
                     log=job.dir)
        entry.update(more)
        self.report["differences"].append(entry)

    def compare(self, group):
        bare = group[0]
        assert bare.mode == "bare"
        b_out, b_xml = bare.outcomes()
        b_ids = bare.progress()[2]
        if bare.ended() or not b_xml:
            self.report["problems"].append("%s bare: %s%s; the suite cannot be judged" % (
                bare.suite["name"], bare.ended() or "no junit XML",
                ", running %s" % bare.progress()[3] if bare.progress()[3] else ""))
        if not b_out:
            self.report["problems"].append("%s bare: no test ran (rc %s, %s)" % (
                bare.suite["name"], bare.rc, os.path.join(bare.dir, "output.txt")))
        plans = []
        for job in group[1:]:
            self.check_shim_ran(job)
            out, xml = job.outcomes()
            collected, _done, ids, running, _fin = job.progress()
            ended = job.ended()
            if ended or not xml:
                left = sorted(set(b_out) - set(out))
                self.difference(job, running or "(after the last test)", "ran on",
                                "%s; %d of the bare run's %d tests have no result" % (
                                    ended or "no junit XML", len(left), len(b_out)),
                                crash=True)
                if running:
                    plans.append(self.plan(job, [mangle(running)], {mangle(running): running},
                                           (b_out, dict(out, **{mangle(running): "crashed"}))))
                # the tests after the crash have no result in either sense: not compared
                out = dict((k, v) for k, v in out.items())
                common = set(out)
            else:
                common = set(b_out) | set(out)
                if (bare.rc in (0, 1)) != (job.rc in (0, 1)) or \
                        (bare.rc not in (0, 1) and bare.rc != job.rc):
                    self.difference(job, "(pytest's exit status)", bare.rc, job.rc)
            diff = sorted(t for t in common if t in out and b_out.get(t, "absent") != out[t]
                          or t not in out and not ended and xml)
            if diff:
                allids = dict(b_ids)
                allids.update(ids)
                plans.append(self.plan(job, diff, allids, (b_out, out)))
        return plans

    def check_shim_ran(self, job):
        files = job.metrics_files()
        if job.ended():
            pass    # the run died (a difference of its own): what it wrote says nothing
        elif not files:
            self.report["problems"].append("%s %s: no metrics file written (%s)" % (
                job.suite["name"], job.mode, job.dir))
        elif job.mode in ("stage", "exact") and not any(stage_called(f) for f in files):
            self.report["problems"].append("%s %s: stage s (%s) never called in %d metrics files" % (
                job.suite["name"], job.mode, job.suite["stage"], len(files)))
        for test, msgs in memshim_lines_by_kind(job.memshim_lines()):
            self.difference(job, test, "-", "%d line(s) from memshim in the output: %s" % (
                len(msgs), msgs[0]))
        for path in job.stray_metrics_files():
            self.difference(job, "-", "-", "metrics file left at %s" % path)

    def plan(self, job, tests, ids, first):
        """A pair of runs (bare, JOB's mode) of the differing tests alone."""
        runnable = [t for t in tests if t in ids][:MAX_RERUN]
        pair = None
        if runnable:
            nodeids = sorted({ids[t] for t in runnable})
            label = "rerun-%s" % job.mode
            pair = [Job(self, job.suite, job.sel, mode, label, nodeids)
                    for mode in ("bare", job.mode)]
            self.say("  rerunning %d test(s) of %s bare and %s" % (
                len(nodeids), job.suite["name"], job.mode))
        return (job, tests, first, pair)

    def recheck(self, plans):
        self.run_jobs([j for p in plans if p[3] for j in p[3]])
        for job, tests, first, pair in plans:
            again_b, again_s = (pair[0].outcomes()[0], pair[1].outcomes()[0]) if pair else ({}, {})
            if pair and pair[1].ended():
                running = pair[1].progress()[3]
                if running:
                    again_s[mangle(running)] = "crashed"
            for t in tests:
                f = (first[0].get(t, "absent"), first[1].get(t, "absent"))
                if not pair or t not in again_b and t not in again_s:
                    # never run alone (too many, or no test id): a difference as it was
                    self.difference(job, t, f[0], f[1], rerun="not run again")
                    continue
                a = (again_b.get(t, "absent"), again_s.get(t, "absent"))
                entry = dict(suite=job.suite["name"], mode=job.mode, test=t, bare=f[0],
                             shim=f[1], rerun=list(a), log=pair[1].dir)
                if differs_again(f, a):
                    self.report["differences"].append(entry)
                else:
                    self.report["flaky"].append(entry)

    def print_table(self, groups):
        self.say("ml: per suite: tests (bare), agreeing in every mode, wall time (s) per mode "
                 "and against bare")
        for g in groups:
            b_out = g[0].outcomes()[0]
            name = g[0].suite["name"]
            bad = {d["test"] for d in self.report["differences"] if d["suite"] == name}
            counts = {}
            for o in b_out.values():
                counts[o] = counts.get(o, 0) + 1
            walls = {j.mode: j.wall for j in g}
            row = {"suite": name, "tests": len(b_out), "outcomes": counts,
                   "agreeing": len([t for t in b_out if t not in bad]), "walls": walls}
            self.report["suites"].append(row)
            self.say("  %-22s %6d tests, %6d agree  %s" % (
                name, row["tests"], row["agreeing"],
                walls_against_bare(walls, self.args.modes, 6)))

    def finish(self, elapsed):
        rep = self.report
        self.write_report()
        for p in rep["problems"]:
            self.say("ml: PROBLEM: " + p)
        for e in rep["flaky"]:
            self.say("ml: flaky (agreed when run again): %(suite)s %(mode)s %(test)s: bare "
                     "%(bare)s, %(mode)s %(shim)s" % e)
        for e, left_out in capped(rep["differences"], lambda d: (d["suite"], d["mode"]),
                                  MAX_SHOWN):
            if left_out:
                key, more = left_out
                self.say("ml: DIFFERENCE %s %s: %d more (report.json)" % (key + (more,)))
            elif e.get("crash"):
                self.say("ml: DIFFERENCE %(suite)s %(mode)s: the run died in %(test)s: %(shim)s; "
                         "logs %(log)s" % e)
            elif "rerun" in e:
                self.say("ml: DIFFERENCE %(suite)s %(mode)s %(test)s: bare %(bare)s, %(mode)s "
                         "%(shim)s (again: %(rerun)s); logs %(log)s" % e)
            else:
                self.say("ml: DIFFERENCE %(suite)s %(mode)s %(test)s: bare %(bare)s, "
                         "%(mode)s %(shim)s; logs %(log)s" % e)
        bad = bool(rep["differences"] or rep["problems"])
        total = sum(s["tests"] for s in rep["suites"])
        self.say("ml: %s in %.0f s (report %s)" % (
            "%d differences" % len(rep["differences"]) if rep["differences"] else
            ("%d problems" % len(rep["problems"]) if bad else
             "every test agreed (%d tests, %d modes)" % (total, len(self.args.modes))),
            elapsed, self.report_path))
        self.clean_up(bad, Job.tmp_dirs)
        return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_arguments(ap, MODES, os.path.join(ROOT, "build", "libmemshim.so"),
                         "pytest runs at once")
    ap.add_argument("--suite", action="append", help="only this suite (a glob; repeatable)")
    ap.add_argument("--venv", default=os.path.join(ROOT, ".venv-ml"))
    ap.add_argument("--venv-cuda", default=os.path.join(ROOT, ".venv-ml-cuda"))
    ap.add_argument("--timeout-scale", type=float, default=1.0,
                    help="multiplies each suite's time limit")
    args = ap.parse_args()
    check_common_arguments(ap, args, MODES)
    return Runner(args).main()


if __name__ == "__main__":
    sys.exit(main())
