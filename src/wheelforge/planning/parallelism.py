"""How much runs at once: ninja's own default job count, and the nvcc threads that fill the
cores with it. Decided when the plan is made (planning/plan.py); nvcc gets the threads through
its environment (running/build/ninja.py run_env)."""

from __future__ import annotations

import math
import os


def default_parallelism(cores: int | None = None) -> int:
    """ninja's own default -j for *cores* (else this machine's CPU count): the count plus two,
    and 2 on one core (ninja.cc GuessParallelism)."""
    cpus = cores or os.cpu_count() or 1
    return cpus + 2 if cpus > 1 else 2


def auto_nvcc_threads(*, cores: int, jobs: int | None, nvcc_sources: int, targets: int) -> int:
    """nvcc ``--threads`` that fills *cores*: each of the nvcc jobs ninja runs at once compiles
    its archs in parallel, one thread per arch's device steps (preprocessing, cicc, ptxas; a
    PTX target shares its arch's cicc) and one for the host side (preprocessing and cudafe++,
    which run beside them: nvcc --time shows the chain). Rounded up: nvcc's host-side phases
    leave its threads idle part of the time."""
    concurrent = max(1, min(nvcc_sources, jobs or default_parallelism(cores)))
    return max(1, min(targets + 1, math.ceil(cores / concurrent)))
