"""What makes a rebuild cheap, for running/build.py: the freshness stamp in front of ninja, the
compile cache around it, nvcc threads that fill the cores, and the stored findings of a wheel
that did not change."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import pickle
import time
from collections.abc import Callable
from pathlib import Path

from wheelforge import __version__
from wheelforge.binaries.verify import WheelVerification
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation import fsutil
from wheelforge.packaging import provenance, stamp, wheel
from wheelforge.planning import freshness, ninja, reproducible
from wheelforge.planning.plan import VariantPlan
from wheelforge.toolchain import compilecache


def with_threads(plan: VariantPlan, settings: BuildSettings) -> VariantPlan:
    """NVCC_THREADS when given, else enough nvcc threads for the nvcc jobs to fill the cores."""
    if plan.nvcc_threads is not None:
        return plan
    nvcc = [s for s in plan.compile_steps if s.rule == "nvcc"]
    targets = max((len((s.arch_set or plan.variant.arch_set).specs) for s in nvcc), default=1)
    threads = auto_nvcc_threads(cores=len(os.sched_getaffinity(0)), jobs=settings.jobs,
                                nvcc_sources=len(nvcc), targets=targets)  # fmt: skip
    return dataclasses.replace(plan, nvcc_threads=threads)


def auto_nvcc_threads(*, cores: int, jobs: int | None, nvcc_sources: int, targets: int) -> int:
    """nvcc ``--threads`` that fills *cores*: each of the nvcc jobs ninja runs at once compiles
    its archs in parallel, one thread per arch's device steps (preprocessing, cicc, ptxas; a
    PTX target shares its arch's cicc) and one for the host side (preprocessing and cudafe++,
    which run beside them: nvcc --time shows the chain). Rounded up: nvcc's host-side phases
    leave its threads idle part of the time."""
    concurrent = max(1, min(nvcc_sources, jobs or ninja.default_parallelism(cores)))
    return max(1, min(targets + 1, math.ceil(cores / concurrent)))


def launchers(
    settings: BuildSettings, cache: compilecache.CompileCache | None
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The C++, C and CUDA compiler launchers: those the environment names (``CXX="ccache
    g++"``, ``CMAKE_<LANG>_COMPILER_LAUNCHER``), else the compile cache (--compile-cache)."""
    cached = (str(cache.exe),) if cache else ()
    # sccache splits an nvcc compile into its steps and runs them in its own temporary folder:
    # it fails with --objdir-as-tempdir, and without it names the temporaries its own way
    # (x_0.cudafe1.cpp, a FILE symbol in .symtab), so its wheel would differ from an uncached
    # one (issue 12). nvcc compiles therefore bypass sccache; ccache runs nvcc whole.
    cuda = cached if cache and cache.tool != "sccache" else ()
    return (
        settings.cxx_launcher or cached,
        settings.cc_launcher or cached,
        settings.cuda_launcher or cuda,
    )


def compile_variant(
    plan: VariantPlan,
    jobs: int | None,
    cache: compilecache.CompileCache | None,
    *,
    before_ninja: Callable[[], None] | None = None,
) -> tuple[list[str], compilecache.CacheStats | None]:
    """Bring the objects and the library up to date: the steps ninja ran (none, and no ninja
    process, when the freshness stamp says nothing changed) and the compile cache's counts.
    *before_ninja* runs when ninja is about to (what can overlap the compile starts there)."""
    for generated in plan.generated:
        fsutil.write_if_changed(generated.path, generated.text)
    text = ninja.write(plan)
    if freshness.up_to_date(plan, text):
        return [], None
    freshness.forget(plan)
    if before_ninja is not None:
        before_ninja()
    started = time.time_ns()
    stats = None
    if cache is None:
        steps = ninja.run(plan, jobs=jobs)
    else:
        root = plan.matrix.root.resolve()
        version = plan.variant.toolkit.version
        absolute = not reproducible.names_project_relatively(plan.build_dir, root, version)
        with compilecache.session(cache, plan.build_dir, absolute=absolute) as (env, found):
            steps = ninja.run(plan, jobs=jobs, env=env)
        stats = found[0] if found else None
    freshness.record(plan, text, started)
    return steps, stats


# The SBOM, build info and inputs list of the last build, and the freshness stamp they were
# made under.
PROVENANCE = "provenance.json"


def dist_info_files(plan: VariantPlan) -> tuple[tuple[str, str], ...]:
    """provenance.provenance, stored beside the freshness stamp: while the stamp is the same
    (no input, output or command changed) it is read back, so a no-op starts no process
    (``ninja -t deps``, ``c++ --version``) for it. The inputs list is written into the build
    folder either way (provenance.INPUTS_NAME); the .dist-info files are returned."""
    text = freshness.stamp_text(plan)
    key = [
        __version__,
        wheel.source_date_epoch(),
        text and hashlib.sha256(text.encode()).hexdigest(),
    ]
    stored = plan.build_dir / PROVENANCE
    made = _stored(stored, key) if text is not None else None
    if made is None:
        made = provenance.provenance(plan)
        if text is not None:
            document = {"key": key, "files": made.dist_info, "inputs": made.inputs}
            fsutil.write_if_changed(stored, json.dumps(document) + "\n")
    fsutil.write_if_changed(plan.build_dir / provenance.INPUTS_NAME, made.inputs)
    return made.dist_info


def _stored(path: Path, key: list[object]) -> provenance.Provenance | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data["key"] != key:
            return None
        files = tuple((str(name), str(body)) for name, body in data["files"])
        return provenance.Provenance(dist_info=files, inputs=str(data["inputs"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


# What verify_wheel found in the wheel the reuse stamp names, so an unchanged wheel is not read
# again: the same bytes give the same findings.
VERIFIED = "wheel-verified.pickle"


def remember_verification(
    published: Path, plan: VariantPlan, found: WheelVerification, imported: str | None
) -> None:
    data = (__version__, stamp.sha256(published), found, imported)
    (plan.build_dir / VERIFIED).write_bytes(pickle.dumps(data))


def verified_before(
    published: Path, plan: VariantPlan
) -> tuple[WheelVerification, str | None] | None:
    """The findings (and the import check's verdict) stored when this very wheel was published
    by this wheelforge. The pickle is wheelforge's own, in its own build folder."""
    try:
        version, sha, found, imported = pickle.loads((plan.build_dir / VERIFIED).read_bytes())
    except Exception:  # missing, truncated, from another layout: verify again
        return None
    ok = version == __version__ and sha == stamp.sha256(published)
    return (found, imported) if ok and isinstance(found, WheelVerification) else None
