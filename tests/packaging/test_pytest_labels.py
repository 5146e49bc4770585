"""pytest --memshim keeps every test's numbers in the metrics file by node id: each phase
is a labelled call (memshim_stage_begin_labelled), listed under "labelled_calls"; memshim-format
shows them.  Same driver as test_pytest_plugin.py: pytest on a small file in a subprocess."""
import json
import os
import re
import subprocess

import pytest

from pytest_driver import ROOT, STANDIN_CUDA, pytest_run

FORMAT = os.environ.get("MEMSHIM_FORMAT") or os.path.join(ROOT, "build", "memshim-format")

TESTS = """
import pytest

@pytest.fixture
def big():
    b = bytearray(12 << 20)
    yield b

@pytest.mark.parametrize("mb", [5, 30])
def test_sized(mb):
    b = bytearray(mb << 20)

def test_uses_fixture(big):
    pass
"""


def by_node(doc):
    """(stage, node id) -> its labelled call."""
    return {(c["stage"], c["label"]): c for c in doc.get("labelled_calls", [])}


def needed(call, comp="cpu"):
    return call[comp]["alloc_delta"] + call[comp]["peaked_delta"]


def test_each_test_by_node_id_in_the_file(tmp_path):
    r = pytest_run(tmp_path, TESTS, "--memshim")
    assert r.returncode == 0 and "3 passed" in r.stdout, r.stdout
    doc = json.load(open(str(tmp_path / "m.json")))
    calls = by_node(doc)
    nodes = ["test_x.py::test_sized[5]", "test_x.py::test_sized[30]", "test_x.py::test_uses_fixture"]
    for node in nodes:
        for stage in ("pytest_setup", "pytest_call", "pytest_teardown"):
            assert (stage, node) in calls, (stage, node, sorted(calls))
    assert 30 << 20 <= needed(calls["pytest_call", "test_x.py::test_sized[30]"]) < 34 << 20
    assert 5 << 20 <= needed(calls["pytest_call", "test_x.py::test_sized[5]"]) < 9 << 20
    assert 12 << 20 <= needed(calls["pytest_setup", "test_x.py::test_uses_fixture"]) < 16 << 20
    assert needed(calls["pytest_call", "test_x.py::test_uses_fixture"]) < 4 << 20  # the fixture is setup's
    assert doc["labelled_calls_dropped"] == 0
    call_stage = {s["name"]: s for s in doc["stages"]}["pytest_call"]
    assert call_stage["calls"] == 3  # the stages are as before


def test_xdist_workers_label_their_tests(tmp_path):
    r = pytest_run(tmp_path, TESTS, "--memshim", "-n", "2")
    assert r.returncode == 0 and "3 passed" in r.stdout, r.stdout
    labels = set()
    for name in os.listdir(str(tmp_path)):
        if name.startswith("m.json"):
            labels |= {label for stage, label in by_node(json.load(open(str(tmp_path / name))))
                       if stage == "pytest_call"}
    assert labels == {"test_x.py::test_sized[5]", "test_x.py::test_sized[30]", "test_x.py::test_uses_fixture"}


GPU = """
import ctypes, os
cu = ctypes.CDLL(os.environ["STANDIN_CUDA"])
assert cu.cuInit(0) == 0

def test_on_device_1():
    ctx, p = ctypes.c_void_p(), ctypes.c_uint64()
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 1) == 0 and cu.cuCtxSetCurrent(ctx) == 0
    assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(24 << 20)) == 0
    cu.cuMemFree_v2(p)
"""


def test_gpu_numbers_per_device(tmp_path):
    if not os.path.isfile(STANDIN_CUDA):
        pytest.fail("the stand-in driver is missing: make %s" % STANDIN_CUDA)
    r = pytest_run(tmp_path, GPU, "--memshim", STANDIN_CUDA=STANDIN_CUDA)
    assert r.returncode == 0, r.stdout
    call = by_node(json.load(open(str(tmp_path / "m.json"))))["pytest_call", "test_x.py::test_on_device_1"]
    assert needed(call, "gpu") == 24 << 20
    assert [(d["device"], d["alloc_delta"] + d["peaked_delta"]) for d in call["gpu"]["devices"]] == [(1, 24 << 20)]


def test_the_formatter_lists_them(tmp_path):
    if not os.path.isfile(FORMAT):
        pytest.fail("memshim-format is not built: make %s" % FORMAT)
    pytest_run(tmp_path, TESTS, "--memshim")
    out = subprocess.run([FORMAT, str(tmp_path / "m.json")], stdout=subprocess.PIPE, universal_newlines=True).stdout
    assert "labelled calls" in out, out
    line = next(l for l in out.splitlines() if "test_x.py::test_sized[30]" in l)
    assert "pytest_call" in line and re.search(r"\b3[0-3]MB\b", line), out
    assert out.index("test_sized[30]") < out.index("test_sized[5]")  # who needed most first
