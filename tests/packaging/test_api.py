"""The memshim package's explicit API from a checkout (python/ on PYTHONPATH): memshim.stage as a
decorator on plain, async def, generator and async generator functions, on each Python the
machine has, with the library preloaded and without; begin/end without the library; the default
stages `memshim --help` shows against the shim's own (shim/core/config.c)."""
import json
import os
import re
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LIB = os.environ.get("MEMSHIM_LIB") or os.path.join(ROOT, "build", "libmemshim.so")
FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
MIB = 1 << 20
PYTHONS = ["/root/.pyenv/versions/%s/bin/python" % v for v in ("3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1",
                                                               "3.13.0")]
PYTHONS.append(os.environ.get("MEMSHIM_VENV_PY") or os.path.join(ROOT, ".venv", "bin", "python"))

# Each stage's calls, MiB kept per call, as fixtures/stage_kinds.py makes them: a generator's
# stretches (next/send/throw to the next yield or the end) and close() of a suspended one.
CALLS = {"plain": [1], "coro": [7], "coro_raises": [1], "gen": [3, 2, 1, 0], "gen_thrown": [2, 4, 0],
         "gen_closed": [2, 5], "agen": [2, 1, 0], "agen_closed": [1, 6]}
SEEN = {"kinds": [True, True, True, True], "names": ["plain", "coro", "gen", "agen"],
        "wrapped": ["coro", "gen", "agen"], "plain": 1, "coro": 7, "coro_raises": "'inside'",
        "gen": [[3, 2, 1], ["a", "b", "c"]], "gen_thrown": [1, -1], "gen_closed": 1, "agen": [2, 1, "stop"],
        "agen_closed": 1, "begin_end": [0, 0]}


def run(tmp_path, python, preload):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSHIM_") and k != "LD_PRELOAD"}
    env.update(PYTHONPATH=os.path.join(ROOT, "python"), MEMSHIM_OUTPUT=str(tmp_path / "m.json"))
    if preload:
        env["LD_PRELOAD"] = LIB
    r = subprocess.run([python, os.path.join(FIXTURES, "stage_kinds.py")], cwd=str(tmp_path), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("python", PYTHONS, ids=lambda p: p.split("/")[-3])
def test_decorator_measures_each_kind_of_function(tmp_path, python):
    if not os.path.exists(python):
        pytest.skip("no " + python)
    seen = run(tmp_path, python, preload=True)
    assert seen.pop("active") is True
    assert seen == SEEN
    stages = {s["name"]: s for s in json.load(open(str(tmp_path / "m.json")))["stages"]}
    for name, mib in CALLS.items():
        s = stages[name]
        kept = [int(round(float(h["cpu_alloc_delta"]) / MIB)) for h in s["history"]]
        assert (s["calls"], kept) == (len(mib), mib), name
        assert not s.get("open"), name
    assert stages["api"]["calls"] == 1


@pytest.mark.parametrize("python", PYTHONS[:1] + PYTHONS[-1:], ids=lambda p: p.split("/")[-3])
def test_without_the_library_the_program_runs_the_same(tmp_path, python):
    if not os.path.exists(python):
        pytest.skip("no " + python)
    seen = run(tmp_path, python, preload=False)
    assert seen.pop("active") is False
    assert seen == SEEN  # begin() and end() return 0, as memshim_stage_begin/_end when not tracking
    assert not os.path.exists(str(tmp_path / "m.json"))


def test_help_shows_the_shims_default_stages():
    source = open(os.path.join(ROOT, "shim", "core", "config.c")).read()
    body = re.search(r"ms_default_stages\[\]\s*=\s*((?:\s*\"[^\"]*\")+)\s*;", source).group(1)
    default = "".join(re.findall(r"\"([^\"]*)\"", body))
    assert default.startswith("init=transformers.trainer:Trainer.__init__,")
    shown = subprocess.run(["sh", os.path.join(ROOT, "scripts", "memshim"), "--help"], stdout=subprocess.PIPE,
                           universal_newlines=True).stdout
    after = shown.split("Default: the Hugging Face Trainer's", 1)[1].split("\n--output", 1)[0]
    assert default in "".join(after.split()), after


def test_metrics_inside_a_stage_adds_little_to_it(tmp_path):
    """metrics() reads the document without its timeline, history and call sites: asking inside a
    stage (the Lightning and HF callbacks do at each epoch end) added ~5.7 MB to its peak and left
    ~1 MB when it parsed the whole document."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSHIM_") and k != "LD_PRELOAD"}
    env.update(PYTHONPATH=os.path.join(ROOT, "python"), MEMSHIM_OUTPUT=str(tmp_path / "m.json"), LD_PRELOAD=LIB)
    r = subprocess.run([PYTHONS[-1], os.path.join(FIXTURES, "metrics_inside.py")], cwd=str(tmp_path), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    seen = json.loads(r.stdout)
    assert seen["whole"] > 500000 and seen["s0_calls"] == 50 and seen["keys"] > 60
    # what the call needed (peak above the stage's begin) and left; a stage may also see Python free
    # a 1 MiB pymalloc arena that was live before it (alloc -1 MiB, peaked +1 MiB, needed the same)
    assert seen["peaked"] + seen["alloc"] < MIB // 2 and seen["alloc"] < 64 * 1024, seen


def run_code(tmp_path, code, python=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSHIM_") and k != "LD_PRELOAD"}
    env.update(PYTHONPATH=os.path.join(ROOT, "python"), MEMSHIM_OUTPUT=str(tmp_path / "m.json"), LD_PRELOAD=LIB)
    return subprocess.run([python or PYTHONS[-1], "-c", code], cwd=str(tmp_path), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=120)


@pytest.mark.parametrize("python", PYTHONS, ids=lambda p: p.split("/")[-3])
def test_a_call_an_exception_ended_is_marked(tmp_path, python):
    """The decorator's and the block's calls an exception left are "raised", with the
    type's name; a generator's end, close() and a coroutine's return are not."""
    if not os.path.exists(python):
        pytest.skip("no " + python)
    seen = run(tmp_path, python, preload=True)
    assert seen.pop("active") is True
    stages = {s["name"]: s for s in json.load(open(str(tmp_path / "m.json")))["stages"]}
    assert stages["coro_raises"]["calls_ended"]["raised"] == 1
    assert stages["coro_raises"]["exceptions"] == ["KeyError"]
    for name in ("plain", "coro", "gen", "gen_closed", "agen", "agen_closed"):
        assert stages[name]["calls_ended"]["raised"] == 0, name
    # gen_thrown: the ValueError thrown in is handled inside, so its stretch returns
    assert stages["gen_thrown"]["calls_ended"]["raised"] == 0
    r = run_code(tmp_path, "import memshim\ntry:\n    with memshim.stage('epoch'):\n        raise KeyboardInterrupt\n"
                           "except KeyboardInterrupt:\n    pass\nmemshim.begin('x'); memshim.end('x', exception=OSError)\n",
                 python)
    assert r.returncode == 0, r.stderr
    stages = {s["name"]: s for s in json.load(open(str(tmp_path / "m.json")))["stages"]}
    assert stages["epoch"]["ended"] == "raised" and stages["epoch"]["exception"] == "KeyboardInterrupt"
    assert stages["x"]["exception"] == "OSError"


def test_the_65th_stage_name_raises(tmp_path):
    """A stage that cannot be opened (the process has 64 names: init and 63 of the
    program's) raises ValueError naming the limit, instead of measuring nothing."""
    r = run_code(tmp_path, "import memshim\nfor i in range(63):\n    with memshim.stage('s%d' % i):\n        pass\n"
                           "try:\n    with memshim.stage('one_more'):\n        print('ran')\n"
                           "except ValueError as e:\n    print('ValueError:', e)\n")
    assert r.returncode == 0, r.stderr
    assert "ran" not in r.stdout and "ValueError: memshim stage 'one_more' not opened" in r.stdout, r.stdout
    assert "at most 64 stage names" in r.stdout
    assert r.stderr.count("memshim:") == 1 and "at most 64 stage names" in r.stderr, r.stderr
