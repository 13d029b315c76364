"""The one report of a run: the results objects, the terminal summary (rich) and JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .archs import ArchSet
from .inspection import BinaryReport
from .verify import check_binary


@dataclass(frozen=True, kw_only=True)
class VariantResult:
    variant_id: str
    arch_set: ArchSet
    toolkit: str
    wheel: Path
    wheel_size: int
    compiled: tuple[str, ...]  # the compile steps ninja ran (empty: everything was up to date)
    reused: bool  # the wheel in the output folder was already made from these inputs
    binaries: tuple[BinaryReport, ...]
    seconds: float


@dataclass(frozen=True, kw_only=True)
class BuildReport:
    matrix: Path
    target_version: tuple[int, int]
    built_against: str
    variants: tuple[VariantResult, ...]


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError  # unreachable


def short_path(binary: BinaryReport) -> str:
    """``x.whl!pkg/_C.abi3.so`` → ``pkg/_C.abi3.so``."""
    return binary.path.rsplit("!", 1)[-1]


def _arch_cells(binary: BinaryReport, kind: str, wanted: Sequence[str]) -> str:
    sizes: dict[str, int] = {}
    for e in binary.entries:
        if e.kind == kind:
            sizes[e.arch] = sizes.get(e.arch, 0) + e.stored_size
    cells = []
    for arch in sorted(sizes, key=lambda a: (int("".join(c for c in a if c.isdigit())), a)):
        mark = "" if arch in wanted else " [yellow](extra)[/yellow]"
        cells.append(f"{arch} {human_size(sizes[arch])}{mark}")
    cells += [f"[red]{a} missing[/red]" for a in wanted if a not in sizes]
    return "\n".join(cells) or "-"


def build_table(report: BuildReport) -> Table:
    table = Table(title="wheelforge build", title_justify="left", show_lines=True)
    for column in ("variant", "wheel", "binary", "SASS", "PTX", "check"):
        table.add_column(column)
    for v in report.variants:
        wheel_cell = f"{v.wheel.name}\n{human_size(v.wheel_size)}" + (
            " (up to date)" if v.reused else ""
        )
        rows = [b for b in v.binaries if b.entries] or list(v.binaries[:1])
        for i, b in enumerate(rows):
            check = check_binary(b, v.arch_set)
            status = "[green]ok[/green]" if check.ok else "[red]missing archs[/red]"
            table.add_row(
                f"{v.variant_id}\n{v.arch_set}\nCUDA {v.toolkit}" if i == 0 else "",
                wheel_cell if i == 0 else "",
                short_path(b),
                _arch_cells(b, "sass", v.arch_set.sass),
                _arch_cells(b, "ptx", v.arch_set.ptx),
                status,
            )
    return table


def print_build(report: BuildReport, console: Console) -> None:
    console.print(build_table(report))
    major, minor = report.target_version
    console.print(
        f"{len(report.variants)} wheel(s) in {report.variants[0].wheel.parent if report.variants else '-'}; "
        f"stable ABI target torch {major}.{minor}, built against torch {report.built_against}"
    )


def print_inspect(reports: Sequence[BinaryReport], console: Console) -> None:
    """One table per binary: its archs grouped by kind, with sizes."""
    if not reports:
        console.print("no ELF files or wheels found")
        return
    for binary in reports:
        table = Table(title=f"{binary.path} ({human_size(binary.size)})", title_justify="left")
        for column in ("kind", "arch", "entries", "stored", "decompressed", "compression"):
            table.add_column(
                column,
                justify="right" if column in ("entries", "stored", "decompressed") else "left",
            )
        groups: dict[tuple[str, str], list[int]] = {}
        compressions: dict[tuple[str, str], set[str]] = {}
        for e in binary.entries:
            key = (e.kind, e.arch)
            acc = groups.setdefault(key, [0, 0, 0])
            acc[0] += 1
            acc[1] += e.stored_size
            acc[2] += e.size
            compressions.setdefault(key, set()).add(e.compression)
        for (kind, arch), (count, stored, size) in sorted(
            groups.items(), key=lambda kv: (kv[0][0] != "sass", kv[0][1])
        ):
            table.add_row(kind.upper() if kind == "ptx" else "SASS", arch, str(count), human_size(stored),
                          human_size(size), ", ".join(sorted(compressions[(kind, arch)])))  # fmt: skip
        if not binary.entries:
            table.add_row("-", "no CUDA code", "0", "-", "-", "-")
        console.print(table)
