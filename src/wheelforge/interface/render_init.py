"""``wheelforge init``'s screen: what was written, what the build script tried that init
refused, what was translated, and what needs a hand (the result is data: running/adopt.py)."""

from __future__ import annotations

from wheelforge.configuration.importers.writer import InitResult
from wheelforge.foundation import log


def print_result(result: InitResult) -> None:
    log.info(f"wrote {result.path} (from {result.front_door}: {result.summary})")
    for generated in result.generated:
        log.info(f"wrote {result.path.parent / generated.path}")
    attempted = [r for r in result.refusals if r.attempted]
    found = [r for r in result.refusals if not r.attempted]
    if attempted:
        log.info(
            f"refused {len(attempted)} thing(s) the build script tried (init never downloads or"
            " builds):"
        )
        for r in attempted:
            log.info(f"  - {r.what} {r.detail}" + (f" ({r.where})" if r.where else ""))
    if found:
        log.info(
            f"{len(found)} download(s) in the build script, not reached in this run (init would"
            " refuse them):"
        )
        for r in found:
            log.info(f"  - {r.where}: {r.detail}")
    if result.done:
        log.info("translated:")
        for note in result.done:
            log.info(f"  - {note}")
    if result.hand:
        log.info(f"{len(result.hand)} thing(s) need a hand:")
        for note in result.hand:
            log.info(f"  - {note}")
    else:
        log.info("nothing needs a hand")
