"""One generate step, as ninja runs it (planning/ninjafile.py's ``generate`` rule): the matrix's
command in the step's output folder, within its deadline, then a check that it wrote every
output it declares. Its output goes to ninja, and so into the variant's build.log; when it fails
it ends with one line that names the step, which build/diagnose.py shows.

    python -m wheelforge.build.genstep --name N --folder DIR --timeout S \\
        --output FILE... -- COMMAND...
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from wheelforge.foundation import proc

# The line a failed step ends with (diagnose.py finds it in ninja's output).
FAILED_MARK = "wheelforge: generate step"
# The exit code of a step past its deadline (as timeout(1) gives it).
TIMED_OUT = 124


def _parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        raise SystemExit(f"{FAILED_MARK}: no command after --")
    split = list(argv).index("--")
    parser = argparse.ArgumentParser(prog="genstep")
    parser.add_argument("--name", required=True)
    parser.add_argument("--folder", required=True, type=Path)
    parser.add_argument("--timeout", required=True, type=int)
    parser.add_argument("--output", action="append", default=[], type=Path)
    return parser.parse_args(argv[:split]), list(argv[split + 1 :])


def run(argv: Sequence[str]) -> int:
    """Run the step; its exit code (0: it ran and wrote every declared output)."""
    args, command = _parse(argv)
    name = f"{FAILED_MARK} '{args.name}'"
    if not command:
        print(f"{name}: no command to run", flush=True)
        return 2
    args.folder.mkdir(parents=True, exist_ok=True)
    print(f"{name}: {shlex.join(command)} (in {args.folder})", flush=True)
    try:
        # Its own session, like every tool wheelforge runs: proc.stop ends it and all it started.
        child = subprocess.Popen(command, cwd=args.folder, start_new_session=True)
    except OSError as exc:
        print(f"{name} could not start {command[0]}: {exc.strerror}", flush=True)
        return 127
    try:
        code = child.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        proc.stop(child)
        print(
            (
                f"{name} ran past its deadline of {args.timeout} s (generate[].timeout) and was "
                "stopped"
            ),
            flush=True,
        )
        return TIMED_OUT
    except BaseException:
        proc.stop(child)
        raise
    if code != 0:
        print(f"{name} failed with exit code {code}: {shlex.join(command)}", flush=True)
        return code
    missing = [o for o in args.output if not o.is_file()]
    if missing:
        shown = ", ".join(str(o.relative_to(args.folder)) for o in missing[:5])
        more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        print(
            f"{name} did not write {shown}{more}, which generate[].outputs declares; "
            f"it wrote into {args.folder} (is its output folder {{out}} in its command?)",
            flush=True,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
