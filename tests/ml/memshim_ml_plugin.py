"""pytest plugin of tests/ml/ml.py, loaded with `-p memshim_ml_plugin` in every run, bare or not.

--ml-log PATH: a line per test as it starts (`start<TAB>NODEID`) and per report
(`report<TAB>PHASE<TAB>OUTCOME<TAB>xfail or -<TAB>NODEID`), each written at once, so a run that
dies (an abort, a kill after its time) still says which tests ended and which one was running.
Hypothesis runs derandomized, without a database or deadlines, so a bare and a preloaded run draw
the same examples and a slower run does not fail on time alone.
"""
import os

import pytest

_log = None


def pytest_addoption(parser):
    parser.addoption("--ml-log", default=None, help="tests/ml/ml.py's progress log")


def _hypothesis_profile():
    try:
        import hypothesis
    except ImportError:
        return
    hypothesis.settings.register_profile(
        "memshim-ml", derandomize=True, database=None, deadline=None, print_blob=False,
        suppress_health_check=list(hypothesis.HealthCheck))
    hypothesis.settings.load_profile("memshim-ml")


def pytest_configure(config):
    global _log
    path = config.getoption("--ml-log")
    if path:
        _log = open(path, "a", buffering=1)
    _hypothesis_profile()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    # packages' conftests load their own profiles while they are collected: ours again on top
    _hypothesis_profile()
    if _log:
        _log.write("collected\t%d\n" % len(session.items))


def pytest_runtest_logstart(nodeid, location):
    if _log:
        _log.write("start\t%s\n" % nodeid)


def pytest_runtest_logreport(report):
    if _log:
        xfail = "xfail" if hasattr(report, "wasxfail") else "-"
        _log.write("report\t%s\t%s\t%s\t%s\n" % (report.when, report.outcome, xfail,
                                                  report.nodeid))


def pytest_sessionfinish(session, exitstatus):
    if _log:
        _log.write("finished\t%d\n" % int(exitstatus))
        _log.flush()
        os.fsync(_log.fileno())
