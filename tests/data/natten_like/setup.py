import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class BuildExtension(build_ext):
    """NATTEN 0.21's shape: scripts write sources into csrc/, then CMake builds csrc/."""

    def build_extension(self, ext):
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.check_call([sys.executable, "scripts/autogen.py", "csrc/autogen"], cwd=here)
        try:  # outside the project: init's sandbox refuses it
            with open(os.path.join(here, "..", "outside.txt"), "w") as f:
                f.write("written")
        except OSError:
            pass
        out = os.path.splitext(os.path.basename(self.get_ext_fullpath(ext.name)))[0]
        build = self.build_temp
        os.makedirs(build, exist_ok=True)
        csrc = os.path.join(here, "csrc")
        subprocess.check_call(
            ["cmake", csrc, "-DTINY_OUTPUT=" + out, "-DTINY_SCALE=3", "-DCMAKE_BUILD_TYPE=Release"],
            cwd=build,
        )
        subprocess.check_call(["cmake", "--build", ".", "-j2"], cwd=build)


setup(
    name="tinyna",
    version="0.1.0",
    ext_modules=[Extension("tinyna.libtinyna", [])],
    cmdclass={"build_ext": BuildExtension},
)
