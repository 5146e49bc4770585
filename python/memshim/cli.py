"""The `memshim` command of a pip installation: `memshim kernel install` here, everything else
(run, format, diff) by the wrapper script installed beside the library."""
import argparse
import json
import os
import shutil
import sys
import tempfile

import memshim


def _wrapper():
    here = os.path.dirname(os.path.abspath(__file__))
    for p in (os.path.join(here, "_bin", "memshim"), os.path.join(here, "..", "..", "scripts", "memshim"),
              os.path.join(here, "..", "..", "..", "..", "bin", "memshim")):  # make install
        if os.path.isfile(p):
            return p
    return None


def kernel_install(argv):
    p = argparse.ArgumentParser(prog="memshim kernel install",
                                description="Writes a Jupyter kernelspec whose kernel runs with libmemshim.so preloaded.")
    p.add_argument("--name", default="memshim", help="kernel name (default: memshim)")
    p.add_argument("--display-name", default=None, help="name shown in Jupyter (default: Python 3 (memshim))")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="for this user (the default)")
    where.add_argument("--sys-prefix", action="store_true", help="into sys.prefix (this environment)")
    where.add_argument("--prefix", help="under PREFIX/share/jupyter/kernels")
    p.add_argument("--stages", help="MEMSHIM_STAGES for the kernel (default: unset, the Trainer's names)")
    p.add_argument("--output", default="memshim_kernel_%p.json", help="MEMSHIM_OUTPUT for the kernel")
    p.add_argument("--children-dir", default=None,
                   help="MEMSHIM_CHILDREN_DIR: where the kernel's children write their files (default: "
                        "children/ in the kernelspec's directory, out of the notebook's folder)")
    a = p.parse_args(argv)
    lib = memshim.library_path()
    if not lib:
        sys.stderr.write("memshim: cannot find libmemshim.so beside this package\n")
        return 125
    try:
        from jupyter_client.kernelspec import KernelSpecManager
    except ImportError:
        sys.stderr.write("memshim: kernel install needs jupyter_client (pip install jupyter_client ipykernel)\n")
        return 125
    env = {"LD_PRELOAD": lib, "MEMSHIM_OUTPUT": a.output}
    if a.stages:
        env["MEMSHIM_STAGES"] = a.stages
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": a.display_name or "Python 3 (memshim)", "language": "python",
            "env": env, "metadata": {"memshim": {"version": memshim.__version__}}}
    tmp = tempfile.mkdtemp()
    try:
        with open(os.path.join(tmp, "kernel.json"), "w") as f:
            json.dump(spec, f, indent=1)
        prefix = sys.prefix if a.sys_prefix else a.prefix
        dest = KernelSpecManager().install_kernel_spec(tmp, kernel_name=a.name, user=prefix is None,
                                                       prefix=prefix, replace=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # The kernel's children (ipykernel runs `uname -p` at start, cells run `!commands`) write into
    # one directory of their own, not the notebook's folder: the kernelspec's, which lives as long
    # as the kernel is installed.
    children = os.path.abspath(a.children_dir or os.path.join(dest, "children"))
    os.makedirs(children, exist_ok=True)
    env["MEMSHIM_CHILDREN_DIR"] = children
    with open(os.path.join(dest, "kernel.json"), "w") as f:
        json.dump(spec, f, indent=1)
    print("memshim: kernel %r installed in %s (preloads %s; children's files in %s)" % (a.name, dest, lib, children))
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--version"]:
        print("memshim", memshim.__version__)
        return 0
    if argv[:2] == ["kernel", "install"]:
        return kernel_install(argv[2:])
    if argv[:1] == ["kernel"]:
        usage = ("usage: memshim kernel install [--name NAME] [--user|--sys-prefix|--prefix P] "
                 "[--stages SPEC] [--output FILE] [--children-dir DIR]\n")
        if argv[1:2] in (["-h"], ["--help"]):
            sys.stdout.write(usage)
            return 0
        sys.stderr.write(usage)
        return 125
    script = _wrapper()
    if not script:
        sys.stderr.write("memshim: the wrapper script is missing from this installation\n")
        return 125
    os.execv("/bin/bash", ["bash", script] + argv)
    return 125


if __name__ == "__main__":
    sys.exit(main())
