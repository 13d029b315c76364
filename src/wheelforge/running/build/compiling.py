"""Bringing a variant's objects and library up to date: the generated files and build.ninja
written, the freshness stamp asked first (an unchanged build starts no ninja), the compile
cache's session around the ninja run (its environment and this build's counts)."""

from __future__ import annotations

import time
from collections.abc import Callable

from wheelforge.foundation import fsutil
from wheelforge.planning import ninjafile, reproducible
from wheelforge.planning.plan import VariantPlan
from wheelforge.running.build import freshness, ninja
from wheelforge.toolchain import compilecache


def compile_variant(
    plan: VariantPlan, *, before_ninja: Callable[[], None] | None = None
) -> tuple[list[str], compilecache.CacheStats | None]:
    """Bring the objects and the library up to date: the steps ninja ran (none, and no ninja
    process, when the freshness stamp says nothing changed) and the compile cache's counts.
    *before_ninja* runs when ninja is about to (what can overlap the compile starts there)."""
    for generated in plan.compile.generated:
        fsutil.write_if_changed(generated.path, generated.text)
    text = ninjafile.write(plan)
    if freshness.up_to_date(plan, text):
        return [], None
    freshness.forget(plan)
    if before_ninja is not None:
        before_ninja()
    started = time.time_ns()
    stats = None
    compile_cache = plan.compile.compile_cache
    if compile_cache is None:
        steps = ninja.run(plan)
    else:
        root = plan.project.resolve()
        version = plan.variant.toolkit.version
        absolute = not reproducible.names_project_relatively(plan.build_dir, root, version)
        with compilecache.session(compile_cache, plan.build_dir, absolute=absolute) as (
            env,
            found,
        ):
            steps = ninja.run(plan, env=env)
        stats = found[0] if found else None
    freshness.record(plan, text, started)
    return steps, stats
