"""The wheel from `make wheel` (MEMSHIM_WHEEL; the unrepaired one in MEMSHIM_RAW_WHEEL): its tag,
what its programs need, and a clean venv that installs it offline and runs memshim.

The formatter is also run in a root that holds glibc's libraries, zlib and expat (which manylinux
lets a wheel take from the system, and every Python has) and the installed package, nothing else
(chroot in a mount namespace of its own): no system cairo, jansson, X11 or anything else they pull
in can be found there, which the system-linked formatter shows by failing to start in it."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WHEEL = os.environ.get("MEMSHIM_WHEEL") or (sorted(glob.glob(os.path.join(ROOT, "dist", "memshim-*.whl"))) or [""])[-1]
RAW_WHEEL = os.environ.get("MEMSHIM_RAW_WHEEL", "")
GLIBC = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "ld-linux-x86-64.so.2"}
SYSTEM = GLIBC | {"libz.so.1", "libexpat.so.1"}  # what the wheel may take from the system
# pip with nothing but the wheel: no index, no find-links from the machine's configuration.
OFFLINE = dict(os.environ, PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")


def header_version():
    text = open(os.path.join(ROOT, "shim", "memshim.h")).read()
    return ".".join(re.search(r"#define MEMSHIM_VERSION_%s (\d+)" % k, text).group(1) for k in ("MAJOR", "MINOR"))


def run(cmd, **kw):
    kw.setdefault("env", OFFLINE)
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, **kw)


def needed(path):
    out = run(["readelf", "-d", path]).stdout
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", out))


def glibc_floor(path):
    out = run(["objdump", "-T", path]).stdout
    return max([int(m) for m in re.findall(r"GLIBC_2\.(\d+)", out)] or [0])


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory):
    assert WHEEL and os.path.isfile(WHEEL), "no wheel: run `make wheel` (MEMSHIM_WHEEL)"
    d = tmp_path_factory.mktemp("unpacked")
    zipfile.ZipFile(WHEEL).extractall(str(d))
    return str(d)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh venv of this interpreter's base Python with the wheel installed offline."""
    d = str(tmp_path_factory.mktemp("venv") / "v")
    base = getattr(sys, "_base_executable", sys.executable)
    r = run([base, "-m", "venv", d])
    assert r.returncode == 0, r.stderr
    r = run([d + "/bin/python", "-m", "pip", "install", "-q", "--no-index", WHEEL])
    assert r.returncode == 0, r.stderr
    return d


def site_packages(venv):
    return run([venv + "/bin/python", "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"]).stdout.strip()


def test_tag_is_manylinux_at_the_true_glibc_floor(unpacked):
    m = re.match(r"memshim-(.+?)-py3-none-manylinux_2_(\d+)_x86_64\.whl$", os.path.basename(WHEEL))
    assert m, WHEEL
    assert m.group(1) == header_version()
    wheel_info = open(glob.glob(unpacked + "/memshim-*.dist-info/WHEEL")[0]).read()
    assert "Root-Is-Purelib: false" in wheel_info
    assert "Tag: py3-none-manylinux_2_%s_x86_64" % m.group(2) in wheel_info
    elves = [p for p in glob.glob(unpacked + "/memshim/_bin/*") + glob.glob(unpacked + "/memshim.libs/*")
             if open(p, "rb").read(4) == b"\x7fELF"]
    assert len(elves) > 10  # the two programs and what the formatter pulls in
    assert int(m.group(2)) == max(glibc_floor(p) for p in elves)


def test_library_needs_only_glibc_and_is_untouched(unpacked):
    lib = unpacked + "/memshim/_bin/libmemshim.so"
    assert needed(lib) <= GLIBC, needed(lib)
    r = run([sys.executable, "-m", "auditwheel", "show", WHEEL])
    assert r.returncode == 0 and "consistent with" in r.stdout, r.stdout + r.stderr


def test_formatter_libraries_bundled_through_rpath(unpacked):
    fmt = unpacked + "/memshim/_bin/memshim-format"
    assert not [n for n in needed(fmt) if n not in GLIBC and not n.startswith(("libjansson-", "libcairo-", "libdw-"))]
    assert "$ORIGIN/../../memshim.libs" in run(["readelf", "-d", fmt]).stdout
    bundled = os.listdir(unpacked + "/memshim.libs")
    for lib in ("libjansson", "libcairo", "libpixman-1", "libfontconfig", "libfreetype", "libpng16", "libX11",
                "libXext", "libXrender", "libxcb", "libdw", "libelf"):
        assert any(b.startswith(lib + "-") for b in bundled), (lib, bundled)
    for b in bundled:  # each bundled library finds the others, and needs nothing else
        for n in needed(unpacked + "/memshim.libs/" + b):
            assert n in SYSTEM or n in bundled, (b, n)


def test_pip_install_dot_wheel_is_platform_tagged():
    """What `pip install .` builds (the PEP 517 wheel, before auditwheel)."""
    assert RAW_WHEEL and os.path.isfile(RAW_WHEEL), "MEMSHIM_RAW_WHEEL"
    assert re.search(r"-py3-none-linux_x86_64\.whl$", RAW_WHEEL), RAW_WHEEL
    with zipfile.ZipFile(RAW_WHEEL) as z:
        info = z.read([n for n in z.namelist() if n.endswith(".dist-info/WHEEL")][0]).decode()
        assert "Root-Is-Purelib: false" in info
        assert not [n for n in z.namelist() if "/purelib/" in n]
        assert "memshim/_bin/libmemshim.so" in z.namelist()


def test_import_and_version(venv):
    r = run([venv + "/bin/python", "-c", "import memshim, os; print(memshim.__version__); print(memshim.library_path())"],
            cwd="/")
    assert r.returncode == 0, r.stderr
    version, lib = r.stdout.split()
    assert version == header_version()
    assert lib.startswith(os.path.realpath(venv)) and lib.endswith("/memshim/_bin/libmemshim.so")
    r = run([venv + "/bin/memshim", "--version"])
    assert r.stdout.strip() == "memshim " + header_version()


def test_run_and_format(venv, tmp_path):
    out = str(tmp_path / "m.json")
    code = "import memshim\nassert memshim.active()\nwith memshim.stage('work'):\n    b = bytearray(8 << 20)\nraise SystemExit(3)"
    r = run([venv + "/bin/memshim", "run", "--output", out, "--", venv + "/bin/python", "-c", code], cwd=str(tmp_path))
    assert r.returncode == 3, r.stderr  # the command's status
    assert "***** work metrics *****" in r.stderr
    doc = json.load(open(out))
    assert doc["metrics"]["work_mem_cpu_alloc_delta"] >= 8 << 20
    r = run([venv + "/bin/memshim-format", out])
    assert r.returncode == 0, r.stderr
    assert "work_mem_cpu_alloc_delta" in r.stdout and "process_mem_cpu_peak" in r.stdout
    r = run([venv + "/bin/memshim-format", "--plot", str(tmp_path / "m.png"), out])
    assert r.returncode == 0, r.stderr
    assert open(str(tmp_path / "m.png"), "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_top(venv, tmp_path):
    """`memshim top` of a pip installation: memshim-top beside memshim-format in the package."""
    live = tmp_path / "live"
    live.mkdir(mode=0o700)
    env = dict(OFFLINE, MEMSHIM_LIVE_DIR=str(live), XDG_RUNTIME_DIR=str(tmp_path))
    r = run([venv + "/bin/memshim", "top", "--once"], env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("host ") and "\nPID " in r.stdout, r.stdout  # the host's memory, then the table
    assert "(no memshim process with a live record)" in r.stdout, r.stdout
    r = run([venv + "/bin/memshim", "top", "--json"], env=env)
    assert r.returncode == 0 and json.loads(r.stdout) == [], r.stderr


OLDEST = sorted(glob.glob("/root/.pyenv/versions/3.8.*/bin/python3.8")) + [shutil.which("python3.8") or ""]


@pytest.mark.skipif(not OLDEST[0], reason="no Python 3.8 here")
def test_oldest_python_takes_the_same_wheel(tmp_path):
    """py3-none: the oldest Python the package supports installs the same wheel and runs it."""
    d = str(tmp_path / "v38")
    assert run([OLDEST[0], "-m", "venv", d]).returncode == 0
    r = run([d + "/bin/python", "-m", "pip", "install", "-q", "--no-index", WHEEL])
    assert r.returncode == 0, r.stderr
    r = run([d + "/bin/memshim", "run", "--no-dump", "--output", str(tmp_path / "m.json"), "--", d + "/bin/python",
             "-c", "import memshim, sys; assert memshim.active() and sys.version_info[:2] == (3, 8)"])
    assert r.returncode == 0, r.stderr
    assert "process_mem_cpu_peak" in json.load(open(str(tmp_path / "m.json")))["metrics"]


def test_formatter_resolves_bundled_libraries(venv):
    fmt = site_packages(venv) + "/memshim/_bin/memshim-format"
    out = run(["ldd", fmt]).stdout
    libs = dict(re.findall(r"^\s*(\S+) => (\S+)", out, re.M))
    assert libs, out
    for name, path in libs.items():
        if name not in SYSTEM:
            assert os.path.realpath(os.path.dirname(path)) == os.path.realpath(site_packages(venv) + "/memshim.libs"), \
                (name, path)


def test_kernel_install(venv, tmp_path):
    """jupyter_client is not the wheel's dependency: the venv borrows the tools venv's."""
    tools = run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    pth = os.path.join(site_packages(venv), "zz-tools.pth")
    with open(pth, "w") as f:
        f.write(tools + "\n")
    try:
        r = run([venv + "/bin/memshim", "kernel", "install", "--prefix", str(tmp_path)])
    finally:
        os.unlink(pth)
    assert r.returncode == 0, r.stderr
    spec = json.load(open(str(tmp_path / "share/jupyter/kernels/memshim/kernel.json")))
    assert spec["env"]["LD_PRELOAD"] == os.path.realpath(site_packages(venv) + "/memshim/_bin/libmemshim.so")


def test_pytest_plugin_entry_point(venv, tmp_path):
    """Installed, `pytest --memshim` finds the plugin by its pytest11 entry point (no -p): pytest
    itself is borrowed from the tools venv."""
    tools = run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    pth = os.path.join(site_packages(venv), "zz-tools.pth")
    with open(pth, "w") as f:
        f.write(tools + "\n")
    (tmp_path / "test_budget.py").write_text(
        "import pytest\n"
        "@pytest.mark.memshim_limit(cpu='20MB')\ndef test_small():\n    b = bytearray(5 << 20)\n"
        "@pytest.mark.memshim_limit(cpu='20MB')\ndef test_big():\n    b = bytearray(40 << 20)\n"
        "def test_free():\n    pass\n")
    env = {k: v for k, v in OFFLINE.items() if k not in ("PYTHONPATH", "LD_PRELOAD")}
    try:
        r = run([venv + "/bin/python", "-m", "pytest", "-p", "no:cacheprovider", "--memshim", "test_budget.py"],
                cwd=str(tmp_path), env=env)
        # Named by -p as well: the same plugin, not a second one.
        r2 = run([venv + "/bin/python", "-m", "pytest", "-p", "memshim.pytest_plugin", "--memshim-top", "1",
                  "-p", "no:cacheprovider", "--memshim", "test_budget.py"], cwd=str(tmp_path), env=env)
    finally:
        os.unlink(pth)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed, 2 passed" in r.stdout and "over its budget of 20.0MB" in r.stdout
    assert "memshim: memory per test" in r.stdout
    assert r2.returncode == 1 and "1 failed, 2 passed" in r2.stdout, r2.stdout + r2.stderr


def copy_keeping_path(src, root):
    dest = root + src
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    shutil.copy(os.path.realpath(src), dest)


def base_root(root):
    """ROOT with the dynamic loader, glibc's libraries, zlib and expat at their paths here, and
    /bin/true."""
    out = run(["ldd", "/bin/true"]).stdout
    libc = re.search(r"libc\.so\.6 => (\S+)", out).group(1)
    loader = re.search(r"^\s*(/\S*ld-linux\S*)", out, re.M).group(1)
    for lib in SYSTEM - {"ld-linux-x86-64.so.2"}:
        p = os.path.join(os.path.dirname(libc), lib)
        if os.path.exists(p):
            copy_keeping_path(p, root)
    copy_keeping_path(loader, root)
    copy_keeping_path("/bin/true", root)


def in_root(root, argv, **env):
    """ARGV run with ROOT as / and the kernel's /proc (which $ORIGIN needs) bound inside, in a mount
    namespace of its own (a user namespace too when not root)."""
    os.makedirs(root + "/proc", exist_ok=True)
    unshare = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-r", "-m"]
    script = 'mount --rbind /proc "$0/proc" && exec chroot "$0" "$@"'
    return run(unshare + ["--", "sh", "-c", script, root] + argv,
               env=dict(env, PATH="/usr/sbin:/usr/bin:/sbin:/bin"))


def test_formatter_and_library_with_the_base_system_alone(venv, tmp_path):
    root = str(tmp_path / "root")
    base_root(root)
    shutil.copytree(site_packages(venv) + "/memshim", root + "/pkg/memshim")
    shutil.copytree(site_packages(venv) + "/memshim.libs", root + "/pkg/memshim.libs")
    shutil.copy(os.environ.get("MEMSHIM_SYSTEM_FORMAT") or os.path.join(ROOT, "build", "memshim-format"),
                root + "/system-memshim-format")
    if in_root(root, ["/bin/true"]).returncode != 0:
        pytest.skip("cannot chroot here (neither root nor user namespaces)")
    found = run(["find", root, "-name", "*.so*"]).stdout.split()
    assert not [p for p in found if re.search(r"/lib(cairo|jansson|X11|png|fontconfig)", p) and "/pkg/" not in p]
    # The system-linked formatter cannot start there: the root really hides the system libraries.
    r = in_root(root, ["/system-memshim-format", "--version"])
    assert r.returncode == 127 and "libjansson.so.4" in r.stderr, r.stderr
    r = in_root(root, ["/pkg/memshim/_bin/memshim-format", "--version"])
    assert r.returncode == 0 and r.stdout.strip() == "memshim-format " + header_version(), r.stderr
    r = in_root(root, ["/bin/true"], LD_PRELOAD="/pkg/memshim/_bin/libmemshim.so", MEMSHIM_OUTPUT="/m.json",
                MEMSHIM_STAGES="main=main")
    assert r.returncode == 0, r.stderr
    r = in_root(root, ["/pkg/memshim/_bin/memshim-format", "/m.json"])
    assert r.returncode == 0 and "process_mem_cpu_peak" in r.stdout, r.stderr
    r = in_root(root, ["/pkg/memshim/_bin/memshim-format", "--plot", "/m.svg", "/m.json"])
    assert r.returncode == 0, r.stderr
    assert b"<svg" in open(root + "/m.svg", "rb").read(400)
    # memshim top's table needs no terminal description (ncurses' terminfo is not in the root)
    os.makedirs(root + "/live", mode=0o700)
    r = in_root(root, ["/pkg/memshim/_bin/memshim-top", "--once"], MEMSHIM_LIVE_DIR="/live")
    assert r.returncode == 0 and r.stdout.startswith("host ") and "\nPID " in r.stdout, r.stderr
