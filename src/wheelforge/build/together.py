"""Variants built side by side: their ninjas at once under one jobserver (jobserver.py), so
the cores a variant's serial tail leaves idle (a ``.cu``'s host side, the link, packing and
checks) run another variant's compiles, as the one ninja of their union would.

How many at once is planning/parallelism.variants_at_once's: every schedule's memory unbound
and their peaks within the memory together, else one at a time; one at a time also with one
variant, ``-j 1``, sccache (its one server counts a session's compiles), and a jobserver this
process was given (``MAKEFLAGS``: a ninja then joins that one, as it always has). One at a
time is the build as it was, in the calling thread.

Each variant runs in a thread of its own; what it prints is held (foundation/log.held) and
printed whole when it ends, in the variants' order, while one live line counts every ninja's
jobs (foundation/progress.JobBoard). A failed variant is its own VariantFailure, as always;
an interruption (SIGINT, SIGTERM: the main thread's), or an error that is no variant's
failure, stops every tool (foundation/proc.stop_all), waits for the threads, prints what they
held, and goes on up.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from wheelforge.build import compiling, ninja
from wheelforge.build.jobserver import Jobserver
from wheelforge.foundation import log, proc
from wheelforge.foundation.errors import Interrupted
from wheelforge.planning.parallelism import default_parallelism, variants_at_once
from wheelforge.planning.plan import VariantPlan

T = TypeVar("T")
_JOIN_S = 0.2  # how often the waiting main thread looks (and lets a signal in)


def at_once(plans: Sequence[VariantPlan], environ: dict[str, str] | None = None) -> int:
    """How many of *plans* build at once (the module notes)."""
    env = os.environ if environ is None else environ
    if len(plans) < 2 or "--jobserver-auth" in env.get("MAKEFLAGS", ""):
        return 1
    jobs = {p.compile.jobs for p in plans}
    cache = plans[0].compile.compile_cache
    if len(jobs) > 1 or any(p.compile.compile_cache != cache for p in plans):
        return 1
    if cache is not None and cache.tool != "ccache":
        return 1
    total = jobs.pop() or default_parallelism()
    return variants_at_once([p.compile.schedule for p in plans], jobs=total)


def total_jobs(plans: Sequence[VariantPlan]) -> int:
    """The compiles at once of the whole build: what one variant's ninja would run."""
    return plans[0].compile.jobs or default_parallelism()


@dataclass
class _Slot:
    """One variant's run: its output held, its outcome or what it raised."""

    held: log.Held = field(default_factory=log.Held)
    done: bool = False
    outcome: object = None
    raised: BaseException | None = None


def build(
    plans: Sequence[VariantPlan], build_one: Callable[[VariantPlan], T], *, workers: int
) -> list[T]:
    """*build_one* of each plan, the ninjas of *workers* at once (1: one after another, in this
    thread, as ever); the outcomes in the plans' order."""
    if workers <= 1:
        return [build_one(p) for p in plans]
    from wheelforge.foundation import progress  # the live line's, loaded when ninja runs

    slots = [_Slot() for _ in plans]
    todo = list(range(len(plans)))
    todo_lock = threading.Lock()

    def work() -> None:
        while True:
            with todo_lock:
                if not todo:
                    return
                i = todo.pop(0)
            slot = slots[i]
            try:
                with log.held(slot.held):
                    slot.outcome = build_one(plans[i])
            except BaseException as exc:  # handed to the main thread; no more plans begin
                slot.raised = exc
                with todo_lock:
                    todo.clear()
            finally:
                slot.done = True

    # *workers* ninjas at once, and a thread more: one variant packs (they take turns) while
    # the others compile.
    jobserver = Jobserver(total_jobs(plans), ninjas=workers)
    threads = [
        threading.Thread(target=work, name=f"wheelforge-variant-{n}", daemon=True)
        for n in range(min(workers + 1, len(plans)))
    ]
    log.detail(
        f"  {workers} variants compiling at a time, {jobserver.jobs} compiles at once in all; "
        "each variant's lines follow when it is done"
    )
    printed = 0
    try:
        with (
            progress.shown(progress.JobBoard()),
            ninja.sharing(jobserver),
            compiling.shared_in_order(plans),
        ):
            for thread in threads:
                thread.start()
            try:
                printed = _wait(threads, slots, printed)
            except BaseException as exc:
                with todo_lock:
                    todo.clear()
                proc.stop_all(_reason(exc))
                # Each thread ends at its next tool or its publishing (both refused now); one
                # in Python work for longer is left (a daemon), its output with it.
                deadline = time.monotonic() + proc.STOP_GRACE_S
                for thread in threads:
                    thread.join(max(0.0, deadline - time.monotonic()))
                raise
    finally:
        if not any(t.is_alive() for t in threads):  # else tools stay refused to the one left
            proc.resume()
        jobserver.close()
        for slot in slots[printed:]:
            slot.held.release()
    return [slot.outcome for slot in slots]  # type: ignore[misc]  # each build_one's T


def _wait(threads: Sequence[threading.Thread], slots: Sequence[_Slot], printed: int) -> int:
    """Wait for the threads, printing each variant's output once it and those before it are
    done; raise what a variant raised (an interruption, an error that is no failure)."""
    while True:
        alive = False
        for thread in threads:
            thread.join(_JOIN_S)
            alive = alive or thread.is_alive()
        while printed < len(slots) and slots[printed].done:
            slots[printed].held.release()
            printed += 1
        raised = next((s.raised for s in slots if s.raised is not None), None)
        if raised is not None:
            raise raised
        if not alive:
            return printed


def _reason(exc: BaseException) -> Callable[[], BaseException]:
    """What the other variants' threads raise once their tools are stopped: the same
    interruption, or one (nothing of theirs is reported: the build goes on up)."""
    if isinstance(exc, Interrupted):
        return type(exc)
    return Interrupted
