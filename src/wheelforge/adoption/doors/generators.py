"""Generated sources as matrix.yaml's ``generate`` steps (FlashAttention-3's
``hopper/generate_kernels.py``): a program of the project that writes sources the extensions
compile, run by wheelforge before compiling, in the build folder.

Two ways one is found:

- **setup.py runs it**: as a command (``subprocess.run`` of ``[sys.executable, "gen.py", "-o", "out"]``)
  or by importing and calling it (``from gen import main; main("out")``). The capture child runs
  it as pip would, under its guards, and records who wrote each file (setup_child.py); the
  sources a project module other than setup.py wrote are that step's outputs, and the argument
  that names their folder becomes ``{out}``.
- **the sources it names do not exist until generated**: setup.py names sources that match no
  file, and a script of the project (``gen*.py``, ``*generate*.py``: one that parses an output
  folder option) writes exactly those when init runs it into a temporary folder, under the same
  guards (setupcapture.py).

A generator wheelforge cannot point at another folder (no argument names its output folder) is
left as it is: its sources are written as files (the run wrote them) and that is a hand note."""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import shlex
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from wheelforge.adoption.record.captured import (
    CapturedExtension,
    CapturedSource,
    CapturedStep,
)
from wheelforge.adoption.record.setuprun import Entry, GeneratorRun, SetupRun, Written
from wheelforge.configuration.matrix.keys import SOURCE_SUFFIXES, STEP_NAME_RE
from wheelforge.foundation import readers

_RESERVED = frozenset({"python", "project", "out"})
_NAME_RE = re.compile(r"gen|codegen", re.I)
_SKIP = frozenset({"build", "dist", "tests", "test", "third_party", "__pycache__", ".git", ".venv"})
_MAX_CANDIDATES = 3


@dataclass(frozen=True, kw_only=True)
class Generated:
    extensions: tuple[CapturedExtension, ...]
    steps: tuple[CapturedStep, ...] = ()
    missing: tuple[str, ...] = ()
    hand: tuple[str, ...] = ()
    done: tuple[str, ...] = ()


def step_name(folder: str, taken: Iterable[str]) -> str:
    """A step's name from its output folder's name (``instantiations``), unique."""
    base = re.sub(r"[^a-z0-9_]+", "_", PurePosixPath(folder).name.lower()).strip("_")
    if not base or not base[0].isalpha() or base in _RESERVED or not STEP_NAME_RE.match(base):
        base = f"gen_{base}" if base and STEP_NAME_RE.match(f"gen_{base}") else "generated"
    taken = set(taken)
    name, n = base, 2
    while name in taken:
        name, n = f"{base}{n}", n + 1
    return name


def _folder(paths: Sequence[str]) -> str:
    """The folder (relative, posix) the generated sources *paths* lie in."""
    return PurePosixPath(
        os.path.commonpath([str(PurePosixPath(p).parent) for p in paths])
    ).as_posix()


def _word(word: str, cwd: Path, root: Path, out: Path) -> str:
    """A command word as a step's: the output folder → ``{out}``, a file or folder of the project
    → ``{project}/...``; ``--flag=value`` by its value."""
    flag, eq, value = (
        word.partition("=") if word.startswith("-") and "=" in word else ("", "", word)
    )
    if not value or value.startswith("-"):
        return word
    path = Path(os.path.normpath(cwd / value))
    if path == out:
        return f"{flag}{eq}{{out}}"
    if path.is_relative_to(root) and path.exists():
        rel = path.relative_to(root).as_posix()
        return f"{flag}{eq}{{project}}" + ("" if rel == "." else f"/{rel}")
    return word


def _command_run(call: GeneratorRun, root: Path, out: Path) -> tuple[str, ...]:
    argv = list(call.argv)
    cwd = Path(call.cwd or root)
    return ("{python}", *(_word(w, cwd, root, out) for w in argv[1:]))


def _call_run(entry: Entry, by: str, root: Path, out: Path) -> tuple[str, ...] | None:
    """``from gen import main; main("out")`` as a command: the module imported from the folder
    that holds it, the function called with the arguments setup.py gave it."""
    module, function = entry.module or "", entry.function or ""
    args = entry.args
    if not module or module == "__main__" or not function.isidentifier():
        return None
    if not all(isinstance(a, str) for a in args):
        return None  # None, numbers, objects: not a command's words
    parents = PurePosixPath(by).parents
    depth = module.count(".") + 1
    if depth > len(parents):
        return None
    base = parents[depth - 1].as_posix()
    words = tuple(_word(str(a), root, root, out) for a in args)
    if not any("{out}" in w for w in words):
        return None
    code = (
        f"import sys; sys.path.insert(0, sys.argv[1]); from {module} import {function}; "
        f"{function}(*sys.argv[2:])"
    )
    return ("{python}", "-c", code, "{project}" + ("" if base == "." else f"/{base}"), *words)


def _renamed(
    extensions: Sequence[CapturedExtension], renames: Mapping[str, str]
) -> tuple[CapturedExtension, ...]:
    return tuple(
        dataclasses.replace(
            ext,
            sources=tuple(
                CapturedSource(path=renames.get(s.path, s.path), archs=s.archs) for s in ext.sources
            ),
        )
        for ext in extensions
    )


def from_record(root: Path, record: SetupRun, extensions: Sequence[CapturedExtension]) -> Generated:
    """The steps setup.py's run shows: the sources the extensions compile that a project
    module other than setup.py wrote during the run."""
    real = Path(os.path.realpath(root))
    setup = Path(record.setup_file).name
    writers: dict[str, Written] = {}
    for item in record.written:
        by = item.by
        if by and by != setup:
            writers[os.path.realpath(item.path)] = item
    by_generator: dict[str, list[str]] = defaultdict(list)
    for ext in extensions:
        for source in ext.sources:
            wrote = writers.get(os.path.realpath(root / source.path))
            if wrote is not None and wrote.by and source.path not in by_generator[wrote.by]:
                by_generator[wrote.by].append(source.path)
    commands = {c.script: c for c in record.generators}
    steps: list[CapturedStep] = []
    renames: dict[str, str] = {}
    hand: list[str] = []
    done: list[str] = []
    for by, sources in by_generator.items():
        folder = _folder(sources)
        out = Path(os.path.normpath(real / folder))
        call = commands.get(by)
        first = writers[os.path.realpath(root / sources[0])]
        if call is not None:
            run: tuple[str, ...] | None = _command_run(call, real, out)
            how = f"{call.where or 'setup.py'} runs {shlex_join(call.argv)}"
        else:
            run = _call_run(first.entry, by, real, out)
            entry = first.entry
            how = f"setup.py calls {entry.module}.{entry.function}()"
        if run is None or not any("{out}" in w for w in run):
            hand.append(
                f"generate: {how}, which writes {len(sources)} source(s) into {folder}/; no argument names that "
                "folder, so wheelforge cannot run it in its build folder: the sources are written as files (the run "
                f"wrote them); run {by} again when it changes, or declare a generate step"
            )
            continue
        name = step_name(folder, [s.name for s in steps])
        outputs = tuple(PurePosixPath(s).relative_to(folder).as_posix() for s in sources)
        steps.append(CapturedStep(name=name, run=run, inputs=(by,), outputs=outputs, found=how))
        renames.update({s: f"{{{name}}}/{o}" for s, o in zip(sources, outputs, strict=True)})
        done.append(
            f"generate: {name}: {how}; its {len(outputs)} source(s) in {folder}/ are written as "
            f"{{{name}}}/..., made in the build folder before compiling"
        )
    return Generated(
        extensions=_renamed(extensions, renames),
        steps=tuple(steps),
        hand=tuple(hand),
        done=tuple(done),
    )


def shlex_join(argv: Iterable[object]) -> str:
    return shlex.join(str(a) for a in argv)


def writes_said(record: SetupRun) -> list[str]:
    """What setup.py's run wrote into the project: each file setup.py itself wrote, and how
    many files each module it ran or called wrote into a folder (a generator's hundreds)."""
    setup = Path(record.setup_file).name
    root = os.path.realpath(record.root or ".")
    by: dict[tuple[str, str], int] = {}
    for item in record.written:
        writer = item.by or setup
        path = os.path.realpath(item.path)
        if writer != setup and (path == root or path.startswith(root + os.sep)):
            key = (writer, Path(os.path.relpath(path, root)).parent.as_posix())
            by[key] = by.get(key, 0) + 1
    generated = {
        os.path.relpath(os.path.realpath(i.path), root)
        for i in record.written
        if (i.by or setup) != setup
    }
    out = [
        f"setup.py wrote {w} (as it does under pip)" for w in record.writes if w not in generated
    ]
    out += [
        f"{writer} (run by setup.py) wrote {count} file(s) into {folder}/ (as it does under pip)"
        for (writer, folder), count in by.items()
    ]
    return out


# -- missing sources and a generator that writes them ---------------------------------------------


def _output_option(tree: ast.AST) -> str | None:
    """The option of an argparse parser that names the output folder (``--output_dir``)."""
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            continue
        flags = [
            a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        if any("out" in f.lower() for f in flags if f.startswith("-")):
            longs = [f for f in flags if f.startswith("--")]
            return (longs or flags)[0]
    return None


def _scripts(root: Path) -> Iterator[Path]:
    for top, dirs, names in os.walk(root):
        depth = len(Path(top).relative_to(root).parts)
        dirs[:] = (
            []
            if depth >= 2
            else sorted(d for d in dirs if d not in _SKIP and not d.startswith("."))
        )
        for name in sorted(names):
            if name.endswith(".py") and name != "setup.py" and _NAME_RE.search(name):
                yield Path(top, name)


def candidates(root: Path) -> list[tuple[str, str]]:
    """Scripts of the project that may write missing sources: a generator's name, run as a
    script (``__main__``), with an output folder option. (script, option), at most a few."""
    out = []
    for path in _scripts(root):
        try:
            text = readers.read_text(path, cap=readers.CONFIG_CAP, errors="replace")
            tree = ast.parse(text)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError, readers.FileRefused):
            continue
        option = _output_option(tree) if "__main__" in text else None
        if option is not None:
            out.append((path.relative_to(root).as_posix(), option))
        if len(out) >= _MAX_CANDIDATES:
            break
    return out


def from_trial(
    missing: Sequence[str],
    extensions: Sequence[CapturedExtension],
    *,
    script: str,
    option: str,
    written: Iterable[str],
    taken: Iterable[str] = (),
) -> Generated:
    """The missing sources a trial run of *script* wrote (*written*: paths relative to the
    folder it was pointed at) as one step per folder of them."""
    wrote = set(written)
    by_folder: dict[str, list[str]] = defaultdict(list)
    for path in missing:
        if PurePosixPath(path).suffix in SOURCE_SUFFIXES:
            by_folder[str(PurePosixPath(path).parent)].append(path)
    steps: list[CapturedStep] = []
    renames: dict[str, str] = {}
    names = list(taken)
    for folder, paths in by_folder.items():
        outputs = [PurePosixPath(p).relative_to(folder).as_posix() for p in paths]
        if not set(outputs) <= wrote:
            continue
        name = step_name(folder, names)
        names.append(name)
        steps.append(
            CapturedStep(
                name=name,
                run=("{python}", f"{{project}}/{script}", option, "{out}"),
                inputs=(script,),
                outputs=tuple(outputs),
                found=f"the {len(outputs)} source(s) setup.py names in {folder}/ do not exist; {script} {option} writes them",
            )
        )
        renames.update({p: f"{{{name}}}/{o}" for p, o in zip(paths, outputs, strict=True)})
    left = tuple(m for m in missing if m not in renames)
    done = tuple(
        f"generate: {s.name}: {s.found} (init ran it into a temporary folder); made in the build folder before compiling"
        for s in steps
    )
    return Generated(
        extensions=_renamed(extensions, renames), steps=tuple(steps), missing=left, done=done
    )
