"""What makes a rebuild cheap, for running/build.py: the freshness stamp in front of ninja, the
compile cache around it, nvcc threads that fill the cores, and the stored findings of a wheel
that did not change."""

from __future__ import annotations

import dataclasses
import hashlib
import json
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
from wheelforge.planning import ninjafile, reproducible
from wheelforge.planning.parallelism import auto_nvcc_threads
from wheelforge.planning.plan import VariantPlan
from wheelforge.running.build import freshness, ninja
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
        settings.compilers.launchers.cxx or cached,
        settings.compilers.launchers.cc or cached,
        settings.compilers.launchers.cuda or cuda,
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
    text = ninjafile.write(plan)
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


# The SBOM and build info of the last build, and the freshness stamp they were made under.
PROVENANCE = "provenance.json"


def dist_info_files(plan: VariantPlan) -> tuple[tuple[str, str], ...]:
    """provenance.dist_info_files, stored beside the freshness stamp: while the stamp is the
    same (no input, output or command changed) they are read back, so a no-op starts no
    process (``ninja -t deps``, ``c++ --version``) for them."""
    text = freshness.stamp_text(plan)
    key = [
        __version__,
        wheel.source_date_epoch(),
        text and hashlib.sha256(text.encode()).hexdigest(),
    ]
    stored = plan.build_dir / PROVENANCE
    if text is not None:
        try:
            data = json.loads(stored.read_text(encoding="utf-8"))
            if data["key"] == key:
                return tuple((str(name), str(body)) for name, body in data["files"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    files = provenance.dist_info_files(
        plan, lambda: freshness.recorded_inputs(plan) or ninja.inputs(plan)
    )
    if text is not None:
        fsutil.write_if_changed(stored, json.dumps({"key": key, "files": files}) + "\n")
    return files


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
