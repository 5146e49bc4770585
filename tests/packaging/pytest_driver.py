"""The driver test_pytest_plugin.py and test_pytest_labels.py share: pytest on a small test file in a
subprocess (this interpreter, the checkout's package on PYTHONPATH, the plugin by -p), and where the
stand-in driver was built."""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
STANDIN_CUDA = os.environ.get("MEMSHIM_STANDIN_CUDA") or os.path.join(ROOT, "build", "gpu", "libcuda.so.1")


def pytest_run(tmp_path, source, *args, **env):
    """pytest ARGS on SOURCE written as tmp_path/test_x.py, with ENV added and the metrics file at
    tmp_path/m.json; the finished process, its stderr in its stdout."""
    (tmp_path / "test_x.py").write_text(textwrap.dedent(source))
    e = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSHIM_", "PYTEST_"))}
    e.pop("LD_PRELOAD", None)
    e.update(PYTHONPATH=os.path.join(ROOT, "python"), MEMSHIM_OUTPUT=str(tmp_path / "m.json"), **env)
    cmd = [sys.executable, "-m", "pytest", "-p", "memshim.pytest_plugin", "-p", "no:cacheprovider"] + list(args)
    return subprocess.run(cmd + ["test_x.py"], cwd=str(tmp_path), env=e, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
