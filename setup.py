"""Builds libmemshim.so and memshim-format with the Makefile and puts them, with the wrapper script,
into the package (memshim/_bin/); the rest of the metadata is in pyproject.toml."""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithMake(build_py):
    def run(self):
        super().run()
        build = os.path.abspath(os.path.join(HERE, "build", "pip"))
        subprocess.check_call(["make", "-C", HERE, "BUILD=" + build,
                               build + "/libmemshim.so", build + "/memshim-format"])
        dest = os.path.join(self.build_lib, "memshim", "_bin")
        os.makedirs(dest, exist_ok=True)
        for src in (os.path.join(build, "libmemshim.so"), os.path.join(build, "memshim-format"),
                    os.path.join(HERE, "scripts", "memshim")):
            shutil.copy2(src, dest)


setup(cmdclass={"build_py": BuildWithMake})
