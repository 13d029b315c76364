"""The setup.py front door: the project's setup.py run in a child process of the build Python
(child/setup_child.py, through foundation/proc with a deadline), recording what ``setup()`` and the
Extension classes are given; record/childdocument.py parses the child's record (a SetupRun) and
setuprecord.py reads it into a CapturedBuild.

The child runs the user's own code, inside the sandbox of foundation/fence.py (the project and
the run's scratch folder the only writable places, no network, every process it starts ended
with it); the child's own guards (child/capture_guards.py) record what it tried, with its line, for
the screen. init says so on the screen, and ``--no-run`` reads setup.py without running it
instead (staticsetup.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from wheelforge.adoption.child import SCRIPT as CHILD
from wheelforge.adoption.doors import generators
from wheelforge.adoption.doors.setuppy import parse_setup_py
from wheelforge.adoption.doors.setuprecord import read_record, shown_name, stand_in_misses
from wheelforge.adoption.record import childdocument, setuprun
from wheelforge.adoption.record.captured import CapturedBuild
from wheelforge.adoption.record.setuprun import SetupRun
from wheelforge.configuration.matrix.pyproject import load_toml
from wheelforge.foundation import fence, log, proc, writers
from wheelforge.foundation.errors import (
    ConfigError,
    EnvironmentProblem,
    ToolError,
    WheelforgeError,
)

# A setup.py that neither ends nor fails within this is stopped (FlashAttention-3's, torch
# imported, takes a few seconds; one that waits on the network would wait forever).
DEADLINE_S = 300.0
# What a failure that asks the GPU looks like: CPU torch's and the driver's words.
_NO_GPU = ("get_device_capability", "Found no NVIDIA driver", "Torch not compiled with CUDA")


@dataclass(frozen=True, kw_only=True)
class CaptureContext:
    """What the child is told: the toolkit a CUDA build would use, the torch the stand-in
    reports when the build Python has none, and what goes into its environment."""

    python: Path
    cuda_home: Path | None = None
    cuda_version: str | None = None  # "13.0"
    torch_version: str = "2.10.0"  # the stand-in torch's version
    env: tuple[tuple[str, str], ...] = ()  # added to the child's environment
    deadline_s: float = DEADLINE_S
    stand_in: bool = False  # the stand-in torch even when the build Python has one
    sandbox: fence.Choice = "auto"  # --sandbox


@dataclass(frozen=True, kw_only=True)
class GeneratorTrial:
    """A project script the child runs alone instead of setup.py (a generator candidate)."""

    argv: tuple[str, ...]  # python, the script, its arguments
    cwd: Path


def run_setup(
    root: Path,
    context: CaptureContext,
    generator: GeneratorTrial | None = None,
    *,
    writable: tuple[Path, ...] = (),
) -> SetupRun:
    """The child's record for *root*/setup.py, parsed (record/childdocument.py); with *generator*,
    that script run alone instead. The
    child runs fenced (--sandbox): *root*, its scratch folder and *writable* the only places
    it can write."""
    kind = fence.choose(context.sandbox, what=str(root / "setup.py"))
    if kind is not None and generator is None:
        fence.say_foreign_owner(root, what="setup.py")
    with tempfile.TemporaryDirectory(prefix="wheelforge-init-") as tmp:
        out = Path(tmp) / "record.json"
        given = {
            "setup": str(root / "setup.py"),
            "root": str(root),
            "out": str(out),
            "tmp": tmp,
            "cuda_home": str(context.cuda_home) if context.cuda_home else None,
            "cuda_version": context.cuda_version,
            "torch_version": context.torch_version,
            "stand_in": context.stand_in,
            "generator": None
            if generator is None
            else {"argv": list(generator.argv), "cwd": str(generator.cwd)},
        }
        writers.write_atomic(Path(tmp) / "context.json", json.dumps(given))
        # Deterministic set and dict order in setup.py (a list built from a set); its
        # temporary files in the scratch folder, the one writable place besides the project.
        # The environment cut to what a build reads (and the project's own knobs), HOME the
        # scratch folder: the user's is not in the fence.
        cut = fence.environment(os.environ, named=fence.named_in(root / "setup.py"), home=Path(tmp))
        if generator is None:
            fence.say_left_out(cut, what=str(root / "setup.py"))
        env = {**cut.kept, "PYTHONHASHSEED": "0", "TMPDIR": tmp, **dict(context.env)}
        python = proc.which(
            context.python, hint="pass --python with the interpreter that builds the project"
        )
        around = fence.repository(root, root / "setup.py")
        if around and generator is None:
            log.detail(
                f"{', '.join(map(str, around))}: shown read-only to setup.py (its repository)"
            )
        readable = (
            *fence.python_folders(Path(python)),
            CHILD.parent,
            *([context.cuda_home] if context.cuda_home else []),
            *fence.env_paths(env),
            *around,
        )
        result = proc.run(
            fence.wrap(
                kind,
                [python, CHILD, Path(tmp) / "context.json"],
                cwd=root,
                writable=(root, Path(tmp), *writable),
                readable=readable,
            ),
            hint=fence.FIX,
            cwd=root,
            env=env,
            replace_env=True,
            check=False,
            what="setup.py",
            timeout=context.deadline_s,
        )
        output = result.stdout + result.stderr
        if not out.is_file() and (said := fence.failure(output)) is not None:
            raise ToolError(
                f"the sandbox init runs {root / 'setup.py'} in could not be set up ({said}); "
                "read setup.py without running it with 'wheelforge init --no-run'",
                details=proc.tail(output) or None,
            )
        if not out.is_file():
            said = last_words(result.stderr) or last_words(result.stdout)
            raise ToolError(
                f"{root / 'setup.py'} could not be run by {context.python} (exit code {result.returncode})"
                + (f": {said}" if said else "")
                + "; read it without running it with 'wheelforge init --no-run'",
                details=proc.tail(result.stdout + result.stderr) or None,
            )
        record = childdocument.load(out, source=f"{root / 'setup.py'} (its run's record)")
    return dataclasses.replace(
        record,
        output=result.stdout + result.stderr,
        stderr=result.stderr,
        root=str(root.resolve()),
        setup_file="setup.py",
        python=str(context.python),
    )


def context_python(record: SetupRun) -> str:
    return record.python or "the build Python"


# A traceback's own lines, which are not what the script said.
_FRAME_RE = re.compile(r"^(?:Traceback \(most recent call last\):|\s+File \"|\s+\^+\s*$)")


def last_words(output: str) -> str | None:
    """The last line a failing setup.py printed (``print("CUDA_HOME not set", file=sys.stderr);
    sys.exit(1)``), cut to _LINE_CAP characters; None when it printed nothing."""
    for line in reversed(output.splitlines()):
        if line.strip() and not _FRAME_RE.match(line):
            text = line.strip()
            return text if len(text) <= _LINE_CAP else f"{text[:_LINE_CAP]}…"
    return None


def _what_failed(record: SetupRun) -> str:
    """setup.py's own words for its failure: the exception and its message, or, for a bare
    ``sys.exit(1)`` or an exception without a message, the last line it printed (stderr first)."""
    error = record.error or setuprun.SetupFailure()
    kind, message = error.type, error.message.strip()
    exit_code = kind == "SystemExit" and (not message or message.lstrip("-").isdigit())
    if message and not exit_code:
        return f"{kind}: {message}"
    said = last_words(record.stderr) or last_words(record.output)
    if exit_code:
        return f"sys.exit({message or ''})" + (f" after printing: {said}" if said else "")
    return f"{kind}" + (f" (it printed: {said})" if said else "")


def _asked_of_stand_in(
    error: setuprun.SetupFailure | None, record: SetupRun
) -> tuple[str, str] | None:
    """The name the stand-in torch lacks that *error* is about (a lookup's AttributeError,
    ImportError or ModuleNotFoundError names it), with the line that asked; None when setup.py
    saw the real torch or *error* is about something else."""
    torch = record.torch
    if error is None or torch is None or torch.real or error.type not in _LOOKUP_ERRORS:
        return None
    message = error.message
    for name, where in reversed(stand_in_misses(record)):
        token = name.removeprefix("import ")
        if token in message or f"'{token.rpartition('.')[2]}'" in message:
            return name, where
    return None


# How Python says a name is not there: what a setup.py asking the stand-in torch for a name it
# lacks fails with.
_LOOKUP_ERRORS = ("AttributeError", "ImportError", "ModuleNotFoundError")


def _lacking_torch(root: Path, record: SetupRun, name: str, where: str) -> WheelforgeError:
    """One line, no traceback (the traceback is of the stand-in's lookup, not of the project):
    which line asked for what, and the two ways on."""
    file, _, line = (where or "setup.py").partition(":")
    asked = shown_name(name)
    python = context_python(record)
    if record.torch is not None and record.torch.forced:
        why = "init was told to show setup.py the stand-in"
    elif record.torch_error:
        why = f"{python}'s torch does not import: {record.torch_error}"
    else:
        why = f"{python} has no torch"
    return EnvironmentProblem(
        f"{root / file}{' line ' + line if line else ''} asks for {asked}, which wheelforge "
        f"init's stand-in torch lacks ({why}); install torch there or pass --python with a "
        "Python that has it, or read setup.py without running it: 'wheelforge init --no-run'"
    )


def _failure(root: Path, record: SetupRun) -> WheelforgeError:
    error = record.error or setuprun.SetupFailure()
    asked = _asked_of_stand_in(error, record)
    if asked is not None:
        return _lacking_torch(root, record, *asked)
    where = error.where or "setup.py"
    file, _, line = where.partition(":")
    message = f"{root / file} failed{' at line ' + line if line else ''}: {_what_failed(record)}"
    text = error.traceback or error.message
    if "No module named 'setuptools'" in text:
        return ToolError(
            f"{root / 'setup.py'} needs setuptools, which {context_python(record)} lacks (pip installs it "
            "from [build-system] requires in an isolated build); install it there or pass --python"
        )
    if any(words in text for words in _NO_GPU):
        fix = (
            "it asks the GPU for its archs and there is none here: give them with --archs (init "
            "sets TORCH_CUDA_ARCH_LIST for setup.py) or TORCH_CUDA_ARCH_LIST"
        )
    elif "Read-only file system" in text:
        fix = (
            "it changes something outside the project folder, which init's sandbox keeps "
            "read-only (only the project and a scratch folder are writable); or read it "
            "without running it: 'wheelforge init --no-run'"
        )
    elif (hidden := _hidden_path(text, root)) is not None:
        fix = (
            f"it opens {hidden}, which init's sandbox does not show (setup.py sees the project, "
            "its repository, the build Python, the toolkit and the system's folders); or read "
            "it without running it: 'wheelforge init --no-run'"
        )
    elif (requires := _build_requires(root, text)) is not None:
        fix = (
            "setup.py runs with --python's packages, where pip's isolated build would first "
            "install pyproject.toml's [build-system] requires; install them there: "
            f"{context_python(record)} -m pip install {' '.join(map(shlex.quote, requires))}"
        )
    else:
        fix = (
            "fix what it needs (an environment variable, a submodule, a package in --python), or "
            "read it without running it: 'wheelforge init --no-run'"
        )
    raised_from = _asked_of_stand_in(error.cause, record)
    if raised_from is not None:  # its own words (a RuntimeError raised from an ImportError)
        name, at = raised_from
        fix += (
            f" (it had asked wheelforge init's stand-in torch for {shown_name(name)}"
            f"{' at ' + at if at else ''}, "
            "which it lacks: pass --python with a Python that has torch)"
        )
    # A bare sys.exit(1) has no traceback: what setup.py printed before it says why.
    shown = text if error.traceback else record.output or text
    return ToolError(f"{message}; {fix}", details=_shown_traceback(shown) or None)


_MISSING_RE = re.compile(r"No such file or directory: '([^']+)'")
_NO_MODULE_RE = re.compile(r"No module named '([^'.]+)")


def _build_requires(root: Path, text: str) -> list[str] | None:
    """pyproject.toml's [build-system] requires, when setup.py failed on an import they
    provide (setuptools_rust for setuptools-rust: a distribution is named with - or _): what
    an isolated build would have installed, all of them, so one install fixes every import."""
    missing = _NO_MODULE_RE.search(text)
    try:
        tables = load_toml(root / "pyproject.toml") or {}
    except ConfigError:
        return None
    system = tables.get("build-system")
    requires = system.get("requires") if isinstance(system, dict) else None
    if missing is None or not isinstance(requires, list):
        return None
    names = set()
    for given in requires:
        try:
            names.add(canonicalize_name(Requirement(str(given)).name))
        except InvalidRequirement:
            continue
    if canonicalize_name(missing.group(1)) not in names:
        return None
    return [str(r) for r in requires]


def _hidden_path(text: str, root: Path) -> str | None:
    """The path setup.py (run from *root*) failed to find that is there outside the sandbox:
    the fence hid it."""
    for path in _MISSING_RE.findall(text):
        if os.path.lexists(root / path):
            return str(os.path.normpath(root / path))
    return None


# A line of setup.py's traceback shown at most this long (a 400 kB literal was printed whole).
_LINE_CAP = 200


def _shown_traceback(text: str) -> str:
    """The tail of setup.py's own traceback as details: its frames and error, each line cut to
    _LINE_CAP characters, without Python's header (the traceback is the project's, not
    wheelforge's)."""
    lines = [ln for ln in text.splitlines() if ln.strip() != "Traceback (most recent call last):"]
    cut = [
        ln if len(ln) <= _LINE_CAP else f"{ln[:_LINE_CAP]}… ({len(ln):,} characters)"
        for ln in lines
    ]
    return proc.tail("\n".join(cut))


def check_parses(root: Path) -> None:
    """A setup.py Python cannot parse cannot run either: one line naming its line, before any
    child (or sandbox) starts (its traceback located the error in runpy, '<frozen runpy>
    failed at 259')."""
    parse_setup_py(
        root / "setup.py", fix="fix it, or write matrix.yaml from docs/your-extension.md"
    )


def capture_setup(root: Path, context: CaptureContext) -> CapturedBuild:
    check_parses(root)
    record = run_setup(root, context)
    if record.setup is None:
        if record.error is not None:
            raise _failure(root, record)
        raise ToolError(
            f"{root / 'setup.py'} ran to its end without calling setup(); "
            "read it without running it with 'wheelforge init --no-run'",
            details=proc.tail(record.output) or None,
        )
    build = read_record(root, record, front_door="setup.py")
    return _generated_missing(root, context, build) if build.missing else build


def _generated_missing(root: Path, context: CaptureContext, build: CapturedBuild) -> CapturedBuild:
    """Sources setup.py names that do not exist, written by a generator of the project: each
    candidate run once into a temporary folder (under the child's guards), the sources it
    writes there become a generate step's outputs."""
    for script, option in generators.candidates(root):
        log.info(
            f"{len(build.missing)} source(s) setup.py names do not exist: running {root / script} "
            f"{option} <a temporary folder> to see whether it writes them"
        )
        with tempfile.TemporaryDirectory(prefix="wheelforge-gen-") as tmp:
            out = Path(tmp).resolve()
            trial = GeneratorTrial(
                argv=(str(context.python), str(root / script), option, str(out)), cwd=root
            )
            record = run_setup(root, context, trial, writable=(out,))
            written = [
                Path(item.path).relative_to(out).as_posix()
                for item in record.written
                if Path(item.path).is_relative_to(out)
            ]
        found = generators.from_trial(
            build.missing,
            build.extensions,
            script=script,
            option=option,
            written=written,
            taken=[s.name for s in build.steps],
        )
        if found.steps:
            build = dataclasses.replace(
                build,
                extensions=found.extensions,
                steps=build.steps + found.steps,
                missing=found.missing,
                done=build.done + found.done,
            )
        if not build.missing:
            break
    return build
