"""What the README and docs/ name is real: every path of this repository they name exists (a
glob matches a file), every `wheelforge COMMAND --flag` is a command and flag of the click CLI
(read from the group itself, no process), and every link between the pages lands on a file and,
with a ``#fragment``, on one of its headings.

docs/architecture.md is left to tests/unit/test_docpaths.py,
which holds their module paths to the tree.

A path counts as this repository's when its first part is an entry of the repository's top
(``src/``, ``tests/``, ``tools/``, ``bench/``, ``kernels/``, ``docs/``, ``.ci/``,
``matrix.yaml``, ...) or the installed package (``wheelforge/data/...``: ``src/wheelforge/``).
``build/wheelforge/<variant>/``, ``dist/`` and a user's project (``myops/csrc/scale.cpp``) are
not. Fenced yaml, toml, C++ and Python blocks are examples of a user's files and are not read for
paths, nor are unlabelled ones (screens, file trees); commands are read in code spans and every
block."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from tests import REPO
from wheelforge.cli.app import cli

LEFT_TO_TEST_DOCPATHS = frozenset({"architecture.md"})
PAGES = sorted(
    [REPO / "README.md"]
    + [p for p in (REPO / "docs").glob("*.md") if p.name not in LEFT_TO_TEST_DOCPATHS]
)
# Fenced blocks in these languages show a user's own files, not this repository's.
EXAMPLE_LANGUAGES = frozenset({"yaml", "toml", "cpp", "c", "python", "json"})
# Unlabelled fenced blocks are screens and file trees: read for commands, not for paths.
SCREEN = "text"
# What a build writes at the top of a checkout: named by the docs, never the repository's.
TOP_OUTPUTS = frozenset({"build", "dist", "__pycache__"})

_FENCE = re.compile(r"^\s*```(\w*)")
_SPAN = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
_PATH = re.compile(
    r"(?<![\w./$<>{}~-])((?:\.?[A-Za-z_][\w.-]*/)+[\w.*-]*|[\w-]+\.(?:md|toml|yaml|py|sh))"
)
_COMMAND = re.compile(r"(?<![\w./-])wheelforge((?: [a-z][a-z-]*)+)([^|;&>)`'\"\n]*)")
_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
_HEADING = re.compile(r"^(#{1,6}) (.*)$")


def _blocks(text: str) -> Iterator[tuple[str | None, str]]:
    """Each line with the language of the fenced block it is in, ``indented`` for a line of an
    indented code block, None for prose."""
    language: str | None = None
    for line in text.splitlines():
        fence = _FENCE.match(line)
        if fence:
            language = None if language is not None else fence[1] or SCREEN
            continue
        yield language or ("indented" if line.startswith("    ") else None), line


def repo_paths(text: str) -> set[str]:
    """The paths of this repository a page names: in code spans, link targets and code blocks
    (not in a user's example files or a screen)."""
    top = {
        p.name
        for p in REPO.iterdir()
        if (not p.name.startswith(".") or p.name == ".ci") and p.name not in TOP_OUTPUTS
    }
    found: set[str] = set()
    for language, line in _blocks(text):
        if language in EXAMPLE_LANGUAGES or language == SCREEN:
            continue
        places = [line] if language is not None else _SPAN.findall(line)
        places += [t.split("#")[0] for t in _LINK.findall(line) if "://" not in t]
        for place in places:
            for path in _PATH.findall(place):
                if re.search(r"[<>{}]|\.\.\.|…", path):
                    continue  # a placeholder: build/wheelforge/<variant>/, {step}/GLOB
                first = path.split("/")[0]
                if first in top or (first == "wheelforge" and "/" in path):
                    found.add(path)
    return found


def missing_paths(text: str, page: Path) -> list[str]:
    missing = []
    for path in sorted(repo_paths(text)):
        relative = path.removeprefix("../") if page.parent.name == "docs" else path
        if relative.startswith("wheelforge/"):
            relative = "src/" + relative
        target = relative.rstrip("/")
        exists = any(REPO.glob(target)) if "*" in target else (REPO / target).exists()
        if not exists:
            missing.append(path)
    return missing


def _commands(
    group: click.Group = cli, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, click.Command]]:
    yield " ".join(path), group
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        else:
            yield " ".join((*path, name)), command


COMMANDS = dict(_commands())


def _flags(command: click.Command) -> set[str]:
    return {
        flag
        for param in command.params
        if isinstance(param, click.Option)
        for flag in (*param.opts, *param.secondary_opts)
    } | {"-h", "--help"}


def wrong_commands(text: str) -> list[str]:
    """Each `wheelforge WORDS --flags` whose command or flag the CLI does not have."""
    wrong = []
    for language, line in _blocks(text):
        if language in EXAMPLE_LANGUAGES - {"yaml"}:
            continue
        code = re.sub(r"(^|\s)#.*", "", line) if language == "yaml" else line  # a comment is prose
        places = [code] if language is not None else _SPAN.findall(code)
        found = (
            m.groups()
            for place in places
            for m in _COMMAND.finditer(place)
            # in a block, "... makes wheelforge generate it" is prose, not a command
            if language is None or not re.search(r"[a-z] $", place[: m.start()])
        )
        for words, rest in found:
            named = words.split()
            command = ""
            for n in range(len(named), -1, -1):
                if " ".join(named[:n]) in COMMANDS:
                    command = " ".join(named[:n])
                    break
            target = COMMANDS[command]
            if isinstance(target, click.Group) and named[len(command.split()) :]:
                wrong.append(f"wheelforge {' '.join(named)}: no such command")
                continue
            tail = " ".join(named[len(command.split()) :]) + rest
            for flag in _FLAG.findall(tail):
                if flag not in _flags(target) and not flag.startswith("-vv"):
                    wrong.append(f"wheelforge {command} {flag}: no such flag")
    return wrong


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but - and _ dropped, spaces -."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    return {
        _slug(m[2])
        for language, line in _blocks(text)
        if language is None and (m := _HEADING.match(line))
    }


def broken_links(text: str, page: Path) -> list[str]:
    broken = []
    for language, line in _blocks(text):
        if language is not None:
            continue
        for target in _LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, fragment = target.partition("#")
            linked = (page.parent / file).resolve()
            if file and not linked.exists():
                broken.append(f"{target}: no such file")
                continue
            headings = anchors(linked.read_text(encoding="utf-8") if file else text)
            if fragment and (not file or linked.suffix == ".md") and fragment not in headings:
                broken.append(f"{target}: no heading #{fragment} in {file or page.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_path_a_page_names_exists(page: Path) -> None:
    assert missing_paths(page.read_text(encoding="utf-8"), page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_and_flag_a_page_names_is_the_clis(page: Path) -> None:
    assert wrong_commands(page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_between_pages_lands(page: Path) -> None:
    assert broken_links(page.read_text(encoding="utf-8"), page) == []


def test_the_readers_find_what_is_wrong() -> None:
    """The readers on a page this test writes: a missing path and glob, a command and a flag
    the CLI lacks, a link to a missing page and to a missing heading, each found; the real
    ones, a user's example file and a placeholder left alone."""
    page = REPO / "docs" / "usage.md"
    text = (
        "# A page\n\nRun `python tools/no_such_tool.py` on `kernels/csrc/*.nothing`, beside "
        "`tools/gallery.py`, `src/wheelforge/data/` and `build/wheelforge/<variant>/gen/`.\n"
        "```yaml\nsources: [tests/not_here.cu]\n```\n"
        "    $ wheelforge build --archs 8.0 --no-such-flag | wheelforge frobnicate --x\n"
        "`wheelforge cache prune --unused-for 3` and `wheelforge --version`.\n"
        "See [usage](usage.md#exit-codes), [gone](gone.md), [here](#a-page), "
        "[nowhere](matrix.md#no-such-key).\n"
    )
    assert missing_paths(text, page) == ["kernels/csrc/*.nothing", "tools/no_such_tool.py"]
    assert wrong_commands(text) == [
        "wheelforge build --no-such-flag: no such flag",
        "wheelforge frobnicate: no such command",
    ]
    assert broken_links(text, page) == [
        "gone.md: no such file",
        "matrix.md#no-such-key: no heading #no-such-key in matrix.md",
    ]
