"""``wheelforge init``'s screen: what was written, what the build script tried that init
refused, what was translated, and what needs a hand (the result is data: adoption/adopt.py)."""

from __future__ import annotations

import shlex
from pathlib import Path

from wheelforge.adoption.writer.matrixfile import InitResult
from wheelforge.foundation import log


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def print_result(result: InitResult) -> None:
    log.info(f"wrote {result.path} (from {result.front_door}: {result.summary})")
    for generated in result.generated:
        log.info(f"wrote {result.path.parent / generated.path}")
    attempted = [r for r in result.refusals if r.attempted]
    found = [r for r in result.refusals if not r.attempted]
    if attempted:
        log.info(
            f"refused {_count(len(attempted), 'thing', 'things')} the build script tried (init never downloads or"
            " builds):"
        )
        for r in attempted:
            log.info(f"  - {r.what} {r.detail}" + (f" ({r.where})" if r.where else ""))
    if found:
        log.info(
            f"{_count(len(found), 'download', 'downloads')} in the build script, not reached in this run (init would"
            " refuse them):"
        )
        for r in found:
            log.info(f"  - {r.where}: {r.detail}")
    if result.done:
        log.info("translated:")
        for note in result.done:
            log.info(f"  - {note}")
    if result.hand:
        log.info(f"{_count(len(result.hand), 'thing needs', 'things need')} a hand:")
        for note in result.hand:
            log.info(f"  - {note}")
    else:
        log.info("nothing needs a hand")
    log.info(next_step(result, Path.cwd()))


def next_step(result: InitResult, cwd: Path) -> str:
    """The command that builds what init wrote, from where the user is."""
    matrix = result.path
    try:
        shown = matrix.relative_to(cwd)
    except ValueError:
        shown = matrix
    quoted = shlex.quote(str(shown))  # pasted into a shell: one argument, whatever its name
    build = "wheelforge build" + ("" if shown == Path("matrix.yaml") else f" --matrix {quoted}")
    things = "the thing" if len(result.hand) == 1 else f"the {len(result.hand)} things"
    first = f"see to {things} above in {shown.name}, then " if result.hand else ""
    return f"next: {first}{build} (wheelforge matrix lists the variants it builds)"
