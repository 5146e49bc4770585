"""pytest --memshim (python/memshim/pytest_plugin.py): budgets, the re-run under the library, phases
measured apart, usage errors, pytest-xdist, GPU budgets per device (the stand-in libcuda.so.1).

Each test runs pytest on a small test file in a subprocess (this interpreter, the checkout's
package on PYTHONPATH, the plugin by -p; the installed entry point is test_wheel.py's)."""
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

import pytest

from pytest_driver import ROOT, STANDIN_CUDA, pytest_run

sys.path.insert(0, os.path.join(ROOT, "python"))
from memshim.pytest_plugin import parse_size  # noqa: E402

BUDGET = """
import pytest

@pytest.mark.memshim_limit(cpu="20MB")
def test_small():
    b = bytearray(5 << 20)

@pytest.mark.memshim_limit(cpu="20MB")
def test_big():
    b = bytearray(40 << 20)

def test_free():
    pass
"""


def summary_rows(out):
    """test -> the summary table's cells."""
    part = out.split("memshim: memory per test")[1].split("short test summary")[0]
    return {m.group(2): m.group(1).split() for m in re.finditer(r"^(.*?) (test_x\.py::\w+)", part, re.M)}


def test_one_test_over_budget_fails_and_every_peak_is_shown(tmp_path):
    r = pytest_run(tmp_path, BUDGET, "--memshim")
    assert r.returncode == 1, r.stdout
    assert "1 failed, 2 passed" in r.stdout
    assert re.search(r"memshim_limit: test_x.py::test_big needed 40\.\dMB of CPU memory \(\d+ bytes: alloc .* "
                     r"\+ peaked 40\.\dMB\), over its budget of 20\.0MB", r.stdout), r.stdout
    assert re.search(r"\d+\.\dMB  test_big \(.*test_x\.py:10\)", r.stdout), r.stdout  # its top call site
    rows = summary_rows(r.stdout)
    assert set(rows) == {"test_x.py::test_small", "test_x.py::test_big", "test_x.py::test_free"}
    assert rows["test_x.py::test_big"][0].startswith("40.") and rows["test_x.py::test_big"][-1] == "20.0MB"
    assert rows["test_x.py::test_small"][0].startswith("5.")
    doc = json.load(open(str(tmp_path / "m.json")))  # the phases are stages of the metrics file
    assert {s["name"]: s["calls"] for s in doc["stages"]}["pytest_call"] == 3


def test_reexec_keeps_arguments_environment_directory_and_status(tmp_path):
    probe = """
    import json, os, sys, memshim
    def test_record():
        json.dump({"cwd": os.getcwd(), "var": os.environ.get("PROBE_VAR"), "argv": sys.argv,
                   "active": memshim.active(), "reexec": os.environ.get("MEMSHIM_PYTEST_REEXEC")},
                  open(os.environ["PROBE_OUT"], "w"))
    def test_fails():
        assert False
    """
    out = str(tmp_path / "probe.json")
    r = pytest_run(tmp_path, probe, "--memshim", "-k", "record", PROBE_VAR="x y", PROBE_OUT=out)
    assert r.returncode == 0, r.stdout
    seen = json.load(open(out))
    assert seen["active"] and seen["reexec"] == "1"
    assert seen["cwd"] == str(tmp_path) and seen["var"] == "x y"
    assert seen["argv"][1:] == ["-p", "memshim.pytest_plugin", "-p", "no:cacheprovider", "--memshim", "-k", "record",
                                "test_x.py"]
    r = pytest_run(tmp_path, probe, "--memshim", PROBE_OUT=out)
    assert r.returncode == 1 and "1 failed, 1 passed" in r.stdout, r.stdout
    # Already preloaded: no second run.
    lib = os.path.join(ROOT, "build", "libmemshim.so")
    r = pytest_run(tmp_path, probe, "--memshim", "-k", "record", PROBE_OUT=out, LD_PRELOAD=lib)
    assert r.returncode == 0 and json.load(open(out))["reexec"] is None, r.stdout


def test_setup_and_teardown_measured_apart(tmp_path):
    src = """
    import pytest
    @pytest.fixture
    def big():
        b = bytearray(30 << 20)
        yield len(b)
        del b
    @pytest.mark.memshim_limit(cpu="10MB")
    def test_uses_fixture(big):
        assert big == 30 << 20
    """
    r = pytest_run(tmp_path, src, "--memshim", "--junitxml", str(tmp_path / "j.xml"))
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout
    props = {p.get("name"): int(p.get("value")) for p in ET.parse(str(tmp_path / "j.xml")).iter("property")}
    assert props["memshim_setup_mem_cpu_alloc_delta"] >= 30 << 20
    assert props["memshim_call_mem_cpu_alloc_delta"] + props["memshim_call_mem_cpu_peaked_delta"] < 1 << 20
    assert props["memshim_teardown_mem_cpu_alloc_delta"] <= -(30 << 20)
    assert props["memshim_budget_cpu"] == 10 << 20
    cells = summary_rows(r.stdout)["test_x.py::test_uses_fixture"]
    assert cells[2].startswith("30.") and cells[0].endswith("KB")  # setup 30MB, the call a few KB


@pytest.mark.parametrize("marker,complaint", [('cpu="20XB"', "cpu=not a size: '20XB'"),
                                              ('ram="1GB"', "unknown key 'ram'"),
                                              ('"1GB"', "keyword arguments only")])
def test_bad_budget_is_a_usage_error_naming_the_test(tmp_path, marker, complaint):
    src = "import pytest\n@pytest.mark.memshim_limit(%s)\ndef test_bad():\n    pass\n" % marker
    r = pytest_run(tmp_path, src, "--memshim")
    assert r.returncode == 4, r.stdout  # pytest's usage error
    assert "memshim_limit on test_x.py::test_bad: " in r.stdout and complaint in r.stdout, r.stdout


def test_bad_budget_under_xdist_errors_the_test(tmp_path):
    """A worker cannot stop the run: the test errors at setup, with the same message."""
    src = "import pytest\n@pytest.mark.memshim_limit(ram='1GB')\ndef test_bad():\n    pass\ndef test_ok():\n    pass\n"
    r = pytest_run(tmp_path, src, "--memshim", "-n", "2")
    assert r.returncode == 1 and "1 passed, 1 error" in r.stdout, r.stdout
    assert "memshim_limit on test_x.py::test_bad: unknown key 'ram'" in r.stdout
    assert "INTERNALERROR" not in r.stdout


def test_xdist_workers(tmp_path):
    r = pytest_run(tmp_path, BUDGET, "--memshim", "-n", "2")
    assert r.returncode == 1, r.stdout
    assert "1 failed, 2 passed" in r.stdout
    assert "over its budget of 20.0MB" in r.stdout
    rows = summary_rows(r.stdout)
    assert len(rows) == 3 and rows["test_x.py::test_big"][-1] == "20.0MB"
    assert rows["test_x.py::test_big"][0].startswith("40.")


GPU = """
import ctypes, os, pytest
cu = ctypes.CDLL(os.environ["STANDIN_CUDA"])
assert cu.cuInit(0) == 0

def alloc(dev, size):
    ctx, p = ctypes.c_void_p(), ctypes.c_uint64()
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0 and cu.cuCtxSetCurrent(ctx) == 0
    assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(size)) == 0
    return p

@pytest.mark.memshim_limit(gpu="20MB")
def test_two_devices_under_budget_each():
    for p in (alloc(0, 16 << 20), alloc(1, 16 << 20)):
        cu.cuMemFree_v2(p)

@pytest.mark.memshim_limit(gpu="32MB", cpu="1GB")
def test_one_device_over():
    cu.cuMemFree_v2(alloc(1, 64 << 20))
"""


def test_gpu_budget_per_device(tmp_path):
    if not os.path.isfile(STANDIN_CUDA):
        pytest.fail("the stand-in driver is missing: make %s" % STANDIN_CUDA)
    r = pytest_run(tmp_path, GPU, "--memshim", STANDIN_CUDA=STANDIN_CUDA)
    assert r.returncode == 1 and "1 failed, 1 passed" in r.stdout, r.stdout
    assert re.search(r"test_x.py::test_one_device_over needed 64\.0MB of GPU memory on device 1 \(67108864 bytes",
                     r.stdout), r.stdout
    assert "call sites live at its GPU peak" in r.stdout and "alloc (" in r.stdout
    assert "test_two_devices_under_budget_each needed" not in r.stdout
    assert "call gpu" in r.stdout  # the summary's column


def test_top_n(tmp_path):
    r = pytest_run(tmp_path, BUDGET, "--memshim", "--memshim-top", "1")
    assert "the 1 that needed most" in r.stdout
    assert list(summary_rows(r.stdout)) == ["test_x.py::test_big"]


def test_without_the_option_nothing_happens(tmp_path):
    r = pytest_run(tmp_path, BUDGET)
    assert r.returncode == 0 and "3 passed" in r.stdout and "memshim" not in r.stdout, r.stdout
    r = pytest_run(tmp_path, BUDGET, "--memshim", MEMSHIM_DISABLE="1")
    assert r.returncode == 0 and "3 passed" in r.stdout, r.stdout
    assert "MEMSHIM_DISABLE is set: nothing measured, no budget enforced" in r.stdout


def test_disable_reads_as_the_library(monkeypatch):
    """MEMSHIM_DISABLE's words are the library's, one rule for every boolean setting:
    no and off do not disable, yes and on do."""
    from memshim.pytest_plugin import _disabled
    for value, disabled in (("1", True), ("yes", True), ("ON", True), ("True", True), ("0", False),
                            ("no", False), ("off", False), ("FALSE", False), ("maybe", False), ("", False)):
        monkeypatch.setenv("MEMSHIM_DISABLE", value)
        assert _disabled() is disabled, value
    monkeypatch.delenv("MEMSHIM_DISABLE")
    assert _disabled() is False


def test_parse_size():
    assert parse_size("20MB") == 20 << 20 and parse_size("1.5 GiB") == 3 << 29 and parse_size("512k") == 512 << 10
    assert parse_size(1234) == 1234 and parse_size("1234") == 1234 and parse_size("2T") == 2 << 40
    for bad in ("20XB", "", "MB", "-1", "1e3", None, True, -5, "5i"):
        with pytest.raises(ValueError):
            parse_size(bad)
