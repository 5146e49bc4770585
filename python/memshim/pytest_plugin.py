"""pytest --memshim: every test's memory as memshim stages, and memory budgets for CPU and GPU.

    pytest --memshim                      # each test's setup, call and teardown measured apart
    pytest --memshim --memshim-top 5      # then the 5 tests whose call needed most

    @pytest.mark.memshim_limit(cpu="20MB", gpu="1GB")
    def test_step(): ...                  # fails when its call needed more (gpu: on any one device)

A test's phases are calls of the stages `pytest_setup`, `pytest_call` and `pytest_teardown`, each
call labelled with the test's node id, so the metrics file holds every test's numbers by node id in
`labelled_calls` (`memshim-format` lists them); what a phase *needed* is its alloc + peaked delta
(the memory above what it started with, whether it kept it or not).  The numbers also go into each
report's user_properties (`memshim_call_mem_cpu_alloc_delta`, ...: junit XML, pytest-xdist).  Sizes
are bytes or a number with a binary suffix (`512K`, `20MB`, `1.5GiB`: MB is 2**20, as memshim's
dumps write it).  Without --memshim the plugin does nothing.  When libmemshim.so is not preloaded,
--memshim runs pytest again under it, in place (same arguments, environment, working directory,
hence exit status); under pytest-xdist every worker is then preloaded too and measures its tests.
Loaded through the `pytest11` entry point of the installed package (or `-p memshim.pytest_plugin`).
"""
import os
import re
import sys

import pytest

import memshim

__all__ = ["parse_size"]

STAGES = {"setup": "pytest_setup", "call": "pytest_call", "teardown": "pytest_teardown"}
LIMIT_KEYS = ("cpu", "gpu")
_REEXEC = "MEMSHIM_PYTEST_REEXEC"  # set in the process the plugin started, so it never loops
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(i?b?)\s*\Z", re.I)
_SITE_FRAMES = 3
_SITES = 3


def parse_size(text):
    """Bytes from 1234, "1234", "512K", "20MB", "1.5 GiB" (binary multiples); ValueError else."""
    if isinstance(text, bool):
        raise ValueError("not a size: %r" % (text,))
    if isinstance(text, int):
        if text < 0:
            raise ValueError("a size cannot be negative: %r" % (text,))
        return text
    m = _SIZE.match(text) if isinstance(text, str) else None
    if not m or (m.group(3).lower() == "i"):
        raise ValueError("not a size: %r (want bytes or a number with K, M, G or T, e.g. \"20MB\")" % (text,))
    return int(float(m.group(1)) * (1 << (10 * " kmgt".index(m.group(2).lower() or " "))))


def human(n):
    """Bytes as memshim's dumps write them (MB = 2**20), one decimal below 10 GB."""
    for unit, shift in (("GB", 30), ("MB", 20), ("KB", 10)):
        if abs(n) >= 1 << shift:
            return "%.1f%s" % (n / float(1 << shift), unit)
    return "%dB" % n


def pytest_addoption(parser):
    group = parser.getgroup("memshim", "memory of each test (memshim)")
    group.addoption("--memshim", action="store_true", default=False,
                    help="measure each test's memory with libmemshim.so (re-runs pytest under it "
                         "when not preloaded) and enforce @pytest.mark.memshim_limit budgets")
    group.addoption("--memshim-top", type=int, default=10, metavar="N",
                    help="with --memshim: print the N tests whose call needed most memory "
                         "(default 10; 0: every test)")


def pytest_configure(config):
    config.addinivalue_line("markers", "memshim_limit(cpu=None, gpu=None): with --memshim, fail the test "
                                       "when its call needed more memory (alloc + peaked) than this, "
                                       "e.g. cpu=\"20MB\", gpu=\"1GB\" (per device)")
    if config.getoption("memshim"):
        config.pluginmanager.register(_Measure(config), "memshim-measure")


def _own_command():
    """This process's command line, to run it again: the interpreter, its options, the rest."""
    argv = getattr(sys, "orig_argv", None)  # Python 3.10+
    if argv:
        return [sys.executable] + list(argv[1:])
    if os.path.basename(sys.argv[0]) == "__main__.py":
        return [sys.executable, "-m", "pytest"] + sys.argv[1:]
    return [sys.executable] + sys.argv


def _not_tracking_reason():
    return ("libmemshim.so is preloaded but not tracking this process (MEMSHIM_DISABLE, a "
            "sanitizer, or it stepped aside)")


def _disabled():
    """MEMSHIM_DISABLE as the library reads it (one rule for every boolean setting): 1, true, yes
    or on in any case disables; anything else (0, false, no, off, a bad value) does not."""
    return os.environ.get("MEMSHIM_DISABLE", "").lower() in ("1", "true", "yes", "on")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """With --memshim and no library: runs this pytest again, in place, with it preloaded."""
    if not config.getoption("memshim") or memshim.active() or _disabled():
        return None
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: its controller was preloaded
        raise pytest.UsageError("memshim: " + _not_tracking_reason() + " in this xdist worker")
    if os.environ.get(_REEXEC):
        raise pytest.UsageError("memshim: --memshim: " + _not_tracking_reason())
    lib = memshim.library_path()
    if lib is None:
        raise pytest.UsageError("memshim: --memshim cannot find libmemshim.so beside the memshim package")
    if list(config.invocation_params.args) != sys.argv[1:]:
        raise pytest.UsageError("memshim: --memshim in pytest.main() cannot run pytest again under "
                                "libmemshim.so; run it under `memshim run -- ...` or LD_PRELOAD=" + lib)
    env = dict(os.environ)
    env["LD_PRELOAD"] = lib + (" " + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    env[_REEXEC] = "1"
    cmd = _own_command()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(cmd[0], cmd, env)
    return None


def _limits(item):
    """The memshim_limit budgets of ITEM in bytes; pytest.UsageError naming it when malformed."""
    out = {}
    for mark in item.iter_markers("memshim_limit"):
        if mark.args:
            raise pytest.UsageError("memshim_limit on %s: keyword arguments only (cpu=..., gpu=...), got %r"
                                    % (item.nodeid, mark.args))
        for key, value in mark.kwargs.items():
            if key not in LIMIT_KEYS:
                raise pytest.UsageError("memshim_limit on %s: unknown key %r (want %s)"
                                        % (item.nodeid, key, " or ".join(LIMIT_KEYS)))
            try:
                size = parse_size(value)
            except ValueError as e:
                raise pytest.UsageError("memshim_limit on %s: %s=%s" % (item.nodeid, key, e))
            out.setdefault(key, size)  # the closest marker wins
    return out


def _frames(site):
    """A call site's frames, innermost first: its Python frames when it has some."""
    frames = site.get("frames", [])
    python = [f for f in frames if re.search(r"\.py:\d+\)$", f)]
    return (python or frames)[:_SITE_FRAMES]


def _phase_numbers(name):
    """NAME's last call: flat numbers, per-device GPU needs and its top call sites."""
    doc = memshim.report()
    stage = next((s for s in doc.get("stages", []) if s.get("name") == name), None)
    if stage is None:
        return {}
    out = {"cpu_alloc_delta": stage["cpu"]["alloc_delta"], "cpu_peaked_delta": stage["cpu"]["peaked_delta"],
           "cpu_sites": [(s["bytes"], _frames(s)) for s in stage.get("peak_sites", [])[:_SITES]]}
    gpu = stage.get("gpu")
    if isinstance(gpu, dict):
        out["gpu_alloc_delta"], out["gpu_peaked_delta"] = gpu["alloc_delta"], gpu["peaked_delta"]
        out["gpu_devices"] = {d["device"]: d["alloc_delta"] + d["peaked_delta"] for d in gpu.get("devices", [])}
        out["gpu_sites"] = [(s["bytes"], _frames(s)) for s in stage.get("peak_sites_gpu", [])[:_SITES]]
    return out


def _sites_text(sites):
    lines = []
    for size, frames in sites:
        lines.append("    %9s  %s" % (human(size), " <- ".join(frames) or "?"))
    return lines or ["    (none sampled: one sample per 512 KiB allocated, MEMSHIM_SITES_RATE)"]


class _Measure:
    """Registered with --memshim: the stages around each phase, the budgets, the summary."""

    def __init__(self, config):
        self.config = config
        self.disabled = _disabled()  # MEMSHIM_DISABLE asked for nothing: one line, no budget
        self.results = {}  # nodeid -> the memshim_ user properties of its reports (xdist workers' too)
        self.outcomes = {}

    def pytest_collection_modifyitems(self, items):
        for item in items:  # a malformed budget stops the run before any test
            try:
                _limits(item)
            except pytest.UsageError:
                if not hasattr(self.config, "workerinput"):
                    raise
                # An xdist worker cannot stop the run: the test errors at setup, with the message.

    def _measured(self, item, phase):
        if self.disabled:
            yield
            return
        name = STAGES[phase]
        memshim.begin(name, label=item.nodeid)  # the file keeps this call's numbers by node id
        try:
            yield
        finally:
            memshim.end(name)
            try:
                numbers = _phase_numbers(name)
            except memshim.NotActive:  # the library stepped aside during the run: nothing to say
                numbers = {}
            item.stash[_NUMBERS_KEY][phase] = numbers
            for k in ("cpu_alloc_delta", "cpu_peaked_delta", "gpu_alloc_delta", "gpu_peaked_delta"):
                if k in numbers:
                    item.user_properties.append(("memshim_%s_mem_%s" % (phase, k), numbers[k]))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        item.stash[_NUMBERS_KEY] = {}
        try:
            limits = _limits(item)
        except pytest.UsageError as e:
            pytest.fail(str(e), pytrace=False)
        for key, size in sorted(limits.items() if not self.disabled else ()):
            item.user_properties.append(("memshim_budget_" + key, size))
        yield from self._measured(item, "setup")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        yield from self._measured(item, "call")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item):
        yield from self._measured(item, "teardown")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if call.when != "call":
            return
        numbers = item.stash.get(_NUMBERS_KEY, {}).get("call")
        over = self._over_budget(item, numbers) if numbers else []
        if not over:
            return
        text = "\n".join(over)
        if report.passed:
            report.outcome = "failed"
            report.longrepr = text
        else:
            report.sections.append(("memshim budget", text))

    def _over_budget(self, item, numbers):
        """The failure text's lines when the call needed more than its budgets, else []."""
        budget = _limits(item)
        lines = []
        cpu = numbers["cpu_alloc_delta"] + numbers["cpu_peaked_delta"]
        if "cpu" in budget and cpu > budget["cpu"]:
            lines.append("memshim_limit: %s needed %s of CPU memory (%d bytes: alloc %s + peaked %s), over its "
                         "budget of %s" % (item.nodeid, human(cpu), cpu, human(numbers["cpu_alloc_delta"]),
                                           human(numbers["cpu_peaked_delta"]), human(budget["cpu"])))
            lines.append("  call sites live at its CPU peak, largest first:")
            lines += _sites_text(numbers["cpu_sites"])
        over_gpu = [(dev, need) for dev, need in sorted(numbers.get("gpu_devices", {}).items())
                    if "gpu" in budget and need > budget["gpu"]]
        for dev, need in over_gpu:
            lines.append("memshim_limit: %s needed %s of GPU memory on device %d (%d bytes, alloc + peaked), "
                         "over its budget of %s per device" % (item.nodeid, human(need), dev, need, human(budget["gpu"])))
        if over_gpu:
            lines.append("  call sites live at its GPU peak, largest first:")
            lines += _sites_text(numbers.get("gpu_sites", []))
        return lines

    def pytest_runtest_logreport(self, report):
        props = dict(p for p in getattr(report, "user_properties", ()) if str(p[0]).startswith("memshim_"))
        if props:
            self.results.setdefault(report.nodeid, {}).update(props)
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.outcomes[report.nodeid] = report.outcome

    def pytest_terminal_summary(self, terminalreporter):
        if hasattr(self.config, "workerinput"):
            return
        tr = terminalreporter
        if self.disabled and not self.results:
            tr.write_line("memshim: MEMSHIM_DISABLE is set: nothing measured, no budget enforced")
            return

        def need(r, phase, comp):
            a = r.get("memshim_%s_mem_%s_alloc_delta" % (phase, comp))
            return None if a is None else a + r.get("memshim_%s_mem_%s_peaked_delta" % (phase, comp), 0)

        rows = sorted(self.results.items(), key=lambda kv: -(need(kv[1], "call", "cpu") or 0))
        top = self.config.getoption("memshim_top")
        shown = rows if top <= 0 else rows[:top]
        if not shown:
            return
        gpu = any(need(r, "call", "gpu") is not None for _, r in rows)
        tr.write_sep("=", "memshim: memory per test, %s" % ("every test" if len(shown) == len(rows) else
                                                            "the %d that needed most" % len(shown)))
        tr.write_line("needed = alloc + peaked delta of the test's call; setup and teardown apart")
        head = "%10s %10s %10s %10s" % ("call cpu", "peaked", "setup", "teardown")
        tr.write_line(head + ("%10s" % "call gpu" if gpu else "") + "  %-16s %s" % ("budget", "test"))
        for nodeid, r in shown:
            cells = [need(r, "call", "cpu"), r.get("memshim_call_mem_cpu_peaked_delta"),
                     need(r, "setup", "cpu"), need(r, "teardown", "cpu")]
            line = "".join("%10s " % ("-" if c is None else human(c)) for c in cells)
            if gpu:
                g = need(r, "call", "gpu")
                line += "%9s " % ("-" if g is None else human(g))
            budget = ",".join("%s %s" % (k, human(r["memshim_budget_" + k])) for k in LIMIT_KEYS
                              if "memshim_budget_" + k in r) or "-"
            mark = " FAILED" if self.outcomes.get(nodeid) == "failed" else ""
            tr.write_line(line + " %-16s %s%s" % (budget, nodeid, mark))


_NUMBERS_KEY = pytest.StashKey[dict]()
