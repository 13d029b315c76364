"""An extension's sources as matrix.yaml writes them: the project's own list as it is, a generate
step's declared outputs (``{step}/*.cu``) or a guessed folder's files as one glob where the glob
names exactly those files, and a source with its own archs as a one-line
``{files: ..., archs: ...}``."""

from __future__ import annotations

import fnmatch
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

from wheelforge.adoption.doors.flags import arch_text
from wheelforge.adoption.record.captured import CapturedExtension
from wheelforge.configuration.archs import ArchSpec
from wheelforge.configuration.matrix.keys import GENERATED_RE, SOURCE_SUFFIXES


class OneLine(dict[str, object]):
    """A mapping written on one line: a source with its archs, ``{files: x.cu, archs: 9.0a}``."""


def _patterns(members: list[str]) -> list[str]:
    """Globs that could name *members* (files of one folder): ``*.cu``, then ``*_sm90.cu`` from
    the names' common ending."""
    names = [Path(m).name for m in members]
    suffix = Path(names[0]).suffix
    ending = os.path.commonprefix([n[::-1] for n in names])[::-1]  # noqa: RUF071 - the names' common ending, characters
    cut = ending.find("_")
    out = [f"*{suffix}"]
    if cut >= 0 and ending[cut:] != suffix:
        out.append(f"*{ending[cut:]}")
    return out


def _listed(
    root: Path, folder: str, pattern: str, outputs: Mapping[str, Sequence[str]]
) -> set[str]:
    """The files *folder*/*pattern* names: on disk, or among a generate step's outputs (a
    ``{step}`` folder, matched as the plan matches it)."""
    if (match := GENERATED_RE.match(folder)) is not None:
        sub = match[2] or ""
        prefix = f"{sub}/" if sub else ""
        return {
            f"{folder}/{o.removeprefix(prefix)}"
            for o in outputs.get(match[1], ())
            if o.startswith(prefix)
            and "/" not in o.removeprefix(prefix)
            and fnmatch.fnmatchcase(o.removeprefix(prefix), pattern)
        }
    return {
        (Path(folder) / f.name).as_posix().removeprefix("./")
        for f in (root / folder).glob(pattern)
        if f.is_file()
    }


def _globbed(
    root: Path,
    paths: list[str],
    *,
    single: bool,
    outputs: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """*paths* with a folder's files written as one glob (``folder/*.cu``, ``folder/*_sm90.cu``)
    when the glob names exactly those files; *single*: a glob for one file too."""
    by_folder: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in paths:
        p = Path(path)
        by_folder[(p.parent.as_posix(), p.suffix)].append(path)
    out: list[str] = []
    for (folder, _), members in by_folder.items():
        chosen = None
        # The project's own list stays a list: a glob would take in files added later that its
        # build leaves out. A generate step's outputs (not known until it runs) and a guessed
        # folder (no build script lists them) are globbed.
        if single or (len(members) > 1 and GENERATED_RE.match(folder)):
            for pattern in _patterns(members):
                if _listed(root, folder, pattern, outputs or {}) == set(members):
                    chosen = f"{folder}/{pattern}".removeprefix("./")
                    break
        out.extend([chosen] if chosen else members)
    return out


def sources_entries(
    root: Path, ext: CapturedExtension, outputs: Mapping[str, Sequence[str]] | None = None
) -> list[object]:
    compiled = [s for s in ext.sources if Path(s.path).suffix in SOURCE_SUFFIXES]
    groups: dict[tuple[tuple[ArchSpec, ...] | None, tuple[str, ...]], list[str]] = defaultdict(list)
    for source in compiled:
        groups[(source.archs, source.flags)].append(source.path)
    out: list[object] = []
    for (archs, flags), paths in groups.items():
        for entry in _globbed(root, paths, single=ext.kind == "guessed", outputs=outputs):
            if archs is None and not flags:
                out.append(entry)
                continue
            own: dict[str, object] = {"files": entry}
            if archs is not None:
                own["archs"] = arch_text(archs)
            if flags:
                own["flags"] = list(flags)
            out.append(OneLine(**own))
    return out
