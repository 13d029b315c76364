"""What one compile cost, measured exactly: the wrapper ninja runs each compile under, and the
reader of what it wrote (stdlib only: it runs as ``python -S -I jobcost.py OUTPUT COMMAND...``,
before anything of wheelforge's could be imported).

The wrapper starts the command, waits for it with ``wait4`` and appends one line, ``[OUTPUT,
cpu seconds, largest resident bytes]``, to the file ``$WHEELFORGE_JOB_COSTS`` names (one short
``O_APPEND`` write: jobs running side by side never interleave). The kernel's rusage of a waited
child holds the user and system time of the child and of every descendant it waited for, and
the largest resident memory any of them reached: exact, however short the compile and however
busy the machine, where a look at /proc every fraction of a second misses a compile that ends
between two looks (build/jobwatch.py, which still gives the sum of a job's processes at
one moment). Without ``$WHEELFORGE_JOB_COSTS`` (ninja run by hand) it only runs the command.

It stays out of the command's way: the command's exit code is its own, a signal that killed
the command kills the wrapper the same way (ninja reports it as it would), and an interruption
ninja sends the job's process group reaches the command directly while the wrapper waits.

One exception: nvcc 13.0 with ``--split-compile`` fails on some sources with "Failed to read
bitcode" where the same command without it compiles (vLLM 0.34.0's
csrc/vocab_parallel_embedding_kernels.cu, every time). A command with ``--split-compile=N`` has
its standard error passed through a pipe; when it fails with that line, the wrapper says so in
one line and runs the command once more without the option. The failure is the source's, not
the moment's, so the same source always takes the same path and the object stays reproducible.
"""

from __future__ import annotations

import json
import os
import signal
import sys

ENV = "WHEELFORGE_JOB_COSTS"
SPLIT = "--split-compile="
# what nvcc 13.0 prints when its split compilation cannot read a partition back
SPLIT_BUG = b"Failed to read bitcode"
FILE = ".job-costs"  # in the build folder, while ninja runs (build/ninja.py)


def command() -> tuple[str, ...]:
    """The words before a compile's output and command in a ninja rule: this interpreter,
    without site or environment (fast, and nothing of the user's can change what it does)."""
    from pathlib import Path  # in wheelforge's process; the wrapper itself needs no pathlib

    return (sys.executable, "-S", "-I", str(Path(__file__).resolve()))


def parse(text: str) -> dict[str, tuple[float, int]]:
    """The costs a run's file holds: output -> (CPU seconds, largest resident bytes). A line
    cut short (a wrapper killed while writing) is skipped."""
    found: dict[str, tuple[float, int]] = {}
    for line in text.splitlines():
        try:
            output, cpu, largest = json.loads(line)
        except (ValueError, TypeError):
            continue
        if isinstance(output, str) and isinstance(cpu, float | int) and isinstance(largest, int):
            found[output] = (float(cpu), largest)
    return found


def _run(args: list[str], *, watch: bool) -> tuple[int, float, int, bool]:
    """Run *args*; its wait status, CPU seconds and largest resident bytes, and whether its
    standard error (piped through only when *watch*) held SPLIT_BUG."""
    if not watch:
        pid = os.posix_spawnp(args[0], args, os.environ)
        _, status, usage = os.wait4(pid, 0)
        return status, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, False
    read, write = os.pipe()
    actions = [(os.POSIX_SPAWN_DUP2, write, 2), (os.POSIX_SPAWN_CLOSE, read)]
    try:
        pid = os.posix_spawnp(args[0], args, os.environ, file_actions=actions)
    finally:
        os.close(write)
    seen, tail = False, b""
    while chunk := os.read(read, 65536):  # a signal's interruption resumed (PEP 475)
        os.write(2, chunk)
        seen = seen or SPLIT_BUG in tail + chunk
        tail = chunk[-len(SPLIT_BUG) :]
    os.close(read)
    _, status, usage = os.wait4(pid, 0)
    return status, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, seen


def main(argv: list[str]) -> int:
    """Run ``argv[1:]`` and write what it cost under the output ``argv[0]``."""
    if len(argv) < 2:
        sys.stderr.write("usage: jobcost.py OUTPUT COMMAND [ARG...]\n")
        return 2
    output, args = argv[0], argv[1:]
    # Caught (not ignored): an exec resets caught signals, so the command above and below kept
    # the defaults; here a signal only ends the wait early, which is resumed (PEP 475).
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, lambda *_: None)
    split = [a for a in args if a.startswith(SPLIT)]
    try:
        status, cpu, largest, bug = _run(args, watch=bool(split))
        if bug and os.WIFEXITED(status) and os.waitstatus_to_exitcode(status) != 0:
            sys.stderr.write(
                f"wheelforge: nvcc {split[0]} failed to read its own bitcode (an nvcc 13.0 "
                f"fault); compiling {output} again without it\n"
            )
            again = [a for a in args if not a.startswith(SPLIT)]
            status, more, largest_again, _ = _run(again, watch=False)
            cpu, largest = cpu + more, max(largest, largest_again)
    except OSError as exc:
        sys.stderr.write(f"{args[0]}: {exc.strerror}\n")
        return 127
    path = os.environ.get(ENV)
    if path:
        line = json.dumps([output, round(cpu, 3), largest]) + "\n"  # ru_maxrss: KiB on Linux
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        except OSError:
            pass  # a cost unknown, never a compile failed
    if os.WIFSIGNALED(status):
        killed_by = os.WTERMSIG(status)
        signal.signal(killed_by, signal.SIG_DFL)
        os.kill(os.getpid(), killed_by)
        return 128 + killed_by
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
