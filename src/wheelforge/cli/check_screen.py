"""``wheelforge check``'s table: per wheel what it declares, per binary its role, floors and
status, then what the binaries allow (its --json document: documents/check_schema.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from wheelforge.binaries.abicheck import BinaryCheck
from wheelforge.binaries.checkwheels import CheckedWheel, CheckResult
from wheelforge.binaries.elf import split_member
from wheelforge.binaries.rule import WheelSummary
from wheelforge.configuration import abi
from wheelforge.documents.kinds import version_text
from wheelforge.foundation.log import printable


def check_table(result: CheckResult) -> Group:
    """Per wheel (or folder of shared objects): its path on a line of its own, what it declares,
    then a table of its binaries by member name (so nothing is cut at 80 columns), then what its
    binaries allow."""
    parts: list[RenderableType] = [Text("wheelforge check", style="italic")]
    by_file: dict[str, list[BinaryCheck]] = {}
    for c in result.binaries:
        container = split_member(c.path)[0] or (c.path if c.role == "wheel" else "")
        by_file.setdefault(container or str(Path(c.path).parent), []).append(c)
    for container, members in by_file.items():
        # The file's name on a line of its own (a wheel's name fits 80 columns), then its folder.
        parts.append(Text(printable(Path(container).name), style="bold", overflow="fold"))
        parts.append(Text(printable(f"in {Path(container).parent}"), style="dim", overflow="fold"))
        wheel = members[0].wheel
        # A classic (unstable-ABI) extension's torch is a pin, not a floor: no floor columns.
        floors = abi.of(members[0].flavour).torch_target
        parts += [Text(line, style="dim", overflow="fold") for line in _header(members)]
        table = Table()
        table.add_column("binary", overflow="fold")
        # Floors: the lowest torch and Python each binary needs (from its shims, its Python
        # symbols), red above what its wheel declares.
        columns = ("role", "shims", "torch", "Python", "status") if floors else ("role", "status")
        for column in columns:
            table.add_column(column, justify="right" if column == "shims" else "left", no_wrap=True)
        for c in members:
            if c.role == "wheel":
                name = "(the wheel)"
            else:
                wheel_path, member = split_member(c.path)
                name = member if wheel_path else Path(c.path).name
            if not floors:
                table.add_row(Text(printable(name)), c.role or "-", _status(c))
                continue
            table.add_row(
                Text(printable(name)),  # data: never markup, never escape sequences
                c.role or "-",
                str(len(c.shims)),
                _floor(c.newest_shim, c.declared_torch),
                _floor(
                    c.python_floor,
                    c.declared_python,
                    wheel.declared.python_floor if wheel else None,
                    shown="any" if c.python_floor == LIMITED_API_FIRST else None,
                ),
                _status(c),
            )
        parts.append(table)
        checked = result.wheel(wheel.path) if wheel is not None else None
        if checked is not None and (allows := _allows(checked)):
            parts.append(Text(allows, overflow="fold"))
        loads = Counter(c.load for c in members if c.load)
        for said, count in loads.items():  # check --torch-from: what loading them said
            parts.append(
                Text(f"{count} binar{'ies' if count > 1 else 'y'}: {said}", overflow="fold")
            )
    if not result.binaries:
        parts.append(Text("no ELF files to check: the wheels given hold no shared objects"))
    return Group(*parts)


def _header(members: Sequence[BinaryCheck]) -> list[str]:
    """What the wheel (or file) declares, and which ABI's rules judged it."""
    first, wheel = members[0], members[0].wheel
    if abi.of(first.flavour).per_torch:
        pin = wheel.declared.torch if wheel and wheel.declared.torch else "no torch requirement"
        # Python's side is the tag's: one CPython, or the limited API (vLLM 0.10's cp38-abi3).
        python = (
            f"tagged cp{wheel.tag_python[0]}{wheel.tag_python[1]}-abi3"
            if wheel and wheel.tag_python
            else "one CPython"
        )
        lines = [f"unstable ABI (libtorch's C++ API: one torch; {python}): declares {pin}"]
    else:
        declared = _declares(wheel) if wheel else _declares_file(first)
        lines = [declared] if declared else []
    applied = list(dict.fromkeys(r for c in members for r in c.rules))
    if applied:
        lines.append(f"{first.flavour}-ABI rules applied: {', '.join(applied)}")
    return lines


def _status(c: BinaryCheck) -> str:
    shown = []
    if c.errors:
        shown.append(f"[red]{c.errors} violation(s)[/red]")
    if c.warnings:
        shown.append(f"[yellow]{c.warnings} warning(s)[/yellow]")
    return ", ".join(shown) or "[green]ok[/green]"


def _declares(wheel: WheelSummary) -> str:
    """What a wheel declares of torch and Python, and what it was checked against."""
    said = wheel.declared
    torch = version_text(wheel.torch)
    if wheel.torch_source == "target":
        first = f"checked against torch >= {torch} (--target)"
        if said.torch:
            first += f"; requires {said.torch}"
    elif wheel.torch_source == "requirement":
        first = f"requires {said.torch}"
    else:
        first = (
            f"requires {said.torch} (no lower bound)"
            if said.torch
            else "states no torch requirement"
        )
        if wheel.torch_source == "inferred":
            first += f": checked against torch {torch}, what its binaries' shims need"
        else:  # assumed: no shim to infer a floor from, so no torch to name as checked
            first += "; its binaries use no torch shim, so no torch floor is inferred"
    python = []
    if said.requires_python:
        python.append(f"Requires-Python {said.requires_python}")
    if wheel.tag_python:
        python.append(f"tagged cp{wheel.tag_python[0]}{wheel.tag_python[1]}-abi3")
    return "; ".join([first, *python])


def _declares_file(c: BinaryCheck) -> str:
    declared = [
        f"{what} >= {version_text(v)}"
        for what, v in (("torch", c.declared_torch), ("Python", c.declared_python))
        if v
    ]
    return f"checked against {', '.join(declared)}" if declared else ""


def _allows(checked: CheckedWheel) -> str | None:
    """What the binaries allow, against what the wheel requires."""
    wheel = checked.summary
    if wheel.allows is None:
        return f"its binaries load on torch {wheel.torch_cuda}" if wheel.torch_cuda else None
    said = wheel.declared.torch
    if wheel.allows.startswith("torch>="):
        need = wheel.allows.removeprefix("torch>=")
        binaries = "its binaries load on torch >= " + need
        if wheel.torch_cuda:
            binaries += f" {wheel.torch_cuda}"
        if said is None or wheel.torch_source == "inferred":
            return f"{binaries}: declare Requires-Dist: {wheel.allows}"
        floor = wheel.declared.torch_floor
        if wheel.declared.torch_pin:
            return f"{binaries}; the wheel pins {said} (the widest correct: {wheel.allows})"
        if floor is not None and version_text(floor) == need:
            return f"{binaries}, as the wheel requires ({said})"
        return f"{binaries}; the wheel requires {said} (the widest correct: {wheel.allows})"
    uses = "binary uses" if checked.unstable == 1 else "binaries use"
    known = checked.built_for
    built = (
        f" (torch {known[0]}, its pin)"
        if known and known[1] == "pin"
        else f" (torch {known[0]}?, the lowest its requirement admits: pin it)"
        if known
        else " (which nothing in the wheel names: pin it)"
    )
    cuda = f", {wheel.torch_cuda}" if wheel.torch_cuda else ""
    return (
        f"{checked.unstable} {uses} libtorch's C++ API: the wheel loads only on the torch it was "
        f"built against{built}{cuda}; it requires {said or 'no torch'}"
    )


# The limited API's first release (PEP 384): a binary that needs only it runs on any Python 3
# with abi3, which its Python cell says in words ("3.2" read as an old Python to ask for).
LIMITED_API_FIRST = (3, 2)


def _floor(
    inferred: tuple[int, int] | None,
    declared: tuple[int, int] | None,
    covered: tuple[int, int] | None = None,
    *,
    shown: str | None = None,
) -> str:
    """The floor a binary needs (*shown*: in other words); red when it is above the declared
    one, yellow when something else the wheel declares (its Requires-Python) covers it."""
    need = shown or version_text(inferred) or "-"
    if not (inferred and declared and inferred > declared):
        return need
    return f"[yellow]{need}[/yellow]" if covered and inferred <= covered else f"[red]{need}[/red]"
