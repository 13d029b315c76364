"""What a setup.py does besides calling ``setup()``, as its capture recorded it: the commands
of its cmdclass (run at build time, which init does not do), the downloads it tried or holds,
the files it hands its build_ext to write, and the per-source rules of a ninja writer it
replaced."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from wheelforge.adoption.record.captured import CapturedExtension, GeneratedFile, Refusal
from wheelforge.adoption.record.setuprun import SetupRun
from wheelforge.foundation import readers

# A line of setup.py that fetches something (a prebuilt wheel, a toolkit, a submodule).
_FETCH_RE = re.compile(
    r"urlretrieve\s*\(|urlopen\s*\(|requests\.(?:get|post)\s*\(|snapshot_download\s*\(|hf_hub_download\s*\("
    r"|[\"']git[\"']\s*,\s*[\"'](?:clone|submodule|fetch|pull)"
    r"|[\"']pip[\"']\s*,\s*[\"'](?:download|install)"
    r"|(?:os\.system|os\.popen|check_output|check_call|subprocess\.\w+)\(\s*f?[\"'][^\"']*"
    r"\b(?:git (?:clone|submodule|fetch|pull)|pip (?:download|install)|wget|curl)\b"
)
# cmdclass entries that are no build step, and one whose job (the wheel's tags) is wheelforge's.
_NOT_BUILD_STEPS = ("clean", "develop", "egg_info", "sdist", "install", "test", "dist_info")
_TORCH_BUILD_EXT = ("BuildExtension", "build_ext")


def _call(matched: str) -> str:
    """What a fetch's match shows: ``urlretrieve(`` as ``urlretrieve(...)``, the parenthesis closed."""
    text = matched.strip()
    return text[:-1].rstrip() + "(...)" if text.endswith("(") else text


class BuildSteps:
    def __init__(self, root: Path, record: SetupRun) -> None:
        self.root = root
        self.record = record
        self.hand: list[str] = []
        self.done: list[str] = []
        self.generated_for: set[str] = set()

    def extra_files(
        self, packages: Mapping[str, str], extensions: Iterable[CapturedExtension]
    ) -> list[GeneratedFile]:
        """Files the project hands its build_ext to write into the package
        (``BuildExtension.with_options(extra_files={"cpp_lib.json": ...})``, as xformers does):
        a mapping of plain file names to their text, written beside the extension."""
        out = []
        for given in self.record.build_ext_options:
            for option, value in given.options:
                if not (
                    isinstance(value, dict)
                    and value
                    and all(
                        isinstance(k, str)
                        and isinstance(v, str)
                        and re.fullmatch(r"[\w.-]+\.\w+", k)
                        for k, v in value.items()
                    )
                ):
                    continue
                ext = next(iter(extensions), None)
                package = (ext.name or "").rpartition(".")[0] if ext else ""
                folder = packages.get(package.split(".")[0]) if package else None
                if folder is None:
                    continue
                sub = "/".join(package.split(".")[1:])
                base = f"{folder}/{sub}" if sub else folder
                out += [
                    GeneratedFile(path=f"{base}/{name}", text=text)
                    for name, text in value.items()
                    if isinstance(text, str)  # all are (checked above): for the type checker
                ]
                self.done.append(
                    f"{given.class_name}.with_options({option}=...) ({given.where or 'setup.py'}): the build_ext writes "
                    f"{', '.join(value)} into {base}/; init wrote them, as this run's setup.py computed them"
                )
                self.generated_for.add(given.class_name)
        return out

    def commands(self) -> list[Refusal]:
        """cmdclass entries: what each would run at build time, which init does not run."""
        refusals = []
        for command in self.record.cmdclass:
            name, cls, overrides = command.name, command.class_name, command.overrides
            if name in _NOT_BUILD_STEPS or not overrides or cls in _TORCH_BUILD_EXT:
                continue
            where = command.where or "setup.py"
            fetch = _FETCH_RE.search(command.source)
            if fetch:
                refusals.append(
                    Refusal(
                        what="network",
                        detail=f"cmdclass {name}={cls} fetches ({_call(fetch[0])})",
                        where=where,
                        attempted=False,
                    )
                )
            elif name == "bdist_wheel":
                self.done.append(
                    f"cmdclass bdist_wheel={cls} ({where}) is not run: wheelforge decides the "
                    "wheel's tags"
                )
            elif cls in self.generated_for:
                self.done.append(
                    f"cmdclass {name}={cls} ({where}) overrides {', '.join(overrides)}: not "
                    "run; the files it writes were written by init"
                )
            else:
                self.hand.append(
                    f"cmdclass {name}={cls} ({where}) overrides {', '.join(overrides)}: init does not run it; "
                    "if it adds files to the wheel or changes the build, give those here by hand"
                )
        return refusals

    def refusals(self) -> list[Refusal]:
        out = [Refusal(what="network", detail=n.detail, where=n.where) for n in self.record.network]
        for item in self.record.refused:
            what: Literal["write", "command"] = (
                "write" if item.detail.startswith("write ") else "command"
            )
            out.append(
                Refusal(what=what, detail=item.detail.removeprefix("write "), where=item.where)
            )
        out += self.commands()
        attempted = {r.where for r in out}
        setup = self.root / "setup.py"
        if setup.is_file():
            for number, line in enumerate(
                readers.read_text(setup, cap=readers.CONFIG_CAP, errors="replace").splitlines(), 1
            ):
                where = f"setup.py:{number}"
                if (
                    where not in attempted
                    and _FETCH_RE.search(line)
                    and not line.lstrip().startswith("#")
                ):
                    out.append(
                        Refusal(
                            what="network", detail=line.strip()[:120], where=where, attempted=False
                        )
                    )
        return out


def ninja_rules(text: str) -> dict[str, list[str]]:
    """Each source of a ninja file (as torch's writer spells it) → its compile command, split
    into arguments with the file's own variables filled in."""
    variables: dict[str, str] = {}
    rules: dict[str, str] = {}
    out: dict[str, list[str]] = {}
    rule = None
    for line in text.splitlines():
        if line.startswith("rule "):
            rule = line.split()[1]
        elif line.startswith("  command = ") and rule:
            rules[rule] = line.split("=", 1)[1].strip()
        elif not line.startswith(" ") and " = " in line:
            name, _, value = line.partition(" = ")
            variables[name.strip()] = value
            rule = None
        elif line.startswith("build "):
            _, _, rest = line[6:].partition(": ")
            parts = rest.split()
            if len(parts) >= 2 and parts[0] in rules:
                command = re.sub(
                    r"\$\{?(\w+)\}?", lambda m: variables.get(m[1], ""), rules[parts[0]]
                )
                out[parts[1].replace("$ ", " ")] = shlex.split(command)
    return out
