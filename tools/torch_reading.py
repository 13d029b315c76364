"""The early reading of torch's files (torchprobe.probe_torch(early=True): no import) against
torch's own answer (torchprobe.confirm: imported, its cpp_extension helpers asked), for each
Python given; each with an empty probe cache.

    python tools/torch_reading.py /path/to/venv-a/bin/python /path/to/venv-b/bin/python
"""

import sys
import tempfile
import time
from pathlib import Path

from wheelforge.toolchain import torchprobe, warmtorch

for py in sys.argv[1:]:
    python = Path(py)
    with warmtorch.session(), tempfile.TemporaryDirectory() as cache:
        t = time.perf_counter()
        early = torchprobe.probe_torch(python, cache=Path(cache), early=True)
        t_early = time.perf_counter() - t
        own = torchprobe.confirm(early, cache=Path(cache))
        t_own = time.perf_counter() - t
        print(
            f"{early.label:16} early {t_early:.2f}s, own {t_own:.2f}s: "
            f"{'same' if own == early else 'DIFFERENT'}  {early.include_dirs[0]}"
        )
        if own != early:
            for f in (
                "version",
                "local",
                "cuda",
                "include_dirs",
                "library_dirs",
                "python_include",
                "ext_suffix",
                "cxx11_abi",
            ):
                if getattr(own, f) != getattr(early, f):
                    print("   ", f, getattr(early, f), "!=", getattr(own, f))
