"""Every difference between a project's own compile commands (CMake's compile_commands.json)
and the ones ``wheelforge build --dry-run`` plans from its matrix.yaml, source by source: the
flags, the defines and the include folders, paths aside (a folder of the project compared by
its path in the project, any other by its resolved path); CMake's plumbing and wheelforge's
(-o, dependency files, -fPIC, -ccbin, prefix maps) left out; the -gencode flags compared as
the SASS and PTX they ask for (``arch=compute_80,code=[compute_80,sm_80]`` is sm_80 and
compute_80). Issue 40 item 5's table.

    python tools/compile_commands_diff.py PROJECT CMAKE_BUILD/compile_commands.json \
        [--target NAME ...] [--python PY] [--markdown]

--target keeps the sources of those CMake targets (their objects' CMakeFiles/NAME.dir/);
--python is the build Python whose torch build --dry-run plans against.

Exit 0 when there is no difference, 1 when there is (the table says which)."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from wheelforge.adoption.doors import cmake  # noqa: E402
from wheelforge.build import ninja  # noqa: E402
from wheelforge.build.prepare import selected  # noqa: E402
from wheelforge.configuration.settings import Flags, resolve  # noqa: E402
from wheelforge.foundation import jobcost  # noqa: E402
from wheelforge.planning import ninjafile  # noqa: E402
from wheelforge.planning.planner import plan_all, plan_inputs  # noqa: E402
from wheelforge.toolchain import toolkits as toolkit  # noqa: E402

# wheelforge's own plumbing, beside CMake's (adoption/doors/cmake.py): dependency files, the
# host compiler, reproducibility (planning/reproducible.py), the arch set (compared apart).
_OWN_WITH_VALUE = ("--dependency-output", "-MF")
_OWN = ("--generate-dependencies-with-compile", "-MMD", "--objdir-as-tempdir")
_OWN_PREFIXES = (
    "-ccbin=",
    "-ffile-prefix-map=",
    "-fdebug-prefix-map=",
    "-fmacro-prefix-map=",
    "-Xcompiler=-ffile-prefix-map=",
    "-Xcompiler=-fdebug-prefix-map=",
    "-Xcompiler=-fmacro-prefix-map=",
    "-frandom-seed=",
    "--frandom-seed=",
    "-Xcompiler=-frandom-seed=",
    "-Xcudafe=--orig_src_path_name=",
    "--split-compile=",  # nvcc's threads per compile, wheelforge's scheduling (planner.py)
)


def _define(flag: str) -> str:
    """A define with a number as its value, written as the number (``0x020B000000000000ULL``
    and ``0x020b000000000000`` are one value)."""
    name, eq, value = flag.partition("=")
    try:
        return f"{name}={int(value.rstrip('ULul'), 0)}" if eq else flag
    except ValueError:
        return flag


@dataclass(frozen=True)
class Compile:
    defines: frozenset[str]
    flags: frozenset[str]
    includes: tuple[str, ...]
    codes: frozenset[str] = frozenset()  # what -gencode asks for: sm_80, compute_80


def _codes(value: str) -> set[str]:
    """``arch=compute_80,code=[compute_80,sm_80]`` → {compute_80, sm_80}."""
    arch, _, code = value.partition(",code=")
    return set(re.findall(r"(?:sm|compute|lto)_\w+", code or arch))


def _words(entry: dict[str, object]) -> list[str]:
    words = list(entry.get("arguments") or shlex.split(str(entry["command"])))  # type: ignore[call-overload]
    # ninja's commands run "cd / && LD_PRELOAD=... nvcc" before CUDA 12.9, and a launcher
    while words and (
        ("=" in words[0] and not words[0].startswith("-")) or words[0] in ("cd", "/", "&&")
    ):
        words.pop(0)
    # wheelforge's compiles run under the wrapper that measures them: python -S -I jobcost.py OUT
    wrapper = jobcost.command()
    if len(words) > len(wrapper) and tuple(words[1 : len(wrapper)]) == wrapper[1:]:
        words = words[len(wrapper) + 1 :]
    return words


def _compile(entry: dict[str, object], root: Path) -> Compile:
    words = _words(entry)
    kept: list[str] = [words[0]]
    codes: set[str] = set()
    i = 1
    while i < len(words):
        word = words[i]
        if word in ("-gencode", "--generate-code") and i + 1 < len(words):
            codes |= _codes(words[i + 1])
            i += 2
            continue
        if word.startswith(("-gencode=", "--generate-code=")):
            codes |= _codes(word.split("=", 1)[1])
            i += 1
            continue
        if word in _OWN_WITH_VALUE:
            i += 2
            continue
        if word in _OWN or word.startswith(_OWN_PREFIXES):
            i += 1
            continue
        kept.append(word)
        i += 1
    parsed = cmake._command({**entry, "arguments": kept})
    defines = frozenset(_define(f) for f in parsed.flags if f.startswith(("-D", "-U")))
    flags = frozenset(f for f in parsed.flags if not f.startswith(("-D", "-U")))
    includes = []
    for folder in parsed.includes:
        path = Path(folder).resolve()
        if path.is_relative_to(root):
            includes.append(path.relative_to(root).as_posix())
        elif "site-packages" in path.parts:  # torch's headers, of whichever install of it
            at = len(path.parts) - 1 - path.parts[::-1].index("site-packages")
            includes.append("{site-packages}/" + "/".join(path.parts[at + 1 :]))
        else:
            includes.append(str(path))
    return Compile(defines, flags, tuple(includes), frozenset(codes))


def _of_targets(entry: dict[str, str], targets: list[str]) -> bool:
    output = entry.get("output") or str(entry.get("command", "")).partition(" -o ")[2]
    return not targets or any(f"CMakeFiles/{t}.dir/" in output for t in targets)


def cmake_compiles(path: Path, root: Path, targets: list[str] | None = None) -> dict[str, Compile]:
    entries = [e for e in json.loads(path.read_text()) if _of_targets(e, targets or [])]
    return {
        Path(e["directory"], e["file"]).resolve().relative_to(root).as_posix(): _compile(e, root)
        for e in entries
        if Path(e["directory"], e["file"]).resolve().is_relative_to(root)
    }


def wheelforge_compiles(root: Path, python: str | None = None) -> dict[str, Compile]:
    """The compiles of the matrix's first variant, as build --dry-run plans them."""
    settings = resolve(Flags(matrix=root / "matrix.yaml", python=python))
    chosen = selected(
        settings, toolkit.discover(cache=settings.cache_dir, pythons=(settings.python,))
    )
    [plan] = plan_all(settings, chosen[:1], plan_inputs(settings, download=False))
    found = {}
    for part in (plan, plan.host):
        if part is None:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "build.ninja").write_text(ninjafile.render(part))
            out = subprocess.run(
                [ninja.executable(), "-C", tmp, "-t", "compdb", "cxx", "cc", "nvcc"],
                capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
        for entry in json.loads(out):
            entry["directory"] = str(part.build_dir)
            source = Path(entry["directory"], entry["file"]).resolve()
            if source.is_relative_to(root):
                found[source.relative_to(root).as_posix()] = _compile(entry, root)
    return found


def differences(theirs: dict[str, Compile], ours: dict[str, Compile]) -> list[tuple[str, ...]]:
    """One row per difference: source, what (flag, define, include, source), only in CMake's,
    only in wheelforge's."""
    rows: list[tuple[str, ...]] = []
    for source in sorted(set(theirs) | set(ours)):
        if source not in ours:
            rows.append((source, "source", "compiled", ""))
            continue
        if source not in theirs:
            rows.append((source, "source", "", "compiled"))
            continue
        a, b = theirs[source], ours[source]
        for what, left, right in (
            ("flag", a.flags, b.flags),
            ("define", a.defines, b.defines),
            ("include", frozenset(a.includes), frozenset(b.includes)),
            ("archs", a.codes, b.codes),
        ):
            if left != right:
                rows.append(
                    (source, what, " ".join(sorted(left - right)), " ".join(sorted(right - left)))
                )
        if a.includes != b.includes and set(a.includes) == set(b.includes):
            rows.append((source, "include order", " ".join(a.includes), " ".join(b.includes)))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("compile_commands", type=Path)
    parser.add_argument("--target", action="append", default=[])
    parser.add_argument("--python")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument(
        "--grouped", action="store_true", help="one row per difference, with how many sources"
    )
    args = parser.parse_args()
    root = args.project.resolve()
    rows = differences(
        cmake_compiles(args.compile_commands, root, args.target),
        wheelforge_compiles(root, args.python),
    )
    header = ("source", "what", "only CMake's", "only wheelforge's")
    if args.grouped:
        counts: dict[tuple[str, ...], int] = {}
        for row in rows:
            counts[row[1:]] = counts.get(row[1:], 0) + 1
        rows = [(f"{n} source(s)", *key) for key, n in counts.items()]
        header = ("sources", *header[1:])
    if args.markdown:
        print("| " + " | ".join(header) + " |\n| --- | --- | --- | --- |")
        for row in rows:
            print("| " + " | ".join(f"`{c}`" if c else "" for c in row) + " |")
    else:
        for row in rows:
            print("\t".join(row))
    print(f"{len(rows)} difference(s)", file=sys.stderr)
    return 1 if rows else 0


if __name__ == "__main__":
    sys.exit(main())
