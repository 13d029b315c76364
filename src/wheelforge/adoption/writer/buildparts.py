"""What the writer reads from the project beside any front door's record, and the matrix
sections of a build's parts besides its extensions: the header libraries its include folders
lie in (headerdirs.py), where its package loads a shared object with ``torch.ops.load_library``
(loading.py), and the ``header-libraries`` and ``generate`` sections as matrix.yaml text."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import yaml

from wheelforge.adoption.record.captured import (
    CapturedBuild,
    CapturedHeaderLibrary,
    CapturedStep,
)
from wheelforge.adoption.writer import loading
from wheelforge.adoption.writer.headerdirs import with_header_libraries
from wheelforge.adoption.writer.sourceglobs import OneLine


def _package_folders(build: CapturedBuild) -> list[str]:
    """The folders of the packages the extensions land in: those the build names, else the
    top-level package of each extension's name."""
    tops = {str(e.name).split(".")[0] for e in build.extensions if e.name and "." in e.name}
    named = [p for p in build.packages if p.rsplit("/", 1)[-1] in tops]
    return named or sorted(t for t in tops if (build.root / t / "__init__.py").is_file())


def prepare(build: CapturedBuild) -> tuple[CapturedBuild, list[str]]:
    """*build* with its header libraries found in its include folders and each extension's
    ``loaded_at``; what to say about them."""
    build, notes = with_header_libraries(build)
    calls = loading.load_calls(build.root, _package_folders(build))
    if calls:
        build = dataclasses.replace(
            build,
            extensions=tuple(
                dataclasses.replace(
                    e,
                    loaded_at=e.loaded_at
                    or loading.loaded_at(str(e.name).rsplit(".", 1)[-1], calls),
                )
                if e.name
                else e
                for e in build.extensions
            ),
        )
    return build, notes


class _Flow(list[str]):
    """A list written on one line: a command, ``run: ["{python}", gen.py, -o, "{out}"]``."""


class _Dumper(yaml.SafeDumper):
    """init's one YAML style: block layout, with a command (_Flow) and a source with its own
    archs (OneLine) each kept on one line."""


_Dumper.add_representer(
    _Flow,
    lambda dumper, data: dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True),
)
_Dumper.add_representer(
    OneLine,
    lambda dumper, data: dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True),
)


def dump(key: str, value: object) -> str:
    """``{key: value}`` as matrix.yaml writes it (every section init writes goes through here)."""
    return yaml.dump(
        {key: value}, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100
    )


def header_libraries_text(libraries: Sequence[CapturedHeaderLibrary]) -> str:
    if not libraries:
        return ""
    entries: list[dict[str, object]] = []
    comments = []
    for lib in libraries:
        entry: dict[str, object] = {"name": lib.name}
        entry.update({"path": lib.path} if lib.path else {"pypi": lib.pypi})
        if tuple(lib.include) != ("include",):
            entry["include"] = list(lib.include)
        if lib.version:
            entry["version"] = lib.version
        entries.append(entry)
        if lib.commit:
            said = f"a git checkout at {lib.commit[:12]}; the SBOM names the commit checked out when it builds"
        elif lib.pypi:
            said = f"the headers of {lib.pypi}'s wheel, downloaded once into the cache"
        else:
            said = "no git checkout of its own" + (
                f"; the superproject pins {lib.pinned[:12]}" if lib.pinned else ""
            )
        comments.append(f"# {lib.name}: from {lib.found}: {said}.\n")
    return (
        "\n# The header libraries the sources include (docs/matrix.md#header-libraries).\n"
        + "".join(comments)
        + dump("header-libraries", entries)
    )


def generate_text(steps: Sequence[CapturedStep]) -> str:
    if not steps:
        return ""
    entries = [
        {"name": s.name, "run": _Flow(s.run), "inputs": _Flow(s.inputs), "outputs": list(s.outputs)}
        for s in steps
    ]
    return (
        "\n# Programs that write sources before compiling, in the build folder; `{name}/...` in sources names\n"
        "# their outputs (docs/matrix.md#generate).\n" + dump("generate", entries)
    )
