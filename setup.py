"""Builds libmemshim.so, memshim-format and memshim-top with the Makefile and puts them, with the
wrapper script, into the package (memshim/_bin/); the rest of the metadata is in pyproject.toml.

The wheel is platform-specific (Root-Is-Purelib false, tagged py3-none-<platform>): it carries
native programs but no CPython extension, so any Python 3 on that platform takes it.  `make wheel`
then turns the linux_x86_64 tag into manylinux with auditwheel (packaging/packaging.mk).  The
version is shim/memshim.h's, the one place it is written."""
import os
import re
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel  # setuptools >= 70.1
except ImportError:  # older setuptools: the wheel package's
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))


def header_version():
    with open(os.path.join(HERE, "shim", "memshim.h")) as f:
        text = f.read()
    return ".".join(re.search(r"#define MEMSHIM_VERSION_%s (\d+)" % k, text).group(1)
                    for k in ("MAJOR", "MINOR"))


class BuildWithMake(build_py):
    def run(self):
        super().run()
        build = os.environ.get("MEMSHIM_PIP_BUILD") or os.path.join(HERE, "build", "pip")
        build = os.path.abspath(build)
        subprocess.check_call(["make", "-C", HERE, "BUILD=" + build,
                               build + "/libmemshim.so", build + "/memshim-format", build + "/memshim-top"])
        dest = os.path.join(self.build_lib, "memshim", "_bin")
        os.makedirs(dest, exist_ok=True)
        # `memshim top` runs memshim-top found beside memshim-format (scripts/memshim)
        for src in (os.path.join(build, "libmemshim.so"), os.path.join(build, "memshim-format"),
                    os.path.join(build, "memshim-top"), os.path.join(HERE, "scripts", "memshim")):
            shutil.copy2(src, dest)
        # The installed package knows its version without the header beside it.
        with open(os.path.join(self.build_lib, "memshim", "_version.py"), "w") as f:
            f.write('"""memshim\'s version (from shim/memshim.h when built)."""\n'
                    '__version__ = "%s"\n' % header_version())


class NativeDistribution(Distribution):
    """Native programs inside: installed into platlib, the wheel's root not purelib."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    """No extension module either: any Python 3 on the platform, py3-none-<platform>."""

    def get_tag(self):
        return ("py3", "none") + tuple(super().get_tag()[2:])


# The egg-info beside the package would make a checkout on PYTHONPATH look installed (its entry
# points loaded twice): it goes to build/ with the rest.
EGG_BASE = os.path.join("build", "egg-info")
os.makedirs(os.path.join(HERE, EGG_BASE), exist_ok=True)
setup(version=header_version(), distclass=NativeDistribution, options={"egg_info": {"egg_base": EGG_BASE}},
      cmdclass={"build_py": BuildWithMake, "bdist_wheel": PlatformWheel})
