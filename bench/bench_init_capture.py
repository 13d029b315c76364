"""How long init's setup.py capture takes with the build Python's torch and with the stand-in
torch, on a project folder (the choice docs/your-extension.md explains: the real torch is the
default because it answers whatever a setup.py asks; the stand-in is what a build Python
without torch gets).

    python bench/bench_init_capture.py PROJECT [NAME=VALUE ...]     # the switches setup.py reads

Each capture is a fresh child process (setup_child.py), timed by wall clock, three times; the
median and every run are printed, with the number of sources captured (the same in both).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

from wheelforge.adoption.doors.setupcapture import CaptureContext, capture_setup


def main(root: Path, env: tuple[tuple[str, str], ...]) -> None:
    nvcc = shutil.which("nvcc")
    for stand_in in (False, True):
        times, sources = [], 0
        for _ in range(3):
            start = time.perf_counter()
            build = capture_setup(
                root,
                CaptureContext(
                    python=Path(sys.executable), cuda_home=Path(nvcc).parent.parent if nvcc else None,
                    cuda_version="13.0", torch_version="2.13.0", env=env, stand_in=stand_in,
                ),
            )  # fmt: skip
            times.append(time.perf_counter() - start)
            sources = sum(len(e.sources) for e in build.extensions)
        label = "stand-in torch" if stand_in else "build Python's torch"
        runs = ", ".join(f"{t:.2f}" for t in times)
        print(f"{label}: median {statistics.median(times):.2f} s ({runs}); {sources} source(s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project", type=Path, help="a folder with a setup.py")
    parser.add_argument("switches", nargs="*", metavar="NAME=VALUE",
                        help="environment variables the setup.py reads")  # fmt: skip
    args = parser.parse_args()
    if not (args.project / "setup.py").is_file():
        parser.error(f"{args.project}: no setup.py")
    if bad := [s for s in args.switches if "=" not in s]:
        parser.error(f"{bad[0]}: a switch is NAME=VALUE")
    pairs = tuple((a.split("=", 1)[0], a.split("=", 1)[1]) for a in args.switches)
    main(args.project.resolve(), pairs)
