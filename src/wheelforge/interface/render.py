"""Rendering of results: rich tables for the terminal and JSON documents. Reads result data
from the lower layers; decides nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table

# Types only: a no-op build imports none of these modules (ELF reading, provisioning, test
# environments), which keeps its start-up short.
if TYPE_CHECKING:
    from rich.console import Console

    from wheelforge.binaries.abicheck import BinaryCheck
    from wheelforge.binaries.inspection import BinaryReport
    from wheelforge.configuration.matrix import Matrix
    from wheelforge.planning.variants import Variant
    from wheelforge.running.results import BuildReport, VariantResult
    from wheelforge.running.torch_tests import Outcome
    from wheelforge.toolchain.compilecache import CacheStats
    from wheelforge.toolchain.toolkit import Toolkit


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


def _arch_key(arch: str) -> tuple[int, str]:
    return (int("".join(c for c in arch if c.isdigit()) or 0), arch)


def variant_table(v: VariantResult) -> Table:
    """One row per (binary, kind, arch): size, and whether it was asked for."""
    reused = " (up to date)" if v.reused else ""
    table = Table(
        title=f"{v.variant_id}: {v.wheel.name} ({human_size(v.wheel_size)}){reused}",
        caption=f"arch set {v.arch_set.name}: {v.arch_set}; CUDA {v.toolkit}",
        title_justify="left",
        caption_justify="left",
    )
    for column in ("binary", "kind", "arch", "size", "status"):
        table.add_column(column, justify="right" if column == "size" else "left")
    for b in v.binaries:
        if not b.entries and not v.arch_set.specs:
            continue
        for kind, wanted in (("sass", v.arch_set.sass), ("ptx", v.arch_set.ptx)):
            sizes: dict[str, int] = {}
            for e in b.entries:
                if e.kind == kind:
                    sizes[e.arch] = sizes.get(e.arch, 0) + e.stored_size
            label = "SASS" if kind == "sass" else "PTX"
            for arch in sorted({*sizes, *wanted}, key=_arch_key):
                if arch not in sizes:
                    status, size = "[red]MISSING[/red]", "-"
                else:
                    status = "ok" if arch in wanted else "[yellow]extra[/yellow]"
                    size = human_size(sizes[arch])
                table.add_row(short_path(b), label, arch, size, status)
    return table


def abi_summary(checks: Sequence[BinaryCheck], target: tuple[int, int]) -> str:
    """One line: what the binaries need of torch and Python."""
    shims = sorted({s for c in checks for s in c.shims})
    newest = max((c.newest_shim for c in checks if c.newest_shim), default=None)
    python = sorted({s for c in checks for s in c.python_symbols})
    bad = sum(len(c.violations) for c in checks)
    status = "[green]ok[/green]" if not bad else f"[red]{bad} violation(s)[/red]"
    needs = f", the newest from torch {newest[0]}.{newest[1]}" if newest else ""
    return (
        f"stable ABI {status}: {len(shims)} shim functions{needs} (target {target[0]}.{target[1]}), "
        f"no libtorch C++ symbols, {len(python)} limited-API Python symbols"
    )


def cache_summary(stats: CacheStats) -> str:
    """One line: what the compile cache answered for this build."""
    return (
        f"compile cache {stats.tool}: {stats.hits} hit(s), {stats.misses} miss(es)"
        + (f", {stats.uncached} not cacheable" if stats.uncached else "")
        + f" for {stats.requests} compile(s) ({stats.location})"
    )


def print_build(report: BuildReport, console: Console) -> None:
    for v in report.variants:
        console.print(variant_table(v))
        if v.abi_checks:
            console.print(abi_summary(v.abi_checks, report.target_version))
        if v.compile_cache is not None:
            console.print(cache_summary(v.compile_cache))
    major, minor = report.target_version
    folder = report.variants[0].wheel.parent if report.variants else "-"
    console.print(
        f"{len(report.variants)} wheel(s) in {folder}; stable-ABI target torch {major}.{minor}, "
        f"built against torch {report.built_against}"
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
            groups.items(), key=lambda kv: (kv[0][0] != "sass", _arch_key(kv[0][1]))
        ):
            table.add_row(kind.upper() if kind == "ptx" else "SASS", arch, str(count), human_size(stored),
                          human_size(size), ", ".join(sorted(compressions[(kind, arch)])))  # fmt: skip
        if not binary.entries:
            table.add_row("-", "no CUDA code", "0", "-", "-", "-")
        console.print(table)


def check_table(checks: Sequence[BinaryCheck]) -> Table:
    table = Table(title="wheelforge check", title_justify="left")
    for column in ("binary", "shims", "newest shim", "Python API", "status"):
        table.add_column(column, justify="right" if column in ("shims", "Python API") else "left")
    for c in checks:
        newest = f"torch {c.newest_shim[0]}.{c.newest_shim[1]}" if c.newest_shim else "-"
        status = (
            "[green]ok[/green]"
            if not c.violations
            else f"[red]{len(c.violations)} violation(s)[/red]"
        )
        table.add_row(c.path, str(len(c.shims)), newest, str(len(c.python_symbols)), status)
    return table


def checks_to_json(checks: Sequence[BinaryCheck]) -> dict[str, object]:
    return {
        "binaries": [
            {
                "path": c.path,
                "shims": list(c.shims),
                "newest_shim": f"{c.newest_shim[0]}.{c.newest_shim[1]}" if c.newest_shim else None,
                "python_symbols": list(c.python_symbols),
                "violations": [
                    {"rule": v.rule, "symbol": v.symbol, "message": v.message} for v in c.violations
                ],
            }
            for c in checks
        ]
    }


def test_table(outcomes: Sequence[Outcome]) -> Table:
    """Torch version × variant → passed / failed / skipped."""
    variants = list(dict.fromkeys(o.variant for o in outcomes))
    table = Table(title="wheelforge test", title_justify="left")
    table.add_column("torch")
    table.add_column("GPU")
    for v in variants:
        table.add_column(v)
    styles = {"passed": "green", "failed": "red", "error": "red", "unavailable": "yellow"}
    for env in dict.fromkeys(o.env for o in outcomes):
        row = [o for o in outcomes if o.env == env]
        torch = row[0].torch or env.removeprefix("torch ")
        label = torch if env.startswith("torch ") and row[0].torch else f"{torch}\n({env})"
        cells = []
        for v in variants:
            o = next((o for o in row if o.variant == v), None)
            if o is None:
                cells.append("-")
            elif o.status == "unavailable":
                cells.append("[yellow]unavailable[/yellow]")
            else:
                style = styles[o.status]
                cells.append(f"[{style}]{o.status}[/{style}]\n{o.passed} passed, {o.failed} failed, {o.skipped} skipped"
                             + (f", {o.errors} errors" if o.errors else ""))  # fmt: skip
        table.add_row(label, "yes" if row[0].cuda else "no", *cells)
    return table


def outcomes_to_json(outcomes: Sequence[Outcome]) -> dict[str, object]:
    return {
        "runs": [
            {
                "env": o.env,
                "torch": o.torch,
                "cuda": o.cuda,
                "variant": o.variant,
                "status": o.status,
                "passed": o.passed,
                "failed": o.failed,
                "skipped": o.skipped,
                "errors": o.errors,
                "seconds": round(o.seconds, 2),
            }
            for o in outcomes
        ]
    }


def variants_table(variants: Sequence[Variant], matrix: Matrix) -> Table:
    table = Table(title=f"variants of {matrix.path}", title_justify="left")
    for column in ("id", "arch set", "archs", "CUDA", "wheel version"):
        table.add_column(column)
    for v in variants:
        version = (
            f"{matrix.package.version}+{v.local_label}" if v.local_label else matrix.package.version
        )
        table.add_row(v.id, v.arch_set.name, str(v.arch_set), v.choice.describe(), version)
    return table


def variants_to_json(variants: Sequence[Variant]) -> dict[str, object]:
    return {
        "variants": [
            {
                "id": v.id,
                "arch_set": v.arch_set.name,
                "archs": str(v.arch_set),
                "cuda": v.choice.release,
                "provisioned": v.choice.toolkit is None,
                "local_label": v.local_label,
            }
            for v in variants
        ]
    }


def github_matrix(variants: Sequence[Variant]) -> dict[str, object]:
    """A GitHub Actions ``strategy.matrix``: one job per variant, each running
    ``wheelforge build --only ${{ matrix.variant }}``."""
    return {
        "include": [
            {"variant": v.id, "archs": str(v.arch_set), "cuda": v.choice.release} for v in variants
        ]
    }


def toolkits_table(found: Sequence[Toolkit]) -> Table:
    table = Table(title="CUDA toolkits", title_justify="left")
    for column in ("CUDA", "archs", "host g++ up to", "found at", "how"):
        table.add_column(column)
    for t in found:
        table.add_row(
            str(t.version), t.describe_range(), str(t.gcc_max or "-"), str(t.root), t.origin
        )
    from wheelforge.toolchain.provision import RECIPES

    for r in RECIPES:
        if not any(t.release == r.release for t in found):
            numbers = sorted(r.sass)
            table.add_row(r.release, f"sm_{numbers[0]} to sm_{numbers[-1]}", "-", "-",
                          f"[dim]wheelforge toolkit install {r.release} ({r.download})[/dim]")  # fmt: skip
    return table
